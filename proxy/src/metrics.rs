//! Counters of the proxy and their Prometheus text exposition (format 0.0.4).
//!
//! The core keeps plain `u64` counters (no atomics on the hot path); the I/O loop publishes
//! [`Counters`] snapshots to the metrics server periodically.

use std::fmt::Write as _;

use crate::flow::FlowCounters;
use crate::packrat::PackratCounters;
use crate::pemi::PemiStats;
use crate::robin::RobinCounters;
use crate::session::SessionStats;

/// All counters and gauges of one core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames seen.
    pub frames: u64,
    /// UDP datagrams (super-frames count once).
    pub udp_packets: u64,
    /// Frames that are not IP.
    pub not_ip: u64,
    /// IP packets that are not UDP.
    pub not_udp: u64,
    /// IP fragments (not classified).
    pub fragments: u64,
    /// Truncated or malformed frames.
    pub malformed_frames: u64,
    /// Frames whose UDP checksum was filled in before caching (`TP_STATUS_CSUMNOTREADY`).
    pub checksums_filled: u64,
    /// GSO/GRO super-frames split into segments.
    pub gso_superframes: u64,
    /// Discovery requests seen.
    pub discovery_seen: u64,
    /// Discovery replies injected.
    pub discovery_replied: u64,
    /// Discovery requests refused (rate limit, version, caps).
    pub discovery_refused: u64,
    /// Datagrams received on the sidekick socket.
    pub sidekick_in: u64,
    /// Sidekick datagrams dropped (malformed, forged, replayed, unknown session).
    pub sidekick_dropped: u64,
    /// eACKs received.
    pub eacks_in: u64,
    /// quACKs sent.
    pub quacks_sent: u64,
    /// Resets sent by the proxy.
    pub resets_sent: u64,
    /// Engine messages refused by the session (quota, amplification limit).
    pub messages_refused: u64,
    /// Frames injected (retransmissions and discovery replies).
    pub injected: u64,
    /// Sessions attached to flows.
    pub sessions_started: u64,
    /// Sessions refused by the flow table (caps).
    pub sessions_refused: u64,
    /// Sessions ended.
    pub sessions_ended: u64,
    /// Flows handed back to PEMI because their session ended (client Close).
    pub pemi_fallbacks_ended: u64,
    /// Flows handed back to PEMI because their session failed (expiry, eviction).
    pub pemi_fallbacks_failed: u64,
    /// Capture drops reported by the kernel (ring full).
    pub capture_drops: u64,
    /// Robin epochs restarted because the capture dropped frames (each a Reset to the client).
    pub capture_resets: u64,
    /// Frames whose kernel capture time was known (for the capture delay below).
    pub capture_delay_frames: u64,
    /// Sum of the capture delays (kernel capture → user-space processing), µs. In bridge mode
    /// this delay is added to every forwarded frame.
    pub capture_delay_us_sum: u64,
    /// Largest capture delay seen, µs.
    pub capture_delay_us_max: u64,
    /// Injection or send failures in the backend.
    pub send_errors: u64,
    /// Gauge: flows in the table.
    pub flows: u64,
    /// Gauge: flows with a session.
    pub assisted_flows: u64,
    /// Gauge: bytes in Packrat caches.
    pub cache_bytes: u64,
    /// Gauge: heap bytes held by engines.
    pub engine_memory_bytes: u64,
    /// Gauge: multicast groups with a shared Packrat cache (Packrat (CoNEXT '26) §6.1).
    pub multicast_groups: u64,
    /// Gauge: clients subscribed to multicast groups.
    pub multicast_members: u64,
    /// Gauge: bytes of the multicast clients' virtual caches.
    pub multicast_virtual_cache_bytes: u64,
    /// Multicast joins refused (group or client caps, or an unsupported link type).
    pub multicast_refused: u64,
    /// Multicast retransmissions skipped because the client's MAC address was not yet known.
    pub multicast_no_mac: u64,
    /// Frames the core could not queue for injection (the backend did not poll in time).
    pub inject_queue_dropped: u64,
    /// Gauge: bytes of the core's memory budget reserved by engines and group caches.
    pub memory_reserved_bytes: u64,
    /// Engines refused, or Packrat caches shrunk, because the memory budget was spent.
    pub memory_refused: u64,
    /// Gauge: entries in the core's deadline index (live and stale).
    pub timer_entries: u64,
    /// Deadlines that came due (timer work, live or stale).
    pub timers_fired: u64,
    /// Flow-table counters.
    pub flow_table: FlowCounters,
    /// Robin totals.
    pub robin: RobinCounters,
    /// Packrat totals.
    pub packrat: PackratCounters,
    /// Session layer counters.
    pub session: SessionStats,
    /// PEMI totals (transparent mode).
    pub pemi: PemiStats,
    /// Handshake rescue totals (`core::handshake_rescue`).
    pub handshake_rescue: crate::core::RescueStats,
}

