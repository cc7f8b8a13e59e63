//! The core's session side: engines attached to a flow when its client's sidekick session is
//! established or reconfigured, detached when it ends, and the session layer's events (resets,
//! eACKs) handed to them.

use crate::Time;

use super::{
    Assistance, FlowValue, ProxyCore, SessionAssist, SessionLayer, TimerKind, pemi_reservation,
    schedule,
};
use crate::engine::{Action, Outgoing};
use crate::flow::{FlowKey, FlowState};
use crate::packrat::{PackratEngine, PackratEngineConfig};
use crate::pemi::PemiEngine;
use crate::robin::RobinEngine;
use crate::session::{CloseReason, EngineConfig, SessionEvent};

/// PEMI's engine out of a flow's assistance: the engine of a PEMI flow, or a session's fallback.
fn take_pemi<Id>(a: &mut Assistance<Id>) -> Option<Box<PemiEngine>> {
    match a {
        Assistance::Pemi(_) => match std::mem::take(a) {
            Assistance::Pemi(p) => Some(p),
            _ => None,
        },
        Assistance::Session(s) => s.fallback.take(),
        Assistance::Unassisted => None,
    }
}

/// The smallest Packrat cache the budget shrinks a session's cache to before refusing Packrat.
pub const MIN_BUDGET_CACHE: usize = 16 * 1024;

