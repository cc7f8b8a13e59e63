//! Both state machines driven with explicit `Time`s (Sidekick (NSDI '24) §4.1–4.2, Packrat (CoNEXT '26) §6.1):
//! handshake, reconfiguration, resets with epochs, close, Init retransmission with backoff and
//! fallback, quota exhaustion and refresh, idle expiry, replay rejection, address change.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Pair, both_modes, robin_only};
use sidekick_protocol::messages::{CAP_ROBIN, msg_type};
use sidekick_protocol::{
    ClientConfig, ClientEvent, ClientState, Destination, Error, ErrorCode, FallbackReason,
    ProxyEvent, ProxyPolicy, frame::Header,
};

const MS: Duration = Duration::from_millis(1);

#[test]
fn handshake_negotiates_and_clamps() {
    let mut p = Pair::new(both_modes());
    let mut cfg = both_modes();
    cfg.robin.as_mut().unwrap().threshold = 500; // above the proxy's default max_threshold 64
    p = Pair::with(ClientConfig::new(cfg), p.proxy.policy().clone());
    let now = p.t0;
    p.client.start(now).unwrap();
    assert_eq!(p.client.state(), ClientState::Discovering);
    let req = p.client_out();
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].dest, Destination::Base);
    assert_eq!(req[0].bytes.len(), sidekick_protocol::DISCOVERY_LEN);
    p.deliver_to_proxy(now, &req[0]).unwrap();
    assert_eq!(p.client.state(), ClientState::Initiating);
    assert_eq!(p.proxy.half_open_len(), 1);
    let init = p.client_out();
    assert_eq!(init.len(), 1);
    assert!(init[0].bytes.len() >= sidekick_protocol::frame::MIN_INIT_DATAGRAM);
    let ev = p.deliver_to_proxy(now, &init[0]).unwrap();
    let ProxyEvent::SessionEstablished {
        id, config, epoch, ..
    } = ev
    else {
        panic!("{ev:?}")
    };
    assert_eq!(epoch, 0);
    assert_eq!(config.robin.as_ref().unwrap().threshold, 64, "clamped");
    assert_eq!(p.proxy.half_open_len(), 0);
    assert_eq!(p.proxy.len(), 1);
    let s = p.proxy.session(&id).unwrap();
    assert!(!s.is_validated());
    // The InitAck fits the zero-amplification budget of the padded Init.
    assert!(s.unverified_bytes_out() <= s.unverified_bytes_in());
    let ack = p.proxy_out();
    assert_eq!(ack.len(), 1);
    assert!(ack[0].bytes.len() <= init[0].bytes.len());
    let ev = p.deliver_to_client(now, &ack[0]).unwrap();
    assert_eq!(
        ev,
        ClientEvent::Established {
            config: config.clone(),
            epoch: 0
        }
    );
    assert_eq!(p.client.state(), ClientState::Established);
    assert_eq!(p.client.config(), Some(&config));
    assert_eq!(p.client.session_id(), Some(id));
    // The client answers the path challenge at once; the proxy validates the address.
    let refresh = p.client_out();
    assert_eq!(refresh.len(), 1);
    assert_eq!(
        p.deliver_to_proxy(now, &refresh[0]).unwrap(),
        ProxyEvent::PathValidated { id }
    );
    assert!(p.proxy.session(&id).unwrap().is_validated());
}

