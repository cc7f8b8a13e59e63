//! Every message type's malformed variants yield the specific typed error: truncated, oversized,
//! trailing bytes, wrong MAC, unknown version, wrong direction, wrong session id, stale epoch —
//! at the frame level and through both state machines (which must stay usable afterwards).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Pair, both_modes};
use prost::Message as _;
use sidekick_protocol::discovery::DiscoveryReply;
use sidekick_protocol::frame::{self, Header, MIN_INIT_DATAGRAM, seal, seal_raw};
use sidekick_protocol::messages::{
    Challenge, Close, Config, ConfigError, Eack, ErrorMsg, Init, InitAck, MAX_ERROR_DETAIL, Quack,
    Refresh, Reset, msg_type,
};
use sidekick_protocol::{
    ClientEvent, Error, ErrorCode, FrameDirection, MAX_DATAGRAM, Message, ProxyEvent, SessionId,
    SessionKey, TagLen, is_discovery_request,
};

fn key() -> SessionKey {
    SessionKey::from_bytes(&[0x42; 32])
}

/// One sample of every message type with a direction it may travel in.
fn samples() -> Vec<(FrameDirection, Message)> {
    use FrameDirection::{ClientToProxy as C, ProxyToClient as P};
    vec![
        (
            C,
            Message::Init(Init {
                capabilities: 3,
                config: Some(both_modes()),
            }),
        ),
        (
            P,
            Message::InitAck(InitAck {
                accepted: true,
                capabilities: 3,
                config: Some(both_modes()),
                path_challenge: 99,
                epoch: 0,
                reject_code: 0,
            }),
        ),
        (
            C,
            Message::Config(Config {
                config_id: 1,
                config: Some(both_modes()),
                accepted: false,
                epoch: 0,
            }),
        ),
        (
            P,
            Message::Config(Config {
                config_id: 1,
                config: Some(both_modes()),
                accepted: true,
                epoch: 2,
            }),
        ),
        (
            C,
            Message::Reset(Reset {
                epoch: 3,
                reason: 0,
            }),
        ),
        (
            P,
            Message::Reset(Reset {
                epoch: 3,
                reason: 3,
            }),
        ),
        (
            P,
            Message::Quack(Quack {
                epoch: 1,
                data: vec![7; 40],
            }),
        ),
        (
            C,
            Message::Eack(Eack {
                epoch: 1,
                data: vec![8; 200],
                open_gaps: 1,
                number: 0,
            }),
        ),
        (C, Message::Close(Close { reason: 0 })),
        (P, Message::Close(Close { reason: 4 })),
        (
            C,
            Message::Error(ErrorMsg {
                code: 3,
                detail: "undecodable".into(),
            }),
        ),
        (
            P,
            Message::Error(ErrorMsg {
                code: 5,
                detail: String::new(),
            }),
        ),
        (
            C,
            Message::Refresh(Refresh {
                path_response: 5,
                want_reply: true,
            }),
        ),
        (
            P,
            Message::Refresh(Refresh {
                path_response: 0,
                want_reply: false,
            }),
        ),
        (P, Message::Challenge(Challenge { token: 17 })),
    ]
}

fn other(d: FrameDirection) -> FrameDirection {
    match d {
        FrameDirection::ClientToProxy => FrameDirection::ProxyToClient,
        FrameDirection::ProxyToClient => FrameDirection::ClientToProxy,
    }
}

