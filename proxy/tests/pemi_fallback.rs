//! PEMI as the fallback of a sidekick session (docs/proxy.md, "PEMI as the fallback"): a QUIC
//! flow PEMI assists opts into a Robin session through the real protocol (discovery on the base
//! path, Init/InitAck on the sidekick socket); while the session lasts PEMI's engine is suspended
//! (it repairs nothing); when the session ends (the client's Close) or fails (no client message
//! for the session idle timeout) the flow goes back to PEMI, which again retransmits the
//! datagrams the client link drops. Every base packet keeps the Forward verdict throughout.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::collections::BTreeSet;
use std::time::Duration;

use sidekick_proxy::Time;

use common::{CLIENT, CLIENT_SK, PROXY, SERVER, addr, eth, long, robin_config};
use sidekick_protocol::{ClientConfig, ClientSession, Destination, ProxyPolicy};
use sidekick_proxy::core::{Assistance, CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::flow::FlowKey;
use sidekick_proxy::metrics::RenderPrometheus as _;
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy::pemi::PemiConfig;
use sidekick_proxy::session::ProtocolSessions;

/// Proxy ↔ client round trip of the synthetic path.
const RTT_CLIENT: Duration = Duration::from_millis(10);

fn key() -> FlowKey {
    FlowKey {
        client: addr(CLIENT),
        server: addr(SERVER),
    }
}

/// A short-header server datagram carrying `id` where a test can read it back.
fn data(id: u32) -> Vec<u8> {
    let mut p = vec![0x41u8; 1200];
    p[1..5].copy_from_slice(&id.to_be_bytes());
    p
}

fn id_of(frame: &[u8]) -> Option<u32> {
    let u = parse_frame(frame, LinkType::Ethernet).ok()?;
    let p = u.payload(frame);
    Some(u32::from_be_bytes(p.get(1..5)?.try_into().ok()?))
}

struct Path {
    core: ProxyCore<ProtocolSessions>,
    t0: Time,
    /// Server datagrams PEMI injected again (by the id they carry).
    repaired: Vec<u32>,
    /// Sidekick datagrams the proxy sent (quACKs, InitAcks).
    sidekick: Vec<Vec<u8>>,
    next_id: u32,
}

impl Path {
    fn new(policy: ProxyPolicy) -> Self {
        // The paper's timing-only inference (PEMI §4.2–4.3): this path's 50-byte replies carry
        // no ACK ranges for the gap signal to read.
        let pemi = PemiConfig {
            gap_signal: false,
            ..PemiConfig::default()
        };
        let core = ProxyCore::new(CoreConfig::default(), ProtocolSessions::new(policy), (1, 2))
            .with_pemi(Some(pemi));
        Self {
            core,
            t0: Time::ZERO,
            repaired: Vec::new(),
            sidekick: Vec::new(),
            next_id: 1,
        }
    }

    fn frame(&mut self, t: Time, dir: Direction, payload: &[u8]) {
        let (src, dst) = match dir {
            Direction::FromClient => (CLIENT, SERVER),
            Direction::ToClient => (SERVER, CLIENT),
        };
        let f = eth(&build_udp_ip(addr(src), addr(dst), payload, 64));
        let v = self.core.handle_frame(t, dir, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward, "a base packet was held");
        self.drain(t);
    }

    fn drain(&mut self, t: Time) {
        if self.core.poll_timeout().is_some_and(|d| d <= t) {
            self.core.handle_timeout(t);
        }
        while let Some(x) = self.core.poll_transmit() {
            match x {
                Transmit::Inject { frame, .. } => {
                    // Discovery replies and ICMP probes are not repairs of the download.
                    if let Some(id) = id_of(&frame).filter(|&id| id != 0) {
                        self.repaired.push(id);
                    }
                }
                Transmit::Sidekick { bytes, .. } => self.sidekick.push(bytes),
            }
        }
    }

    /// The connection's handshake (client Initial, server Initial + Handshake, client
    /// Handshake): PEMI takes the flow and learns its initial RTTs.
    fn handshake(&mut self) {
        let t = self.t0;
        self.frame(t, Direction::FromClient, &long(0, 1180));
        let mut sh = long(0, 150);
        sh.extend(long(2, 1000));
        self.frame(t + Duration::from_millis(40), Direction::ToClient, &sh);
        self.frame(
            t + Duration::from_millis(50),
            Direction::FromClient,
            &long(2, 60),
        );
    }

    /// `bursts` bursts of 10 server datagrams 0.5 ms apart, every 30 ms from `start`; the client
    /// answers each datagram it received one client RTT later. Datagrams whose position in the
    /// whole run (0-based) is in `drop` are lost on the client link. Returns the ids dropped.
    fn download(&mut self, start: Duration, bursts: u64, drop: &BTreeSet<u64>) -> Vec<u32> {
        let mut evs = Vec::new();
        let mut dropped = Vec::new();
        for b in 0..bursts {
            for i in 0..10u64 {
                let id = self.next_id;
                self.next_id += 1;
                let t = start + Duration::from_micros(30_000 * b + 500 * i);
                evs.push((t, 0u8, id));
                if drop.contains(&(b * 10 + i)) {
                    dropped.push(id);
                } else {
                    evs.push((t + RTT_CLIENT, 1, id));
                }
            }
        }
        evs.sort_unstable();
        for (t, kind, id) in evs {
            let at = self.t0 + t;
            if kind == 0 {
                self.frame(at, Direction::ToClient, &data(id));
            } else {
                let mut ack = vec![0x41u8; 50];
                ack[1..5].copy_from_slice(&(0x8000_0000u32 | id).to_be_bytes());
                self.frame(at, Direction::FromClient, &ack);
            }
        }
        // Let the last flowlets finish.
        let end = self.t0 + start + Duration::from_millis(30 * bursts + 200);
        self.drain(end);
        dropped
    }

    /// The client opens a Robin session on the flow at `t`; returns the client's session.
    fn open_session(&mut self, t: Time) -> ClientSession {
        let mut client = ClientSession::new(ClientConfig::new(robin_config()));
        client.start(t).unwrap();
        self.exchange(&mut client, t);
        assert!(
            self.core
                .flows()
                .get(&key())
                .unwrap()
                .value
                .assistance
                .session()
                .is_some(),
            "the session did not attach"
        );
        client
    }

    /// Move datagrams between the client session and the proxy until both are quiet.
    fn exchange(&mut self, client: &mut ClientSession, t: Time) {
        for _ in 0..50 {
            let mut moved = false;
            while let Some(x) = client.poll_transmit() {
                moved = true;
                match x.dest {
                    Destination::Base => {
                        // The discovery request on the base path; its reply is injected below.
                        let f = eth(&build_udp_ip(addr(CLIENT), addr(SERVER), &x.bytes, 64));
                        let v = self.core.handle_frame(
                            t,
                            Direction::FromClient,
                            &f,
                            FrameMeta::default(),
                        );
                        assert_eq!(v, Verdict::Forward);
                    }
                    Destination::Sidekick(_) => {
                        self.core.handle_sidekick(t, addr(CLIENT_SK), &x.bytes);
                    }
                }
            }
            self.core.handle_timeout(t);
            let mut replies = Vec::new();
            while let Some(x) = self.core.poll_transmit() {
                moved = true;
                match x {
                    Transmit::Sidekick { bytes, .. } => {
                        let _ = client.handle_datagram(t, addr(PROXY), &bytes);
                        self.sidekick.push(bytes);
                    }
                    Transmit::Inject { frame, .. } => replies.push(frame),
                }
            }
            for f in replies {
                if let Ok(u) = parse_frame(&f, LinkType::Ethernet) {
                    let _ = client.handle_base_datagram(t, u.payload(&f));
                }
            }
            while client.poll_event().is_some() {}
            if !moved {
                break;
            }
        }
    }

    fn assistance(&self) -> &Assistance<sidekick_protocol::SessionId> {
        &self.core.flows().get(&key()).unwrap().value.assistance
    }
}

/// Positions of the dropped datagrams: one in the middle of every third burst after a warm-up
/// of five (the matching's eliciting threshold settles over the first bursts, PEMI App. A).
fn drops(bursts: u64) -> BTreeSet<u64> {
    (5..bursts)
        .filter(|b| b % 3 == 1)
        .map(|b| b * 10 + 4)
        .collect()
}

/// Handshake, a PEMI-assisted download with losses, and a session opened at 400 ms; then a
/// download during the session with the same losses. Returns the path and the client.
fn assisted_then_session(policy: ProxyPolicy) -> (Path, ClientSession) {
    let mut path = Path::new(policy);
    path.handshake();
    let lost = path.download(Duration::from_millis(60), 12, &drops(12));
    assert!(
        matches!(path.assistance(), Assistance::Pemi(_)),
        "a flow that began with a client Initial gets PEMI"
    );
    let before: BTreeSet<u32> = path.repaired.iter().copied().collect();
    assert!(
        lost.iter().all(|id| before.contains(id)),
        "PEMI repaired the losses before the session: lost {lost:?}, repaired {before:?}"
    );
    let client = path.open_session(path.t0 + Duration::from_millis(600));
    let engines = path.assistance().session_engines().unwrap();
    assert!(engines.robin.is_some());
    assert!(
        engines.fallback.is_some(),
        "PEMI's engine waits beside the session"
    );
    // During the session PEMI is suspended: the session's engines have the flow, PEMI repairs
    // nothing and counts nothing.
    let pemi_at_attach = path.core.snapshot().pemi;
    let repaired = path.repaired.len();
    let lost = path.download(Duration::from_millis(700), 10, &drops(10));
    assert!(!lost.is_empty());
    assert_eq!(
        path.repaired.len(),
        repaired,
        "PEMI acted during the session"
    );
    assert_eq!(
        path.core.snapshot().pemi.protected,
        pemi_at_attach.protected
    );
    assert!(
        path.sidekick.len() > 2,
        "Robin quACKed during the session (InitAck and quACKs)"
    );
    (path, client)
}

/// After the session: PEMI has the flow again and repairs the drops of a new download.
fn pemi_repairs_again(path: &mut Path, start: Duration) {
    assert!(
        matches!(path.assistance(), Assistance::Pemi(_)),
        "the flow went back to PEMI"
    );
    let protected = path.core.snapshot().pemi.protected;
    let repaired = path.repaired.len();
    let lost = path.download(start, 10, &drops(10));
    let after: BTreeSet<u32> = path.repaired[repaired..].iter().copied().collect();
    assert!(
        lost.iter().all(|id| after.contains(id)),
        "PEMI repaired the losses after the session: lost {lost:?}, repaired {after:?}"
    );
    assert!(
        after.iter().all(|id| lost.contains(id)),
        "only lost datagrams are retransmitted: lost {lost:?}, repaired {after:?}"
    );
    assert!(path.core.snapshot().pemi.protected >= protected + 90);
}

#[test]
fn session_end_hands_the_flow_to_pemi() {
    let (mut path, mut client) = assisted_then_session(ProxyPolicy::new(addr(PROXY)));
    let t = path.t0 + Duration::from_millis(1200);
    client.close(t, 0);
    path.exchange(&mut client, t);
    let c = path.core.snapshot();
    assert_eq!(c.sessions_ended, 1);
    assert_eq!((c.pemi_fallbacks_ended, c.pemi_fallbacks_failed), (1, 0));
    assert!(
        c.render_prometheus()
            .unwrap()
            .contains("sidekick_pemi_fallbacks_total{reason=\"session_ended\"} 1\n")
    );
    pemi_repairs_again(&mut path, Duration::from_millis(1300));
}

#[test]
fn session_failure_hands_the_flow_to_pemi() {
    let mut policy = ProxyPolicy::new(addr(PROXY));
    policy.idle_timeout = Duration::from_secs(1);
    let (mut path, _client) = assisted_then_session(policy);
    // The client's sidekick goes silent (crashed, moved away) while its connection goes on:
    // the session expires one idle timeout after its last message.
    let start = Duration::from_millis(1200);
    path.download(start, 40, &BTreeSet::new());
    let c = path.core.snapshot();
    assert_eq!(c.sessions_ended, 1, "{c:?}");
    assert_eq!((c.pemi_fallbacks_ended, c.pemi_fallbacks_failed), (0, 1));
    pemi_repairs_again(&mut path, Duration::from_millis(2600));
}

#[test]
fn a_flow_without_pemi_goes_back_to_unassisted() {
    // PEMI off: the session's end leaves the flow unassisted (nothing to hand it to).
    let mut path = Path::new(ProxyPolicy::new(addr(PROXY)));
    path.core = ProxyCore::new(
        CoreConfig::default(),
        ProtocolSessions::new(ProxyPolicy::new(addr(PROXY))),
        (1, 2),
    );
    path.handshake();
    path.download(Duration::from_millis(60), 3, &BTreeSet::new());
    assert!(matches!(path.assistance(), Assistance::Unassisted));
    let mut client = path.open_session(path.t0 + Duration::from_millis(200));
    assert!(
        path.assistance()
            .session_engines()
            .unwrap()
            .fallback
            .is_none()
    );
    let t = path.t0 + Duration::from_millis(300);
    client.close(t, 0);
    path.exchange(&mut client, t);
    assert!(matches!(path.assistance(), Assistance::Unassisted));
    let c = path.core.snapshot();
    assert_eq!((c.pemi_fallbacks_ended, c.pemi_fallbacks_failed), (0, 0));
}