#[test]
fn reconfigure_reset_and_close() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    let id = p.handshake(now);

    // Reconfigure: a new epoch on both sides.
    now += 50 * MS;
    let cid = p.client.reconfigure(now, robin_only(20)).unwrap();
    let (ce, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::Reconfigured {
        id,
        config: robin_only(20),
        epoch: 1
    }));
    assert!(ce.contains(&ClientEvent::Reconfigured {
        config: robin_only(20),
        epoch: 1
    }));
    assert_eq!(
        (p.client.epoch(), p.proxy.session(&id).unwrap().epoch()),
        (1, 1)
    );
    assert_eq!(p.proxy.session(&id).unwrap().config(), &robin_only(20));
    assert!(cid > 0);

    // Client reset, with its first Reset lost: the retry timer resends it.
    now += 50 * MS;
    assert_eq!(p.client.reset(now, 0).unwrap(), 2);
    let lost_reset = p.client_out();
    assert_eq!(lost_reset.len(), 1);
    let due = p.client.poll_timeout().unwrap();
    assert_eq!(due, now + 200 * MS, "control retry");
    now = due;
    p.client.handle_timeout(now);
    let (ce, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::Reset { id, epoch: 2 }), "{pe:?}");
    assert!(ce.contains(&ClientEvent::ResetAcked { epoch: 2 }), "{ce:?}");

    // Proxy-initiated reset (e.g. an undecodable eACK, Packrat (CoNEXT '26) §6.1), first copy held back.
    now += 10 * MS;
    assert_eq!(
        p.proxy
            .send_reset(now, &id, ErrorCode::DecodeFailure)
            .unwrap(),
        3
    );
    let held_proxy_reset = p.proxy_out();
    assert_eq!(held_proxy_reset.len(), 1);
    now += 200 * MS;
    p.proxy.handle_timeout(now);
    let (ce, pe) = p.pump(now);
    assert!(
        ce.contains(&ClientEvent::ResetByProxy {
            epoch: 3,
            reason: ErrorCode::DecodeFailure as u32
        }),
        "{ce:?}"
    );
    assert!(
        pe.contains(&ProxyEvent::ResetAcked { id, epoch: 3 }),
        "{pe:?}"
    );
    assert_eq!(
        (p.client.epoch(), p.proxy.session(&id).unwrap().epoch()),
        (3, 3)
    );

    // Late copies of older epochs are refused with the typed stale-epoch error on both sides.
    assert_eq!(
        p.deliver_to_proxy(now, &lost_reset[0]),
        Err(Error::StaleEpoch { got: 2, current: 3 })
    );
    // The held proxy Reset carries epoch 3 = current: an echo, not stale. Make a stale one:
    // a quACK sealed in epoch 3, delivered after a client reset to epoch 4.
    let q = p.proxy.send_quack(now, &id, b"quack-e3").unwrap();
    p.client.reset(now, 0).unwrap();
    assert_eq!(
        p.deliver_to_client(now, &q),
        Err(Error::StaleEpoch { got: 3, current: 4 })
    );
    // And an eACK sealed in epoch 4 by the client reaches the proxy still in epoch 3: ahead.
    p.client_out(); // lose the Reset(4)
    p.client.send_eack(now, b"eack-e4").unwrap();
    let e = p.client_out();
    assert_eq!(
        p.deliver_to_proxy(now, &e[0]),
        Err(Error::EpochAhead { got: 4, current: 3 })
    );
    now += 200 * MS;
    p.client.handle_timeout(now);
    let (ce, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::Reset { id, epoch: 4 }), "{pe:?}");
    assert!(ce.contains(&ClientEvent::ResetAcked { epoch: 4 }), "{ce:?}");
    // The client refuses a late proxy Reset of an older epoch.
    let _ = held_proxy_reset;
    p.proxy
        .send_reset(now, &id, ErrorCode::DecodeFailure)
        .unwrap(); // epoch 5
    let r5 = p.proxy_out();
    p.client.reset(now, 0).unwrap(); // client moves to 5 on its own...
    p.client_out();
    let ev = p.deliver_to_client(now, &r5[0]).unwrap();
    assert_eq!(
        ev,
        ClientEvent::ResetAcked { epoch: 5 },
        "equal epoch = echo"
    );
    p.client.reset(now, 0).unwrap(); // 6
    p.pump(now);
    p.proxy
        .send_reset(now, &id, ErrorCode::DecodeFailure)
        .unwrap(); // 7
    let r7 = p.proxy_out();
    p.client.reset(now, 0).unwrap(); // client: 7 already in force, then...
    p.client.reset(now, 0).unwrap(); // 8
    assert_eq!(
        p.deliver_to_client(now, &r7[0]),
        Err(Error::StaleEpoch { got: 7, current: 8 })
    );

    // eACKs in the current epoch reach the proxy's engine.
    p.pump(now);
    let epoch = p.client.epoch();
    assert_eq!(p.proxy.session(&id).unwrap().epoch(), epoch);
    p.client.send_eack(now, b"eack").unwrap();
    let (_, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::Eack {
        id,
        epoch,
        data: b"eack".to_vec(),
        open_gaps: 0,
        number: 0,
    }));
    // An eACK with open gaps says so; the proxy's outcome reaches the client in the epoch.
    p.client.send_eack_with_gaps(now, b"eack", 2, 9).unwrap();
    let (_, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::Eack {
        id,
        epoch,
        data: b"eack".to_vec(),
        open_gaps: 2,
        number: 9,
    }));
    let o = p.proxy.send_eack_outcome(now, &id, 0, 9).unwrap();
    assert_eq!(
        p.deliver_to_client(now, &o),
        Ok(ClientEvent::EackOutcome {
            epoch,
            resent: 0,
            eack_number: 9
        })
    );

    // Close from the client: the proxy forgets the session.
    now += 10 * MS;
    p.client.close(now, 0);
    assert_eq!(p.client.state(), ClientState::Closed);
    let (_, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::Closed { id }));
    assert!(p.proxy.is_empty());
    assert_eq!(p.proxy.stats().sessions_closed, 1);
    assert_eq!(p.client.poll_timeout(), None, "no timers after close");
}

