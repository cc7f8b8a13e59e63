//! The Prometheus text exposition (format 0.0.4) of the core's [`Counters`].
//!
//! The core keeps plain `u64` counters (no atomics on the hot path); the I/O loop publishes
//! [`Counters`] snapshots to the metrics server periodically.

use std::fmt::Write as _;

pub use sidekick_proxy_core::counters::Counters;

/// Renders a core's counters in the Prometheus text format.
pub trait RenderPrometheus {
    /// The text exposition: one `# HELP`, one `# TYPE` and the samples of each family.
    fn render_prometheus(&self) -> String;
}

impl RenderPrometheus for Counters {
    fn render_prometheus(&self) -> String {
        render(self)
    }
}

fn render(c: &Counters) -> String {
    let mut s = String::with_capacity(4096);
    let mut m = |name: &str, kind: &str, help: &str, v: u64| {
        let _ = writeln!(s, "# HELP sidekick_{name} {help}");
        let _ = writeln!(s, "# TYPE sidekick_{name} {kind}");
        let _ = writeln!(s, "sidekick_{name} {v}");
    };
    m("frames_total", "counter", "Frames captured.", c.frames);
    m(
        "udp_packets_total",
        "counter",
        "UDP datagrams seen.",
        c.udp_packets,
    );
    m("flows", "gauge", "Flows in the flow table.", c.flows);
    m(
        "sessions",
        "gauge",
        "Flows with a sidekick session.",
        c.assisted_flows,
    );
    m(
        "discovery_seen_total",
        "counter",
        "Discovery requests seen.",
        c.discovery_seen,
    );
    m(
        "discovery_replied_total",
        "counter",
        "Discovery replies injected.",
        c.discovery_replied,
    );
    m(
        "quacks_sent_total",
        "counter",
        "quACKs sent.",
        c.quacks_sent,
    );
    m(
        "quacks_on_gap_total",
        "counter",
        "quACKs sent early: a packet followed a silence (quack_on_gap_percent).",
        c.robin.gap_quacks,
    );
    m(
        "eacks_received_total",
        "counter",
        "eACKs received.",
        c.eacks_in,
    );
    m(
        "eacks_decoded_total",
        "counter",
        "eACKs decoded.",
        c.packrat.eacks_decoded,
    );
    m(
        "eacks_failed_total",
        "counter",
        "eACKs that did not decode (Reset sent).",
        c.packrat.eacks_failed,
    );
    m(
        "eacks_stale_total",
        "counter",
        "eACKs of an old epoch.",
        c.packrat.eacks_stale,
    );
    m(
        "retransmissions_total",
        "counter",
        "Cached packets retransmitted.",
        c.packrat.retransmissions,
    );
    m(
        "retransmitted_bytes_total",
        "counter",
        "Bytes of cached packets retransmitted.",
        c.packrat.retransmitted_bytes,
    );
    m(
        "packrat_forwarded_bytes_total",
        "counter",
        "Bytes forwarded to Packrat clients (the retransmission budget's base).",
        c.packrat.forwarded_bytes,
    );
    m(
        "retransmissions_refused_budget_total",
        "counter",
        "Retransmissions refused: over the budget (retx_budget_percent of forwarded bytes).",
        c.packrat.retx_refused_budget,
    );
    m(
        "cache_bytes",
        "gauge",
        "Bytes in Packrat caches.",
        c.cache_bytes,
    );
    m(
        "cache_evicted_acked_total",
        "counter",
        "Cached packets evicted on acknowledgement.",
        c.packrat.evicted_acked,
    );
    m(
        "cache_evicted_optimistic_total",
        "counter",
        "Cached packets evicted because the cache was full.",
        c.packrat.evicted_optimistic,
    );
    m(
        "eack_id_collisions_total",
        "counter",
        "Identifier collisions: packets forwarded with an identifier an eACK showed missing, \
             and cached packets beyond the first sharing one.",
        c.packrat.id_collisions,
    );
    m(
        "missing_uncached_total",
        "counter",
        "Missing packets no longer cached.",
        c.packrat.missing_uncached,
    );
    m(
        "resets_sent_total",
        "counter",
        "Resets sent by the proxy.",
        c.resets_sent,
    );
    m("injected_total", "counter", "Frames injected.", c.injected);
    m(
        "engine_memory_bytes",
        "gauge",
        "Heap bytes held by engines.",
        c.engine_memory_bytes,
    );
    m(
        "multicast_groups",
        "gauge",
        "Multicast groups with a shared Packrat cache.",
        c.multicast_groups,
    );
    m(
        "multicast_members",
        "gauge",
        "Clients subscribed to multicast groups.",
        c.multicast_members,
    );
    m(
        "multicast_virtual_cache_bytes",
        "gauge",
        "Bytes of multicast clients' virtual caches.",
        c.multicast_virtual_cache_bytes,
    );
    m(
        "multicast_refused_total",
        "counter",
        "Multicast joins refused (caps).",
        c.multicast_refused,
    );
    m(
        "multicast_no_mac_total",
        "counter",
        "Multicast retransmissions skipped: client MAC unknown.",
        c.multicast_no_mac,
    );
    m(
        "inject_queue_dropped_total",
        "counter",
        "Frames not queued for injection: the backend did not poll in time.",
        c.inject_queue_dropped,
    );
    m(
        "memory_reserved_bytes",
        "gauge",
        "Bytes of the memory budget reserved by engines and multicast caches.",
        c.memory_reserved_bytes,
    );
    m(
        "memory_refused_total",
        "counter",
        "Engines refused or Packrat caches shrunk: the memory budget was spent.",
        c.memory_refused,
    );
    m(
        "timer_entries",
        "gauge",
        "Entries in the core's deadline index.",
        c.timer_entries,
    );
    m(
        "timers_fired_total",
        "counter",
        "Deadlines that came due in the core.",
        c.timers_fired,
    );
    m(
        "checksums_filled_total",
        "counter",
        "Partial checksums completed before caching.",
        c.checksums_filled,
    );
    m(
        "gso_superframes_total",
        "counter",
        "GSO/GRO super-frames split.",
        c.gso_superframes,
    );
    m(
        "capture_drops_total",
        "counter",
        "Frames dropped by the kernel capture ring.",
        c.capture_drops,
    );
    m(
        "capture_resets_total",
        "counter",
        "Robin epochs restarted because the capture dropped frames.",
        c.capture_resets,
    );
    m(
        "capture_delay_frames_total",
        "counter",
        "Frames whose kernel capture time was known.",
        c.capture_delay_frames,
    );
    m(
        "capture_delay_us_sum",
        "counter",
        "Sum of kernel-capture-to-processing delays, microseconds.",
        c.capture_delay_us_sum,
    );
    m(
        "capture_delay_us_max",
        "gauge",
        "Largest kernel-capture-to-processing delay, microseconds.",
        c.capture_delay_us_max,
    );
    let _ = writeln!(s, "# HELP sidekick_drops_total Items dropped, by reason.");
    let _ = writeln!(s, "# TYPE sidekick_drops_total counter");
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
    for (reason, v) in drops {
        let _ = writeln!(s, "sidekick_drops_total{{reason=\"{reason}\"}} {v}");
    }
    render_pemi(c, &mut s);
    render_handshake_rescue(c, &mut s);
    s
}

