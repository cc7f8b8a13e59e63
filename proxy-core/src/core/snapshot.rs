//! The core's counters and gauges at a moment: its own counters plus every live and retired
//! engine's (walked, so called periodically by the daemon, never per packet).

use super::{ProxyCore, SessionLayer};
use crate::counters::Counters;

impl<S: SessionLayer> ProxyCore<S> {
    /// A snapshot of all counters and gauges (sums live engines and retired ones).
    pub fn snapshot(&self) -> Counters {
        let mut c = self.counters;
        let mut robin = self.retired.robin;
        let mut packrat = self.retired.packrat;
        let mut cache_bytes = 0u64;
        let mut memory = (self.deadlines.memory() + self.injects.memory()) as u64;
        let mut pemi = self.retired.pemi;
        for flow in self.by_session.values() {
            if let Some(e) = self.table.get(flow)
                && let Some(s) = e.value.assistance.session_engines()
            {
                if let Some(r) = &s.robin {
                    robin.add(&r.counters);
                }
                if let Some(p) = &s.packrat {
                    packrat.add(&p.counters);
                    cache_bytes += p.cache_bytes() as u64;
                }
                if let Some(f) = &s.fallback {
                    pemi.add(&f.stats);
                }
                memory += e.value.assistance.memory() as u64;
            }
        }
        // PEMI runs on unassisted flows: sum every live engine (a walk of the table; snapshots
        // are periodic, not per packet).
        if self.pemi.is_some() {
            for (_, e) in self.table.iter() {
                if let Some(p) = e.value.assistance.pemi() {
                    pemi.add(&p.stats);
                    memory += e.value.assistance.memory() as u64;
                }
            }
        }
        packrat.add(&self.retired.multicast);
        for g in self.groups.values() {
            packrat.add(&g.counters());
            cache_bytes += g.cache_bytes() as u64;
            memory += g.memory_bytes() as u64;
            c.multicast_members += g.members() as u64;
            c.multicast_virtual_cache_bytes += g.virtual_cache_bytes() as u64;
            c.multicast_no_mac += g.no_mac();
        }
        if let Some(r) = &self.rescue {
            c.handshake_rescue = r.stats;
            memory += r.charged_bytes() as u64;
        }
        c.multicast_groups = self.groups.len() as u64;
        c.memory_reserved_bytes = self.budget.reserved() as u64;
        c.memory_refused = self.budget.refused;
        c.inject_queue_dropped = self.injects.dropped;
        c.timer_entries = self.deadlines.len() as u64;
        c.timers_fired = self.deadlines.popped;
        c.pemi = pemi;
        c.robin = robin;
        c.packrat = packrat;
        c.cache_bytes = cache_bytes;
        c.engine_memory_bytes = memory;
        c.flows = self.table.len() as u64;
        c.assisted_flows = self.table.assisted_len() as u64;
        c.flow_table = self.table.counters;
        c.session = self.sessions.stats();
        c
    }
}
