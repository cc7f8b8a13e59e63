//! The counters and gauges of one core: plain `u64`s (no atomics on the hot path). The daemon
//! publishes snapshots to its metrics endpoint and renders them there.

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
    /// eACK outcomes sent: eACKs with open gaps the proxy could repair none of.
    pub eack_outcomes: u64,
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
        add!(eack_outcomes);
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
}