#[test]
fn frame_level_every_type() {
    let sid = SessionId([3; 16]);
    for (dir, m) in samples() {
        for tag in [TagLen::Short, TagLen::Long] {
            let b = seal(dir, tag, sid, 7, 100, &m, &key()).unwrap();
            let ctx = format!("{m:?} {tag:?}");
            assert_eq!(frame::open(&b, &key(), dir).unwrap().message, m, "{ctx}");
            // Truncated at every length.
            for n in 0..b.len() {
                let e = frame::open(&b[..n], &key(), dir).unwrap_err();
                assert!(
                    matches!(e, Error::Truncated { have, .. } if have == n),
                    "{ctx} {n}: {e}"
                );
            }
            // Oversized datagram, trailing bytes.
            let mut big = b.clone();
            big.resize(MAX_DATAGRAM + 1, 0);
            assert_eq!(
                frame::open(&big, &key(), dir),
                Err(Error::Oversized {
                    len: MAX_DATAGRAM + 1,
                    max: MAX_DATAGRAM
                }),
                "{ctx}"
            );
            let mut long = b.clone();
            long.push(0);
            assert!(matches!(
                frame::open(&long, &key(), dir),
                Err(Error::LengthMismatch { .. })
            ));
            // Wrong MAC: any flipped bit after the version byte, or another key.
            for i in 3..b.len() {
                let mut c = b.clone();
                c[i] ^= 0x01;
                let e = frame::open(&c, &key(), dir).unwrap_err();
                if i == 4 {
                    // The flags byte also carries the tag length: a flip there changes the
                    // layout first.
                    assert!(
                        matches!(
                            e,
                            Error::BadMac | Error::Truncated { .. } | Error::LengthMismatch { .. }
                        ),
                        "{ctx}: {e}"
                    );
                } else if (34..36).contains(&i) {
                    // Length field.
                    assert!(
                        matches!(e, Error::Truncated { .. } | Error::LengthMismatch { .. }),
                        "{ctx}: {e}"
                    );
                } else {
                    assert_eq!(e, Error::BadMac, "{ctx} flip at {i}");
                }
            }
            assert_eq!(
                frame::open(&b, &SessionKey::from_bytes(&[1; 32]), dir),
                Err(Error::BadMac)
            );
            // Unknown version, with or without a valid MAC: refused before anything else.
            for v in [0u8, 2, 255] {
                let mut c = b.clone();
                c[2] = v;
                assert_eq!(
                    frame::open(&c, &key(), dir),
                    Err(Error::UnsupportedVersion(v))
                );
                let mut h = Header::peek(&b).unwrap();
                h.version = v;
                let body = &b[frame::HEADER_LEN..b.len() - tag.bytes()];
                let c = seal_raw(&h, body, &key()).unwrap();
                assert_eq!(
                    frame::open(&c, &key(), dir),
                    Err(Error::UnsupportedVersion(v))
                );
            }
            // Bad magic.
            let mut c = b.clone();
            c[1] ^= 0xff;
            assert_eq!(frame::open(&c, &key(), dir), Err(Error::BadMagic));
            // Authentic but in the wrong direction (reflection): the direction flag is covered
            // by the MAC, so even types that travel both ways cannot be reflected.
            assert_eq!(
                frame::open(&b, &key(), other(dir)),
                Err(Error::WrongDirection(m.msg_type())),
                "{ctx}"
            );
        }
    }
}

