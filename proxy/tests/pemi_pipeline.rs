//! PEMI through the proxy core (PEMI): a synthetic QUIC-like download (handshake, then
//! RTC-like bursts) with datagrams dropped between the proxy and the client. The proxy must
//! retransmit exactly the dropped datagrams, never more than 10 % of forwarded packets, and give
//! up (with a reason) where inference is unreliable.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sidekick_proxy::Time;

use common::{CLIENT, SERVER, addr, eth, long};
use sidekick_protocol::ProxyPolicy;
use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::metrics::RenderPrometheus as _;
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame, udp_checksum_ok};
use sidekick_proxy::pemi::{PemiConfig, PemiStats};
use sidekick_proxy::session::ProtocolSessions;

/// Proxy ↔ client and proxy ↔ server round trips of the synthetic path.
const RTT_CLIENT: Duration = Duration::from_millis(10);
const RTT_SERVER: Duration = Duration::from_millis(40);

/// A short-header datagram carrying `id` (what a test can see of an encrypted packet).
fn short(id: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0x41u8; len];
    p[1..5].copy_from_slice(&id.to_be_bytes());
    p
}

fn id_of(frame: &[u8]) -> u32 {
    let u = parse_frame(frame, LinkType::Ethernet).unwrap();
    let p = u.payload(frame);
    u32::from_be_bytes([p[1], p[2], p[3], p[4]])
}

#[derive(Debug, Clone)]
enum Ev {
    /// A datagram reaching the proxy.
    Frame(Direction, Vec<u8>),
}

struct Sim {
    core: ProxyCore<ProtocolSessions>,
    t0: Time,
    queue: BTreeMap<(Duration, u64), Ev>,
    seq: u64,
    injected: Vec<u32>,
    delayed: u64,
    /// Server packets that the client link drops (after the proxy, so the proxy saw them).
    drop: BTreeSet<u32>,
    /// Proxy ↔ client RTT as a function of time (a growing queue on the client link).
    rtt_client: fn(Duration) -> Duration,
    /// Hand frames over with a partial (garbage) UDP checksum, as `TP_STATUS_CSUMNOTREADY`.
    csum_partial: bool,
    /// Every injected frame had a correct UDP checksum.
    injected_csum_ok: bool,
    /// ICMP echo probes the proxy injected towards the client (RTT calibration).
    probes: u64,
    /// The client's ACKs grow by one ACK range (2 bytes) per missing packet below the largest
    /// received, as real QUIC ACK frames do; off: every reply is 50 bytes.
    ack_ranges: bool,
    /// Server packets the client has received (for `ack_ranges`).
    received: BTreeSet<u32>,
    /// Replies that showed a hole and were forwarded without a Delay verdict.
    grown_unheld: u64,
}

impl Sim {
    fn new(pemi: PemiConfig, drop: BTreeSet<u32>) -> Self {
        let core = ProxyCore::new(
            CoreConfig {
                link: LinkType::Ethernet,
                ..CoreConfig::default()
            },
            ProtocolSessions::new(ProxyPolicy::new(addr("10.0.0.1:7788"))),
            (1, 2),
        )
        .with_pemi(Some(pemi));
        Self {
            core,
            t0: Time::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            injected: Vec::new(),
            delayed: 0,
            drop,
            rtt_client: |_| RTT_CLIENT,
            csum_partial: false,
            injected_csum_ok: true,
            probes: 0,
            ack_ranges: false,
            received: BTreeSet::new(),
            grown_unheld: 0,
        }
    }

    fn at(&mut self, t: Duration, ev: Ev) {
        self.seq += 1;
        self.queue.insert((t, self.seq), ev);
    }

    fn up(&mut self, t: Duration, payload: &[u8]) {
        let f = eth(&build_udp_ip(addr(CLIENT), addr(SERVER), payload, 64));
        self.at(t, Ev::Frame(Direction::FromClient, f));
    }

