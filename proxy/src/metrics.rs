//! The metrics endpoint's exposition: a core's [`Counters`] (every worker's, merged) and the
//! daemon's own figures, as OpenMetrics text encoded by `prometheus-client`.
//!
//! The core counts in plain `u64`s (no atomics on its hot path) and the workers publish
//! snapshots; at each scrape a [`Scrape`] of those values is registered as a `prometheus-client`
//! [`Collector`] of constant metrics and encoded. Names keep the `sidekick_` prefix; a counter's
//! samples end in `_total` (OpenMetrics).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

pub use sidekick_proxy_core::counters::Counters;

/// The `Content-Type` of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What one scrape exposes.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// The core's counters and gauges (the sum over the workers).
    pub counters: Counters,
    /// Frames each capture worker captured, by worker index (the daemon's; empty elsewhere).
    pub worker_frames: Vec<u64>,
    /// Configuration reloads (SIGHUP) applied and refused (the daemon's; `None` elsewhere).
    pub reloads: Option<ReloadCounts>,
}

/// Outcomes of configuration reloads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Reloads applied.
    pub applied: u64,
    /// Reloads refused (a key that needs a restart changed, or the file did not parse).
    pub refused: u64,
}

/// Encodes a scrape as OpenMetrics text ([`CONTENT_TYPE`]).
///
/// ```
/// use sidekick_proxy::metrics::{Counters, Scrape, encode};
/// let mut counters = Counters::default();
/// counters.quacks_sent = 7;
/// let text = encode(Scrape { counters, ..Scrape::default() }).unwrap();
/// assert!(text.contains("sidekick_quacks_sent_total 7\n"));
/// assert!(text.ends_with("# EOF\n"));
/// ```
pub fn encode(scrape: Scrape) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix("sidekick");
    registry.register_collector(Box::new(scrape));
    let mut text = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

/// Renders a core's counters alone (no daemon figures), as the simulator and tests read them.
pub trait RenderPrometheus {
    /// [`encode`] of a [`Scrape`] holding only these counters.
    fn render_prometheus(&self) -> Result<String, std::fmt::Error>;
}

impl RenderPrometheus for Counters {
    fn render_prometheus(&self) -> Result<String, std::fmt::Error> {
        encode(Scrape {
            counters: *self,
            ..Scrape::default()
        })
    }
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let enc = &mut enc;
        core_families(enc, &self.counters)?;
        drops(enc, &self.counters)?;
        pemi_families(enc, &self.counters)?;
        handshake_rescue_families(enc, &self.counters)?;
        if !self.worker_frames.is_empty() {
            labelled(
                enc,
                "worker_frames",
                "Frames captured by each capture worker.",
                self.worker_frames
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| (k.to_string(), v)),
                "worker",
            )?;
            gauge(
                enc,
                "workers",
                "Capture workers running.",
                self.worker_frames.len() as u64,
            )?;
        }
        if let Some(r) = self.reloads {
            labelled(
                enc,
                "config_reloads",
                "Configuration reloads (SIGHUP), by outcome.",
                [
                    ("applied".to_string(), r.applied),
                    ("refused".to_string(), r.refused),
                ],
                "result",
            )?;
        }
        Ok(())
    }
}