#[test]
fn authentic_but_malformed_bodies() {
    let h = |ty: u8| Header {
        version: 1,
        msg_type: ty,
        flags: 0,
        session_id: SessionId([1; 16]),
        seq: 1,
        quota: 0,
        body_len: 0,
    };
    let open = |b: &[u8]| frame::open(b, &key(), FrameDirection::ClientToProxy);
    // Unknown type byte with a valid MAC.
    for ty in [0u8, 12, 200, 255] {
        let b = seal_raw(&h(ty), &[], &key()).unwrap();
        assert_eq!(open(&b), Err(Error::UnknownMessageType(ty)));
    }
    // Protobuf garbage (truncated length-delimited field) under every type.
    for ty in 1..=11u8 {
        if !Message::allowed(ty, FrameDirection::ClientToProxy) {
            continue;
        }
        let b = seal_raw(&h(ty), &[0x12, 0x05, 1], &key()).unwrap();
        assert!(matches!(open(&b), Err(Error::Decode(_))), "type {ty}");
    }
    // Oversized error detail.
    let e = ErrorMsg {
        code: 1,
        detail: "x".repeat(MAX_ERROR_DETAIL + 1),
    };
    let b = seal_raw(&h(msg_type::ERROR), &e.encode_to_vec(), &key()).unwrap();
    assert_eq!(
        open(&b),
        Err(Error::Oversized {
            len: MAX_ERROR_DETAIL + 1,
            max: MAX_ERROR_DETAIL
        })
    );
    // Oversized bodies cannot even be sealed.
    for m in [
        Message::Eack(Eack {
            epoch: 0,
            data: vec![0; MAX_DATAGRAM],
            open_gaps: 0,
            number: 0,
        }),
        Message::Quack(Quack {
            epoch: 0,
            data: vec![0; MAX_DATAGRAM],
        }),
    ] {
        assert!(matches!(
            seal(
                FrameDirection::ClientToProxy,
                TagLen::Short,
                SessionId([0; 16]),
                1,
                0,
                &m,
                &key()
            ),
            Err(Error::Oversized { .. })
        ));
    }
    // Invalid configurations inside Init and Config.
    let mut cfg = both_modes();
    cfg.identifier.as_mut().unwrap().width = 3;
    let init = Init {
        capabilities: 3,
        config: Some(cfg.clone()),
    };
    let b = seal_raw(&h(msg_type::INIT), &init.encode_to_vec(), &key()).unwrap();
    assert_eq!(
        open(&b),
        Err(Error::InvalidConfig(ConfigError::BadWidth(3)))
    );
    let c = Config {
        config_id: 1,
        config: None,
        accepted: false,
        epoch: 0,
    };
    let b = seal_raw(&h(msg_type::CONFIG), &c.encode_to_vec(), &key()).unwrap();
    assert_eq!(open(&b), Err(Error::InvalidConfig(ConfigError::NoMode)));
}

/// Applies the malformed variants to an authentic frame and checks each is refused with its
/// typed error by `deliver`; returns how many were tried.
fn variants(b: &[u8], mut deliver: impl FnMut(&[u8]) -> Result<(), Error>, ctx: &str) -> usize {
    let mut n = 0;
    for cut in [
        0,
        1,
        2,
        20,
        frame::HEADER_LEN - 1,
        frame::HEADER_LEN,
        b.len() - 1,
    ] {
        let e = deliver(&b[..cut]).unwrap_err();
        assert!(matches!(e, Error::Truncated { .. }), "{ctx} cut {cut}: {e}");
        n += 1;
    }
    let mut big = b.to_vec();
    big.resize(MAX_DATAGRAM + 1, 0);
    assert!(
        matches!(deliver(&big), Err(Error::Oversized { .. })),
        "{ctx}"
    );
    let mut long = b.to_vec();
    long.push(1);
    assert!(
        matches!(deliver(&long), Err(Error::LengthMismatch { .. })),
        "{ctx}"
    );
    let mut mac = b.to_vec();
    *mac.last_mut().unwrap() ^= 1;
    assert_eq!(deliver(&mac), Err(Error::BadMac), "{ctx}");
    let mut body = b.to_vec();
    body[frame::HEADER_LEN] ^= 0x80;
    assert_eq!(deliver(&body), Err(Error::BadMac), "{ctx}");
    let mut ver = b.to_vec();
    ver[2] = 2;
    assert_eq!(deliver(&ver), Err(Error::UnsupportedVersion(2)), "{ctx}");
    let mut sid = b.to_vec();
    sid[6] ^= 0xff;
    assert_eq!(deliver(&sid), Err(Error::UnknownSession), "{ctx}");
    n += 6;
    n
}

/// The first datagram of type `ty` in `v`.
fn take_type(v: &[Vec<u8>], ty: u8) -> Vec<u8> {
    v.iter()
        .find(|b| Header::peek(b).unwrap().msg_type == ty)
        .cloned()
        .unwrap_or_else(|| panic!("no frame of type {ty}"))
}

