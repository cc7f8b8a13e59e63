//! The SDK's judgement of its proxy (docs/sdk.md, "Fail open"): holds and early resends
//! are assessed against what they brought, and an engine that costs more than it brings stops
//! — alone it takes the session with it.

use std::time::Instant;

use super::{Engine, FallbackCause, SdkEvent, SidekickClient};

impl SidekickClient {
    /// Falls back when holds measurably cost more than they bring: once `hold_assessment_gaps`
    /// gaps have settled in this epoch's engine, too few of all of them were repaired (while
    /// held or late: a repair after the hold still shows the proxy repairs; a packet that never
    /// arrives shows it does not). The fraction is over every settled gap, not a window: a
    /// genuine proxy on a path where some repairs come too late still repairs a share that
    /// grows with the session, while one that never repairs stays at zero.
    pub(super) fn assess_holds(&mut self, now: Instant) {
        let Some(p) = self.packrat.as_ref() else {
            return;
        };
        let n = self.config.hold_assessment_gaps;
        let st = p.stats();
        let repaired = st.gaps_filled + st.gaps_filled_late;
        let unrepaired = st.gaps_unrepaired;
        self.stats.holds_repaired += repaired.saturating_sub(self.hold_base.0);
        self.stats.holds_unrepaired += unrepaired.saturating_sub(self.hold_base.1);
        self.hold_base = (repaired, unrepaired);
        if n == 0 || repaired + unrepaired < n {
            return;
        }
        #[allow(clippy::cast_precision_loss)]
        let fraction = repaired as f64 / (repaired + unrepaired) as f64;
        if fraction < self.config.min_repaired_fraction {
            self.fail_engine(now, Engine::Packrat, FallbackCause::HoldsUnrepaired);
        }
    }

    /// Falls back when early resends measurably cost more than they bring: of the last
    /// `resend_assessment` resends settled by end-to-end ACKs, most were unneeded.
    pub(super) fn assess_resends(&mut self, now: Instant) {
        let Some(r) = self.robin.as_ref() else {
            return;
        };
        let n = self.config.resend_assessment;
        let st = r.stats();
        let assessed = st.resends_assessed - self.resend_base.0;
        let unneeded = st.resends_unneeded - self.resend_base.1;
        if n == 0 || assessed < n {
            return;
        }
        self.resend_base = (st.resends_assessed, st.resends_unneeded);
        self.stats.resends_assessed += assessed;
        self.stats.resends_unneeded += unneeded;
        #[allow(clippy::cast_precision_loss)]
        let wasted = unneeded as f64 / assessed as f64;
        if wasted >= self.config.max_unneeded_fraction {
            self.fail_engine(now, Engine::Robin, FallbackCause::ResendsUnneeded);
        }
    }

    /// `engine` failed its assessment. Alone, it takes the session with it (fall back). Beside
    /// the other engine, only it stops — a proxy that cannot repair what the client receives
    /// (losses before it, a spent memory budget) may still reveal what the client sends lost
    /// near it, and the other way round — and the proxy is asked to drop it too (a
    /// reconfiguration without it: a new epoch, its cache or quACKs freed); a proxy refusing
    /// that keeps an engine the client no longer feeds or reads.
    pub(super) fn fail_engine(&mut self, now: Instant, engine: Engine, cause: FallbackCause) {
        let other_runs = match engine {
            Engine::Robin => self.packrat.is_some(),
            Engine::Packrat => self.robin.is_some(),
        };
        if !other_runs {
            self.fall_back(now, cause);
            return;
        }
        tracing::info!(
            ?engine,
            ?cause,
            "sidekick: one engine stops, the other goes on"
        );
        let mut rest = self.session.config().cloned();
        match engine {
            Engine::Robin => {
                self.robin = None;
                if let Some(c) = rest.as_mut() {
                    c.robin = None;
                }
            }
            Engine::Packrat => {
                if let Some(mut p) = self.packrat.take() {
                    p.release_all();
                    self.deliver.extend(p.poll_ready());
                }
                if let Some(c) = rest.as_mut() {
                    c.packrat = None;
                }
            }
        }
        self.stats.engines_dropped += 1;
        self.push_event(SdkEvent::EngineDropped(engine, cause));
        let pnow = self.protocol_time(now);
        if let Some(c) = rest
            && let Err(e) = self.session.reconfigure(pnow, c)
        {
            tracing::debug!(%e, "the proxy keeps the dropped engine");
        }
        self.pump_session();
    }
}
