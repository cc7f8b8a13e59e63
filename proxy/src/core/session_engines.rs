//! The core's session side: engines attached to a flow when its client's sidekick session is
//! established or reconfigured, detached when it ends, and the session layer's events (resets,
//! eACKs) handed to them.

use std::time::Instant;

use super::{FlowValue, ProxyCore, SessionLayer, add_robin};
use crate::engine::Action;
use crate::flow::FlowKey;
use crate::packrat::PackratEngine;
use crate::robin::RobinEngine;
use crate::session::{EngineConfig, SessionEvent};

impl<S: SessionLayer> ProxyCore<S> {
    /// Session `id` is established or reconfigured on `flow`: its engines replace whatever
    /// assisted the flow before (another session's, or PEMI's).
    fn attach(
        &mut self,
        now: Instant,
        id: S::Id,
        flow: FlowKey,
        engines: EngineConfig,
        epoch: u32,
    ) {
        let robin = engines.robin.map(|c| RobinEngine::new(c, now));
        self.leave_group(id);
        let multicast = engines.packrat.zip(engines.multicast_group);
        if let Some((cfg, group)) = multicast {
            self.join_group(id, flow, group, cfg, epoch);
        }
        let packrat = engines
            .packrat
            .filter(|_| multicast.is_none())
            .map(|mut c| {
                c.cache_bytes = c.cache_bytes.min(self.cfg.max_flow_memory);
                let mut p = PackratEngine::new(c);
                p.reset(epoch);
                p
            });
        let client_mac = self.table.get(&flow).and_then(|e| e.value.client_mac);
        if let Some(mac) = client_mac {
            self.learn_member_mac(id, mac);
        }
        let value = FlowValue {
            session: Some(id),
            robin,
            packrat,
            pemi: None,
            client_mac,
        };
        if let Some(old) = self.table.get_mut(&flow).and_then(|e| e.value.session) {
            if old != id {
                self.detach(old);
            }
        }
        // A flow opting into Robin/Packrat leaves PEMI (its counters are kept).
        if let Some(p) = self.table.get(&flow).and_then(|e| e.value.pemi.as_ref()) {
            self.retired_pemi.add(&p.stats);
        }
        if let Some(t) = value.next_timeout() {
            self.next_engine_timeout = Some(self.next_engine_timeout.map_or(t, |n| n.min(t)));
        }
        match self.table.set(flow, now, value) {
            Ok(()) => {
                self.by_session.insert(id, flow);
                self.counters.sessions_started += 1;
            }
            Err(e) => {
                tracing::info!(error = %e, "session refused by the flow table");
                self.counters.sessions_refused += 1;
            }
        }
    }

    /// Session `id` ended: its counters retire and its flow goes back to unassisted.
    pub(super) fn detach(&mut self, id: S::Id) {
        self.leave_group(id);
        let Some(flow) = self.by_session.remove(&id) else {
            return;
        };
        if let Some(e) = self.table.get(&flow) {
            if let Some(r) = &e.value.robin {
                add_robin(&mut self.retired_robin, &r.counters);
            }
            if let Some(p) = &e.value.packrat {
                self.retired_packrat.add(&p.counters);
            }
        }
        if self.table.get(&flow).is_some() {
            let now = self.table.get(&flow).map(|e| e.last_seen);
            if let Some(now) = now {
                let _ = self.table.set(flow, now, FlowValue::unassisted());
            }
        }
    }

    /// Carry out what the session layer reports.
    pub(super) fn on_event(
        &mut self,
        now: Instant,
        ev: SessionEvent<S::Id>,
        out: &mut Vec<Action>,
    ) {
        match ev {
            SessionEvent::Nothing => {}
            SessionEvent::Established {
                id,
                flow,
                engines,
                epoch,
            } => self.attach(now, id, flow, engines, epoch),
            SessionEvent::Reconfigured { id, engines, epoch } => {
                if let Some(flow) = self.by_session.get(&id).copied() {
                    self.attach(now, id, flow, engines, epoch);
                }
            }
            SessionEvent::Reset { id, epoch } => {
                if let Some(e) = self.entry_of(id) {
                    if let Some(r) = e.value.robin.as_mut() {
                        r.reset(now);
                    }
                    if let Some(p) = e.value.packrat.as_mut() {
                        p.reset(epoch);
                    }
                }
                if let Some(gk) = self.membership.get(&id)
                    && let Some(g) = self.groups.get_mut(gk)
                {
                    g.reset(id, epoch);
                }
            }
            SessionEvent::Eack { id, epoch: _, data } => {
                self.counters.eacks_in += 1;
                let Some(flow) = self.by_session.get(&id).copied() else {
                    return;
                };
                let mut acts = std::mem::take(&mut self.engine_out);
                acts.clear();
                if let Some(gk) = self.membership.get(&id)
                    && let Some(g) = self.groups.get_mut(gk)
                {
                    g.on_eack(id, &data, &mut acts);
                } else if let Some(p) = self
                    .table
                    .get_mut(&flow)
                    .and_then(|e| e.value.packrat.as_mut())
                {
                    p.on_eack(&data, &mut acts);
                }
                self.dispatch(now, id, flow, &mut acts, out);
                self.engine_out = acts;
            }
            SessionEvent::Closed { id } => {
                self.detach(id);
                self.counters.sessions_ended += 1;
            }
        }
    }

    fn entry_of(&mut self, id: S::Id) -> Option<&mut crate::flow::FlowEntry<FlowValue<S::Id>>> {
        let flow = self.by_session.get(&id).copied()?;
        self.table.get_mut(&flow)
    }
}
