//! The sidekick side of `sidekick-transfer client --sidekick`: which engine runs for which
//! direction, the parameters the lab scenarios set, and the counters the JSON report carries.
//!
//! - **Upload** (the client is the data sender, lossy link near it): Robin (Sidekick (NSDI '24) §4.3). The
//!   proxy quACKs what it forwarded; the SDK retransmits a datagram the quACK shows lost (an
//!   identical copy) and, on quinn, PACUBIC reacts to the near-segment loss (§4.3.2, App. A).
//!   Defaults from Sidekick (NSDI '24) Table 5, scenario #2: a quACK every 30 ms, threshold t = 10.
//!   ACK reduction (scenario #3, quinn only): the client asks the server through the QUIC
//!   ACK-frequency extension to ACK only every N ack-eliciting packets and lets quACKs advance
//!   PACUBIC's window meanwhile; defaults then become a quACK every 15 ms, t = 50.
//! - **Download** (the client is the data receiver, lossy link near it): Packrat (Packrat (CoNEXT '26)
//!   §4-§5). The client sends eACKs of what it received; the proxy retransmits from its cache
//!   what is missing; the client holds post-gap datagrams for a reorder window (ACK withholding,
//!   Packrat (CoNEXT '26) §4 and §5.2) so the server never sees a gap the proxy repairs. Defaults from seed
//!   002 Table 4 (HTTP/3: eACK every 10 ms / 16 packets, 160 symbols, 48 kB cache) and Table 3
//!   (reorder delay 30 ms, the Wi-Fi and cellular setting; 65 ms for satellite).

use std::time::Duration;

use serde::Serialize;
use sidekick::packrat::PackratStats;
use sidekick::robin::RobinStats;
use sidekick::session::{FallbackCause, SidekickClient, SidekickConfig};
use sidekick_protocol::FallbackReason;

use super::TransferDirection;

/// Parameters of the sidekick session (`--sidekick-*` flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SidekickParams {
    /// quACK interval in ms (Robin); `None`: 30, or 15 with ACK reduction (Sidekick (NSDI '24) Table 5).
    pub quack_interval_ms: Option<u32>,
    /// quACK threshold t (Robin); `None`: 10, or 50 with ACK reduction.
    pub quack_threshold: Option<u32>,
    /// Also a quACK every this many packets (Robin; Sidekick (NSDI '24) Table 5 #1 uses 2); 0: time only.
    pub quack_packets: u32,
    /// quinn upload: ask the server to send an ACK only every this many ack-eliciting packets
    /// (ACK-frequency extension) and advance PACUBIC on quACKs (Robin #3). `None`: off.
    pub ack_reduction: Option<u32>,
    /// eACK interval in ms (Packrat).
    pub eack_interval_ms: u32,
    /// eACK every this many packets (Packrat).
    pub eack_packets: u32,
    /// Local eACK symbols (Packrat).
    pub eack_symbols: u32,
    /// Proxy cache capacity in bytes requested (Packrat).
    pub cache_bytes: u32,
    /// Reorder window (ACK withholding) in ms (Packrat).
    pub reorder_ms: u32,
    /// Selective eACKs: only while a gap is open (Packrat (CoNEXT '26) §5.2.3).
    pub selective: bool,
    /// Packets added to the open gaps when sizing an eACK (Packrat): the proxy's view includes
    /// the packets it forwarded that had not reached the client when the eACK was built, and
    /// after a proxy reset those that straddle the epoch change; an eACK sized for the gaps alone
    /// fails to decode at the proxy, which then resets the epoch.
    pub eack_inflight: u32,
    /// First discovery retransmission timeout in ms (doubles per attempt).
    pub discovery_retry_ms: u32,
    /// Discovery requests sent before falling back (no proxy).
    pub discovery_attempts: u32,
    /// Identifier width in bytes (2, 4 or 8; Sidekick (NSDI '24) §3): the last `id_bytes`
    /// bytes of each datagram.
    pub id_bytes: u32,
    /// The engines the session asks for (`--sidekick-engines`); `None`: the transfer's own
    /// (Robin for an upload, Packrat for a download, both for `--both`).
    pub engines: Option<Mode>,
}