#[test]
fn proxy_refuses_malformed_client_frames_of_every_type() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    p.client.start(now).unwrap();
    let req = p.client_out();
    p.deliver_to_proxy(now, &req[0]).unwrap();
    let from = p.client_sk;
    let mut tried = 0;

    // Init, against the half-open entry.
    let init = p.client_out().remove(0).bytes;
    tried += variants(
        &init,
        |d| p.proxy.handle_datagram(now, from, d).map(|_| ()),
        "Init",
    );
    // An unpadded Init is refused before any lookup or crypto (amplification safety).
    let h = Header::peek(&init).unwrap();
    let unpadded = seal(
        FrameDirection::ClientToProxy,
        TagLen::Short,
        h.session_id,
        1,
        0,
        &Message::Init(Init {
            capabilities: 3,
            config: Some(both_modes()),
        }),
        &key(),
    )
    .unwrap();
    assert!(unpadded.len() < MIN_INIT_DATAGRAM);
    assert_eq!(
        p.proxy.handle_datagram(now, from, &unpadded),
        Err(Error::Truncated {
            need: MIN_INIT_DATAGRAM,
            have: unpadded.len()
        })
    );
    assert_eq!(p.proxy.len(), 0);
    assert_eq!(
        p.proxy.half_open_len(),
        1,
        "half-open entry survives forgeries"
    );
    assert!(matches!(
        p.proxy.handle_datagram(now, from, &init).unwrap(),
        ProxyEvent::SessionEstablished { .. }
    ));
    p.pump(now);
    let id = p.proxy.session_ids().next().unwrap();

    // One authentic frame of every other client type, produced by the client's own API.
    p.client.reconfigure(now, both_modes()).unwrap();
    let config = p.client_out().remove(0).bytes;
    p.client.reset(now, 0).unwrap();
    let reset = p.client_out().remove(0).bytes;
    p.client.send_eack(now, &[1; 100]).unwrap();
    let eack = p.client_out().remove(0).bytes;
    p.client.send_error(now, 3, "bad eack").unwrap();
    let error = p.client_out().remove(0).bytes;
    now += Duration::from_secs(4); // quiet for a third of the idle timeout: Refresh(want_reply)
    p.client.handle_timeout(now);
    let out: Vec<Vec<u8>> = p.client_out().into_iter().map(|t| t.bytes).collect();
    let refresh = take_type(&out, msg_type::REFRESH);
    let frames = [
        ("Config", config),
        ("Reset", reset),
        ("Eack", eack),
        ("Error", error),
        ("Refresh", refresh),
    ];
    let before = p.proxy.stats();
    for (name, b) in &frames {
        tried += variants(
            b,
            |d| p.proxy.handle_datagram(now, from, d).map(|_| ()),
            name,
        );
        // Nothing was sent in answer to any forgery.
        assert!(p.proxy_out().is_empty(), "{name}");
    }
    let after = p.proxy.stats();
    assert_eq!(
        after.auth_failures - before.auth_failures,
        2 * frames.len() as u64
    );
    assert_eq!(
        after.unknown_session - before.unknown_session,
        frames.len() as u64
    );
    // The authentic originals are still accepted afterwards: the forgeries changed nothing.
    for (name, b) in &frames {
        assert!(p.proxy.handle_datagram(now, from, b).is_ok(), "{name}");
    }
    p.pump(now);
    // Stale epoch: an eACK of epoch 1 after the epoch moved on.
    p.client.send_eack(now, b"old").unwrap();
    let old = p.client_out().remove(0).bytes;
    p.client.reset(now, 0).unwrap();
    p.pump(now);
    let cur = p.proxy.session(&id).unwrap().epoch();
    assert_eq!(
        p.proxy.handle_datagram(now, from, &old),
        Err(Error::StaleEpoch {
            got: cur - 1,
            current: cur
        })
    );
    // Close last.
    p.client.close(now, 0);
    let close = p.client_out().remove(0).bytes;
    tried += variants(
        &close,
        |d| p.proxy.handle_datagram(now, from, d).map(|_| ()),
        "Close",
    );
    assert!(p.proxy.session(&id).is_some());
    assert_eq!(
        p.proxy.handle_datagram(now, from, &close),
        Ok(ProxyEvent::Closed { id })
    );
    assert!(tried >= 7 * 13);
}