impl<S: SessionLayer> ProxyCore<S> {
    /// Session `id` is established or reconfigured on `flow`: its engines replace whatever
    /// assisted the flow before (another session's, whose counters retire), within the memory
    /// budget. PEMI's engine of the flow, if any, is suspended and kept as the session's
    /// fallback (while the budget holds its reservation; otherwise it retires).
    fn attach(&mut self, now: Time, id: S::Id, flow: FlowKey, engines: EngineConfig, epoch: u32) {
        self.leave_group(id);
        if let Some(old) = self
            .table
            .get(&flow)
            .and_then(|e| e.value.assistance.session())
            && old != id
        {
            // Another session takes the flow over: the old one's fallback passes to it.
            self.detach(old, None);
        }
        // The flow's engines are replaced: their reservation is given back first (and taken
        // back if the attach does not happen).
        let old_reserved = self
            .table
            .get(&flow)
            .map_or(0, |e| e.value.reserved as usize);
        self.budget.release(old_reserved);
        let robin_need = engines.robin.map_or(0, |c| {
            std::mem::size_of::<RobinEngine>() + c.threshold * c.width.bytes()
        });
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
        // PEMI §4: the flow's PEMI engine waits beside the session, to take the flow back.
        let had_pemi = self
            .table
            .get(&flow)
            .is_some_and(|e| match &e.value.assistance {
                Assistance::Pemi(_) => true,
                Assistance::Session(s) => s.fallback.is_some(),
                Assistance::Unassisted => false,
            });
        let pemi_need = match self.pemi {
            Some(c) if had_pemi && self.budget.try_reserve(pemi_reservation(&c)) => {
                pemi_reservation(&c)
            }
            _ => 0,
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
        let reserved = (robin_need + packrat_need + pemi_need) as u32;
        let assistance = Assistance::Session(Box::new(SessionAssist {
            id,
            robin,
            packrat,
            fallback: None,
        }));
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
                // A flow opting into Robin/Packrat suspends PEMI; a reconfigured session's old
                // engines go (their counters are kept) and its fallback stays.
                if let Some(mut old) = old {
                    let fallback = take_pemi(&mut old);
                    self.retired.add(&old);
                    if let Some(mut p) = fallback {
                        if pemi_need > 0
                            && let Some(e) = self.table.get_mut(&flow)
                            && let Assistance::Session(s) = &mut e.value.assistance
                        {
                            p.suspend();
                            s.fallback = Some(p);
                        } else {
                            self.retired.pemi.add(&p.stats);
                        }
                    }
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
    fn reserve_packrat(
        &mut self,
        mut cfg: PackratEngineConfig,
    ) -> (Option<PackratEngineConfig>, usize) {
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

    /// Session `id` ended or failed: its counters retire and its reservation is given back. Its
    /// flow goes to PEMI when the session kept PEMI's engine as its fallback (and PEMI is still
    /// on), else back to unassisted.
    /// `reason` is `None` when another session takes the flow over (not counted as a fallback).
    pub(super) fn detach(&mut self, id: S::Id, reason: Option<CloseReason>) {
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
        let Some((mut old, reserved)) = old else {
            return;
        };
        let fallback = take_pemi(&mut old);
        self.retired.add(&old);
        let keep = match (&fallback, self.pemi) {
            (Some(_), Some(c)) => pemi_reservation(&c).min(reserved as usize),
            _ => 0,
        };
        self.budget.release(reserved as usize - keep);
        let Some(p) = fallback else {
            return;
        };
        if self.pemi.is_none() {
            self.retired.pemi.add(&p.stats);
            return;
        }
        if let Some(e) = self.table.get_mut(&flow) {
            e.value.assistance = Assistance::Pemi(p);
            e.value.reserved = keep as u32;
            schedule(&mut self.deadlines, flow, &mut e.value);
            match reason {
                Some(CloseReason::Ended) => self.counters.pemi_fallbacks_ended += 1,
                Some(CloseReason::Failed) => self.counters.pemi_fallbacks_failed += 1,
                None => {}
            }
        } else {
            self.budget.release(keep);
            self.retired.pemi.add(&p.stats);
        }
    }

    /// Carry out what the session layer reports.
    pub(super) fn on_event(&mut self, now: Time, ev: SessionEvent<S::Id>) {
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
            SessionEvent::Reset { id, epoch } => self.restart_epoch(now, id, epoch),
            SessionEvent::Eack {
                id,
                epoch: _,
                data,
                open_gaps,
                number,
            } => {
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
                    // The client holds gaps this eACK came after, and the proxy resent nothing
                    // for them: they are not its to fill (skipped numbers, losses before it).
                    if open_gaps > 0 && p.last_eack_repairable() == Some(0) {
                        self.engine_out.push(Action::Message(Outgoing::EackOutcome {
                            resent: 0,
                            eack_number: number,
                        }));
                        self.counters.eack_outcomes += 1;
                    }
                }
                self.dispatch(now, id);
            }
            SessionEvent::Closed { id, reason } => {
                self.detach(id, Some(reason));
                self.counters.sessions_ended += 1;
            }
        }
    }

    /// Session `id` is in epoch `epoch` now (a Reset either way): every engine of the session
    /// starts over, Robin's quACK cadence included (Sidekick (NSDI '24) §4.2 "Resets").
    pub(super) fn restart_epoch(&mut self, now: Time, id: S::Id, epoch: u32) {
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
        if let Some(flow) = self.by_session.get(&id).copied()
            && let Some(e) = self.table.get_mut(&flow)
        {
            schedule(&mut self.deadlines, flow, &mut e.value);
        }
    }

    /// The capture dropped frames (the kernel's count for this worker's sockets). Robin's quACKs
    /// would report those frames as losses the sender never suffered: a spurious resend and a
    /// congestion event each (one Robin #3 lab trial took 71 such "losses" and fell to 3.8 of
    /// 10 Mbit/s). Which frames were missed is unknown, so every session with Robin starts a new
    /// epoch (a Reset, Sidekick (NSDI '24) §4.2) and its sender re-synchronises on the next quACK
    /// instead of judging the gap. Call after the frames of a turn and before
    /// [`ProxyCore::handle_timeout`] emits quACKs. O(sessions), only when drops occurred.
    pub fn on_capture_drops(&mut self, now: Time) {
        let sessions: Vec<S::Id> = self.by_session.keys().copied().collect();
        for id in sessions {
            if self.engines_of(id).is_none_or(|s| s.robin.is_none()) {
                continue;
            }
            match self.sessions.send(now, id, Outgoing::Reset) {
                Ok(Some(epoch)) => {
                    self.counters.resets_sent += 1;
                    self.counters.capture_resets += 1;
                    self.restart_epoch(now, id, epoch);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::trace!(error = %e, "reset after capture drops refused");
                    self.counters.messages_refused += 1;
                }
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