impl Default for SidekickParams {
    fn default() -> Self {
        Self {
            quack_interval_ms: None,
            quack_threshold: None,
            quack_packets: 0,
            ack_reduction: None,
            eack_interval_ms: 10,
            eack_packets: 16,
            eack_symbols: 160,
            cache_bytes: 48_000,
            reorder_ms: 30,
            selective: false,
            eack_inflight: 16,
            discovery_retry_ms: 250,
            discovery_attempts: 4,
            id_bytes: 4,
            engines: None,
        }
    }
}

/// Which engine the client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Robin sender (uploads).
    Robin,
    /// Packrat receiver (downloads).
    Packrat,
    /// Both on one session: an upload beside a download on one connection (`--both`).
    Both,
}

impl Mode {
    /// The engine for a transfer direction.
    pub fn for_direction(d: TransferDirection) -> Self {
        match d {
            TransferDirection::Upload => Mode::Robin,
            TransferDirection::Download => Mode::Packrat,
        }
    }

    /// Whether the client sends data under Robin (PACUBIC on quinn).
    pub fn robin(self) -> bool {
        matches!(self, Mode::Robin | Mode::Both)
    }

    /// Whether the client receives data under Packrat.
    pub fn packrat(self) -> bool {
        matches!(self, Mode::Packrat | Mode::Both)
    }
}

impl SidekickParams {
    /// quACK interval and threshold in effect.
    pub fn quack(&self) -> (u32, u32) {
        let reduce = self.ack_reduction.is_some();
        (
            self.quack_interval_ms
                .unwrap_or(if reduce { 15 } else { 30 }),
            self.quack_threshold.unwrap_or(if reduce { 50 } else { 10 }),
        )
    }

    /// The SDK configuration for a transfer in `direction`.
    ///
    /// ```
    /// use sidekick_examples::transfer::TransferDirection;
    /// use sidekick_examples::transfer::sidekick::SidekickParams;
    ///
    /// let c = SidekickParams::default().config(TransferDirection::Upload);
    /// let robin = c.protocol.session.robin.unwrap();
    /// assert_eq!((robin.interval_ms, robin.threshold), (30, 10)); // Sidekick (NSDI '24) Table 5, #2
    /// assert!(c.protocol.session.packrat.is_none());
    /// ```
    pub fn config(&self, direction: TransferDirection) -> SidekickConfig {
        self.config_for(self.engines.unwrap_or(Mode::for_direction(direction)))
    }

    /// The SDK configuration of a session running `mode`'s engines.
    ///
    /// ```
    /// use sidekick_examples::transfer::sidekick::{Mode, SidekickParams};
    ///
    /// let c = SidekickParams::default().config_for(Mode::Both);
    /// let s = &c.protocol.session;
    /// assert_eq!(s.robin.as_ref().map(|r| r.interval_ms), Some(30));
    /// assert_eq!(s.packrat.as_ref().map(|p| p.eack_interval_ms), Some(10));
    /// ```
    pub fn config_for(&self, mode: Mode) -> SidekickConfig {
        let (interval, t) = self.quack();
        let mut c = match mode {
            Mode::Robin => SidekickConfig::robin(interval, t),
            Mode::Packrat => SidekickConfig::packrat(),
            Mode::Both => SidekickConfig::robin_and_packrat(interval, t),
        };
        if let Some(r) = c.protocol.session.robin.as_mut() {
            r.interval_packets = self.quack_packets;
        }
        if let Some(p) = c.protocol.session.packrat.as_mut() {
            p.eack_interval_ms = self.eack_interval_ms;
            p.eack_interval_packets = self.eack_packets;
            p.local_symbols = self.eack_symbols;
            p.cache_capacity_bytes = u64::from(self.cache_bytes);
            p.reorder_delay_ms = self.reorder_ms;
            c.packrat.selective = self.selective;
            c.packrat.inflight_allowance = self.eack_inflight as usize;
        }
        c.protocol.discovery_retry = Duration::from_millis(u64::from(self.discovery_retry_ms));
        c.protocol.discovery_attempts = self.discovery_attempts.max(1);
        if self.id_bytes != 4 {
            c = c.with_identifier_width(self.id_bytes);
        }
        c
    }
}

/// The engines' counters, sampled while the session is active (the SDK drops its engines on
/// fallback, so the report keeps the last sample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineSample {
    /// Robin's counters.
    pub robin: Option<RobinStats>,
    /// Packrat's counters.
    pub packrat: Option<PackratStats>,
}

