use super::*;
use quack::PowerSumQuack;
use sidekick_protocol::{
    BaseFlow, FallbackReason, ProxyEvent, ProxyPolicy, ProxySessionTable, SessionId,
};

const PROXY: &str = "192.0.2.1:7000";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn dg(i: u32) -> Vec<u8> {
    let mut d = vec![0x42u8; 30];
    d.extend(i.to_le_bytes());
    d
}

struct Lab {
    t0: Instant,
    client: SidekickClient,
    proxy: ProxySessionTable,
    sid: SessionId,
    /// The proxy's quACK of what it saw.
    seen: PowerSumQuack<u32>,
}

fn proxy_addr() -> SocketAddr {
    PROXY.parse().unwrap()
}

/// Runs discovery and the handshake against a real protocol proxy table.
fn connect(config: SidekickConfig) -> Lab {
    connect_sending(config, &[])
}

/// As [`connect`], with the base datagrams `dg(i)` for `i` in `handshake_sends` sent (and seen
/// by the proxy) while the InitAck is on its way.
fn connect_sending(config: SidekickConfig, handshake_sends: &[u32]) -> Lab {
    let t0 = Instant::now();
    let t = config
        .protocol
        .session
        .robin
        .as_ref()
        .map_or(8, |r| r.threshold as usize);
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let mut proxy = ProxySessionTable::new(ProxyPolicy::new(proxy_addr()));
    let mut client = SidekickClient::new(config);
    client.start(t0).unwrap();
    let Some(Transmit::Base(req)) = client.poll_transmit() else {
        panic!("no request")
    };
    let parsed = sidekick_protocol::is_discovery_request(&req).unwrap();
    let reply = proxy.handle_discovery(Time::ZERO, base, &parsed).unwrap();
    client.on_base_received(t0, reply.bytes.to_vec());
    assert!(client.poll_deliver().is_none(), "the reply is consumed");
    let mut sid = None;
    let mut seen = PowerSumQuack::new(t);
    // Shuttle frames until established.
    for round in 0..10 {
        while let Some(t) = client.poll_transmit() {
            if let Transmit::Sidekick(_, bytes) = t
                && let Ok(ProxyEvent::SessionEstablished { id, .. }) =
                    proxy.handle_datagram(Time::ZERO, base.client, &bytes)
            {
                sid = Some(id);
            }
        }
        if round == 0 {
            for &i in handshake_sends {
                client.on_base_sent(t0, &dg(i));
                seen.insert(i);
            }
        }
        while let Some(t) = proxy.poll_transmit() {
            client.on_sidekick_datagram(t0, proxy_addr(), &t.bytes);
        }
    }
    assert!(client.is_active());
    assert_eq!(client.poll_event(), Some(SdkEvent::Established));
    let mut lab = Lab {
        t0,
        client,
        proxy,
        sid: sid.unwrap(),
        seen,
    };
    if lab.client.robin().is_some() && handshake_sends.is_empty() {
        // The proxy's first quACK (nothing seen yet) is the epoch baseline.
        lab.quack(0);
        assert!(lab.client.robin().unwrap().is_synced());
    }
    lab
}

impl Lab {
    fn send(&mut self, range: std::ops::Range<u32>, drop: &[u32]) {
        for i in range {
            self.client.on_base_sent(self.t0 + ms(u64::from(i)), &dg(i));
            if !drop.contains(&i) {
                self.seen.insert(i);
            }
        }
    }

    /// Delivers the client's pending sidekick frames (Reset, Refresh…) to the proxy.
    fn flush_to_proxy(&mut self, at: u64) {
        while let Some(t) = self.client.poll_transmit() {
            if let Transmit::Sidekick(_, b) = t {
                let from = "10.0.0.2:5000".parse().unwrap();
                let _ = self.proxy.handle_datagram(Time::from_millis(at), from, &b);
            }
        }
    }