/// Handshake rescue counters (`core::handshake_rescue`).
fn render_handshake_rescue(c: &Counters, s: &mut String) {
    let h = &c.handshake_rescue;
    let families: [(&str, &str, u64); 13] = [
        (
            "handshake_flows_total",
            "New flows whose handshake the rescue tracked.",
            h.flows,
        ),
        (
            "handshake_completed_total",
            "Tracked handshakes the client completed (1-RTT seen).",
            h.completed,
        ),
        (
            "handshake_kept_total",
            "Server handshake datagrams kept.",
            h.kept,
        ),
        (
            "handshake_replays_total",
            "Server handshake datagrams replayed.",
            h.replays,
        ),
        (
            "handshake_replay_bytes_total",
            "Bytes of replayed handshake frames.",
            h.replay_bytes,
        ),
        (
            "handshake_probe_triggers_total",
            "Replays started by a repeated first client Initial.",
            h.probe_triggers,
        ),
        (
            "handshake_silence_triggers_total",
            "Replays started by a missing client completion.",
            h.silence_triggers,
        ),
        (
            "handshake_refused_total",
            "Server handshake datagrams not kept (caps, memory budget).",
            h.refused,
        ),
        (
            "handshake_amplification_refused_total",
            "Replays withheld: beyond 3x the client's bytes on the flow.",
            h.amplification_refused,
        ),
        (
            "handshake_retry_or_vn_total",
            "Tracked handshakes ended by Retry or Version Negotiation.",
            h.retry_or_vn,
        ),
        (
            "handshake_expired_total",
            "Tracked handshakes that never completed.",
            h.expired,
        ),
        (
            "handshake_instant_acks_total",
            "Server first answers that were an instant ACK.",
            h.instant_acks,
        ),
        (
            "handshake_wait_for_cert_total",
            "Server first answers coalescing ACK and ServerHello.",
            h.wait_for_cert,
        ),
    ];
    for (name, help, v) in families {
        let _ = writeln!(s, "# HELP sidekick_{name} {help}");
        let _ = writeln!(s, "# TYPE sidekick_{name} counter");
        let _ = writeln!(s, "sidekick_{name} {v}");
    }
}

