//! PEMI's part of the core: ICMP calibration replies and the engines' side actions (PEMI §4.4,
//! §4.5; docs/proxy.md "PEMI"). PEMI's timers run from the core's deadline index.

use crate::Time;

use super::{Assistance, ProxyCore, SessionLayer, Verdict};
use crate::engine::Action;

impl<S: SessionLayer> ProxyCore<S> {
    /// An ICMP frame while PEMI flows exist: an echo reply to one of their probes is an RTT
    /// sample of the receiver side (the frame itself is forwarded like any other).
    pub(super) fn on_icmp(&mut self, now: Time, frame: &[u8]) {
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
        if !self.pemi_probe_flows.is_empty() {
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
