//! Robin and Packrat on one session: the SDK's client (`SidekickClient` with
//! `SidekickConfig::robin_and_packrat`) and the proxy's sans-IO core with the real session
//! layer, in virtual time. The client uploads and downloads at once on one base flow; the near
//! link drops some datagrams in each direction. Nothing else repairs them (there is no
//! end-to-end transport here): an upload datagram reaches the server only if Robin's quACK
//! revealed its loss and the client resent it (Sidekick (NSDI '24) §4.3.1); a download datagram
//! reaches the client only if its eACK showed it missing and the proxy resent it from its cache
//! (Packrat (CoNEXT '26) §5). A reset of the one epoch restarts both engines on both ends, and
//! both keep repairing after it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sidekick_proxy_core::Time;

use common::{CLIENT, CLIENT_SK, PROXY, SERVER, addr, eth};
use sidekick::session::{SidekickClient, SidekickConfig, Transmit as SdkTransmit};
use sidekick_protocol::ProxyPolicy;
use sidekick_proxy_core::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use sidekick_proxy_core::engine::Direction;
use sidekick_proxy_core::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy_core::session::ProtocolSessions;

/// Datagrams each way.
const N: u64 = 600;
const UP: u8 = 0x55;
const DOWN: u8 = 0xdd;

/// A base datagram: its direction, its sequence number, filler, and a 4-byte identifier (the
/// QUIC default: the last 4 bytes) spread by a multiplicative hash, as an AEAD tag would be.
fn datagram(dir: u8, seq: u64) -> Vec<u8> {
    let mut d = vec![dir];
    d.extend_from_slice(&seq.to_be_bytes());
    d.resize(1000, 0x41);
    let id = (seq as u32 ^ u32::from(dir) << 24).wrapping_mul(0x9e37_79b1);
    d.extend_from_slice(&id.to_le_bytes());
    d
}

fn seq_of(d: &[u8], dir: u8) -> Option<u64> {
    (d.len() == 1004 && d[0] == dir).then(|| u64::from_be_bytes(d[1..9].try_into().unwrap()))
}

/// The near link loses one datagram in 20 each way, at different offsets up and down: not the
/// last few, which nothing after them would reveal, nor the first few, which precede Robin's
/// first quACK, the epoch's baseline (its losses are left to the end-to-end transport).
fn lost(dir: u8, seq: u64) -> bool {
    let offset = if dir == UP { 7 } else { 13 };
    (20..N - 20).contains(&seq) && seq % 20 == offset
}

struct World {
    core: ProxyCore<ProtocolSessions>,
    client: SidekickClient,
    /// Upload datagrams that reached the server.
    at_server: BTreeSet<u64>,
    /// Download datagrams the client's stack received.
    at_client: BTreeSet<u64>,
    /// The core's time; the client's is `origin + now`.
    now: Time,
    origin: Instant,
}

impl World {
    fn new() -> Self {
        Self::with(CoreConfig::default(), |_| {})
    }

    /// A world whose core has `cfg` (on Ethernet) and whose client's settings `tune` adjusts.
    fn with(cfg: CoreConfig, tune: impl FnOnce(&mut SidekickConfig)) -> Self {
        let cfg = CoreConfig {
            link: LinkType::Ethernet,
            ..cfg
        };
        // The proxy's default retransmission budget (10 % of the bytes forwarded to the client).
        let core = ProxyCore::new(
            cfg,
            ProtocolSessions::new(ProxyPolicy::new(addr(PROXY))),
            (1, 2),
        );
        let mut sdk = SidekickConfig::robin_and_packrat(10, 16);
        sdk.protocol.refresh_interval = Duration::from_millis(100);
        tune(&mut sdk);
        let mut client = SidekickClient::new(sdk);
        client.set_base_peer(addr(SERVER));
        Self {
            core,
            client,
            at_server: BTreeSet::new(),
            at_client: BTreeSet::new(),
            now: Time::ZERO,
            // The SDK's clock is `Instant` (its users' and quinn's): any origin will do, the
            // test maps the core's simulated time onto it.
            #[allow(clippy::disallowed_methods)]
            origin: Instant::now(),
        }
    }

    /// The client's instant for the core's `now`.
    fn instant(&self) -> Instant {
        self.origin + self.now.since_origin()
    }

    /// A datagram from the client crosses the proxy (unless lost before it) to the server.
    fn client_sends(&mut self, d: &[u8], lose: bool) {
        if lose {
            return;
        }
        let f = eth(&build_udp_ip(addr(CLIENT), addr(SERVER), d, 64));
        let v = self
            .core
            .handle_frame(self.now, Direction::FromClient, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward);
        if let Some(seq) = seq_of(d, UP) {
            self.at_server.insert(seq);
        }
    }

    /// A datagram from the server crosses the proxy, then the near link (unless lost there).
    fn server_sends(&mut self, d: &[u8], lose: bool) {
        let f = eth(&build_udp_ip(addr(SERVER), addr(CLIENT), d, 64));
        let v = self
            .core
            .handle_frame(self.now, Direction::ToClient, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward);
        if !lose {
            self.client_receives(d.to_vec());
        }
    }

