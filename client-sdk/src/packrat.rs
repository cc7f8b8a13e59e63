//! The Packrat receiver engine (Packrat (CoNEXT '26) §4, §5.2, §6.1).
//!
//! Every received datagram's identifier goes into the local eACK (a rateless IBLT). eACKs are
//! sent every `N` ms or `N` packets, or only while a gap is open (selective eACKs, §5.2.3); each
//! is sized from the number of packets the client believes missing (rateless eACKs, §5.2.2).
//!
//! The reorder window (§4.2): when the packet-number lens shows a gap, datagrams after the gap
//! are held back from the QUIC stack, so the stack's ACKs do not reveal the gap before the
//! proxy had one window to repair it. A held datagram is released when every gap below it has
//! filled, when the proxy reported nothing missing, or when the gap is older than the window.
//! Nothing waits forever: stacks skip packet numbers on purpose.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use sidekick::packrat::{PackratReceiverConfig, PackratReceiver};
//!
//! let t0 = Instant::now();
//! let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
//! let dg = |i: u32| [vec![0u8; 20], i.to_le_bytes().to_vec()].concat();
//! rx.on_datagram(t0, dg(0), Some(0));
//! rx.on_datagram(t0, dg(2), Some(2)); // packet 1 missing: packet 2 is held
//! assert_eq!(rx.poll_ready().count(), 1);
//! rx.on_datagram(t0 + Duration::from_millis(3), dg(1), Some(1)); // the proxy's retransmission
//! assert_eq!(rx.poll_ready().count(), 2); // 1, then 2
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::delay_histogram::DelayHistogram;
use eack::{HashKey, WidthReceiverEack};
use quack::{IdSource, Width};

/// Packrat receiver parameters (defaults: the WiFi scenario of Packrat (CoNEXT '26) Table 3/4).
#[derive(Debug, Clone, PartialEq)]
pub struct PackratReceiverConfig {
    /// Local eACK coded symbols (160 for downloads, 40 for media).
    pub local_symbols: usize,
    /// How identifiers are read from datagrams.
    pub id_source: IdSource,
    /// Identifier width the session negotiated (2, 4 or 8 bytes; Sidekick (NSDI '24) §3): read
    /// at this width with `id_source`, and named in every eACK's header (the proxy refuses an
    /// eACK of another width).
    pub width: Width,
    /// Send an eACK at least this often while packets arrive.
    pub eack_interval: Duration,
    /// …or after this many packets.
    pub eack_every_packets: u32,
    /// Selective eACKs: only while a gap is open.
    pub selective: bool,
    /// Target decoding probability used to size each eACK.
    pub success_probability: f64,
    /// The reorder window (30 ms WiFi/cellular, 65 ms satellite): the longest a datagram is
    /// held, at most what the client asked the proxy for (an echo cannot raise it).
    pub reorder_window: Duration,
    /// The hold is also at most this fraction of the measured end-to-end minimum RTT (once
    /// [`PackratReceiver::on_e2e_rtt`] has one): Packrat (CoNEXT '26) Table 3 withholds for
    /// 0.38–0.47 of the RTT; holding much longer delays the sender's feedback more than a repair
    /// can save.
    pub max_hold_rtt_fraction: f64,
    /// Packets added to the open gaps when sizing an eACK: those in flight from the proxy when
    /// the eACK is built also differ from the proxy's set unless the proxy discounts them.
    pub inflight_allowance: usize,
    /// Cap on held datagrams; beyond it the oldest is released early. At most
    /// [`MAX_HELD_LIMIT`] (larger values are clamped).
    pub max_held: usize,
    /// Cap on tracked missing packet numbers; beyond it new gaps are not tracked. At most
    /// [`MAX_GAPS_LIMIT`] (larger values are clamped).
    pub max_gaps: usize,
}

/// The largest [`PackratReceiverConfig::max_gaps`] a receiver honours. One datagram whose packet number
/// jumps ahead opens a gap entry for every number skipped, up to the cap: an unbounded cap let
/// one datagram allocate without limit (found by the `c_api_calls` fuzz target: `max_gaps` near
/// `usize::MAX` and a jump of billions, 545 MB after one call).
pub const MAX_GAPS_LIMIT: usize = 1 << 16;

/// The largest [`PackratReceiverConfig::max_held`] a receiver honours (each held datagram is a copy).
pub const MAX_HELD_LIMIT: usize = 1 << 16;