#[test]
fn proxy_close_and_rejected_config() {
    let mut policy = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    policy.capabilities = CAP_ROBIN;
    let mut p = Pair::with(ClientConfig::new(robin_only(8)), policy);
    let now = p.t0;
    let id = p.handshake(now);
    // Packrat-only is unsupported by this proxy: refused, old configuration stays.
    let mut packrat = common::both_modes();
    packrat.robin = None;
    let cid = p.client.reconfigure(now, packrat).unwrap();
    let (ce, _) = p.pump(now);
    assert!(ce.contains(&ClientEvent::ConfigRejected { config_id: cid }));
    assert_eq!(p.client.config(), Some(&robin_only(8)));
    assert_eq!(p.client.epoch(), 0);
    // The proxy closes.
    p.proxy.close(now, &id, ErrorCode::Busy).unwrap();
    let (ce, _) = p.pump(now);
    assert!(ce.contains(&ClientEvent::Closed {
        reason: ErrorCode::Busy as u32
    }));
    assert_eq!(p.client.state(), ClientState::Closed);
    assert!(p.proxy.is_empty());
}

#[test]
fn init_retransmits_with_backoff_then_falls_back() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    p.client.start(now).unwrap();
    let req = p.client_out();
    p.deliver_to_proxy(now, &req[0]).unwrap();
    let mut init_times = vec![now];
    let first_init = p.client_out();
    assert_eq!(first_init.len(), 1);
    // Every InitAck is lost.
    loop {
        let due = p.client.poll_timeout().unwrap();
        now = due;
        p.client.handle_timeout(now);
        if let Some(ev) = p.client.poll_event() {
            assert_eq!(ev, ClientEvent::Fallback(FallbackReason::InitTimeout));
            break;
        }
        let out = p.client_out();
        assert_eq!(out.len(), 1, "one Init per timeout");
        let h = Header::peek(&out[0].bytes).unwrap();
        assert_eq!(h.msg_type, msg_type::INIT);
        init_times.push(now);
    }
    assert_eq!(p.client.state(), ClientState::Failed);
    let gaps: Vec<u128> = init_times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    // ClientConfig defaults: 200 ms doubling, 5 attempts, backoff capped at 2 s.
    assert_eq!(gaps, vec![200, 400, 800, 1600]);
    assert_eq!(
        (now - init_times[4]).as_millis(),
        2000,
        "fallback after the last wait"
    );
    assert_eq!(p.client.stats().retransmissions, 4);
    assert_eq!(p.client.poll_timeout(), None);
}