impl EngineSample {
    /// Take a fresh sample if the engines are running.
    pub fn update(&mut self, c: &SidekickClient) {
        if let Some(r) = c.robin() {
            self.robin = Some(r.stats());
        }
        if let Some(p) = c.packrat() {
            self.packrat = Some(p.stats());
        }
    }
}

/// Counters of the client's sidekick session in the JSON report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SidekickCounters {
    /// `robin` (upload), `packrat` (download) or `both` (`--both`).
    pub mode: Option<Mode>,
    /// `active` (session up at the end), `fallback` (the SDK fell back: see `fallback_cause`), or
    /// `discovering` (no proxy had answered when the transfer ended: it ran end to end).
    pub state: &'static str,
    /// quACKs handed to Robin (`SdkStats::quacks`).
    pub quacks: u64,
    /// Of which rejected as inconsistent.
    pub inconsistent_quacks: u64,
    /// Of which stale (ignored).
    pub stale_quacks: u64,
    /// eACKs sent (Packrat).
    pub eacks_sent: u64,
    /// Coded symbols in those eACKs.
    pub eack_symbols: u64,
    /// Bytes of those eACKs on the wire (the eACK itself, without the session's framing); the
    /// identifier width sets the bytes per symbol (`width + 5`).
    pub eack_bytes: u64,
    /// Near-segment losses Robin detected (reordering rule + time rule).
    pub losses_detected: u64,
    /// Robin: quACKs that did not decode (more than `t` missing, or power sums inconsistent
    /// with the log).
    pub quack_undecodable: u64,
    /// Robin: quACKs whose last element was not a logged send awaiting a verdict.
    pub quack_unknown_last: u64,
    /// Robin: first quACKs naming a send from before the engine logged (the handshake
    /// window), deferred rather than rejected.
    pub syncs_deferred: u64,
    /// Robin: bytes of the well-formed quACKs received.
    pub quack_bytes: u64,
    /// Robin: identifier collisions inside decoded quACKs (indeterminate groups).
    pub quack_collisions: u64,
    /// Robin: losses not resent because the copy would reach the receiver too far behind its
    /// highest packet number to be accepted (`RobinSenderConfig::resend_window`).
    pub resends_too_late: u64,
    /// Identifier width of the session, bytes.
    pub id_bytes: u32,
    /// quinn: near-segment losses applied to PACUBIC (`SharedSignals::quack_events_applied`).
    pub cc_events: u64,
    /// Early retransmissions the SDK sent (Robin: identical copies of datagrams a quACK shows
    /// lost).
    pub retransmissions: u64,
    /// Packrat: datagrams held back by the reorder window.
    pub held: u64,
    /// Packrat: gaps opened in the packet-number sequence.
    pub gaps_opened: u64,
    /// Packrat: gaps filled while held (late arrival or the proxy's retransmission).
    pub gaps_filled: u64,
    /// Packrat: gaps released by the reorder window expiring.
    pub gaps_expired: u64,
    /// Packrat: the median time gaps took to fill, ms — from the datagram that revealed the
    /// gap to the missing packet's arrival, within the hold or after it (1 ms buckets, upper
    /// edges; `PackratStats::fill_delays`). Absent without fills.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill_delay_p50_ms: Option<f64>,
    /// Packrat: the 90th percentile of the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill_delay_p90_ms: Option<f64>,
    /// Packrat: the 99th percentile of the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fill_delay_p99_ms: Option<f64>,
    /// Packrat: eACK outcomes received (the proxy could fill none of the gaps an eACK came
    /// after, and the client stopped holding for them).
    pub eack_outcomes: u64,
    /// Resets the client requested.
    pub resets_requested: u64,
    /// Resets the proxy started.
    pub resets_by_proxy: u64,
    /// Sidekick datagrams refused (forged, replayed, wrong source).
    pub rejected_frames: u64,
    /// Base datagrams the QUIC lens could not open under the connection's keys (left out of
    /// the eACK; the stack gets them as they are).
    pub unauthenticated_datagrams: u64,
    /// Whether the session was active at the end.
    pub active: bool,
    /// Whether the transfer ran (at the end) without the sidekick: fell back, or no proxy
    /// answered.
    pub fallback: bool,
    /// Why: `no_proxy`, `init_timeout`, `rejected`, `idle_timeout`, `control_timeout`,
    /// `bad_echo`, `sidekick_addr_refused`, `closed_by_proxy`, `inconsistent_quacks`,
    /// `never_sent`, `over_quota`, `too_many_resets`, `application`, `holds_unrepaired`,
    /// `resends_unneeded`, or `discovery_unanswered` (still probing when the transfer ended).
    pub fallback_cause: Option<&'static str>,
}