impl Default for PackratReceiverConfig {
    fn default() -> Self {
        Self {
            local_symbols: 160,
            id_source: IdSource::QUIC_DEFAULT,
            width: Width::U32,
            eack_interval: Duration::from_millis(10),
            eack_every_packets: 16,
            selective: false,
            success_probability: 0.95,
            reorder_window: Duration::from_millis(30),
            max_hold_rtt_fraction: 0.5,
            inflight_allowance: 0,
            max_held: 1024,
            max_gaps: 512,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackratStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams without an identifier (too short).
    pub unidentifiable: u64,
    /// Datagrams without a packet number (lens not ready): delivered at once.
    pub no_packet_number: u64,
    /// Datagrams held back.
    pub held: u64,
    /// Gaps opened.
    pub gaps_opened: u64,
    /// Gaps filled by a late or retransmitted packet.
    pub gaps_filled: u64,
    /// Gaps closed by the window expiring.
    pub gaps_expired: u64,
    /// Expired gaps whose packet arrived later (within [`PackratReceiver::late_window`]): a
    /// repair that came after the hold, or late reordering. Worth counts them as repaired.
    pub gaps_filled_late: u64,
    /// Expired gaps whose packet had not arrived [`PackratReceiver::late_window`] after the
    /// expiry: nothing repaired them (the sender's end-to-end recovery sends new packet numbers).
    pub gaps_unrepaired: u64,
    /// Gaps closed by a proxy report of nothing missing.
    pub gaps_cleared_by_proxy: u64,
    /// Gaps not tracked because of the cap.
    pub gaps_untracked: u64,
    /// Held datagrams released early because of the cap.
    pub held_overflow: u64,
    /// eACKs produced.
    pub eacks: u64,
    /// Coded symbols sent in eACKs.
    pub eack_symbols: u64,
    /// Bytes of the eACKs produced (their wire form: 12-byte header and `width + 5` bytes per
    /// symbol; the session's framing not included).
    pub eack_bytes: u64,
    /// Resets (new epochs).
    pub resets: u64,
    /// How long each gap took to fill, from the datagram that revealed it to the missing
    /// packet's arrival: within the hold ([`Self::gaps_filled`]) and after it
    /// ([`Self::gaps_filled_late`]). Set against the hold window, it shows how many of the
    /// proxy's repairs race the window and by how much.
    pub fill_delays: DelayHistogram,
}

#[derive(Debug)]
struct Held {
    pn: u64,
    datagram: Vec<u8>,
}

/// The Packrat receiver engine (sans-IO).
#[derive(Debug)]
pub struct PackratReceiver {
    config: PackratReceiverConfig,
    eack: WidthReceiverEack,
    largest: Option<u64>,
    /// Missing packet number → when the gap was seen.
    gaps: BTreeMap<u64, Instant>,
    /// Expired gaps' packet numbers → when they expired and when they were seen, until they
    /// fill late or settle as unrepaired (capped like `gaps`).
    expired: BTreeMap<u64, (Instant, Instant)>,
    held: VecDeque<Held>,
    ready: VecDeque<Vec<u8>>,
    packets_since_eack: u32,
    /// Arrival of the first packet not yet covered by an eACK.
    first_unreported: Option<Instant>,
    last_eack: Option<Instant>,
    /// Gaps were opened since the last eACK.
    new_gap_since_eack: bool,
    e2e_min_rtt: Option<Duration>,
    stats: PackratStats,
}

impl PackratReceiver {
    /// A receiver in epoch 0 (caps above [`MAX_GAPS_LIMIT`] / [`MAX_HELD_LIMIT`] are clamped).
    pub fn new(mut config: PackratReceiverConfig) -> Self {
        config.max_gaps = config.max_gaps.min(MAX_GAPS_LIMIT);
        config.max_held = config.max_held.min(MAX_HELD_LIMIT);
        Self {
            eack: WidthReceiverEack::new(config.width, config.local_symbols, HashKey::DEFAULT),
            config,
            largest: None,
            gaps: BTreeMap::new(),
            expired: BTreeMap::new(),
            held: VecDeque::new(),
            ready: VecDeque::new(),
            packets_since_eack: 0,
            first_unreported: None,
            last_eack: None,
            new_gap_since_eack: false,
            e2e_min_rtt: None,
            stats: PackratStats::default(),
        }
    }

    /// Feeds the end-to-end RTT measured by the transport (its minimum bounds the hold).
    pub fn on_e2e_rtt(&mut self, rtt: Duration) {
        if rtt > Duration::ZERO {
            self.e2e_min_rtt = Some(self.e2e_min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
    }

    /// How long a gap holds the datagrams after it: the reorder window, bounded by
    /// [`PackratReceiverConfig::max_hold_rtt_fraction`] of the minimum end-to-end RTT once measured.
    pub fn hold_window(&self) -> Duration {
        let window = self.config.reorder_window;
        match self.e2e_min_rtt {
            Some(rtt) => window.min(rtt.mul_f64(self.config.max_hold_rtt_fraction.clamp(0.0, 1.0))),
            None => window,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PackratReceiverConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> PackratStats {
        self.stats
    }

    /// Packet numbers currently believed missing.
    pub fn open_gaps(&self) -> usize {
        self.gaps.len()
    }

    /// Datagrams currently held back.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The local eACK's epoch.
    pub fn epoch(&self) -> u32 {
        self.eack.epoch()
    }

    /// A datagram arrived at `now` with packet number `pn` (from the lens, if readable).
    /// Deliverable datagrams appear in [`Self::poll_ready`].
    pub fn on_datagram(&mut self, now: Instant, datagram: Vec<u8>, pn: Option<u64>) {
        self.stats.received += 1;
        self.packets_since_eack = self.packets_since_eack.saturating_add(1);
        self.first_unreported.get_or_insert(now);
        if self
            .eack
            .on_datagram(&self.config.id_source, &datagram)
            .is_err()
        {
            self.stats.unidentifiable += 1;
        }
        self.expire(now);
        let Some(pn) = pn else {
            self.stats.no_packet_number += 1;
            self.ready.push_back(datagram);
            return;
        };
        if let Some(opened) = self.gaps.remove(&pn) {
            self.stats.gaps_filled += 1;
            self.stats
                .fill_delays
                .record(now.saturating_duration_since(opened));
        } else if let Some((_, opened)) = self.expired.remove(&pn) {
            self.stats.gaps_filled_late += 1;
            self.stats
                .fill_delays
                .record(now.saturating_duration_since(opened));
        }
        let next = self.largest.map_or(0, |l| l + 1);
        if pn > next && self.largest.is_some() {
            for missing in next..pn {
                if self.gaps.len() >= self.config.max_gaps {
                    self.stats.gaps_untracked += pn - missing;
                    break;
                }
                self.gaps.insert(missing, now);
                self.stats.gaps_opened += 1;
                self.new_gap_since_eack = true;
            }
        }
        self.largest = Some(self.largest.map_or(pn, |l| l.max(pn)));
        if self.blocked(pn) {
            if self.held.len() >= self.config.max_held
                && let Some(h) = self.held.pop_front()
            {
                self.ready.push_back(h.datagram);
                self.stats.held_overflow += 1;
            }
            self.held.push_back(Held { pn, datagram });
            self.stats.held += 1;
        } else {
            self.ready.push_back(datagram);
        }
        self.release();
    }

    /// Whether a datagram with packet number `pn` must wait for an open gap below it.
    fn blocked(&self, pn: u64) -> bool {
        self.gaps.range(..pn).next().is_some()
    }

    fn release(&mut self) {
        let lowest_gap = self.gaps.keys().next().copied();
        let mut still = VecDeque::with_capacity(self.held.len());
        for h in self.held.drain(..) {
            if lowest_gap.is_some_and(|g| g < h.pn) {
                still.push_back(h);
            } else {
                self.ready.push_back(h.datagram);
            }
        }
        self.held = still;
    }

    fn expire(&mut self, now: Instant) {
        let window = self.hold_window();
        let cap = self.config.max_gaps;
        let expired = &mut self.expired;
        let mut n = 0;
        self.gaps.retain(|&pn, opened| {
            let keep = now.saturating_duration_since(*opened) < window;
            if !keep {
                n += 1;
                if expired.len() < cap {
                    expired.insert(pn, (now, *opened));
                }
            }
            keep
        });
        self.stats.gaps_expired += n;
        let late = self.late_window();
        let before = self.expired.len();
        self.expired
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < late);
        self.stats.gaps_unrepaired += (before - self.expired.len()) as u64;
    }

    /// How long after its hold expired a gap's packet still counts as a late repair (and not
    /// as lost for good): four reorder windows, at least 100 ms. A repair of a genuine proxy
    /// arrives within about one eACK interval and the near round trip, which on some paths
    /// is longer than the RTT-bounded hold; the sender's own recovery never fills the gap
    /// (it sends new packet numbers).
    pub fn late_window(&self) -> Duration {
        (self.config.reorder_window * 4).max(Duration::from_millis(100))
    }

    /// Advances time: expires gaps older than the reorder window and releases what they held.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
        self.release();
    }

    /// The proxy reported that it has nothing to retransmit (an eACK decoded with nothing
    /// missing on its side, or no cache): the open gaps are not going to be repaired by it.
    pub fn on_proxy_nothing_missing(&mut self, now: Instant) {
        // Only gaps the last eACK could have told the proxy about.
        self.on_proxy_nothing_missing_before(self.last_eack.unwrap_or(now));
    }

    /// The proxy reported that it can repair none of the gaps the eACK sent at `eack_sent` came
    /// after (an eACK outcome naming that eACK): gaps opened up to then are given up and what
    /// they held is released; later gaps keep waiting for their own eACK.
    pub fn on_proxy_nothing_missing_before(&mut self, eack_sent: Instant) {
        let cutoff = eack_sent;
        let before = self.gaps.len();
        self.gaps.retain(|_, opened| *opened > cutoff);
        self.stats.gaps_cleared_by_proxy += (before - self.gaps.len()) as u64;
        self.release();
    }

    /// Stops holding: every open gap is given up and every held datagram becomes ready, in
    /// order (the session ends or is reconfigured).
    pub fn release_all(&mut self) {
        self.gaps.clear();
        let held = std::mem::take(&mut self.held);
        self.ready.extend(held.into_iter().map(|h| h.datagram));
    }

    /// Datagrams that may be handed to the QUIC stack now, in order.
    pub fn poll_ready(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.ready.drain(..)
    }

    /// The proxy started a new epoch (Reset): the local eACK restarts empty.
    pub fn reset(&mut self, epoch: u32) {
        self.eack.reset(epoch);
        self.packets_since_eack = 0;
        self.first_unreported = None;
        self.stats.resets += 1;
    }

    /// The next instant at which [`Self::handle_timeout`] or [`Self::poll_eack`] has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let gap = self.gaps.values().min().map(|t| *t + self.hold_window());
        let eack = self.eack_due_at();
        match (gap, eack) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn eack_due_at(&self) -> Option<Instant> {
        if self.packets_since_eack == 0 || (self.config.selective && self.gaps.is_empty()) {
            return None;
        }
        let first = self.first_unreported?;
        Some(
            self.last_eack
                .map_or(first, |t| (t + self.config.eack_interval).max(first)),
        )
    }

    /// An eACK to send now, if one is due: bytes for the sidekick connection.
    pub fn poll_eack(&mut self, now: Instant) -> Option<Vec<u8>> {
        // An expired gap releases what it held at once (found by `holds_never_exceed_either_bound`
        // with a zero window: the datagrams waited for the next arrival).
        self.expire(now);
        self.release();
        if self.packets_since_eack == 0 {
            return None;
        }
        if self.config.selective && self.gaps.is_empty() {
            return None;
        }
        let by_count = self.packets_since_eack >= self.config.eack_every_packets;
        let by_time = self
            .last_eack
            .is_none_or(|t| now.saturating_duration_since(t) >= self.config.eack_interval);
        // Selective mode: a new gap is worth an eACK at once.
        let by_gap = self.config.selective && self.new_gap_since_eack;
        if !(by_count || by_time || by_gap) {
            return None;
        }
        // Rateless sizing (Packrat (CoNEXT '26) §5.2.2): the open gaps are the expected retransmissions.
        let mut buf = Vec::new();
        let expected = self.gaps.len() + self.config.inflight_allowance;
        let n = self
            .eack
            .encode_for(expected, self.config.success_probability, &mut buf);
        self.stats.eacks += 1;
        self.stats.eack_symbols += n as u64;
        self.stats.eack_bytes += buf.len() as u64;
        self.packets_since_eack = 0;
        self.first_unreported = None;
        self.last_eack = Some(now);
        self.new_gap_since_eack = false;
        Some(buf)
    }
}

#[cfg(test)]
#[path = "packrat_width_tests.rs"]
mod width_tests;

#[cfg(test)]
mod tests {

    /// Regression (fuzz target `c_api_calls`, an out-of-memory): a cap configured near
    /// `usize::MAX` and one datagram jumping billions of packet numbers ahead allocated a gap
    /// entry per number skipped. The receiver clamps its caps.
    #[test]
    fn a_huge_gap_cap_is_clamped_and_a_jump_costs_at_most_the_limit() {
        let t0 = Instant::now();
        let mut r = PackratReceiver::new(PackratReceiverConfig {
            max_gaps: usize::MAX,
            max_held: usize::MAX,
            ..PackratReceiverConfig::default()
        });
        r.on_datagram(t0, vec![0x41; 40], Some(0));
        r.on_datagram(t0, vec![0x41; 40], Some(5_000_000_000));
        assert_eq!(r.stats().gaps_opened, MAX_GAPS_LIMIT as u64);
        assert_eq!(
            r.stats().gaps_untracked,
            5_000_000_000 - 1 - MAX_GAPS_LIMIT as u64
        );
    }
    use super::*;
    use eack::ProxyEack;

    fn dg(i: u32) -> Vec<u8> {
        let mut d = vec![0x55u8; 20];
        d.extend(i.to_le_bytes());
        d
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ids(rx: &mut PackratReceiver) -> Vec<u32> {
        rx.poll_ready()
            .map(|d| u32::from_le_bytes(d[d.len() - 4..].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn in_order_delivery_is_immediate() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        for i in 0..5 {
            rx.on_datagram(t0, dg(i), Some(u64::from(i)));
        }
        assert_eq!(ids(&mut rx), vec![0, 1, 2, 3, 4]);
        assert_eq!(rx.stats().held, 0);
    }

    #[test]
    fn gap_holds_until_filled() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0 + ms(1), dg(3), Some(3));
        rx.on_datagram(t0 + ms(2), dg(4), Some(4));
        assert_eq!(ids(&mut rx), vec![0]);
        assert_eq!(rx.open_gaps(), 2);
        rx.on_datagram(t0 + ms(5), dg(1), Some(1));
        assert_eq!(ids(&mut rx), vec![1], "2 still missing");
        rx.on_datagram(t0 + ms(6), dg(2), Some(2));
        assert_eq!(ids(&mut rx), vec![2, 3, 4]);
        assert_eq!(rx.stats().gaps_filled, 2);
        // Both gaps were seen at 1 ms; they filled 4 and 5 ms later.
        let d = rx.stats().fill_delays;
        assert_eq!(
            (d.count(), d.quantile_ms(0.5), d.quantile_ms(1.0)),
            (2, Some(5.0), Some(6.0))
        );
    }

    #[test]
    fn a_repair_after_the_hold_counts_as_late_and_a_missing_packet_settles_unrepaired() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0, dg(3), Some(3)); // 1 and 2 missing
        rx.handle_timeout(t0 + ms(31)); // the 30 ms hold ends: both expire
        assert_eq!((rx.stats().gaps_expired, rx.open_gaps()), (2, 0));
        // The proxy's repair of 1 arrives after the hold: late, not lost.
        rx.on_datagram(t0 + ms(50), dg(1), Some(1));
        assert_eq!(rx.stats().gaps_filled_late, 1);
        // Its fill delay counts from when the gap was seen, not from the expiry.
        assert_eq!(rx.stats().fill_delays.quantile_ms(1.0), Some(51.0));
        assert_eq!(rx.stats().gaps_unrepaired, 0, "2 may still come");
        // 2 never comes: unrepaired once the late window (4 × 30 ms) has passed.
        assert_eq!(rx.late_window(), ms(120));
        rx.handle_timeout(t0 + ms(31) + ms(119));
        assert_eq!(rx.stats().gaps_unrepaired, 0);
        rx.handle_timeout(t0 + ms(31) + ms(120));
        assert_eq!(rx.stats().gaps_unrepaired, 1);
        // A packet number arriving after it settled is neither.
        rx.on_datagram(t0 + ms(400), dg(2), Some(2));
        assert_eq!(
            (rx.stats().gaps_filled_late, rx.stats().gaps_unrepaired),
            (1, 1)
        );
    }

    #[test]
    fn window_expiry_releases_skipped_numbers() {
        // Stacks skip packet numbers on purpose: the gap never fills.
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0, dg(2), Some(2));
        assert_eq!(rx.poll_timeout(), Some(t0), "first eACK due at once");
        assert!(rx.poll_eack(t0).is_some());
        assert_eq!(rx.poll_timeout(), Some(t0 + ms(30)), "gap expiry");
        rx.handle_timeout(t0 + ms(29));
        assert_eq!(ids(&mut rx), vec![0]);
        rx.handle_timeout(t0 + ms(30));
        assert_eq!(ids(&mut rx), vec![2]);
        assert_eq!(rx.stats().gaps_expired, 1);
        assert_eq!(rx.open_gaps(), 0);
    }

    #[test]
    fn proxy_report_releases_early() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0, dg(2), Some(2));
        assert!(rx.poll_eack(t0 + ms(1)).is_some());
        rx.on_proxy_nothing_missing(t0 + ms(4));
        assert_eq!(ids(&mut rx), vec![0, 2]);
        assert_eq!(rx.stats().gaps_cleared_by_proxy, 1);
    }

