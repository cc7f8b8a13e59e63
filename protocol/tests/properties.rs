//! Property tests: round trips of every message, of frame seal/open (with and without padding)
//! and of discovery encode/parse; unknown protobuf fields tolerated; arbitrary bytes never panic
//! any decoder, and every fuzz body holds on random input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sidekick_protocol::Time;
use std::net::{IpAddr, SocketAddr};

use proptest::prelude::*;
use sidekick_protocol::discovery::{DiscoveryReply, DiscoveryRequest, is_discovery_reply};
use sidekick_protocol::frame::{self, Header, seal, seal_padded};
use sidekick_protocol::messages::{
    Challenge, Close, Config, Eack, EackOutcome, ErrorMsg, IdentifierSpec, Init, InitAck,
    MAX_ERROR_DETAIL, PackratConfig, Quack, Refresh, Reset, RobinConfig,
};
use sidekick_protocol::{
    ClientConfig, ClientSession, FrameDirection, MAX_DATAGRAM, Message, ProxyPolicy,
    ProxySessionTable, SessionConfig, SessionId, SessionKey, TagLen, fuzz, is_discovery_request,
};

fn arb_identifier() -> impl Strategy<Value = IdentifierSpec> {
    prop_oneof![
        (
            -70_000i32..70_000,
            prop_oneof![Just(2u32), Just(4), Just(8), 0u32..10]
        )
            .prop_map(|(offset, width)| IdentifierSpec {
                mode: 0,
                offset,
                width,
                hash_key: Vec::new(),
            }),
        (
            prop_oneof![Just(2u32), Just(4), Just(8)],
            proptest::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(width, hash_key)| IdentifierSpec {
                mode: 1,
                offset: 0,
                width,
                hash_key,
            }),
        any::<i32>().prop_map(|mode| IdentifierSpec {
            mode,
            offset: -4,
            width: 4,
            hash_key: Vec::new(),
        }),
    ]
}

/// Any configuration, valid or not (the decoder must agree with `validate`).
fn arb_config() -> impl Strategy<Value = SessionConfig> {
    (
        proptest::option::of((0u32..100, 0u32..100, 0u32..2000, 0u32..300)),
        proptest::option::of((
            0u32..100,
            0u32..100,
            0u32..70_000,
            0u64..1 << 40,
            any::<u32>(),
        )),
        proptest::option::of(arb_identifier()),
    )
        .prop_map(|(r, p, identifier)| SessionConfig {
            robin: r.map(
                |(interval_ms, interval_packets, threshold, quack_on_gap_percent)| RobinConfig {
                    interval_ms,
                    interval_packets,
                    threshold,
                    quack_on_gap_percent,
                },
            ),
            packrat: p.map(|(a, b, c, d, e)| PackratConfig {
                eack_interval_ms: a,
                eack_interval_packets: b,
                local_symbols: c,
                cache_capacity_bytes: d,
                reorder_delay_ms: e,
                multicast_group: Vec::new(),
            }),
            identifier,
        })
}

fn arb_valid_config() -> impl Strategy<Value = SessionConfig> {
    arb_config().prop_filter("valid", |c| c.validate().is_ok())
}

fn arb_message(config: BoxedStrategy<SessionConfig>) -> impl Strategy<Value = Message> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..600);
    prop_oneof![
        (any::<u32>(), proptest::option::of(config.clone())).prop_map(|(capabilities, config)| {
            Message::Init(Init {
                capabilities,
                config,
            })
        }),
        (
            any::<bool>(),
            any::<u32>(),
            proptest::option::of(config.clone()),
            any::<u64>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(accepted, capabilities, config, path_challenge, epoch, reject_code)| {
                    Message::InitAck(InitAck {
                        accepted,
                        capabilities,
                        config,
                        path_challenge,
                        epoch,
                        reject_code,
                    })
                }
            ),
        (
            any::<u32>(),
            proptest::option::of(config),
            any::<bool>(),
            any::<u32>()
        )
            .prop_map(
                |(config_id, config, accepted, epoch)| Message::Config(Config {
                    config_id,
                    config,
                    accepted,
                    epoch
                })
            ),
        (any::<u32>(), any::<u32>())
            .prop_map(|(epoch, reason)| Message::Reset(Reset { epoch, reason })),
        (any::<u32>(), bytes()).prop_map(|(epoch, data)| Message::Quack(Quack { epoch, data })),
        (any::<u32>(), bytes(), any::<u32>(), any::<u32>()).prop_map(
            |(epoch, data, open_gaps, number)| {
                Message::Eack(Eack {
                    epoch,
                    data,
                    open_gaps,
                    number,
                })
            }
        ),
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(epoch, resent, eack_number)| {
            Message::EackOutcome(EackOutcome {
                epoch,
                resent,
                eack_number,
            })
        }),
        any::<u32>().prop_map(|reason| Message::Close(Close { reason })),
        (any::<u32>(), "[a-zé]{0,300}")
            .prop_map(|(code, detail)| Message::Error(ErrorMsg { code, detail })),
        (any::<u64>(), any::<bool>()).prop_map(|(path_response, want_reply)| {
            Message::Refresh(Refresh {
                path_response,
                want_reply,
            })
        }),
        any::<u64>().prop_map(|token| Message::Challenge(Challenge { token })),
    ]
}