impl Counters {
    /// Add another core's counters (multi-worker totals).
    pub fn merge(&mut self, o: &Counters) {
        macro_rules! add {
            ($($f:ident).+) => { $( self.$f += o.$f; )+ };
        }
        add!(frames);
        add!(udp_packets);
        add!(not_ip);
        add!(not_udp);
        add!(fragments);
        add!(malformed_frames);
        add!(checksums_filled);
        add!(gso_superframes);
        add!(discovery_seen);
        add!(discovery_replied);
        add!(discovery_refused);
        add!(sidekick_in);
        add!(sidekick_dropped);
        add!(eacks_in);
        add!(quacks_sent);
        add!(resets_sent);
        add!(messages_refused);
        add!(injected);
        add!(sessions_started);
        add!(sessions_refused);
        add!(sessions_ended);
        add!(pemi_fallbacks_ended);
        add!(pemi_fallbacks_failed);
        add!(capture_drops);
        add!(capture_resets);
        add!(capture_delay_frames);
        add!(capture_delay_us_sum);
        self.capture_delay_us_max = self.capture_delay_us_max.max(o.capture_delay_us_max);
        add!(send_errors);
        add!(flows);
        add!(assisted_flows);
        add!(cache_bytes);
        add!(engine_memory_bytes);
        add!(multicast_groups);
        add!(multicast_members);
        add!(multicast_virtual_cache_bytes);
        add!(multicast_refused);
        add!(multicast_no_mac);
        add!(inject_queue_dropped);
        add!(timer_entries);
        add!(memory_reserved_bytes);
        add!(memory_refused);
        add!(timers_fired);
        self.flow_table.add(&o.flow_table);
        self.robin.add(&o.robin);
        self.packrat.add(&o.packrat);
        self.session.add(&o.session);
        self.pemi.add(&o.pemi);
        self.handshake_rescue.add(&o.handshake_rescue);
    }

