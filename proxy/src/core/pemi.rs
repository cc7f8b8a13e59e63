//! PEMI's part of the core: ICMP calibration replies, the engines' side actions and timers
//! (seed 000; docs/proxy.md "PEMI").

use std::time::Instant;

use super::{ProxyCore, SessionLayer};
use crate::engine::{Action, FlowEngine};

impl<S: SessionLayer> ProxyCore<S> {
    /// An ICMP frame while PEMI flows exist: an echo reply to one of their probes is an RTT
    /// sample of the receiver side (the frame itself is forwarded like any other).
    pub(super) fn on_icmp(&mut self, now: Instant, frame: &[u8]) {
        let Some(r) = crate::pemi::probe::echo_reply(frame, self.cfg.link) else {
            return;
        };
        let Some(key) = self.pemi_probe_flows.get(&r.id).copied() else {
            return;
        };
        // The reply comes from the probed receiver: one of the flow's two addresses.
        if ![key.client.ip(), key.server.ip()].contains(&std::net::IpAddr::V4(r.src)) {
            return;
        }
        if let Some(p) = self.table.get_mut(&key).and_then(|e| e.value.pemi.as_mut()) {
            p.on_probe_reply(now, r.seq);
        }
    }

    /// Hand PEMI's side actions to the backend; a delay becomes the frame's verdict.
    pub(super) fn pemi_actions(&mut self, out: &mut Vec<Action>) -> Action {
        let mut verdict = Action::Forward;
        for a in self.engine_out.drain(..) {
            match a {
                Action::Inject { dir, frame } => {
                    self.counters.injected += 1;
                    out.push(Action::Inject { dir, frame });
                }
                Action::Delay { until } => verdict = Action::Delay { until },
                _ => {}
            }
        }
        verdict
    }

    /// Run due PEMI timers (finishing overdue flowlets, enforcement periods) over the flows that
    /// have a PEMI engine.
    pub(super) fn pemi_timeouts(&mut self, now: Instant, out: &mut Vec<Action>) {
        if self.next_pemi_timeout.is_none_or(|t| t > now) {
            return;
        }
        let mut next: Option<Instant> = None;
        let mut acts = std::mem::take(&mut self.engine_out);
        acts.clear();
        for (_, e) in self.table.iter_mut() {
            if e.value.session.is_some() {
                continue;
            }
            if let Some(p) = e.value.pemi.as_mut() {
                if p.next_timeout().is_some_and(|t| t <= now) {
                    p.on_timeout(now, &mut acts);
                }
                if let Some(t) = p.next_timeout() {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
        }
        for a in acts.drain(..) {
            if let Action::Inject { dir, frame } = a {
                self.counters.injected += 1;
                out.push(Action::Inject { dir, frame });
            }
        }
        self.engine_out = acts;
        self.next_pemi_timeout = next;
    }
}