    fn deliver_quack(&mut self, at: u64, data: &[u8]) {
        self.flush_to_proxy(at);
        let t = self
            .proxy
            .send_quack(Time::from_millis(at), &self.sid, data)
            .unwrap();
        self.client
            .on_sidekick_datagram(self.t0 + ms(at), proxy_addr(), &t.bytes);
    }

    fn quack(&mut self, at: u64) {
        let data = self.seen.to_bytes();
        self.deliver_quack(at, &data);
    }

    fn events(&mut self) -> Vec<SdkEvent> {
        std::iter::from_fn(|| self.client.poll_event()).collect()
    }
}

#[test]
fn quack_loss_gives_event_and_early_retransmission() {
    let mut lab = connect(SidekickConfig::robin(30, 8));
    lab.send(0..10, &[4]);
    lab.quack(12);
    let ev = lab.events();
    assert!(
        ev.iter()
            .any(|e| matches!(e, SdkEvent::NearLoss(l) if l.id == 4))
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, SdkEvent::Delivered { bytes, .. } if *bytes == 9 * 34))
    );
    let resent: Vec<_> = std::iter::from_fn(|| lab.client.poll_transmit())
        .filter_map(|t| match t {
            Transmit::Base(d) => Some(d),
            Transmit::Sidekick(..) => None,
        })
        .collect();
    assert_eq!(resent, vec![dg(4)]);
    assert_eq!(lab.client.stats().quacks, 2, "baseline + one");
    assert_eq!(lab.client.stats().retransmissions, 1);
}

/// Base packets sent while the InitAck was on its way were counted by the proxy but never
/// logged: its first quACK names one of them, which is no reason to give up on it.
#[test]
fn a_first_quack_naming_a_handshake_send_is_not_inconsistent() {
    let mut lab = connect_sending(SidekickConfig::robin(30, 8), &[100, 101, 102]);
    lab.quack(1);
    assert!(lab.client.is_active());
    assert_eq!(lab.client.stats().inconsistent_quacks, 0);
    assert!(!lab.client.robin().unwrap().is_synced());
    assert_eq!(lab.client.robin().unwrap().stats().syncs_deferred, 1);
    lab.send(0..10, &[]);
    lab.quack(12);
    assert!(lab.client.robin().unwrap().is_synced());
    lab.send(10..20, &[14]);
    lab.quack(25);
    assert!(
        lab.events()
            .iter()
            .any(|e| matches!(e, SdkEvent::NearLoss(l) if l.id == 14))
    );
    assert_eq!(lab.client.stats().inconsistent_quacks, 0);
}

#[test]
fn receipts_of_never_sent_packets_cause_fallback() {
    let mut lab = connect(SidekickConfig::robin(30, 8));
    lab.send(0..3, &[]);
    for i in 50..55 {
        lab.seen.insert(i);
    }
    lab.quack(5);
    assert_eq!(lab.client.fallback_cause(), Some(FallbackCause::NeverSent));
    assert!(
        lab.events()
            .contains(&SdkEvent::Fallback(FallbackCause::NeverSent))
    );
    assert!(lab.client.robin().is_none());
}

#[test]
fn proxy_beyond_quota_causes_fallback() {
    let mut lab = connect(SidekickConfig::robin(30, 8));
    lab.send(0..3, &[]);
    lab.quack(3);
    assert_eq!(
        lab.client.stats().quacks,
        2,
        "baseline + one, within the grant"
    );
    // The proxy has every grant the client sent; an authentic frame numbered beyond the last
    // one is a proxy ignoring the quota (Sidekick (NSDI '24) §4.1).
    lab.flush_to_proxy(4);
    let data = lab.seen.to_bytes();
    let t = lab.proxy.send_quack_beyond_quota(&lab.sid, &data).unwrap();
    lab.client
        .on_sidekick_datagram(lab.t0 + ms(4), proxy_addr(), &t.bytes);
    assert_eq!(lab.client.fallback_cause(), Some(FallbackCause::OverQuota));
    assert!(
        lab.events()
            .contains(&SdkEvent::Fallback(FallbackCause::OverQuota))
    );
    assert_eq!(lab.client.stats().over_quota, 1);
    assert_eq!(lab.client.stats().quacks, 2, "the frame was not used");
    assert!(lab.client.robin().is_none());
    assert!(!lab.client.is_active());
}