/// The ACK-frequency request of Robin #3 (Sidekick (NSDI '24) §2.3, §6.2): the receiver ACKs
/// every `every` ack-eliciting packets, or after at most 100 ms (quinn clamps the delay to
/// max(RTT, 25 ms)), and out-of-order arrivals do not elicit an immediate ACK (reordering
/// threshold 0). The last part is what lets the receiver stay quiet when the near link drops:
/// with the extension's default (2), every gap costs an immediate ACK, which in a slow-start
/// overshoot is most of the ACKs. With the sidekick, quACKs report those losses; without it
/// (the end-to-end baseline at the same ACK rate) the sparse ACKs alone do.
///
/// ```
/// let af = sidekick_examples::transfer::sidekick::ack_frequency_config(100);
/// let mut t = quinn::TransportConfig::default();
/// t.ack_frequency_config(Some(af));
/// ```
pub fn ack_frequency_config(every: u32) -> quinn::AckFrequencyConfig {
    let mut af = quinn::AckFrequencyConfig::default();
    af.ack_eliciting_threshold(quinn::VarInt::from_u32(every.saturating_sub(1)))
        .max_ack_delay(Some(std::time::Duration::from_millis(100)))
        .reordering_threshold(quinn::VarInt::from_u32(0));
    af
}

/// Stable name of a fallback cause for reports.
pub fn cause_name(c: FallbackCause) -> &'static str {
    match c {
        FallbackCause::Protocol(r) => match r {
            FallbackReason::NoProxy => "no_proxy",
            FallbackReason::InitTimeout => "init_timeout",
            FallbackReason::Rejected(_) => "rejected",
            FallbackReason::IdleTimeout => "idle_timeout",
            FallbackReason::ControlTimeout => "control_timeout",
            FallbackReason::BadEcho(_) => "bad_echo",
            FallbackReason::SidekickAddr(_) => "sidekick_addr_refused",
        },
        FallbackCause::ClosedByProxy => "closed_by_proxy",
        FallbackCause::InconsistentQuacks => "inconsistent_quacks",
        FallbackCause::NeverSent => "never_sent",
        FallbackCause::OverQuota => "over_quota",
        FallbackCause::TooManyResets => "too_many_resets",
        FallbackCause::Application => "application",
        FallbackCause::HoldsUnrepaired => "holds_unrepaired",
        FallbackCause::ResendsUnneeded => "resends_unneeded",
    }
}