/// One unlabelled counter (`sidekick_<name>_total`).
fn counter(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(v);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

/// One unlabelled gauge (`sidekick_<name>`); values beyond `i64::MAX` (none in practice) read as
/// `i64::MAX` rather than fail the whole scrape.
fn gauge(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

/// A counter family with one label (`sidekick_<name>_total{<label>="…"}`).
fn labelled(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (String, u64)>,
    label: &str,
) -> Result<(), std::fmt::Error> {
    let kind = ConstCounter::new(0u64).metric_type();
    let mut family = enc.encode_descriptor(name, help, None, kind)?;
    for (value, v) in samples {
        let labels = [(label, value.as_str())];
        ConstCounter::new(v).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Traffic, sessions, engines, caches, memory, timers and capture.
fn core_families(enc: &mut DescriptorEncoder<'_>, c: &Counters) -> Result<(), std::fmt::Error> {
    counter(enc, "frames", "Frames captured.", c.frames)?;
    counter(enc, "udp_packets", "UDP datagrams seen.", c.udp_packets)?;
    gauge(enc, "flows", "Flows in the flow table.", c.flows)?;
    gauge(
        enc,
        "sessions",
        "Flows with a sidekick session.",
        c.assisted_flows,
    )?;
    counter(
        enc,
        "discovery_seen",
        "Discovery requests seen.",
        c.discovery_seen,
    )?;
    counter(
        enc,
        "discovery_replied",
        "Discovery replies injected.",
        c.discovery_replied,
    )?;
    counter(enc, "quacks_sent", "quACKs sent.", c.quacks_sent)?;
    counter(
        enc,
        "quacks_on_gap",
        "quACKs sent early: a packet followed a silence or an RTP sequence gap (quack_on_gap_percent).",
        c.robin.gap_quacks,
    )?;
    counter(
        enc,
        "quacks_on_rtp_gap",
        "Of the early quACKs, those only an RTP sequence gap revealed (no silence seen).",
        c.robin.rtp_gaps,
    )?;
    counter(enc, "eacks_received", "eACKs received.", c.eacks_in)?;
    counter(
        enc,
        "eack_outcomes",
        "eACK outcomes sent: eACKs with open gaps the proxy could repair none of.",
        c.eack_outcomes,
    )?;
    counter(
        enc,
        "eacks_decoded",
        "eACKs decoded.",
        c.packrat.eacks_decoded,
    )?;
    counter(
        enc,
        "eacks_failed",
        "eACKs that did not decode (Reset sent).",
        c.packrat.eacks_failed,
    )?;
    counter(
        enc,
        "eacks_stale",
        "eACKs of an old epoch.",
        c.packrat.eacks_stale,
    )?;
    counter(
        enc,
        "retransmissions",
        "Cached packets retransmitted.",
        c.packrat.retransmissions,
    )?;
    counter(
        enc,
        "retransmitted_bytes",
        "Bytes of cached packets retransmitted.",
        c.packrat.retransmitted_bytes,
    )?;
    counter(
        enc,
        "packrat_forwarded_bytes",
        "Bytes forwarded to Packrat clients (the retransmission budget's base).",
        c.packrat.forwarded_bytes,
    )?;
    counter(
        enc,
        "retransmissions_refused_budget",
        "Retransmissions refused: over the budget (retx_budget_percent of forwarded bytes).",
        c.packrat.retx_refused_budget,
    )?;
    counter(
        enc,
        "repairs_abandoned",
        "Cached packets given up after MAX_REPAIRS failed repairs (datagrams the client does not take).",
        c.packrat.repairs_abandoned,
    )?;
    gauge(
        enc,
        "cache_bytes",
        "Bytes in Packrat caches.",
        c.cache_bytes,
    )?;
    counter(
        enc,
        "cache_evicted_acked",
        "Cached packets evicted on acknowledgement.",
        c.packrat.evicted_acked,
    )?;
    counter(
        enc,
        "cache_evicted_optimistic",
        "Cached packets evicted because the cache was full.",
        c.packrat.evicted_optimistic,
    )?;
    counter(
        enc,
        "eack_id_collisions",
        "Identifier collisions: packets forwarded with an identifier an eACK showed missing,  and cached packets beyond the first sharing one.",
        c.packrat.id_collisions,
    )?;
    counter(
        enc,
        "missing_uncached",
        "Missing packets no longer cached.",
        c.packrat.missing_uncached,
    )?;
    counter(
        enc,
        "resets_sent",
        "Resets sent by the proxy.",
        c.resets_sent,
    )?;
    counter(enc, "injected", "Frames injected.", c.injected)?;
    gauge(
        enc,
        "engine_memory_bytes",
        "Heap bytes held by engines.",
        c.engine_memory_bytes,
    )?;
    gauge(
        enc,
        "multicast_groups",
        "Multicast groups with a shared Packrat cache.",
        c.multicast_groups,
    )?;
    gauge(
        enc,
        "multicast_members",
        "Clients subscribed to multicast groups.",
        c.multicast_members,
    )?;
    gauge(
        enc,
        "multicast_virtual_cache_bytes",
        "Bytes of multicast clients' virtual caches.",
        c.multicast_virtual_cache_bytes,
    )?;
    counter(
        enc,
        "multicast_refused",
        "Multicast joins refused (caps).",
        c.multicast_refused,
    )?;
    counter(
        enc,
        "multicast_no_mac",
        "Multicast retransmissions skipped: client MAC unknown.",
        c.multicast_no_mac,
    )?;
    counter(
        enc,
        "inject_queue_dropped",
        "Frames not queued for injection: the backend did not poll in time.",
        c.inject_queue_dropped,
    )?;
    gauge(
        enc,
        "memory_reserved_bytes",
        "Bytes of the memory budget reserved by engines and multicast caches.",
        c.memory_reserved_bytes,
    )?;
    counter(
        enc,
        "memory_refused",
        "Engines refused or Packrat caches shrunk: the memory budget was spent.",
        c.memory_refused,
    )?;
    gauge(
        enc,
        "timer_entries",
        "Entries in the core's deadline index.",
        c.timer_entries,
    )?;
    counter(
        enc,
        "timers_fired",
        "Deadlines that came due in the core.",
        c.timers_fired,
    )?;
    counter(
        enc,
        "checksums_filled",
        "Partial checksums completed before caching.",
        c.checksums_filled,
    )?;
    counter(
        enc,
        "gso_superframes",
        "GSO/GRO super-frames split.",
        c.gso_superframes,
    )?;
    counter(
        enc,
        "capture_drops",
        "Frames dropped by the kernel capture ring.",
        c.capture_drops,
    )?;
    counter(
        enc,
        "capture_resets",
        "Robin epochs restarted because the capture dropped frames.",
        c.capture_resets,
    )?;
    counter(
        enc,
        "capture_delay_frames",
        "Frames whose kernel capture time was known.",
        c.capture_delay_frames,
    )?;
    counter(
        enc,
        "capture_delay_us",
        "Sum of kernel-capture-to-processing delays, microseconds.",
        c.capture_delay_us_sum,
    )?;
    gauge(
        enc,
        "capture_delay_us_max",
        "Largest kernel-capture-to-processing delay, microseconds.",
        c.capture_delay_us_max,
    )?;
    Ok(())
}

/// Items dropped, by reason.
fn drops(enc: &mut DescriptorEncoder<'_>, c: &Counters) -> Result<(), std::fmt::Error> {
    let drops: [(&str, u64); 15] = [
        ("not_ip", c.not_ip),
        ("not_udp", c.not_udp),
        ("fragment", c.fragments),
        ("malformed_frame", c.malformed_frames),
        ("sidekick_malformed", c.sidekick_dropped),
        ("discovery_refused", c.discovery_refused),
        ("discovery_rate_limited", c.session.discovery_rate_limited),
        ("flow_table_full", c.flow_table.refused_full),
        (
            "session_cap",
            c.flow_table.refused_assisted_cap + c.sessions_refused,
        ),
        ("flow_displaced", c.flow_table.displaced),
        ("quota", c.messages_refused),
        ("outbox_full", c.session.outbox_dropped),
        ("id_unreadable", c.robin.id_errors + c.packrat.not_cached),
        ("send_error", c.send_errors),
        ("flow_expired", c.flow_table.expired),
    ];
    labelled(
        enc,
        "drops",
        "Items dropped, by reason.",
        drops.map(|(r, v)| (r.to_string(), v)),
        "reason",
    )
}

/// PEMI: activity, each give-up with its reason (PEMI §4.6), and the session fallbacks.
fn pemi_families(enc: &mut DescriptorEncoder<'_>, c: &Counters) -> Result<(), std::fmt::Error> {
    let p = &c.pemi;
    counter(
        enc,
        "pemi_handshakes",
        "Handshakes with both initial RTTs measured.",
        p.handshakes,
    )?;
    counter(
        enc,
        "pemi_instant_acks",
        "Handshakes with an instant ACK.",
        p.instant_acks,
    )?;
    counter(
        enc,
        "pemi_protected",
        "Dominant-direction packets forwarded.",
        p.protected,
    )?;
    counter(enc, "pemi_flowlets", "Flowlets evaluated.", p.flowlets)?;
    counter(
        enc,
        "pemi_rtt_samples",
        "RTT samples from matched pairs.",
        p.rtt_samples,
    )?;
    counter(
        enc,
        "pemi_inferred_lost",
        "Packets inferred lost.",
        p.inferred_lost,
    )?;
    counter(
        enc,
        "pemi_retransmissions",
        "Datagrams retransmitted by PEMI.",
        p.retransmissions,
    )?;
    counter(
        enc,
        "pemi_replies_delayed",
        "Replies delayed to enforce the window.",
        p.replies_delayed,
    )?;
    counter(
        enc,
        "pemi_gap_signals",
        "Prompt replies one ACK range longer than the previous one.",
        p.gap_signals,
    )?;
    counter(
        enc,
        "pemi_gap_retransmissions",
        "Retransmissions named by the reply-length gap signal.",
        p.gap_retransmissions,
    )?;
    counter(
        enc,
        "pemi_gap_walk_backs",
        "Gap-signal retransmissions of an older packet after a repair left the gap open.",
        p.gap_walk_backs,
    )?;
    counter(
        enc,
        "pemi_gap_paired",
        "Gap-signal retransmissions of the packet before the candidate, named with it.",
        p.gap_paired,
    )?;
    counter(
        enc,
        "pemi_gap_timer_paired",
        "Gap-signal retransmissions named with the receiver's learned ACK wait (a timer receiver).",
        p.gap_timer_paired,
    )?;
    counter(
        enc,
        "pemi_gap_closed",
        "Gaps a gap-signal repair closed within its round (the sender saw no hole).",
        p.gap_closed,
    )?;
    counter(
        enc,
        "pemi_replies_held",
        "Replies held while a repaired gap was open.",
        p.replies_held,
    )?;
    counter(
        enc,
        "pemi_spin_samples",
        "Spin-bit RTT samples.",
        p.spin_samples,
    )?;
    counter(
        enc,
        "pemi_icmp_probes",
        "ICMP echo probes sent to protected endpoints.",
        p.icmp_probes,
    )?;
    counter(
        enc,
        "pemi_icmp_samples",
        "ICMP echo replies matched (RTT calibration samples).",
        p.icmp_samples,
    )?;
    let giveups: [(&str, u64); 8] = [
        ("flowlet_too_long", p.giveup_flowlet_too_long),
        ("implausible_loss", p.giveup_implausible_loss),
        ("unreadable_flow", p.giveup_unreadable_flow),
        ("budget_exhausted", p.giveup_budget),
        ("rate_limited", p.giveup_rate_limited),
        ("not_buffered", p.not_buffered),
        ("reply_excluded", p.replies_excluded),
        ("rtt_reset", p.rtt_resets),
    ];
    labelled(
        enc,
        "pemi_giveups",
        "PEMI protection given up, by reason.",
        giveups.map(|(r, v)| (r.to_string(), v)),
        "reason",
    )?;
    labelled(
        enc,
        "pemi_fallbacks",
        "Flows handed back to PEMI when their session went, by why.",
        [
            ("session_ended".to_string(), c.pemi_fallbacks_ended),
            ("session_failed".to_string(), c.pemi_fallbacks_failed),
        ],
        "reason",
    )
}

/// Handshake rescue (`core::handshake_rescue`).
fn handshake_rescue_families(
    enc: &mut DescriptorEncoder<'_>,
    c: &Counters,
) -> Result<(), std::fmt::Error> {
    let h = &c.handshake_rescue;
    counter(
        enc,
        "handshake_flows",
        "New flows whose handshake the rescue tracked.",
        h.flows,
    )?;
    counter(
        enc,
        "handshake_completed",
        "Tracked handshakes the client completed (1-RTT seen).",
        h.completed,
    )?;
    counter(
        enc,
        "handshake_kept",
        "Server handshake datagrams kept.",
        h.kept,
    )?;
    counter(
        enc,
        "handshake_replays",
        "Server handshake datagrams replayed.",
        h.replays,
    )?;
    counter(
        enc,
        "handshake_replay_bytes",
        "Bytes of replayed handshake frames.",
        h.replay_bytes,
    )?;
    counter(
        enc,
        "handshake_probe_triggers",
        "Replays started by a repeated first client Initial.",
        h.probe_triggers,
    )?;
    counter(
        enc,
        "handshake_silence_triggers",
        "Replays started by a missing client completion.",
        h.silence_triggers,
    )?;
    counter(
        enc,
        "handshake_refused",
        "Server handshake datagrams not kept (caps, memory budget).",
        h.refused,
    )?;
    counter(
        enc,
        "handshake_amplification_refused",
        "Replays withheld: beyond 3x the client's bytes on the flow.",
        h.amplification_refused,
    )?;
    counter(
        enc,
        "handshake_retry_or_vn",
        "Tracked handshakes ended by Retry or Version Negotiation.",
        h.retry_or_vn,
    )?;
    counter(
        enc,
        "handshake_expired",
        "Tracked handshakes that never completed.",
        h.expired,
    )?;
    counter(
        enc,
        "handshake_instant_acks",
        "Server first answers that were an instant ACK.",
        h.instant_acks,
    )?;
    counter(
        enc,
        "handshake_wait_for_cert",
        "Server first answers coalescing ACK and ServerHello.",
        h.wait_for_cert,
    )?;
    counter(
        enc,
        "handshake_spurious_rounds",
        "Silence-triggered replays answered sooner than the client's measured round trip (it held the flight, or that round trip holds its ACK delay).",
        h.spurious_rounds,
    )?;
    counter(
        enc,
        "handshake_paces_learned",
        "Handshake completions that taught a client's own pace.",
        h.paces_learned,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_once() {
        let mut c = Counters {
            quacks_sent: 7,
            ..Counters::default()
        };
        c.packrat.retransmissions = 3;
        c.packrat.retx_refused_budget = 5;
        c.packrat.retransmitted_bytes = 3600;
        c.packrat.forwarded_bytes = 36_000;
        c.flow_table.refused_full = 9;
        let text = c.render_prometheus().unwrap();
        assert!(text.contains("sidekick_retransmissions_refused_budget_total 5\n"));
        assert!(text.contains("sidekick_retransmitted_bytes_total 3600\n"));
        assert!(text.contains("sidekick_packrat_forwarded_bytes_total 36000\n"));
        assert!(text.contains("sidekick_quacks_sent_total 7\n"));
        assert!(text.contains("sidekick_retransmissions_total 3\n"));
        assert!(text.contains("sidekick_drops_total{reason=\"flow_table_full\"} 9\n"));
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        let names: std::collections::HashSet<_> =
            text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        assert_eq!(types, names.len());
        let mut d = c;
        d.merge(&c);
        assert_eq!(d.quacks_sent, 14);
        assert_eq!(d.packrat.retx_refused_budget, 10);
        // Every family of two workers adds up, the flow table's and the sessions' included.
        assert!(
            d.render_prometheus()
                .unwrap()
                .contains("sidekick_drops_total{reason=\"flow_table_full\"} 18\n")
        );
        let mut p = Counters::default();
        p.pemi.giveup_budget = 4;
        p.pemi.retransmissions = 2;
        let text = p.render_prometheus().unwrap();
        assert!(text.contains("sidekick_pemi_giveups_total{reason=\"budget_exhausted\"} 4\n"));
        assert!(text.contains("sidekick_pemi_retransmissions_total 2\n"));
        let mut q = p;
        q.merge(&p);
        assert_eq!(q.pemi.giveup_budget, 8);
    }

    #[test]
    fn the_daemon_adds_workers_and_reloads_and_gauges_never_fail_the_scrape() {
        let counters = Counters {
            frames: 7,
            flows: u64::MAX,
            ..Counters::default()
        };
        let text = encode(Scrape {
            counters,
            worker_frames: vec![3, 4],
            reloads: Some(ReloadCounts {
                applied: 1,
                refused: 2,
            }),
        })
        .unwrap();
        for line in [
            "sidekick_frames_total 7",
            "sidekick_flows 9223372036854775807",
            "sidekick_worker_frames_total{worker=\"0\"} 3",
            "sidekick_worker_frames_total{worker=\"1\"} 4",
            "sidekick_workers 2",
            "sidekick_config_reloads_total{result=\"applied\"} 1",
            "sidekick_config_reloads_total{result=\"refused\"} 2",
            "# TYPE sidekick_frames counter",
            "# TYPE sidekick_flows gauge",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing in:\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"));
        // Outside the daemon there is no worker or reload family.
        let core_only = counters.render_prometheus().unwrap();
        assert!(!core_only.contains("sidekick_workers"));
        assert!(!core_only.contains("config_reloads"));
    }
}
