//! The client SDK under quinn-proto, sans IO: what the SDK's quinn socket wrapper
//! (client-sdk/src/integrations/quinn_socket.rs) does around a real socket, done around the
//! simulated one, with the same calls in the same order.
//!
//! - every datagram quinn sends passes [`SidekickClient::on_base_sent`] first (Robin's log, the
//!   lens); discovery starts with the first short-header datagram;
//! - every datagram from the server passes [`SidekickClient::on_base_received`] before quinn sees
//!   it (discovery replies, Packrat);
//! - the SDK's own transmits (discovery, identical early resends, sidekick messages) go out on
//!   the base or the sidekick socket;
//! - near-segment losses, proxy-confirmed bytes and the RTT ratio reach PACUBIC through the same
//!   [`SharedSignals`] the real integration uses, and the end-to-end RTT comes back.

use std::net::SocketAddr;
use std::time::Instant;

use sidekick::integrations::quinn_cc::SharedSignals;
use sidekick::keylog::KeyLogStore;
use sidekick::session::{Engine, SdkEvent, SidekickClient, Transmit};
use sidekick_examples::transfer::sidekick::{EngineSample, Mode, SidekickCounters};

/// A datagram the client must send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// On the base socket to the server.
    Base(Vec<u8>),
    /// On the sidekick socket to `to`.
    Sidekick(SocketAddr, Vec<u8>),
}

/// The SDK session of the simulated client.
#[derive(Debug)]
pub struct SdkGlue {
    client: SidekickClient,
    keylog: KeyLogStore,
    signals: Option<SharedSignals>,
    peer: SocketAddr,
    sample: EngineSample,
    mode: Mode,
}

impl SdkGlue {
    /// Glue for `client` talking to `peer`; `keylog` is the store given to rustls, `signals`
    /// those of the PACUBIC controller (uploads).
    pub fn new(
        client: SidekickClient,
        keylog: KeyLogStore,
        signals: Option<SharedSignals>,
        peer: SocketAddr,
        mode: Mode,
    ) -> Self {
        Self {
            client,
            keylog,
            signals,
            peer,
            sample: EngineSample::default(),
            mode,
        }
    }

    fn drain_keylog(&mut self) {
        if !self.keylog.is_empty() {
            self.keylog.drain_into(self.client.lens_mut());
        }
    }

    /// quinn sends `datagram` at `now` (called before it goes on the wire).
    pub fn on_sent(&mut self, now: Instant, datagram: &[u8], out: &mut Vec<Out>) {
        self.drain_keylog();
        self.client.on_base_sent(now, datagram);
        let short_header = datagram.first().is_some_and(|b| b & 0x80 == 0);
        if short_header && self.client.is_idle() {
            // Discovery failing to start leaves the connection end to end, as in the wrapper.
            let _ = self.client.start(now);
        }
        self.flush(out);
    }

    /// A datagram from `from` arrived on the base socket.
    pub fn on_base_received(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut Vec<Out>,
    ) {
        self.drain_keylog();
        if from == self.peer {
            self.client.on_base_received(now, datagram.to_vec());
        } else {
            self.client.push_passthrough(from, datagram.to_vec());
        }
        self.flush(out);
    }

    /// A datagram arrived on the sidekick socket.
    pub fn on_sidekick(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut Vec<Out>,
    ) {
        self.client.on_sidekick_datagram(now, from, datagram);
        self.flush(out);
    }

    /// The next datagram for quinn, if any (after the reorder window, for Packrat).
    pub fn deliver(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.client.poll_deliver_from(self.peer)
    }

    /// The SDK's next timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.client.poll_timeout()
    }

    /// Runs the SDK's timers.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut Vec<Out>) {
        self.client.handle_timeout(now);
        self.flush(out);
    }

    fn flush(&mut self, out: &mut Vec<Out>) {
        while let Some(t) = self.client.poll_transmit() {
            out.push(match t {
                Transmit::Base(b) => Out::Base(b),
                Transmit::Sidekick(a, b) => Out::Sidekick(a, b),
            });
        }
        if let Some(s) = &self.signals {
            if let Some(rtt) = s.e2e_min_rtt() {
                self.client.on_e2e_rtt(rtt);
            }
            if let Some(r) = self.client.rtt_ratio() {
                s.set_rtt_ratio(r);
            }
        }
        while let Some(e) = self.client.poll_event() {
            if let Some(s) = &self.signals {
                match &e {
                    SdkEvent::NearLoss(l) => s.near_loss(l.sent),
                    SdkEvent::Delivered { bytes, .. } => s.delivered(*bytes),
                    // Robin stopped (alone or with the session): PACUBIC acts as CUBIC again.
                    SdkEvent::Fallback(_) | SdkEvent::EngineDropped(Engine::Robin, _) => s.clear(),
                    SdkEvent::Established | SdkEvent::EngineDropped(Engine::Packrat, _) => {}
                }
            }
        }
        // The SDK drops its engines on fallback: keep their last counters for the report.
        self.sample.update(&self.client);
    }

    /// The counters of the lab client's JSON report (`sidekick` object).
    pub fn counters(&self) -> SidekickCounters {
        let cc = self
            .signals
            .as_ref()
            .map_or(0, SharedSignals::quack_events_applied);
        SidekickCounters::collect(self.mode, &self.client, &self.sample, cc)
    }
}