#[test]
fn forged_quack_contents_cause_reset_then_fallback() {
    let mut lab = connect(SidekickConfig::robin(30, 4));
    for round in 0..3u32 {
        let mut first = round * 10;
        if round > 0 {
            // The proxy's first quACK of the new epoch that names a packet re-synchronises the
            // sender (an empty one cannot while the old epoch's packets are outstanding).
            lab.seen = PowerSumQuack::new(4);
            lab.send(first..first + 1, &[]);
            lab.quack(90 + u64::from(round));
            first += 1;
        }
        lab.send(first..round * 10 + 10, &[]);
        // Authentic frame, nonsense power sums (an on-path liar): undecodable.
        let mut forged = PowerSumQuack::<u32>::new(4);
        for i in 0..9 {
            forged.insert(7_000 + i);
        }
        forged.insert(round * 10 + 9);
        lab.deliver_quack(100 + u64::from(round), &forged.to_bytes());
        if round < 2 {
            assert!(lab.client.is_active());
            assert_eq!(lab.client.stats().resets_requested, u64::from(round) + 1);
        }
    }
    assert_eq!(lab.client.stats().inconsistent_quacks, 3);
    assert_eq!(
        lab.client.fallback_cause(),
        Some(FallbackCause::InconsistentQuacks)
    );
}

#[test]
fn off_path_forgeries_are_counted_not_fatal() {
    let mut lab = connect(SidekickConfig::robin(30, 8));
    lab.send(0..4, &[]);
    let t = lab
        .proxy
        .send_quack(Time::ZERO, &lab.sid, &lab.seen.to_bytes())
        .unwrap();
    let mut bad = t.bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1; // broken MAC
    lab.client.on_sidekick_datagram(lab.t0, proxy_addr(), &bad);
    lab.client
        .on_sidekick_datagram(lab.t0, "198.51.100.9:1".parse().unwrap(), &t.bytes);
    assert_eq!(lab.client.stats().rejected_frames, 2);
    assert!(lab.client.is_active());
    lab.client
        .on_sidekick_datagram(lab.t0, proxy_addr(), &t.bytes);
    assert_eq!(lab.client.stats().quacks, 2, "baseline + one");
    // A replay of the same authentic frame is refused too.
    lab.client
        .on_sidekick_datagram(lab.t0, proxy_addr(), &t.bytes);
    assert_eq!(lab.client.stats().rejected_frames, 3);
}

#[test]
fn stale_quack_is_counted_and_ignored() {
    let mut lab = connect(SidekickConfig::robin(30, 8));
    lab.send(0..4, &[]);
    let old = lab.seen.to_bytes();
    lab.send(4..8, &[]);
    lab.quack(10);
    lab.deliver_quack(11, &old);
    assert_eq!(lab.client.stats().stale_quacks, 1);
    assert!(lab.client.is_active());
}

#[test]
fn proxy_gone_falls_back_after_idle_timeout() {
    let mut lab = connect(SidekickConfig::robin(30, 8));
    let mut now = lab.t0;
    for _ in 0..100 {
        let Some(next) = lab.client.poll_timeout() else {
            break;
        };
        now = next.max(now);
        lab.client.handle_timeout(now);
        while lab.client.poll_transmit().is_some() {}
        if !lab.client.is_active() {
            break;
        }
    }
    assert!(matches!(
        lab.client.fallback_cause(),
        Some(FallbackCause::Protocol(FallbackReason::IdleTimeout))
    ));
    // Afterwards base traffic flows untouched.
    lab.client.on_base_sent(now, &dg(1));
    lab.client.on_base_received(now, dg(2));
    assert_eq!(lab.client.poll_deliver(), Some(dg(2)));
}