fn arb_valid_message() -> impl Strategy<Value = Message> {
    arb_message(arb_valid_config().boxed()).prop_filter("valid", |m| m.validate().is_ok())
}

fn direction_for(m: &Message, prefer_proxy: bool) -> FrameDirection {
    let ty = m.msg_type();
    let p = Message::allowed(ty, FrameDirection::ProxyToClient);
    let c = Message::allowed(ty, FrameDirection::ClientToProxy);
    if p && (prefer_proxy || !c) {
        FrameDirection::ProxyToClient
    } else {
        FrameDirection::ClientToProxy
    }
}

/// A protobuf field with a number no message uses, of a random wire type.
fn arb_unknown_field() -> impl Strategy<Value = Vec<u8>> {
    (
        16u32..2047,
        0u8..3,
        proptest::collection::vec(any::<u8>(), 0..20),
    )
        .prop_map(|(field, kind, data)| {
            let mut out = Vec::new();
            let wire = [0u32, 2, 5][kind as usize];
            put_varint(&mut out, u64::from((field << 3) | wire));
            match wire {
                0 => put_varint(&mut out, data.iter().map(|&b| u64::from(b)).sum()),
                2 => {
                    put_varint(&mut out, data.len() as u64);
                    out.extend_from_slice(&data);
                }
                _ => out.extend_from_slice(&[1, 2, 3, 4]),
            }
            out
        })
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn arb_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Decoding an encoded body gives the message back exactly when it is valid, and the
    /// validation error otherwise.
    #[test]
    fn every_message_round_trips(m in arb_message(arb_config().boxed())) {
        let got = Message::decode_body(m.msg_type(), &m.encode_body());
        match m.validate() {
            Ok(()) => prop_assert_eq!(got, Ok(m)),
            Err(e) => prop_assert_eq!(got, Err(e)),
        }
    }

    /// Unknown fields (any number not in use, any wire type, anywhere) are skipped.
    #[test]
    fn unknown_fields_are_tolerated(
        m in arb_valid_message(),
        extra in proptest::collection::vec(arb_unknown_field(), 1..4),
        front in any::<bool>(),
    ) {
        let mut body = Vec::new();
        let fields: Vec<u8> = extra.concat();
        if front {
            body.extend_from_slice(&fields);
            body.extend_from_slice(&m.encode_body());
        } else {
            body.extend_from_slice(&m.encode_body());
            body.extend_from_slice(&fields);
        }
        prop_assert_eq!(Message::decode_body(m.msg_type(), &body), Ok(m));
    }

    /// seal → open is the identity on (header fields, message), for both tag lengths, with
    /// and without padding; any single flipped bit is refused.
    #[test]
    fn frame_seal_open_round_trip(
        m in arb_valid_message(),
        prefer_proxy in any::<bool>(),
        long in any::<bool>(),
        sid in any::<[u8; 16]>(),
        seq in any::<u64>(),
        quota in any::<u32>(),
        key in any::<[u8; 32]>(),
        min_len in 0usize..2000,
        flip in any::<(usize, u8)>(),
    ) {
        let dir = direction_for(&m, prefer_proxy);
        let tag = if long { TagLen::Long } else { TagLen::Short };
        let key = SessionKey::from_bytes(&key);
        let b = seal_padded(dir, tag, SessionId(sid), seq, quota, &m, &key, min_len).unwrap();
        prop_assert!(b.len() >= min_len.min(MAX_DATAGRAM - 1));
        prop_assert!(b.len() <= MAX_DATAGRAM);
        let f = frame::open(&b, &key, dir).unwrap();
        prop_assert_eq!(&f.message, &m);
        prop_assert_eq!(f.header.session_id, SessionId(sid));
        prop_assert_eq!(f.header.seq, seq);
        prop_assert_eq!(f.header.quota, quota);
        prop_assert_eq!(f.header.tag_len(), tag);
        prop_assert_eq!(f.header.direction(), dir);
        let plain = seal(dir, tag, SessionId(sid), seq, quota, &m, &key).unwrap();
        let g = frame::open(&plain, &key, dir).unwrap();
        prop_assert_eq!(&g.message, &f.message);
        prop_assert_eq!(Header { body_len: 0, ..g.header }, Header { body_len: 0, ..f.header });
        let mut c = b.clone();
        let i = flip.0 % c.len();
        c[i] ^= 1 << (flip.1 % 8);
        prop_assert!(frame::open(&c, &key, dir).is_err());
    }

    /// Discovery request and reply: encode → parse round trip; the reply's key confirmation
    /// verifies under its key only; requests and replies are never confused.
    #[test]
    fn discovery_round_trips(
        version in any::<u8>(),
        caps in any::<u8>(),
        nonce in any::<[u8; 16]>(),
        pk in any::<[u8; 32]>(),
        sid in any::<[u8; 16]>(),
        addr in arb_addr(),
        b0 in any::<u8>(),
        key in any::<[u8; 32]>(),
    ) {
        let req = DiscoveryRequest { version, capabilities: caps, nonce, public_key: pk };
        let rb = req.encode(b0);
        prop_assert_eq!(is_discovery_request(&rb), Some(req));
        prop_assert!(!is_discovery_reply(&rb));
        let key = SessionKey::from_bytes(&key);
        let rep = DiscoveryReply {
            version,
            capabilities: caps,
            nonce,
            session_id: SessionId(sid),
            public_key: pk,
            sidekick_addr: addr,
            tag: [0; 16],
        };
        let pb = rep.encode(b0, &key);
        prop_assert!(is_discovery_request(&pb).is_none());
        let d = DiscoveryReply::decode(&pb).unwrap();
        prop_assert_eq!(DiscoveryReply { tag: [0; 16], ..d }, rep);
        prop_assert!(DiscoveryReply::verify_tag(&pb, &key));
        prop_assert!(!DiscoveryReply::verify_tag(&pb, &SessionKey::from_bytes(&[0; 32])));
    }

    /// Arbitrary bytes never panic any decoder, and every fuzz body holds.
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
        fuzz::fuzz_discovery(&data);
        fuzz::fuzz_open(&data);
        fuzz::fuzz_decode_body(&data);
        let _ = Header::peek(&data);
        let _ = DiscoveryReply::decode(&data);
        for ty in [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 255] {
            let _ = Message::decode_body(ty, &data);
        }
    }

    /// Bytes that look like frames (valid magic and version, random rest, sometimes a matching
    /// length) never panic and never authenticate.
    #[test]
    fn frame_like_bytes_never_authenticate(
        ty in 0u8..12,
        flags in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 30..600),
        fix_len in any::<bool>(),
    ) {
        let mut d = vec![0x53, 0x4b, 1, ty, flags, 0];
        d.extend_from_slice(&rest);
        if fix_len && d.len() >= frame::HEADER_LEN + 32 {
            let tag = if flags & 1 == 1 { 32 } else { 16 };
            let body = (d.len() - frame::HEADER_LEN - tag) as u16;
            d[34..36].copy_from_slice(&body.to_be_bytes());
        }
        let key = SessionKey::from_bytes(&[9; 32]);
        for dir in [FrameDirection::ClientToProxy, FrameDirection::ProxyToClient] {
            let r = frame::open(&d, &key, dir);
            prop_assert!(r.is_err());
        }
        fuzz::fuzz_open(&d);
    }

    /// The session table fuzz body (an established session driven by a random script).
    #[test]
    fn table_script_never_panics(data in proptest::collection::vec(any::<u8>(), 0..800)) {
        fuzz::fuzz_table(&data);
    }

    /// Both state machines refuse random datagrams without panicking or emitting anything.
    #[test]
    fn state_machines_refuse_random_datagrams(
        datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..20),
    ) {
        let now = Time::ZERO;
        let proxy_addr: SocketAddr = "192.0.2.1:7000".parse().unwrap();
        let mut cfg = ClientConfig::new(SessionConfig {
            robin: Some(RobinConfig {
                interval_ms: 30,
                interval_packets: 0,
                threshold: 10,
                quack_on_gap_percent: 0,
            }),
            packrat: None,
            identifier: Some(IdentifierSpec::quic_default()),
        });
        cfg.quota_window = 16;
        let mut client = ClientSession::new(cfg);
        client.start(now).unwrap();
        client.poll_transmit();
        let mut table = ProxySessionTable::new(ProxyPolicy::new(proxy_addr));
        let from: SocketAddr = "10.0.0.9:4000".parse().unwrap();
        for d in &datagrams {
            prop_assert!(client.handle_datagram(now, proxy_addr, d).is_err());
            let _ = client.handle_base_datagram(now, d);
            prop_assert!(table.handle_datagram(now, from, d).is_err());
            if let Some(req) = is_discovery_request(d) {
                let _ = table.handle_discovery(now, sidekick_protocol::BaseFlow {
                    client: from, server: proxy_addr }, &req);
            }
        }
        prop_assert!(client.poll_transmit().is_none());
        prop_assert!(table.poll_transmit().is_none());
        prop_assert_eq!(table.len(), 0);
    }
}

/// The ErrorMsg bound is enforced by the decoder, not only by the client's sender.
#[test]
fn error_detail_bound() {
    let m = Message::Error(ErrorMsg {
        code: 0,
        detail: "y".repeat(MAX_ERROR_DETAIL),
    });
    assert_eq!(Message::decode_body(m.msg_type(), &m.encode_body()), Ok(m));
}