#[test]
fn client_refuses_malformed_proxy_frames_of_every_type() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    let id = p.until_init(now);
    let proxy = p.proxy_addr;

    let ack = p.proxy_out().remove(0).bytes;
    variants(
        &ack,
        |d| p.client.handle_datagram(now, proxy, d).map(|_| ()),
        "InitAck",
    );
    // From the wrong source address: refused before parsing.
    let stranger: SocketAddr = "198.51.100.1:7000".parse().unwrap();
    assert_eq!(
        p.client.handle_datagram(now, stranger, &ack),
        Err(Error::UnexpectedSource)
    );
    assert!(matches!(
        p.client.handle_datagram(now, proxy, &ack).unwrap(),
        ClientEvent::Established { .. }
    ));
    p.pump(now);

    p.client.reconfigure(now, both_modes()).unwrap();
    let c = p.client_out();
    p.deliver_to_proxy(now, &c[0]).unwrap();
    let config = p.proxy_out().remove(0).bytes;
    p.proxy
        .send_reset(now, &id, ErrorCode::DecodeFailure)
        .unwrap();
    let reset = p.proxy_out().remove(0).bytes;
    let quack = p.proxy.send_quack(now, &id, &[5; 64]).unwrap().bytes;
    p.client.send_error(now, 1, "").unwrap(); // no reply; just exercising the path
    p.client_out();
    now += Duration::from_secs(4);
    p.client.handle_timeout(now);
    for t in p.client_out() {
        p.deliver_to_proxy(now, &t).unwrap();
    }
    let out: Vec<Vec<u8>> = p.proxy_out().into_iter().map(|t| t.bytes).collect();
    let refresh = take_type(&out, msg_type::REFRESH);
    // A Challenge: the client's frames arrive from a new address.
    p.client_sk = "10.0.0.2:6001".parse().unwrap();
    p.client.send_eack(now, &[0; 100]).unwrap();
    let e = p.client_out();
    // The client has not seen the new epoch yet: its eACK is stale, but it is authentic, so
    // the address change still counts and a Challenge goes out.
    assert_eq!(
        p.deliver_to_proxy(now, &e[0]),
        Err(Error::StaleEpoch { got: 0, current: 2 })
    );
    let out: Vec<Vec<u8>> = p.proxy_out().into_iter().map(|t| t.bytes).collect();
    let challenge = take_type(&out, msg_type::CHALLENGE);

    let frames = [
        ("Config", config),
        ("Reset", reset),
        ("Quack", quack),
        ("Refresh", refresh),
        ("Challenge", challenge),
    ];
    let rejected = p.client.stats().rejected;
    for (name, b) in &frames {
        variants(
            b,
            |d| p.client.handle_datagram(now, proxy, d).map(|_| ()),
            name,
        );
    }
    assert_eq!(
        p.client.stats().rejected - rejected,
        13 * frames.len() as u64
    );
    for (name, b) in &frames {
        assert!(p.client.handle_datagram(now, proxy, b).is_ok(), "{name}");
    }
    // Stale epoch: a quACK of the old epoch after a client reset.
    let old = p.proxy.send_quack(now, &id, b"old").unwrap();
    let e = p.client.reset(now, 0).unwrap();
    assert_eq!(
        p.client.handle_datagram(now, proxy, &old.bytes),
        Err(Error::StaleEpoch {
            got: e - 1,
            current: e
        })
    );
    p.pump(now);
    // Close last.
    p.proxy.close(now, &id, ErrorCode::None).unwrap();
    let close = p.proxy_out().remove(0).bytes;
    variants(
        &close,
        |d| p.client.handle_datagram(now, proxy, d).map(|_| ()),
        "Close",
    );
    assert_eq!(
        p.client.handle_datagram(now, proxy, &close),
        Ok(ClientEvent::Closed { reason: 0 })
    );
}