#[test]
fn no_proxy_falls_back_after_discovery_attempts() {
    let t0 = Instant::now();
    let mut client = SidekickClient::new(SidekickConfig::robin(30, 8));
    client.start(t0).unwrap();
    let mut now = t0;
    while let Some(next) = client.poll_timeout() {
        now = next;
        client.handle_timeout(now);
        if client.fallback_cause().is_some() {
            break;
        }
    }
    assert_eq!(
        client.fallback_cause(),
        Some(FallbackCause::Protocol(FallbackReason::NoProxy))
    );
    assert!(now - t0 < Duration::from_secs(10));
}

#[test]
fn packrat_holds_then_fallback_releases_everything() {
    let mut lab = connect(SidekickConfig::packrat());
    // Short-header datagrams with readable numbers need keys; give the lens a fixed CID length
    // and secret, and build packets it can read.
    let secret = [3u8; 48];
    lab.client
        .lens_mut()
        .set_secret(crate::lens::DatagramDirection::Incoming, &secret);
    lab.client
        .lens_mut()
        .set_dcid_len(crate::lens::DatagramDirection::Incoming, 4);
    let pkt = |pn: u8| test_packet(&secret, pn);
    lab.client.on_base_received(lab.t0, pkt(0));
    lab.client.on_base_received(lab.t0, pkt(2)); // 1 missing: held
    assert_eq!(std::iter::from_fn(|| lab.client.poll_deliver()).count(), 1);
    assert_eq!(lab.client.packrat().unwrap().held(), 1);
    assert!(lab.client.stats().eacks_sent >= 1);
    lab.client
        .fall_back(lab.t0 + ms(1), FallbackCause::Application);
    assert_eq!(std::iter::from_fn(|| lab.client.poll_deliver()).count(), 1);
}

/// A short-header packet with a 4-byte DCID and packet number `pn`, sealed under `secret`.
fn test_packet(secret: &[u8], pn: u8) -> Vec<u8> {
    let plain: Vec<u8> = (0..40u8)
        .map(|i| i.wrapping_mul(pn).wrapping_add(7))
        .collect();
    sealed(secret, pn, &plain)
}

/// `plain` in a short-header packet with a 4-byte DCID and packet number `pn`, sealed under
/// `secret` (AES-256-GCM).
fn sealed(secret: &[u8], pn: u8, plain: &[u8]) -> Vec<u8> {
    crate::lens::auth::seal_short_packet(
        crate::lens::Suite::Aes256Gcm,
        secret,
        &[1, 2, 3, 4],
        u64::from(pn),
        plain,
    )
}

#[test]
fn too_many_proxy_resets_cause_fallback() {
    let mut lab = connect(SidekickConfig::packrat());
    for k in 0..6u64 {
        lab.proxy
            .send_reset(
                Time::from_millis(k),
                &lab.sid,
                sidekick_protocol::ErrorCode::DecodeFailure,
            )
            .unwrap();
        while let Some(t) = lab.proxy.poll_transmit() {
            lab.client
                .on_sidekick_datagram(lab.t0 + ms(k), proxy_addr(), &t.bytes);
        }
        while let Some(t) = lab.client.poll_transmit() {
            if let Transmit::Sidekick(_, b) = t {
                let _ = lab.proxy.handle_datagram(
                    Time::from_millis(k),
                    "10.0.0.2:5000".parse().unwrap(),
                    &b,
                );
            }
        }
    }
    assert_eq!(
        lab.client.fallback_cause(),
        Some(FallbackCause::TooManyResets)
    );
    assert_eq!(lab.client.stats().resets_by_proxy, 6);
}

// The engines' assessments of their proxy (session_assess.rs): holds, resends, and one engine
// stopping beside the other.
#[path = "session_assess_tests.rs"]
mod assess;