#[test]
fn lost_init_ack_is_recovered_by_retransmission() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    p.until_init(now);
    let lost = p.proxy_out();
    assert_eq!(lost.len(), 1);
    now += 200 * MS;
    p.client.handle_timeout(now);
    let init2 = p.client_out();
    assert_eq!(init2.len(), 1);
    // The proxy answers the retransmitted Init again without creating a second session.
    assert_eq!(
        p.deliver_to_proxy(now, &init2[0]).unwrap(),
        ProxyEvent::Nothing
    );
    assert_eq!(p.proxy.len(), 1);
    let ack = p.proxy_out();
    assert!(matches!(
        p.deliver_to_client(now, &ack[0]).unwrap(),
        ClientEvent::Established { .. }
    ));
    // The late first InitAck is a duplicate: answered with a Refresh, no new event.
    assert_eq!(
        p.deliver_to_client(now, &lost[0]).unwrap(),
        ClientEvent::Nothing
    );
    let (_, pe) = p.pump(now);
    assert!(
        pe.iter()
            .any(|e| matches!(e, ProxyEvent::PathValidated { .. }))
    );
}

#[test]
fn lost_path_response_is_resent_until_the_proxy_confirms_it() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    let id = p.until_init(now);
    let ack = p.proxy_out();
    assert!(matches!(
        p.deliver_to_client(now, &ack[0]).unwrap(),
        ClientEvent::Established { .. }
    ));
    // The Refresh carrying the path response is lost: the proxy stays unvalidated and its
    // anti-amplification limit soon refuses quACKs.
    assert_eq!(p.client_out().len(), 1);
    assert!(!p.proxy.session(&id).unwrap().is_validated());
    let refused = (0..10)
        .filter(|_| {
            matches!(
                p.proxy.send_quack(now, &id, &[0; 100]),
                Err(Error::AmplificationLimit)
            )
        })
        .count();
    assert!(refused > 0);
    let _ = p.proxy_out();
    // One control retry later (not the next keepalive, seconds away) the response goes again,
    // asking for a reply; the proxy validates the path and answers.
    let due = p.client.poll_timeout().unwrap();
    assert!(due <= now + 200 * MS, "{:?}", due - now);
    now = due;
    p.client.handle_timeout(now);
    let (_, pe) = p.pump(now);
    assert!(pe.contains(&ProxyEvent::PathValidated { id }), "{pe:?}");
    assert!(p.proxy.session(&id).unwrap().is_validated());
    assert!(p.proxy.send_quack(now, &id, &[0; 100]).is_ok());
    // Confirmed: no more resends.
    let _ = p.proxy_out();
    now += 2000 * MS;
    p.client.handle_timeout(now);
    let refreshes = p.client_out().len();
    assert!(
        refreshes <= 1,
        "only the keepalive cadence remains: {refreshes}"
    );
}

#[test]
fn discovery_without_proxy_falls_back() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    p.client.start(now).unwrap();
    let mut sent = p.client_out().len();
    loop {
        now = p.client.poll_timeout().unwrap();
        p.client.handle_timeout(now);
        if let Some(ev) = p.client.poll_event() {
            assert_eq!(ev, ClientEvent::Fallback(FallbackReason::NoProxy));
            break;
        }
        sent += p.client_out().len();
    }
    // 250 ms doubling: requests at 0, 250, 750, 1750; fallback 2 s later (capped backoff).
    assert_eq!(sent, 4);
    assert_eq!((now - p.t0).as_millis(), 3750);
    assert_eq!(p.client.state(), ClientState::Failed);
}

