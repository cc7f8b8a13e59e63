//! PEMI's part of the core: ICMP calibration replies and the engines' side actions (PEMI §4.4,
//! §4.5; docs/proxy.md "PEMI"). PEMI's timers run from the core's deadline index.

use std::collections::HashMap;

use crate::Time;

use super::{Assistance, ProxyCore, SessionLayer, Verdict};
use crate::engine::Action;
use crate::flow::FlowKey;

/// The core's PEMI ICMP probe identifiers (calibration, `pemi::probe`): the next to give out,
/// stepping by the worker count so that workers never share one (`CoreConfig::probe_ids`), and
/// the flow each names. 16-bit and reused as they wrap: at most 65 536 entries.
#[derive(Debug)]
pub(super) struct ProbeIds {
    next: u16,
    step: u16,
    flows: HashMap<u16, FlowKey>,
}

impl ProbeIds {
    /// Identifiers `first`, `first + step`, … (`step` at least 1).
    pub(super) fn new((first, step): (u16, u16)) -> Self {
        Self {
            next: first,
            step: step.max(1),
            flows: HashMap::new(),
        }
    }

    /// The next identifier, now naming `key`'s flow.
    pub(super) fn assign(&mut self, key: FlowKey) -> u16 {
        let id = self.next;
        self.next = id.wrapping_add(self.step);
        self.flows.insert(id, key);
        id
    }

    /// Whether no probe was ever given out.
    pub(super) fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }
}

impl<S: SessionLayer> ProxyCore<S> {
    /// An ICMP frame while PEMI flows exist: an echo reply to one of their probes is an RTT
    /// sample of the receiver side (the frame itself is forwarded like any other).
    pub(super) fn on_icmp(&mut self, now: Time, frame: &[u8]) {
        let Some(r) = crate::pemi::probe::echo_reply(frame, self.cfg.link) else {
            return;
        };
        let Some(key) = self.probes.flows.get(&r.id).copied() else {
            return;
        };
        // The reply comes from the probed receiver: one of the flow's two addresses.
        if ![key.client.ip(), key.server.ip()].contains(&std::net::IpAddr::V4(r.src)) {
            return;
        }
        if let Some(e) = self.table.get_mut(&key)
            && let Assistance::Pemi(p) = &mut e.value.assistance
        {
            p.on_probe_reply(now, r.seq);
        }
    }

    /// An ICMP echo reply seen beside the frame path — a worker's echo-reply socket sees every
    /// reply on its interface, whichever worker the capture fanout handed the frame to: an RTT
    /// sample when it answers one of this core's PEMI probes, else nothing. Not forwarded, not
    /// counted as a frame; a reply seen on both paths counts once (its probe is taken by the
    /// first).
    pub fn handle_echo_reply(&mut self, now: Time, frame: &[u8]) {
        if !self.probes.is_empty() {
            self.on_icmp(now, frame);
        }
    }

    /// Queue PEMI's side actions (in `engine_out`) for the backend; a delay becomes the frame's
    /// verdict.
    pub(super) fn pemi_actions(&mut self) -> Verdict {
        let mut verdict = Verdict::Forward;
        for a in self.engine_out.drain(..) {
            match a {
                Action::Inject { dir, frame } => {
                    if self.injects.push(dir, frame) {
                        self.counters.injected += 1;
                    }
                }
                Action::Delay { until } => verdict = Verdict::Delay { until },
                Action::Message(_) | Action::Forward | Action::SendSidekick { .. } => {}
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_draw_disjoint_probe_ids() {
        let key = FlowKey {
            client: "10.0.2.2:5000".parse().unwrap(),
            server: "10.0.1.1:443".parse().unwrap(),
        };
        // Worker k of 2 starts at k + 1 and steps by 2.
        let mut w0 = ProbeIds::new((1, 2));
        let mut w1 = ProbeIds::new((2, 2));
        assert!(w0.is_empty());
        let a: Vec<u16> = (0..4).map(|_| w0.assign(key)).collect();
        let b: Vec<u16> = (0..4).map(|_| w1.assign(key)).collect();
        assert_eq!((a, b), (vec![1, 3, 5, 7], vec![2, 4, 6, 8]));
        assert_eq!(w0.flows.get(&5), Some(&key));
        assert_eq!(w0.flows.get(&2), None);
        // A step of 0 is taken as 1.
        let mut one = ProbeIds::new((7, 0));
        assert_eq!((one.assign(key), one.assign(key)), (7, 8));
    }
}