    #[test]
    fn unreadable_numbers_are_not_held() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0, dg(5), Some(5));
        rx.on_datagram(t0, dg(9), None);
        assert_eq!(ids(&mut rx), vec![0, 9]);
        assert_eq!(rx.stats().no_packet_number, 1);
    }

    #[test]
    fn caps_bound_held_and_gaps() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig {
            max_held: 2,
            max_gaps: 3,
            ..PackratReceiverConfig::default()
        });
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0, dg(10), Some(10));
        assert_eq!(rx.open_gaps(), 3);
        assert_eq!(rx.stats().gaps_untracked, 6);
        rx.on_datagram(t0, dg(11), Some(11));
        rx.on_datagram(t0, dg(12), Some(12));
        assert_eq!(rx.held(), 2);
        assert_eq!(rx.stats().held_overflow, 1);
        assert_eq!(ids(&mut rx), vec![0, 10]);
    }

    #[test]
    fn eacks_every_n_packets_and_every_interval() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        assert!(rx.poll_eack(t0).is_some(), "first eACK at once");
        for i in 1..16 {
            rx.on_datagram(t0 + ms(1), dg(i), Some(u64::from(i)));
            assert!(rx.poll_eack(t0 + ms(1)).is_none());
        }
        rx.on_datagram(t0 + ms(1), dg(16), Some(16));
        assert!(rx.poll_eack(t0 + ms(1)).is_some(), "16 packets");
        rx.on_datagram(t0 + ms(2), dg(17), Some(17));
        assert!(rx.poll_eack(t0 + ms(10)).is_none());
        assert!(rx.poll_eack(t0 + ms(11)).is_some(), "10 ms");
        assert!(rx.poll_eack(t0 + ms(40)).is_none(), "nothing new");
        assert_eq!(rx.stats().eacks, 3);
    }

    #[test]
    fn selective_eacks_only_on_gaps_and_sized_by_gaps() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig {
            selective: true,
            ..PackratReceiverConfig::default()
        });
        for i in 0..40 {
            rx.on_datagram(t0, dg(i), Some(u64::from(i)));
        }
        assert!(rx.poll_eack(t0 + ms(20)).is_none(), "no gap: no eACK");
        rx.on_datagram(t0 + ms(21), dg(41), Some(41)); // 40 missing
        let wire = rx.poll_eack(t0 + ms(21)).unwrap();
        assert_eq!(rx.stats().eacks, 1);
        assert_eq!(rx.stats().eack_symbols, eack::symbols_for(1, 0.95) as u64);
        // The eACK lets a proxy that forwarded 0..42 find the missing packet.
        let mut proxy = ProxyEack::new(160, 4096);
        for i in 0..42 {
            proxy.insert(i);
        }
        let diff = proxy.on_eack(&wire).unwrap();
        assert_eq!(diff.missing, vec![40]);
        // Five more gaps → a larger eACK (rateless sizing, Packrat (CoNEXT '26) §5.2.2).
        rx.on_datagram(t0 + ms(22), dg(47), Some(47));
        assert!(
            rx.poll_eack(t0 + ms(22)).is_some(),
            "a new gap triggers an eACK at once"
        );
        let sizes = rx.stats().eack_symbols - eack::symbols_for(1, 0.95) as u64;
        assert_eq!(sizes, eack::symbols_for(6, 0.95) as u64);
        assert!(sizes > eack::symbols_for(1, 0.95) as u64);
    }

    #[test]
    fn reset_starts_a_new_epoch() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
        rx.on_datagram(t0, dg(0), Some(0));
        rx.reset(3);
        assert_eq!(rx.epoch(), 3);
        assert!(
            rx.poll_eack(t0).is_none(),
            "nothing received in the new epoch"
        );
    }

    #[test]
    fn holds_are_bounded_by_a_fraction_of_the_rtt() {
        let t0 = Instant::now();
        let mut rx = PackratReceiver::new(PackratReceiverConfig {
            reorder_window: ms(65),
            ..PackratReceiverConfig::default()
        });
        assert_eq!(rx.hold_window(), ms(65));
        rx.on_e2e_rtt(ms(40));
        rx.on_e2e_rtt(ms(90));
        assert_eq!(rx.hold_window(), ms(20), "half the minimum RTT");
        rx.on_datagram(t0, dg(0), Some(0));
        rx.on_datagram(t0, dg(2), Some(2));
        assert_eq!(ids(&mut rx), vec![0]);
        rx.handle_timeout(t0 + ms(20));
        assert_eq!(ids(&mut rx), vec![2]);
    }

    proptest::proptest! {
        /// Whatever arrives, nothing is held longer than the reorder window, nor longer than
        /// the RTT fraction once an RTT is known.
        #[test]
        fn holds_never_exceed_either_bound(
            pns in proptest::collection::vec(0u64..300, 1..120),
            window_ms in 0u64..10_000,
            rtt_ms in proptest::option::of(1u64..500),
        ) {
            let t0 = Instant::now();
            let mut rx = PackratReceiver::new(PackratReceiverConfig {
                reorder_window: ms(window_ms),
                ..PackratReceiverConfig::default()
            });
            if let Some(r) = rtt_ms {
                rx.on_e2e_rtt(ms(r));
            }
            let bound = rtt_ms.map_or(ms(window_ms), |r| ms(window_ms).min(ms(r) / 2));
            proptest::prop_assert!(rx.hold_window() <= bound);
            let mut arrivals = std::collections::HashMap::new();
            for (k, pn) in pns.iter().enumerate() {
                let now = t0 + ms(k as u64);
                let d = dg(k as u32);
                arrivals.insert(k as u32, now);
                rx.on_datagram(now, d, Some(*pn));
                for out in rx.poll_ready() {
                    let id = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
                    proptest::prop_assert!(now.saturating_duration_since(arrivals[&id]) <= bound);
                }
                let _ = rx.poll_eack(now);
                for out in rx.poll_ready() {
                    let id = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
                    proptest::prop_assert!(now.saturating_duration_since(arrivals[&id]) <= bound);
                }
                // Every timer due before the next arrival, in order.
                while let Some(t) = rx.poll_timeout().filter(|t| *t <= now + ms(1)) {
                    rx.handle_timeout(t);
                    let _ = rx.poll_eack(t);
                    for out in rx.poll_ready() {
                        let id = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
                        proptest::prop_assert!(t.saturating_duration_since(arrivals[&id]) <= bound);
                    }
                    if rx.poll_timeout() == Some(t) {
                        break;
                    }
                }
            }
        }

        #[test]
        fn never_holds_past_the_window(
            pns in proptest::collection::vec(0u64..200, 1..100),
            step in 0u64..5,
        ) {
            let t0 = Instant::now();
            let mut rx = PackratReceiver::new(PackratReceiverConfig::default());
            let mut delivered = 0usize;
            for (k, pn) in pns.iter().enumerate() {
                rx.on_datagram(t0 + ms(step * k as u64), dg(*pn as u32), Some(*pn));
                delivered += rx.poll_ready().count();
            }
            let end = t0 + ms(step * pns.len() as u64) + ms(30);
            rx.handle_timeout(end);
            delivered += rx.poll_ready().count();
            proptest::prop_assert_eq!(delivered, pns.len());
            proptest::prop_assert_eq!(rx.held(), 0);
        }
    }
}