#[test]
fn quota_exhaustion_and_refresh() {
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    let id = p.handshake(now);
    // The client authorised 256 frames beyond the InitAck (seq 1): seqs 2..=257; the reply
    // confirming its path response took seq 2.
    assert_eq!(p.client.quota_granted(), 257);
    assert_eq!(p.proxy.session(&id).unwrap().quota_remaining(), 255);
    let mut held = Vec::new();
    for i in 0..255 {
        let q = p.proxy.send_quack(now, &id, &[i as u8]).unwrap();
        held.push(q);
    }
    assert_eq!(p.proxy.session(&id).unwrap().quota_remaining(), 0);
    assert_eq!(
        p.proxy.send_quack(now, &id, b"x"),
        Err(Error::QuotaExhausted)
    );
    assert_eq!(p.proxy.stats().quota_refused, 1);
    // The last frame says: no further frames allowed.
    let last = held.pop().unwrap();
    assert!(matches!(
        p.deliver_to_client(now, &last).unwrap(),
        ClientEvent::Quack { .. }
    ));
    assert_eq!(p.client.proxy_quota_remaining(), 0);
    // Seeing seq 257 makes the client raise its grant at once (half the window used).
    assert_eq!(p.client.quota_granted(), 257 + 256);
    let (_, pe) = p.pump(now);
    assert!(pe.iter().all(|e| *e == ProxyEvent::Nothing));
    assert_eq!(p.proxy.session(&id).unwrap().quota_remaining(), 256);
    p.proxy.send_quack(now, &id, b"again").unwrap();

    // Timer-driven refresh: a few quACKs (below half the window) are seen; the grant rises at
    // the next refresh tick rather than immediately.
    for _ in 0..10 {
        let q = p.proxy.send_quack(now, &id, b"q").unwrap();
        p.deliver_to_client(now, &q).unwrap();
    }
    assert!(p.client_out().is_empty(), "no data-driven refresh yet");
    let before = p.proxy.session(&id).unwrap().quota_remaining();
    now = p.client.poll_timeout().unwrap();
    assert!(now - p.t0 <= Duration::from_millis(500), "refresh interval");
    p.client.handle_timeout(now);
    p.pump(now);
    assert!(p.proxy.session(&id).unwrap().quota_remaining() > before);
}

