//! Packrat's multicast part of the core: shared caches per multicast stream, clients joining and
//! leaving them, and the Ethernet addresses retransmissions to a member go to (Packrat (CoNEXT '26) §6.1).

use std::net::SocketAddr;

use super::{FrameMeta, ProxyCore, SessionLayer, checksummed};
use crate::flow::FlowKey;
use crate::packet::{LinkType, UdpPacket};
use crate::packrat::PackratEngineConfig;
use crate::packrat::multicast::MulticastCache;

impl<S: SessionLayer> ProxyCore<S> {
    /// A frame of a multicast stream some clients are subscribed to: one shared copy per group
    /// (Packrat (CoNEXT '26) §6.1). A multicast stream is not segmented (GSO super-frames are left alone).
    /// Kept out of line so that the unicast hot path stays small.
    #[inline(never)]
    pub(super) fn on_multicast_frame(
        &mut self,
        key: FlowKey,
        frame: &[u8],
        udp: &UdpPacket,
        meta: FrameMeta,
    ) {
        if !udp.dst.ip().is_multicast() || meta.gso_size.is_some() {
            return;
        }
        let Some(g) = self.groups.get_mut(&key) else {
            return;
        };
        let f = checksummed(
            &mut self.scratch,
            &mut self.counters.checksums_filled,
            frame,
            udp,
            meta.csum_not_ready,
        );
        g.cache_packet(udp.payload(frame), f);
    }

    /// A multicast client's Ethernet address (the source of its frames): where its
    /// retransmissions go.
    #[inline(never)]
    pub(super) fn learn_member_mac(&mut self, sid: S::Id, mac: [u8; 6]) {
        if let Some(gk) = self.membership.get(&sid)
            && let Some(g) = self.groups.get_mut(gk)
        {
            g.set_mac(sid, mac);
        }
    }

    /// Subscribes session `id` (whose base flow is `flow`) to the shared cache of the multicast
    /// stream `group` from the same server (Packrat (CoNEXT '26) §6.1), creating it within the caps.
    pub(super) fn join_group(
        &mut self,
        id: S::Id,
        flow: FlowKey,
        group: SocketAddr,
        mut cfg: PackratEngineConfig,
        epoch: u32,
    ) {
        if self.cfg.link != LinkType::Ethernet {
            // Retransmissions to one client are addressed by its MAC.
            self.counters.multicast_refused += 1;
            return;
        }
        let key = FlowKey {
            client: group,
            server: flow.server,
        };
        if !self.groups.contains_key(&key) && self.groups.len() >= self.cfg.max_multicast_groups {
            self.counters.multicast_refused += 1;
            return;
        }
        cfg.cache_bytes = cfg.cache_bytes.min(self.cfg.max_flow_memory);
        let max_members = self.cfg.max_group_members;
        if !self.groups.contains_key(&key)
            && !self
                .budget
                .try_reserve(MulticastCache::<S::Id>::memory_cap(&cfg, max_members))
        {
            self.counters.multicast_refused += 1;
            return;
        }
        let g = self
            .groups
            .entry(key)
            .or_insert_with(|| MulticastCache::new(cfg, max_members));
        if g.config().width != cfg.width {
            // One width per group: every member's eACK encodes the shared cache's identifiers.
            tracing::info!(
                group = %group,
                width = cfg.width.bytes(),
                group_width = g.config().width.bytes(),
                "multicast join refused: another identifier width than the group's"
            );
            self.counters.multicast_refused += 1;
            return;
        }
        match g.join(id, epoch) {
            Ok(()) => {
                self.membership.insert(id, key);
            }
            Err(e) => {
                tracing::info!(error = %e, "multicast join refused");
                self.counters.multicast_refused += 1;
            }
        }
    }

    /// Unsubscribes session `id` from its multicast group (the group goes with its last client).
    pub(super) fn leave_group(&mut self, id: S::Id) {
        let Some(key) = self.membership.remove(&id) else {
            return;
        };
        if let Some(g) = self.groups.get_mut(&key) {
            if let Some(c) = g.leave(id) {
                self.retired.multicast.add(&c);
            }
            if g.members() == 0 {
                let shared = g.counters();
                // The shared cache's own counts (cached, evicted) retire with the group.
                self.retired.multicast.cached += shared.cached;
                self.retired.multicast.not_cached += shared.not_cached;
                self.retired.multicast.evicted_optimistic += shared.evicted_optimistic;
                self.counters.multicast_no_mac += g.no_mac();
                self.budget.release(MulticastCache::<S::Id>::memory_cap(
                    g.config(),
                    self.cfg.max_group_members,
                ));
                self.groups.remove(&key);
            }
        }
    }
}