    /// Render in the Prometheus text format.
    pub fn render_prometheus(&self) -> String {
        let mut s = String::with_capacity(4096);
        let mut m = |name: &str, kind: &str, help: &str, v: u64| {
            let _ = writeln!(s, "# HELP sidekick_{name} {help}");
            let _ = writeln!(s, "# TYPE sidekick_{name} {kind}");
            let _ = writeln!(s, "sidekick_{name} {v}");
        };
        m("frames_total", "counter", "Frames captured.", self.frames);
        m(
            "udp_packets_total",
            "counter",
            "UDP datagrams seen.",
            self.udp_packets,
        );
        m("flows", "gauge", "Flows in the flow table.", self.flows);
        m(
            "sessions",
            "gauge",
            "Flows with a sidekick session.",
            self.assisted_flows,
        );
        m(
            "discovery_seen_total",
            "counter",
            "Discovery requests seen.",
            self.discovery_seen,
        );
        m(
            "discovery_replied_total",
            "counter",
            "Discovery replies injected.",
            self.discovery_replied,
        );
        m(
            "quacks_sent_total",
            "counter",
            "quACKs sent.",
            self.quacks_sent,
        );
        m(
            "quacks_on_gap_total",
            "counter",
            "quACKs sent early: a packet followed a silence (quack_on_gap_percent).",
            self.robin.gap_quacks,
        );
        m(
            "eacks_received_total",
            "counter",
            "eACKs received.",
            self.eacks_in,
        );
        m(
            "eacks_decoded_total",
            "counter",
            "eACKs decoded.",
            self.packrat.eacks_decoded,
        );
        m(
            "eacks_failed_total",
            "counter",
            "eACKs that did not decode (Reset sent).",
            self.packrat.eacks_failed,
        );
        m(
            "eacks_stale_total",
            "counter",
            "eACKs of an old epoch.",
            self.packrat.eacks_stale,
        );
        m(
            "retransmissions_total",
            "counter",
            "Cached packets retransmitted.",
            self.packrat.retransmissions,
        );
        m(
            "retransmitted_bytes_total",
            "counter",
            "Bytes of cached packets retransmitted.",
            self.packrat.retransmitted_bytes,
        );
        m(
            "packrat_forwarded_bytes_total",
            "counter",
            "Bytes forwarded to Packrat clients (the retransmission budget's base).",
            self.packrat.forwarded_bytes,
        );
        m(
            "retransmissions_refused_budget_total",
            "counter",
            "Retransmissions refused: over the budget (retx_budget_percent of forwarded bytes).",
            self.packrat.retx_refused_budget,
        );
        m(
            "cache_bytes",
            "gauge",
            "Bytes in Packrat caches.",
            self.cache_bytes,
        );
        m(
            "cache_evicted_acked_total",
            "counter",
            "Cached packets evicted on acknowledgement.",
            self.packrat.evicted_acked,
        );
        m(
            "cache_evicted_optimistic_total",
            "counter",
            "Cached packets evicted because the cache was full.",
            self.packrat.evicted_optimistic,
        );
        m(
            "eack_id_collisions_total",
            "counter",
            "Identifier collisions: packets forwarded with an identifier an eACK showed missing, \
             and cached packets beyond the first sharing one.",
            self.packrat.id_collisions,
        );
        m(
            "missing_uncached_total",
            "counter",
            "Missing packets no longer cached.",
            self.packrat.missing_uncached,
        );
        m(
            "resets_sent_total",
            "counter",
            "Resets sent by the proxy.",
            self.resets_sent,
        );
        m(
            "injected_total",
            "counter",
            "Frames injected.",
            self.injected,
        );
        m(
            "engine_memory_bytes",
            "gauge",
            "Heap bytes held by engines.",
            self.engine_memory_bytes,
        );
        m(
            "multicast_groups",
            "gauge",
            "Multicast groups with a shared Packrat cache.",
            self.multicast_groups,
        );
        m(
            "multicast_members",
            "gauge",
            "Clients subscribed to multicast groups.",
            self.multicast_members,
        );
        m(
            "multicast_virtual_cache_bytes",
            "gauge",
            "Bytes of multicast clients' virtual caches.",
            self.multicast_virtual_cache_bytes,
        );
        m(
            "multicast_refused_total",
            "counter",
            "Multicast joins refused (caps).",
            self.multicast_refused,
        );
        m(
            "multicast_no_mac_total",
            "counter",
            "Multicast retransmissions skipped: client MAC unknown.",
            self.multicast_no_mac,
        );
        m(
            "inject_queue_dropped_total",
            "counter",
            "Frames not queued for injection: the backend did not poll in time.",
            self.inject_queue_dropped,
        );
        m(
            "memory_reserved_bytes",
            "gauge",
            "Bytes of the memory budget reserved by engines and multicast caches.",
            self.memory_reserved_bytes,
        );
        m(
            "memory_refused_total",
            "counter",
            "Engines refused or Packrat caches shrunk: the memory budget was spent.",
            self.memory_refused,
        );
        m(
            "timer_entries",
            "gauge",
            "Entries in the core's deadline index.",
            self.timer_entries,
        );
        m(
            "timers_fired_total",
            "counter",
            "Deadlines that came due in the core.",
            self.timers_fired,
        );
        m(
            "checksums_filled_total",
            "counter",
            "Partial checksums completed before caching.",
            self.checksums_filled,
        );
        m(
            "gso_superframes_total",
            "counter",
            "GSO/GRO super-frames split.",
            self.gso_superframes,
        );
        m(
            "capture_drops_total",
            "counter",
            "Frames dropped by the kernel capture ring.",
            self.capture_drops,
        );
        m(
            "capture_resets_total",
            "counter",
            "Robin epochs restarted because the capture dropped frames.",
            self.capture_resets,
        );
        m(
            "capture_delay_frames_total",
            "counter",
            "Frames whose kernel capture time was known.",
            self.capture_delay_frames,
        );
        m(
            "capture_delay_us_sum",
            "counter",
            "Sum of kernel-capture-to-processing delays, microseconds.",
            self.capture_delay_us_sum,
        );
        m(
            "capture_delay_us_max",
            "gauge",
            "Largest kernel-capture-to-processing delay, microseconds.",
            self.capture_delay_us_max,
        );
        let _ = writeln!(s, "# HELP sidekick_drops_total Items dropped, by reason.");
        let _ = writeln!(s, "# TYPE sidekick_drops_total counter");
        let drops: [(&str, u64); 15] = [
            ("not_ip", self.not_ip),
            ("not_udp", self.not_udp),
            ("fragment", self.fragments),
            ("malformed_frame", self.malformed_frames),
            ("sidekick_malformed", self.sidekick_dropped),
            ("discovery_refused", self.discovery_refused),
            (
                "discovery_rate_limited",
                self.session.discovery_rate_limited,
            ),
            ("flow_table_full", self.flow_table.refused_full),
            (
                "session_cap",
                self.flow_table.refused_assisted_cap + self.sessions_refused,
            ),
            ("flow_displaced", self.flow_table.displaced),
            ("quota", self.messages_refused),
            ("outbox_full", self.session.outbox_dropped),
            (
                "id_unreadable",
                self.robin.id_errors + self.packrat.not_cached,
            ),
            ("send_error", self.send_errors),
            ("flow_expired", self.flow_table.expired),
        ];
        for (reason, v) in drops {
            let _ = writeln!(s, "sidekick_drops_total{{reason=\"{reason}\"}} {v}");
        }
        self.render_pemi(&mut s);
        self.render_handshake_rescue(&mut s);
        s
    }

    /// Handshake rescue counters (`core::handshake_rescue`).
    fn render_handshake_rescue(&self, s: &mut String) {
        let h = &self.handshake_rescue;
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
    fn render_pemi(&self, s: &mut String) {
        let p = &self.pemi;
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
            ("session_ended", self.pemi_fallbacks_ended),
            ("session_failed", self.pemi_fallbacks_failed),
        ] {
            let _ = writeln!(
                s,
                "sidekick_pemi_fallbacks_total{{reason=\"{reason}\"}} {v}"
            );
        }
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