    fn client_receives(&mut self, d: Vec<u8>) {
        let pn = seq_of(&d, DOWN);
        self.client.on_base_received_with_pn(self.instant(), d, pn);
    }

    /// Moves everything queued on either side until both are quiet, then runs due timers.
    fn pump(&mut self) {
        for _ in 0..100 {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit() {
                moved = true;
                match t {
                    // Discovery requests and Robin's early resends (which the link does not
                    // drop: the test counts repairs, not repairs of repairs).
                    SdkTransmit::Base(d) => self.client_sends(&d, false),
                    SdkTransmit::Sidekick(to, bytes) => {
                        assert_eq!(to, addr(PROXY));
                        self.core.handle_sidekick(self.now, addr(CLIENT_SK), &bytes);
                    }
                }
            }
            if self.core.poll_timeout().is_some_and(|t| t <= self.now) {
                self.core.handle_timeout(self.now);
            }
            while let Some(t) = self.core.poll_transmit() {
                moved = true;
                match t {
                    Transmit::Sidekick { to, bytes } => {
                        assert_eq!(to, addr(CLIENT_SK));
                        self.client
                            .on_sidekick_datagram(self.instant(), addr(PROXY), &bytes);
                    }
                    Transmit::Inject { dir, frame } => {
                        assert_eq!(dir, Direction::ToClient);
                        let p = parse_frame(&frame, LinkType::Ethernet).unwrap();
                        assert_eq!((p.src, p.dst), (addr(SERVER), addr(CLIENT)));
                        self.client_receives(p.payload(&frame).to_vec());
                    }
                }
            }
            if self
                .client
                .poll_timeout()
                .is_some_and(|t| t <= self.instant())
            {
                self.client.handle_timeout(self.instant());
                moved = true;
            }
            while let Some(d) = self.client.poll_deliver() {
                if let Some(seq) = seq_of(&d, DOWN) {
                    self.at_client.insert(seq);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn establish(&mut self) {
        self.establish_with(true);
    }

    /// Discovery and Init; `packrat` whether the proxy's core runs Packrat for the session.
    fn establish_with(&mut self, packrat: bool) {
        self.client.start(self.instant()).unwrap();
        for _ in 0..20 {
            self.pump();
            if self.client.is_active() {
                break;
            }
            self.now += Duration::from_millis(1);
        }
        assert!(self.client.is_active(), "{:?}", self.client.stats());
        let s = self.client.session_config().unwrap();
        assert!(s.robin.is_some() && s.packrat.is_some(), "{s:?}");
        assert!(self.client.robin().is_some() && self.client.packrat().is_some());
        assert_eq!(self.core.flows().assisted_len(), 1);
        let (_, e) = self.core.flows().iter().next().unwrap();
        let engines = e.value.assistance.session_engines().unwrap();
        assert!(engines.robin.is_some());
        assert_eq!(engines.packrat.is_some(), packrat);
    }

    /// Datagrams `from..to` both ways, one each way per millisecond.
    fn exchange(&mut self, from: u64, to: u64) {
        for seq in from..to {
            let up = datagram(UP, seq);
            self.client.on_base_sent(self.instant(), &up);
            self.client_sends(&up, lost(UP, seq));
            self.server_sends(&datagram(DOWN, seq), lost(DOWN, seq));
            self.pump();
            self.now += Duration::from_millis(1);
            self.pump();
        }
    }

    /// Lets the timers run for `ms` milliseconds.
    fn settle(&mut self, ms: u64) {
        for _ in 0..ms {
            self.now += Duration::from_millis(1);
            self.pump();
        }
    }
}

fn lost_count(dir: u8, seqs: std::ops::Range<u64>) -> u64 {
    seqs.filter(|&s| lost(dir, s)).count() as u64
}

#[test]
fn one_session_repairs_near_losses_both_ways() {
    let mut w = World::new();
    w.establish();
    w.exchange(0, N);
    w.settle(200);

    let all: BTreeSet<u64> = (0..N).collect();
    let dropped_up = lost_count(UP, 0..N);
    let dropped_down = lost_count(DOWN, 0..N);
    // Robin: every upload datagram lost before the proxy reached the server as the client's
    // early resend; nothing else resends here.
    let missing_up: Vec<u64> = all.difference(&w.at_server).copied().collect();
    assert!(missing_up.is_empty(), "upload not repaired: {missing_up:?}");
    let st = w.client.stats();
    assert!(
        st.retransmissions >= dropped_up,
        "{} resends for {dropped_up} losses",
        st.retransmissions
    );
    // Packrat: every download datagram lost after the proxy reached the client as the proxy's
    // retransmission.
    let missing_down: Vec<u64> = all.difference(&w.at_client).copied().collect();
    assert!(
        missing_down.is_empty(),
        "download not repaired: {missing_down:?}"
    );
    let snap = w.core.snapshot();
    assert!(
        snap.packrat.retransmissions >= dropped_down,
        "{} proxy retransmissions for {dropped_down} losses",
        snap.packrat.retransmissions
    );
    let rx = w.client.packrat().unwrap().stats();
    assert!(rx.gaps_filled > 0, "{rx:?}");
    // One session did both: quACKs out and eACKs in on the same sidekick socket.
    assert_eq!(snap.sessions_started, 1);
    assert!(snap.quacks_sent > 0 && snap.eacks_in > 0, "{snap:?}");
    assert!(st.quacks > 0 && st.eacks_sent > 0, "{st:?}");
    assert_eq!(snap.robin.inserted, N - dropped_up + st.retransmissions);
    assert!(w.client.is_active(), "{:?}", w.client.fallback_cause());
    assert_eq!(st.inconsistent_quacks, 0);
}

#[test]
fn a_reset_restarts_both_engines_and_both_keep_repairing() {
    let mut w = World::new();
    w.establish();
    w.exchange(0, N / 2);
    // The proxy starts a new epoch (here because its capture dropped frames): one epoch per
    // session (Sidekick (NSDI '24) §4.2), so Robin and Packrat restart on both ends.
    let before = w.core.snapshot();
    let robin_resets = w.client.robin().unwrap().stats().resets;
    let packrat_resets = w.client.packrat().unwrap().stats().resets;
    w.core.on_capture_drops(w.now);
    w.pump();
    w.settle(5);
    let snap = w.core.snapshot();
    assert_eq!(snap.resets_sent, before.resets_sent + 1, "{snap:?}");
    assert_eq!(snap.robin.resets, before.robin.resets + 1);
    // The proxy's Packrat engine started over too: its cache is empty (its `resets` counter
    // counts only the resets its own failed decodes start).
    assert!(before.cache_bytes > 0);
    assert_eq!(snap.cache_bytes, 0);
    assert_eq!(w.client.stats().resets_by_proxy, 1);
    assert_eq!(w.client.robin().unwrap().stats().resets, robin_resets + 1);
    assert_eq!(
        w.client.packrat().unwrap().stats().resets,
        packrat_resets + 1
    );

    let resent_before = w.client.stats().retransmissions;
    let retx_before = snap.packrat.retransmissions;
    w.exchange(N / 2, N);
    w.settle(200);
    let all: BTreeSet<u64> = (0..N).collect();
    let missing_up: Vec<u64> = all.difference(&w.at_server).copied().collect();
    let missing_down: Vec<u64> = all.difference(&w.at_client).copied().collect();
    // Losses straddling the reset may be missed by either engine's new epoch (its first quACK
    // or eACK is a baseline); every loss after it is repaired.
    let settled = |m: &[u64]| m.iter().all(|&s| (N / 2 - 40..N / 2 + 40).contains(&s));
    assert!(
        settled(&missing_up),
        "upload after the reset: {missing_up:?}"
    );
    assert!(
        settled(&missing_down),
        "download after the reset: {missing_down:?}"
    );
    assert!(w.client.stats().retransmissions > resent_before);
    assert!(w.core.snapshot().packrat.retransmissions > retx_before);
    assert!(w.client.is_active(), "{:?}", w.client.fallback_cause());
}

/// The proxy's memory budget holds Robin's few bytes but not a Packrat cache: the core runs the
/// session with Robin alone. The client's Packrat finds its holds never repaired and stops on
/// its own (`EngineDropped`), and asks the proxy for a Robin-only configuration; Robin never
/// stopped repairing the upload.
#[test]
fn a_proxy_without_room_for_packrat_leaves_robin_running() {
    let cfg = CoreConfig {
        memory_budget: 8 * 1024,
        ..CoreConfig::default()
    };
    let mut w = World::with(cfg, |c| c.hold_assessment_gaps = 16);
    w.establish_with(false);
    assert!(w.core.snapshot().memory_refused >= 1);
    w.exchange(0, N);
    w.settle(200);
    let st = w.client.stats();
    assert_eq!(st.engines_dropped, 1, "{st:?}");
    assert!(w.client.packrat().is_none());
    assert!(w.client.is_active(), "{:?}", w.client.fallback_cause());
    assert_eq!(st.reconfigurations, 1, "{st:?}");
    let echo = w.client.session_config().unwrap();
    assert!(echo.robin.is_some() && echo.packrat.is_none(), "{echo:?}");
    // The upload lost nothing the quACKs did not reveal, before and after the
    // reconfiguration (whose new epoch's first quACK is again a baseline).
    let missing_up: Vec<u64> = (0..N).filter(|s| !w.at_server.contains(s)).collect();
    assert!(missing_up.len() <= 1, "upload not repaired: {missing_up:?}");
    assert!(st.retransmissions > 0);
    // The download's losses stay lost (nothing repairs them), but nothing stays held.
    let dropped_down = lost_count(DOWN, 0..N);
    assert_eq!(w.at_client.len() as u64, N - dropped_down);
    assert_eq!(w.core.snapshot().packrat.retransmissions, 0);
}