#[test]
fn idle_expiry_on_both_sides_and_keepalive() {
    // A live pair stays up for a minute with no application traffic: keepalives work.
    let mut p = Pair::new(both_modes());
    let mut now = p.t0;
    let id = p.handshake(now);
    while now - p.t0 < Duration::from_secs(60) {
        now = [p.client.poll_timeout(), p.proxy.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        p.client.handle_timeout(now);
        p.proxy.handle_timeout(now);
        let (ce, pe) = p.pump(now);
        assert!(
            !ce.iter().any(|e| matches!(e, ClientEvent::Fallback(_))),
            "{ce:?}"
        );
        assert!(
            !pe.iter().any(|e| matches!(e, ProxyEvent::Expired { .. })),
            "{pe:?}"
        );
    }
    assert_eq!(p.client.state(), ClientState::Established);
    assert!(p.proxy.session(&id).is_some());

    // The proxy goes silent: the client falls back after its idle timeout (10 s).
    let silent_from = now;
    loop {
        now = p.client.poll_timeout().unwrap();
        p.client.handle_timeout(now);
        p.client_out();
        if let Some(ev) = p.client.poll_event() {
            assert_eq!(ev, ClientEvent::Fallback(FallbackReason::IdleTimeout));
            break;
        }
    }
    assert!(now - silent_from <= Duration::from_secs(10));
    assert_eq!(p.client.state(), ClientState::Failed);

    // The client is gone: the proxy expires the session after its idle timeout (30 s).
    loop {
        now = p.proxy.poll_timeout().unwrap();
        p.proxy.handle_timeout(now);
        p.proxy_out();
        if let Some(ev) = p.proxy.poll_event() {
            assert_eq!(ev, ProxyEvent::Expired { id, base: p.base });
            break;
        }
    }
    assert!(now - silent_from <= Duration::from_secs(30));
    assert!(p.proxy.is_empty());
    assert_eq!(p.proxy.stats().sessions_expired, 1);
}

#[test]
fn half_open_entries_expire() {
    let mut p = Pair::new(both_modes());
    let now = p.t0;
    p.client.start(now).unwrap();
    let req = p.client_out();
    p.deliver_to_proxy(now, &req[0]).unwrap();
    assert_eq!(p.proxy.half_open_len(), 1);
    let due = p.proxy.poll_timeout().unwrap();
    assert_eq!(due - now, Duration::from_secs(5));
    p.proxy.handle_timeout(due);
    assert_eq!(p.proxy.half_open_len(), 0);
    assert_eq!(p.proxy.stats().half_open_expired, 1);
    // The Init now finds no session.
    let init = p.client_out();
    assert_eq!(
        p.deliver_to_proxy(due, &init[0]),
        Err(Error::UnknownSession)
    );
}

#[test]
fn replayed_frames_are_rejected_on_both_sides() {
    let mut p = Pair::new(both_modes());
    let now = p.t0;
    let id = p.handshake(now);
    p.client.send_eack(now, b"e").unwrap();
    let e = p.client_out();
    assert!(matches!(
        p.deliver_to_proxy(now, &e[0]).unwrap(),
        ProxyEvent::Eack { .. }
    ));
    let seq = Header::peek(&e[0].bytes).unwrap().seq;
    assert_eq!(p.deliver_to_proxy(now, &e[0]), Err(Error::Replayed(seq)));
    assert_eq!(p.proxy.stats().replays, 1);
    let q = p.proxy.send_quack(now, &id, b"q").unwrap();
    p.deliver_to_client(now, &q).unwrap();
    let seq = Header::peek(&q.bytes).unwrap().seq;
    assert_eq!(p.deliver_to_client(now, &q), Err(Error::Replayed(seq)));
    assert_eq!(p.client.stats().rejected, 1);
}

#[test]
fn address_change_keeps_the_validated_address_until_the_new_one_validates() {
    // RFC 9000 §9.3.3: frames from a new address (NAT rebinding, or an on-path copy) do not
    // move the session; the new address is probed within its own zero-amplification budget.
    let mut p = Pair::new(both_modes());
    let now = p.t0;
    let id = p.handshake(now);
    let old = p.client_sk;
    let new: std::net::SocketAddr = "10.0.0.2:6001".parse().unwrap();
    p.client.send_eack(now, &[0; 32]).unwrap();
    let e = p.client_out();
    p.proxy.handle_datagram(now, new, &e[0].bytes).unwrap();
    let s = p.proxy.session(&id).unwrap();
    assert!(s.is_validated());
    assert_eq!(s.client_addr(), old);
    assert_eq!(s.probing_addr(), Some(new));
    // The probe's challenge went to the new address, no larger than what came from it.
    let out = p.proxy_out();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, new);
    assert!(out[0].bytes.len() <= e[0].bytes.len());
    // quACKs keep flowing to the validated address, unlimited by the probe.
    for _ in 0..10 {
        let t = p.proxy.send_quack(now, &id, &[0; 100]).unwrap();
        assert_eq!(t.to, old);
        p.client
            .handle_datagram(now, p.proxy_addr, &t.bytes)
            .unwrap();
    }
    // The client answers the challenge from its new address: the session moves there.
    p.client
        .handle_datagram(now, p.proxy_addr, &out[0].bytes)
        .unwrap();
    let answers = p.client_out();
    let mut validated = false;
    for a in &answers {
        if let Ok(ProxyEvent::PathValidated { id: v }) = p.proxy.handle_datagram(now, new, &a.bytes)
        {
            validated = v == id;
        }
    }
    assert!(validated);
    let s = p.proxy.session(&id).unwrap();
    assert_eq!(s.client_addr(), new);
    assert_eq!(s.probing_addr(), None);
    assert_eq!(s.stats().address_changes, 1);
    assert_eq!(p.proxy.send_quack(now, &id, &[0; 100]).unwrap().to, new);
}

#[test]
fn a_probe_that_never_answers_leaves_the_session_where_it_was() {
    let mut p = Pair::new(both_modes());
    let now = p.t0;
    let id = p.handshake(now);
    let spoofed: std::net::SocketAddr = "10.0.0.2:9999".parse().unwrap();
    // An on-path attacker re-sends the client's authentic frames from another port.
    for _ in 0..5 {
        p.client.send_eack(now, &[0; 32]).unwrap();
        for t in p.client_out() {
            let _ = p.proxy.handle_datagram(now, spoofed, &t.bytes);
        }
    }
    let to_spoofed: usize = p
        .proxy_out()
        .iter()
        .filter(|t| t.to == spoofed)
        .map(|t| t.bytes.len())
        .sum();
    let s = p.proxy.session(&id).unwrap();
    assert_eq!(s.client_addr(), p.client_sk);
    assert!(s.is_validated());
    assert!(
        to_spoofed > 0 && to_spoofed <= 5 * 200,
        "challenges only: {to_spoofed}"
    );
    assert_eq!(
        p.proxy.send_quack(now, &id, &[0; 10]).unwrap().to,
        p.client_sk
    );
}