/// PEMI counters: activity, and each give-up with its reason (PEMI §4.6).
fn render_pemi(c: &Counters, s: &mut String) {
    let p = &c.pemi;
    let families: [(&str, &str, u64); 14] = [
        (
            "pemi_handshakes_total",
            "Handshakes with both initial RTTs measured.",
            p.handshakes,
        ),
        (
            "pemi_instant_acks_total",
            "Handshakes with an instant ACK.",
            p.instant_acks,
        ),
        (
            "pemi_protected_total",
            "Dominant-direction packets forwarded.",
            p.protected,
        ),
        ("pemi_flowlets_total", "Flowlets evaluated.", p.flowlets),
        (
            "pemi_rtt_samples_total",
            "RTT samples from matched pairs.",
            p.rtt_samples,
        ),
        (
            "pemi_inferred_lost_total",
            "Packets inferred lost.",
            p.inferred_lost,
        ),
        (
            "pemi_retransmissions_total",
            "Datagrams retransmitted by PEMI.",
            p.retransmissions,
        ),
        (
            "pemi_replies_delayed_total",
            "Replies delayed to enforce the window.",
            p.replies_delayed,
        ),
        (
            "pemi_gap_signals_total",
            "Prompt replies one ACK range longer than the previous one.",
            p.gap_signals,
        ),
        (
            "pemi_gap_retransmissions_total",
            "Retransmissions named by the reply-length gap signal.",
            p.gap_retransmissions,
        ),
        (
            "pemi_replies_held_total",
            "Replies held while a repaired gap was open.",
            p.replies_held,
        ),
        (
            "pemi_spin_samples_total",
            "Spin-bit RTT samples.",
            p.spin_samples,
        ),
        (
            "pemi_icmp_probes_total",
            "ICMP echo probes sent to protected endpoints.",
            p.icmp_probes,
        ),
        (
            "pemi_icmp_samples_total",
            "ICMP echo replies matched (RTT calibration samples).",
            p.icmp_samples,
        ),
    ];
    for (name, help, v) in families {
        let _ = writeln!(s, "# HELP sidekick_{name} {help}");
        let _ = writeln!(s, "# TYPE sidekick_{name} counter");
        let _ = writeln!(s, "sidekick_{name} {v}");
    }
    let _ = writeln!(
        s,
        "# HELP sidekick_pemi_giveups_total PEMI protection given up, by reason."
    );
    let _ = writeln!(s, "# TYPE sidekick_pemi_giveups_total counter");
    let giveups: [(&str, u64); 7] = [
        ("flowlet_too_long", p.giveup_flowlet_too_long),
        ("implausible_loss", p.giveup_implausible_loss),
        ("budget_exhausted", p.giveup_budget),
        ("rate_limited", p.giveup_rate_limited),
        ("not_buffered", p.not_buffered),
        ("reply_excluded", p.replies_excluded),
        ("rtt_reset", p.rtt_resets),
    ];
    for (reason, v) in giveups {
        let _ = writeln!(s, "sidekick_pemi_giveups_total{{reason=\"{reason}\"}} {v}");
    }
    let _ = writeln!(
        s,
        "# HELP sidekick_pemi_fallbacks_total Flows handed back to PEMI when their session went, by why."
    );
    let _ = writeln!(s, "# TYPE sidekick_pemi_fallbacks_total counter");
    for (reason, v) in [
        ("session_ended", c.pemi_fallbacks_ended),
        ("session_failed", c.pemi_fallbacks_failed),
    ] {
        let _ = writeln!(
            s,
            "sidekick_pemi_fallbacks_total{{reason=\"{reason}\"}} {v}"
        );
    }
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
        let text = c.render_prometheus();
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
                .contains("sidekick_drops_total{reason=\"flow_table_full\"} 18\n")
        );
        let mut p = Counters::default();
        p.pemi.giveup_budget = 4;
        p.pemi.retransmissions = 2;
        let text = p.render_prometheus();
        assert!(text.contains("sidekick_pemi_giveups_total{reason=\"budget_exhausted\"} 4\n"));
        assert!(text.contains("sidekick_pemi_retransmissions_total 2\n"));
        let mut q = p;
        q.merge(&p);
        assert_eq!(q.pemi.giveup_budget, 8);
    }
}
