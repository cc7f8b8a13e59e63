//! The core's session side: engines attached to a flow when its client's sidekick session is
//! established or reconfigured, detached when it ends, and the session layer's events (resets,
//! eACKs) handed to them.

use std::time::Instant;

use super::{Assistance, FlowValue, ProxyCore, SessionAssist, SessionLayer, TimerKind, schedule};
use crate::flow::{FlowKey, FlowState};
use crate::packrat::{PackratConfig, PackratEngine};
use crate::robin::RobinEngine;
use crate::session::{EngineConfig, SessionEvent};

/// The smallest Packrat cache the budget shrinks a session's cache to before refusing Packrat.
pub const MIN_BUDGET_CACHE: usize = 16 * 1024;

impl<S: SessionLayer> ProxyCore<S> {
    /// Session `id` is established or reconfigured on `flow`: its engines replace whatever
    /// assisted the flow before (another session's, or PEMI's, whose counters retire), within the
    /// memory budget.
    fn attach(
        &mut self,
        now: Instant,
        id: S::Id,
        flow: FlowKey,
        engines: EngineConfig,
        epoch: u32,
    ) {
        self.leave_group(id);
        if let Some(old) = self
            .table
            .get(&flow)
            .and_then(|e| e.value.assistance.session())
            && old != id
        {
            self.detach(old);
        }
        // The flow's engines are replaced: their reservation is given back first (and taken
        // back if the attach does not happen).
        let old_reserved = self
            .table
            .get(&flow)
            .map_or(0, |e| e.value.reserved as usize);
        self.budget.release(old_reserved);
        let robin_need = engines
            .robin
            .map_or(0, |c| std::mem::size_of::<RobinEngine>() + c.threshold * 4);
        if !self.budget.try_reserve(robin_need) {
            self.budget.restore(old_reserved);
            self.counters.sessions_refused += 1;
            return;
        }
        let multicast = engines.packrat.zip(engines.multicast_group);
        if let Some((cfg, group)) = multicast {
            self.join_group(id, flow, group, cfg, epoch);
        }
        let (packrat_cfg, packrat_need) = match engines.packrat.filter(|_| multicast.is_none()) {
            Some(mut c) => {
                c.cache_bytes = c.cache_bytes.min(self.cfg.max_flow_memory);
                self.reserve_packrat(c)
            }
            None => (None, 0),
        };
        let robin = engines.robin.map(|c| RobinEngine::new(c, now));
        let packrat = packrat_cfg.map(|c| {
            let mut p = PackratEngine::new(c);
            p.reset(epoch);
            p
        });
        let client_mac = self.table.get(&flow).and_then(|e| e.value.client_mac);
        if let Some(mac) = client_mac {
            self.learn_member_mac(id, mac);
        }
        let reserved = (robin_need + packrat_need) as u32;
        let assistance = Assistance::Session(Box::new(SessionAssist { id, robin, packrat }));
        let attached = if let Some(e) = self.table.get(&flow) {
            if !e.value.assisted() && self.table.assisted_len() >= self.cfg.flows.max_assisted {
                self.table.counters.refused_assisted_cap += 1;
                false
            } else {
                let old = self.table.modify(&flow, |e| {
                    e.last_seen = now;
                    e.value.timer = None;
                    e.value.reserved = reserved;
                    std::mem::replace(&mut e.value.assistance, assistance)
                });
                // A flow opting into Robin/Packrat leaves PEMI; a reconfigured session's old
                // engines go: their counters are kept.
                if let Some(old) = old {
                    self.retired.add(&old);
                }
                true
            }
        } else {
            let generation = self.generation.wrapping_add(1);
            let mut value = FlowValue::new(generation);
            value.assistance = assistance;
            value.reserved = reserved;
            match self.table.set(flow, now, value) {
                Ok(()) => {
                    self.generation = generation;
                    self.deadlines.push(
                        now + self.cfg.flows.idle_timeout,
                        flow,
                        generation,
                        TimerKind::Idle,
                    );
                    true
                }
                Err(e) => {
                    tracing::info!(error = %e, "session refused by the flow table");
                    false
                }
            }
        };
        if attached {
            if let Some(e) = self.table.get_mut(&flow) {
                schedule(&mut self.deadlines, flow, &mut e.value);
            }
            self.by_session.insert(id, flow);
            self.counters.sessions_started += 1;
        } else {
            self.budget.release(reserved as usize);
            self.budget.restore(old_reserved);
            self.leave_group(id);
            self.counters.sessions_refused += 1;
        }
    }