impl SidekickCounters {
    /// Counters from the client state, the last engine sample and (quinn) PACUBIC's count.
    pub fn collect(mode: Mode, c: &SidekickClient, sample: &EngineSample, cc_events: u64) -> Self {
        let mut sample = *sample;
        sample.update(c);
        let st = c.stats();
        let (state, cause) = match (c.is_active(), c.fallback_cause()) {
            (true, _) => ("active", None),
            (false, Some(cause)) => ("fallback", Some(cause_name(cause))),
            (false, None) => ("discovering", Some("discovery_unanswered")),
        };
        let robin = sample.robin.unwrap_or_default();
        let packrat = sample.packrat.unwrap_or_default();
        Self {
            mode: Some(mode),
            state,
            quacks: st.quacks,
            inconsistent_quacks: st.inconsistent_quacks,
            stale_quacks: st.stale_quacks,
            eacks_sent: st.eacks_sent,
            eack_symbols: packrat.eack_symbols,
            eack_bytes: packrat.eack_bytes,
            losses_detected: robin.lost_by_reordering + robin.lost_by_time,
            quack_undecodable: robin.undecodable,
            quack_unknown_last: robin.unknown_last,
            syncs_deferred: robin.syncs_deferred,
            quack_bytes: robin.quack_bytes,
            quack_collisions: robin.indeterminate,
            resends_too_late: robin.resends_too_late,
            id_bytes: c
                .session_config()
                .and_then(|s| s.identifier.as_ref())
                .map_or(4, |i| i.width),
            cc_events,
            retransmissions: st.retransmissions,
            held: packrat.held,
            gaps_opened: packrat.gaps_opened,
            gaps_filled: packrat.gaps_filled,
            gaps_expired: packrat.gaps_expired,
            fill_delay_p50_ms: packrat.fill_delays.quantile_ms(0.5),
            fill_delay_p90_ms: packrat.fill_delays.quantile_ms(0.9),
            fill_delay_p99_ms: packrat.fill_delays.quantile_ms(0.99),
            eack_outcomes: st.eack_outcomes,
            resets_requested: st.resets_requested,
            resets_by_proxy: st.resets_by_proxy,
            rejected_frames: st.rejected_frames,
            unauthenticated_datagrams: st.unauthenticated_datagrams,
            active: state == "active",
            fallback: state != "active",
            fallback_cause: cause,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn defaults_follow_the_papers() {
        let p = SidekickParams::default();
        assert_eq!(p.quack(), (30, 10));
        let reduce = SidekickParams {
            ack_reduction: Some(20),
            ..p
        };
        assert_eq!(reduce.quack(), (15, 50));
        let c = p.config(TransferDirection::Download);
        let pk = c.protocol.session.packrat.unwrap();
        assert_eq!(
            (
                pk.eack_interval_ms,
                pk.eack_interval_packets,
                pk.local_symbols,
                pk.cache_capacity_bytes,
                pk.reorder_delay_ms
            ),
            (10, 16, 160, 48_000, 30)
        );
        assert!(c.protocol.session.robin.is_none());
    }

    #[test]
    fn overrides_reach_the_sdk_config() {
        let p = SidekickParams {
            quack_interval_ms: Some(7),
            quack_threshold: Some(33),
            quack_packets: 2,
            reorder_ms: 65,
            eack_symbols: 40,
            selective: true,
            discovery_attempts: 2,
            ..SidekickParams::default()
        };
        let up = p.config(TransferDirection::Upload);
        let r = up.protocol.session.robin.unwrap();
        assert_eq!((r.interval_ms, r.threshold, r.interval_packets), (7, 33, 2));
        assert_eq!(up.protocol.discovery_attempts, 2);
        let down = p.config(TransferDirection::Download);
        let pk = down.protocol.session.packrat.unwrap();
        assert_eq!((pk.reorder_delay_ms, pk.local_symbols), (65, 40));
        assert!(down.packrat.selective);
    }

    #[test]
    fn both_engines_take_each_sides_parameters_and_engines_override_the_direction() {
        let p = SidekickParams {
            quack_interval_ms: Some(7),
            reorder_ms: 65,
            selective: true,
            ..SidekickParams::default()
        };
        let both = p.config_for(Mode::Both);
        let s = &both.protocol.session;
        assert_eq!(s.robin.as_ref().map(|r| r.interval_ms), Some(7));
        assert_eq!(s.packrat.as_ref().map(|p| p.reorder_delay_ms), Some(65));
        assert!(both.packrat.selective);
        assert!(Mode::Both.robin() && Mode::Both.packrat());
        // `--sidekick-engines packrat` on an upload asks for Packrat alone.
        let only = SidekickParams {
            engines: Some(Mode::Packrat),
            ..p
        }
        .config(TransferDirection::Upload);
        assert!(only.protocol.session.robin.is_none());
        assert!(only.protocol.session.packrat.is_some());
    }

    #[test]
    fn counters_report_discovery_and_fallback() {
        let mut c =
            SidekickClient::new(SidekickParams::default().config(TransferDirection::Upload));
        let now = Instant::now();
        c.start(now).unwrap();
        let s = SidekickCounters::collect(Mode::Robin, &c, &EngineSample::default(), 0);
        assert_eq!(s.state, "discovering");
        assert!(s.fallback && !s.active);
        assert_eq!(s.fallback_cause, Some("discovery_unanswered"));
        // Without answers, discovery gives up after its attempts: no proxy.
        let mut t = now;
        for _ in 0..20 {
            t += Duration::from_secs(1);
            c.handle_timeout(t);
        }
        let s = SidekickCounters::collect(Mode::Robin, &c, &EngineSample::default(), 0);
        assert_eq!(s.state, "fallback");
        assert_eq!(s.fallback_cause, Some("no_proxy"));
        let line = serde_json::to_string(&s).unwrap();
        assert!(
            line.contains(r#""mode":"robin","state":"fallback""#),
            "{line}"
        );
    }
}