#[test]
fn malformed_discovery() {
    let mut p = Pair::new(both_modes());
    let now = p.t0;
    p.client.start(now).unwrap();
    let req_bytes = p.client_out().remove(0).bytes;
    let req = is_discovery_request(&req_bytes).unwrap();
    // Unknown (older) request version refused by the proxy; low-order public key refused.
    let mut old = req;
    old.version = 0;
    assert_eq!(
        p.proxy.handle_discovery(now, p.base, &old),
        Err(Error::UnsupportedVersion(0))
    );
    let mut weak = req;
    weak.public_key = [0; 32];
    assert_eq!(
        p.proxy.handle_discovery(now, p.base, &weak),
        Err(Error::Crypto)
    );
    assert_eq!(p.proxy.half_open_len(), 0);
    assert_eq!(p.proxy.stats().discovery_refused, 2);
    // Request marker detection is exact-length.
    assert!(is_discovery_request(&req_bytes[..127]).is_none());
    let mut longer = req_bytes.clone();
    longer.push(0);
    assert!(is_discovery_request(&longer).is_none());

    let reply = p.proxy.handle_discovery(now, p.base, &req).unwrap().bytes;
    // Truncated / oversized reply.
    assert_eq!(
        DiscoveryReply::decode(&reply[..100]),
        Err(Error::Truncated {
            need: 128,
            have: 100
        })
    );
    let mut big = reply.to_vec();
    big.push(0);
    assert_eq!(
        DiscoveryReply::decode(&big),
        Err(Error::Oversized { len: 129, max: 128 })
    );
    assert_eq!(
        p.client.handle_base_datagram(now, &reply[..100]),
        Err(Error::BadMagic)
    );
    // Unknown address family.
    let mut fam = reply;
    fam[83] = 5;
    assert!(matches!(
        DiscoveryReply::decode(&fam),
        Err(Error::Decode(_))
    ));
    // Unknown version in the reply.
    let mut v = reply;
    v[17] = 9;
    assert_eq!(
        p.client.handle_base_datagram(now, &v),
        Err(Error::UnsupportedVersion(9))
    );
    // Wrong nonce (an off-path guess) and a wrong key-confirmation tag (an altered field).
    let mut n = reply;
    n[19] ^= 1;
    assert_eq!(
        p.client.handle_base_datagram(now, &n),
        Err(Error::DiscoveryMismatch)
    );
    let mut t = reply;
    t[110] ^= 1;
    assert_eq!(
        p.client.handle_base_datagram(now, &t),
        Err(Error::DiscoveryMismatch)
    );
    // After a forged reply the client re-keys, so the genuine (now stale) reply is refused too
    // and the next retry carries a fresh request that completes.
    assert_eq!(
        p.client.handle_base_datagram(now, &reply),
        Err(Error::DiscoveryMismatch)
    );
    let due = p.client.poll_timeout().unwrap();
    p.client.handle_timeout(due);
    let req2 = p.client_out().remove(0).bytes;
    assert_ne!(req2, req_bytes);
    let parsed = is_discovery_request(&req2).unwrap();
    let reply2 = p.proxy.handle_discovery(due, p.base, &parsed).unwrap();
    assert!(matches!(
        p.client.handle_base_datagram(due, &reply2.bytes),
        Ok(ClientEvent::Discovered { .. })
    ));
}