    /// Reserve a Packrat engine with `cfg`, halving its cache until it fits the budget (down to
    /// [`MIN_BUDGET_CACHE`]); `None` when even that does not fit.
    fn reserve_packrat(&mut self, mut cfg: PackratConfig) -> (Option<PackratConfig>, usize) {
        let mut shrunk = false;
        loop {
            let need = PackratEngine::memory_cap(&cfg);
            if self.budget.fits(need) {
                self.budget.restore(need);
                if shrunk {
                    self.budget.refused += 1;
                }
                return (Some(cfg), need);
            }
            if cfg.cache_bytes <= MIN_BUDGET_CACHE {
                self.budget.refused += 1;
                return (None, 0);
            }
            cfg.cache_bytes = (cfg.cache_bytes / 2).max(MIN_BUDGET_CACHE);
            shrunk = true;
        }
    }

    /// Session `id` ended: its counters retire, its reservation is given back and its flow goes
    /// back to unassisted.
    pub(super) fn detach(&mut self, id: S::Id) {
        self.leave_group(id);
        let Some(flow) = self.by_session.remove(&id) else {
            return;
        };
        let old = self.table.modify(&flow, |e| {
            if e.value.assistance.session() == Some(id) {
                e.value.timer = None;
                let reserved = std::mem::take(&mut e.value.reserved);
                (std::mem::take(&mut e.value.assistance), reserved)
            } else {
                (Assistance::Unassisted, 0)
            }
        });
        if let Some((old, reserved)) = old {
            self.budget.release(reserved as usize);
            self.retired.add(&old);
        }
    }

    /// Carry out what the session layer reports.
    pub(super) fn on_event(&mut self, now: Instant, ev: SessionEvent<S::Id>) {
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
                if let Some(s) = self.engines_of(id) {
                    if let Some(r) = s.robin.as_mut() {
                        r.reset(now);
                    }
                    if let Some(p) = s.packrat.as_mut() {
                        p.reset(epoch);
                    }
                }
                if let Some(gk) = self.membership.get(&id)
                    && let Some(g) = self.groups.get_mut(gk)
                {
                    g.reset(id, epoch);
                }
                // Robin's quACK cadence restarts with the epoch.
                if let Some(flow) = self.by_session.get(&id).copied()
                    && let Some(e) = self.table.get_mut(&flow)
                {
                    schedule(&mut self.deadlines, flow, &mut e.value);
                }
            }
            SessionEvent::Eack { id, epoch: _, data } => {
                self.counters.eacks_in += 1;
                let Some(flow) = self.by_session.get(&id).copied() else {
                    return;
                };
                self.engine_out.clear();
                if let Some(gk) = self.membership.get(&id)
                    && let Some(g) = self.groups.get_mut(gk)
                {
                    g.on_eack(id, &data, &mut self.engine_out);
                } else if let Some(e) = self.table.get_mut(&flow)
                    && let Assistance::Session(s) = &mut e.value.assistance
                    && let Some(p) = s.packrat.as_mut()
                {
                    p.on_eack(&data, &mut self.engine_out);
                }
                self.dispatch(now, id, flow);
            }
            SessionEvent::Closed { id } => {
                self.detach(id);
                self.counters.sessions_ended += 1;
            }
        }
    }

    fn engines_of(&mut self, id: S::Id) -> Option<&mut SessionAssist<S::Id>> {
        let flow = self.by_session.get(&id).copied()?;
        match &mut self.table.get_mut(&flow)?.value.assistance {
            Assistance::Session(s) if s.id == id => Some(s),
            _ => None,
        }
    }
}