    fn down(&mut self, t: Duration, payload: &[u8]) {
        let f = eth(&build_udp_ip(addr(SERVER), addr(CLIENT), payload, 64));
        self.at(t, Ev::Frame(Direction::ToClient, f));
    }

    /// Client reply to a server datagram that reached it (one reply per packet: quiche-like
    /// eliciting threshold 1).
    fn reply(&mut self, t_proxy: Duration, id: u32) {
        let rtt = (self.rtt_client)(t_proxy);
        self.received.insert(id);
        let len = if self.ack_ranges {
            50 + 2 * self.holes()
        } else {
            50
        };
        self.up(t_proxy + rtt, &short(0x8000_0000 | id, len));
    }

    /// Missing server packets below the largest received.
    fn holes(&self) -> usize {
        self.received
            .last()
            .map_or(0, |&l| l as usize + 1 - self.received.len())
    }

    fn handle_actions(&mut self, now: Duration) {
        while let Some(a) = self.core.poll_transmit() {
            if let Transmit::Inject { dir, frame } = a {
                assert_eq!(dir, Direction::ToClient);
                let Ok(u) = parse_frame(&frame, LinkType::Ethernet) else {
                    // An ICMP echo request to the client (§4.4.3): the client answers it one
                    // client RTT later, addresses swapped, type 0.
                    assert_eq!((frame[14 + 9], frame[14 + 20]), (1, 8), "ICMP echo request");
                    self.probes += 1;
                    let mut reply = frame.clone();
                    reply[14 + 12..14 + 16].copy_from_slice(&frame[14 + 16..14 + 20]);
                    reply[14 + 16..14 + 20].copy_from_slice(&frame[14 + 12..14 + 16]);
                    reply[14 + 20] = 0;
                    let rtt = (self.rtt_client)(now);
                    self.at(now + rtt, Ev::Frame(Direction::FromClient, reply));
                    continue;
                };
                self.injected_csum_ok &= udp_checksum_ok(&frame, &u);
                let id = id_of(&frame);
                self.injected.push(id);
                // The retransmission crosses the lossy link intact and is answered.
                self.reply(now, id);
            }
        }
    }

    fn run(&mut self) {
        while let Some(((t, _), ev)) = self.queue.pop_first() {
            let now = self.t0 + t;
            while let Some(due) = self.core.poll_timeout().filter(|&d| d <= now) {
                self.core.handle_timeout(due);
                self.handle_actions(due.duration_since(self.t0));
                if self.core.poll_timeout() == Some(due) {
                    break;
                }
            }
            let Ev::Frame(dir, mut f) = ev;
            let meta = FrameMeta {
                csum_not_ready: self.csum_partial,
                gso_size: None,
            };
            if self.csum_partial {
                // Ethernet 14 + IPv4 20: the UDP checksum field is at 40..42.
                f[40..42].copy_from_slice(&[0x12, 0x34]);
            }
            let verdict = self.core.handle_frame(now, dir, &f, meta);
            if matches!(verdict, Verdict::Delay { .. }) {
                self.delayed += 1;
            } else if dir == Direction::FromClient
                && let Ok(p) = parse_frame(&f, LinkType::Ethernet)
                && p.payload(&f).first().is_some_and(|b| b & 0x80 == 0)
                && p.payload(&f).len() > 50
            {
                self.grown_unheld += 1;
            }
            self.handle_actions(t);
            if dir == Direction::ToClient && f.len() > 14 + 20 + 8 + 4 {
                let p = parse_frame(&f, LinkType::Ethernet).unwrap();
                let payload = p.payload(&f);
                if payload[0] & 0x80 == 0 {
                    let id = id_of(&f);
                    if !self.drop.contains(&id) {
                        self.reply(t, id);
                    }
                }
            }
        }
        let end = self.t0 + Duration::from_secs(30);
        self.core.handle_timeout(end);
        self.handle_actions(Duration::from_secs(30));
    }

    fn stats(&self) -> PemiStats {
        self.core.snapshot().pemi
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The paper's timing-only inference (§4.2–4.3): the gap signal off, as with a receiver whose
/// ACK lengths say nothing (this simulator's 50-byte replies without `ack_ranges`).
fn timing_only() -> PemiConfig {
    PemiConfig {
        gap_signal: false,
        ..PemiConfig::default()
    }
}

/// Handshake: client Initial at 0, server Initial+Handshake after RTT_SERVER, client Handshake
/// after RTT_CLIENT. Then `bursts` flights of `per` 1200-byte packets 0.5 ms apart every 30 ms.
fn download(sim: &mut Sim, bursts: u32, per: u32, gap: Duration) -> u32 {
    sim.up(ms(0), &long(0, 1180));
    let mut sh = long(0, 150);
    sh.extend(long(2, 1000));
    sim.down(RTT_SERVER, &sh);
    let mut fin = long(0, 30);
    fin.extend(long(2, 60));
    sim.up(RTT_SERVER + RTT_CLIENT, &fin);
    let start = ms(60);
    let mut id = 0;
    for b in 0..bursts {
        for i in 0..per {
            let t = start + gap * b + Duration::from_micros(500) * i;
            sim.down(t, &short(id, 1200));
            id += 1;
        }
    }
    id
}

#[test]
fn retransmits_exactly_the_dropped_datagrams() {
    // After a warm-up of 5 bursts, one packet (never a burst's last) dropped in some bursts.
    let drop: BTreeSet<u32> = [53, 61, 87, 102, 118, 144, 170, 203, 256, 311, 402, 455, 538]
        .into_iter()
        .collect();
    for d in &drop {
        assert_ne!(d % 10, 9);
    }
    let mut sim = Sim::new(timing_only(), drop.clone());
    let sent = download(&mut sim, 60, 10, ms(30));
    sim.run();
    let s = sim.stats();
    eprintln!("{s:?}");
    let got: BTreeSet<u32> = sim.injected.iter().copied().collect();
    assert_eq!(got, drop, "stats {s:?}");
    assert_eq!(sim.injected.len(), drop.len(), "each retransmitted once");
    assert_eq!(s.handshakes, 1);
    assert_eq!(s.instant_acks, 0);
    assert_eq!(s.retransmissions, drop.len() as u64);
    assert!(s.retransmissions as f64 <= 0.1 * s.protected as f64);
    assert!(s.protected >= u64::from(sent) - 20, "{s:?}");
    assert!(s.rtt_samples > 400, "{s:?}");
    // No window pressure on a 330 pkt/s flow: no reply delayed.
    assert_eq!(sim.delayed, 0);
    assert_eq!(sim.core.snapshot().injected, drop.len() as u64 + sim.probes);
    assert!(sim.injected_csum_ok);
    // ICMP calibration: about one probe per end-to-end RTT (50 ms) over the 1.8 s of bursts,
    // each answered; the answers agree with the matched RTT, so nothing was reset.
    assert_eq!(s.icmp_probes, sim.probes);
    assert!(sim.probes >= 20, "{s:?}");
    assert!(s.icmp_samples + 1 >= s.icmp_probes, "{s:?}");
    assert_eq!(s.rtt_resets, 0, "{s:?}");

    // The same with checksum-partial frames: the buffered copies get their checksum filled in.
    let mut sim = Sim::new(timing_only(), drop.clone());
    sim.csum_partial = true;
    download(&mut sim, 60, 10, ms(30));
    sim.run();
    let got: BTreeSet<u32> = sim.injected.iter().copied().collect();
    assert_eq!(got, drop);
    assert!(sim.injected_csum_ok);
}

#[test]
fn retransmissions_capped_at_ten_percent() {
    // 30 % loss after the warm-up: three losses per burst, but only 10 % may be retransmitted.
    let drop: BTreeSet<u32> = (50..600).filter(|i| matches!(i % 10, 2 | 5 | 7)).collect();
    let mut sim = Sim::new(timing_only(), drop.clone());
    download(&mut sim, 60, 10, ms(30));
    sim.run();
    let s = sim.stats();
    eprintln!("{s:?}");
    assert!(s.retransmissions > 0, "{s:?}");
    assert!(
        s.retransmissions as f64 <= 0.1 * s.protected as f64,
        "{s:?}"
    );
    assert!(s.giveup_budget > 0, "budget give-ups counted: {s:?}");
    // Every retransmission is of a dropped datagram, and none twice.
    let got: BTreeSet<u32> = sim.injected.iter().copied().collect();
    assert!(got.is_subset(&drop));
    assert_eq!(got.len(), sim.injected.len());
    let text = sim.core.snapshot().render_prometheus().unwrap();
    assert!(text.contains("sidekick_pemi_giveups_total{reason=\"budget_exhausted\"}"));
}

#[test]
fn uniform_pacing_gives_up_on_long_flowlets() {
    // Packets 0.5 ms apart without gaps: one endless flowlet, abandoned beyond N = 100 (§4.6).
    let drop: BTreeSet<u32> = [150, 250, 350].into_iter().collect();
    let mut sim = Sim::new(PemiConfig::default(), drop);
    download(&mut sim, 1, 500, ms(30));
    sim.run();
    let s = sim.stats();
    assert!(s.giveup_flowlet_too_long >= 1, "{s:?}");
    assert!(sim.injected.is_empty());
}

#[test]
fn non_quic_udp_gets_no_engine_and_sniff_mode_never_delays() {
    // A flow that does not start with a client Initial is forwarded untouched.
    let mut sim = Sim::new(PemiConfig::default(), BTreeSet::new());
    for i in 0..50u32 {
        sim.down(ms(u64::from(i)), &short(i, 1200));
        sim.up(ms(u64::from(i)) + ms(1), &[1, 2, 3]);
    }
    sim.run();
    assert_eq!(sim.stats(), PemiStats::default());
    // Sniff mode (no reply delays) with heavy loss: verdicts are always Forward.
    let drop: BTreeSet<u32> = (50..600).filter(|i| i % 3 == 0).collect();
    let cfg = PemiConfig {
        enforce_delay: false,
        ..PemiConfig::default()
    };
    let mut sim = Sim::new(cfg, drop);
    download(&mut sim, 60, 10, ms(30));
    sim.run();
    assert_eq!(sim.delayed, 0);
    assert_eq!(sim.stats().replies_delayed, 0);
}

#[test]
fn bridge_mode_delays_replies_when_the_window_shrinks() {
    // A lossy flow (PEMI retransmits for it) whose client-side RTT grows from 10 ms to 40 ms: a
    // standing queue. Copa's window shrinks (§4.5.1), the flow exceeds CWND / RTT_min, PEMI
    // first stops retransmitting and then delays replies (bridge verdicts, §4.5.2).
    let drop: BTreeSet<u32> = (100..3000).filter(|i| i % 20 == 3).collect();
    let dropped = drop.len() as u64;
    let mut sim = Sim::new(timing_only(), drop);
    sim.rtt_client = |t| {
        let ms = t.as_millis() as u64;
        RTT_CLIENT + Duration::from_millis(ms.saturating_sub(60).min(900) / 30)
    };
    download(&mut sim, 300, 10, ms(10));
    sim.run();
    let s = sim.stats();
    eprintln!("{s:?} delayed verdicts {}", sim.delayed);
    // The matching follows the drifting RTT: every drop is inferred, nothing else — except in
    // the few flowlets that an ICMP calibration sample cleared (App. A: a sample off the smoothed
    // RTT by more than Δ_margin resets it and drops the replied flowlets).
    assert!(s.inferred_lost <= dropped, "{s:?}");
    assert!(s.inferred_lost + 2 * s.rtt_resets >= dropped, "{s:?}");
    assert!(s.icmp_samples > 0 && s.rtt_resets > 0, "{s:?}");
    assert!(s.retransmissions > 0, "{s:?}");
    assert!(
        s.giveup_rate_limited > 0,
        "retransmissions stopped first: {s:?}"
    );
    assert!(sim.delayed > 0, "replies delayed: {s:?}");
    assert_eq!(sim.delayed, s.replies_delayed);
    assert!(s.retransmissions as f64 <= 0.1 * s.protected as f64);
    // The same flow with sniff-mode settings: retransmissions stop but nothing is delayed.
    let drop: BTreeSet<u32> = (100..3000).filter(|i| i % 20 == 3).collect();
    let cfg = PemiConfig {
        enforce_delay: false,
        ..timing_only()
    };
    let mut sniff = Sim::new(cfg, drop);
    sniff.rtt_client = sim.rtt_client;
    download(&mut sniff, 300, 10, ms(10));
    sniff.run();
    assert_eq!(sniff.delayed, 0);
    assert!(sniff.stats().giveup_rate_limited > 0);
}

#[test]
fn gap_signal_repairs_each_drop_at_once_and_hides_it() {
    // A receiver whose ACKs carry their ranges (2 bytes per hole), per-packet replies: every
    // drop — a burst's last packet included — is named by the first grown reply, retransmitted
    // once, and every reply that shows a hole is held until the repair's reply has passed.
    let drop: BTreeSet<u32> = [53, 61, 87, 99, 118, 144, 170, 203, 256, 311, 402, 455, 538]
        .into_iter()
        .collect();
    let mut sim = Sim::new(PemiConfig::default(), drop.clone());
    sim.ack_ranges = true;
    download(&mut sim, 60, 10, ms(30));
    sim.run();
    let s = sim.stats();
    eprintln!("{s:?} delayed verdicts {}", sim.delayed);
    let got: BTreeSet<u32> = sim.injected.iter().copied().collect();
    assert_eq!(got, drop, "stats {s:?}");
    assert_eq!(sim.injected.len(), drop.len(), "each retransmitted once");
    assert_eq!(s.gap_retransmissions, drop.len() as u64, "{s:?}");
    assert_eq!(s.retransmissions, drop.len() as u64, "{s:?}");
    assert_eq!(sim.holes(), 0);
    // Every reply that showed a hole was held; no enforcement delays on this light flow.
    assert_eq!(sim.grown_unheld, 0, "{s:?}");
    assert_eq!(s.replies_delayed, 0, "{s:?}");
    assert_eq!(sim.delayed, s.replies_held);
    assert!(s.replies_held >= drop.len() as u64, "{s:?}");

    // Both inferences retransmitting: still never the same datagram twice (§4.3.2).
    let cfg = PemiConfig {
        timing_retx: true,
        ..PemiConfig::default()
    };
    let mut both = Sim::new(cfg, drop.clone());
    both.ack_ranges = true;
    download(&mut both, 60, 10, ms(30));
    both.run();
    let got: BTreeSet<u32> = both.injected.iter().copied().collect();
    assert!(got.is_superset(&drop), "{:?}", both.stats());
    assert_eq!(got.len(), both.injected.len(), "each retransmitted once");
    // What the gap signal repaired is not even a loss candidate for the timing inference.
    assert_eq!(both.stats().not_buffered, 0, "{:?}", both.stats());

    // Sniff settings: the same repairs, nothing held.
    let cfg = PemiConfig {
        enforce_delay: false,
        hold_on_gap: false,
        ..PemiConfig::default()
    };
    let mut sniff = Sim::new(cfg, drop.clone());
    sniff.ack_ranges = true;
    download(&mut sniff, 60, 10, ms(30));
    sniff.run();
    let got: BTreeSet<u32> = sniff.injected.iter().copied().collect();
    assert_eq!(got, drop);
    assert_eq!(sniff.delayed, 0);
    assert_eq!(sniff.stats().replies_held, 0);
}
