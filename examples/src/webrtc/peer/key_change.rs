//! The peer's side of a key change ([`super::super::rekey`]): the new instance takes over, the
//! old one retires make-before-break — it carries the media until the new one is connected,
//! then decrypts stragglers and answers NACKs for [`RETIRE_GRACE`].

use std::time::Instant;

use str0m::{Event, Input, Output, Rtc};

use super::PeerCore;
use crate::webrtc::rekey::{RETIRE_GRACE, Rekey, Retiring};
use crate::webrtc::sidekick::WebrtcSidekick;

impl PeerCore {
    /// Drains the retiring instance, if any; returns its next timeout.
    pub(super) fn drain_retiring(&mut self) -> Option<Instant> {
        let mut old = self.retiring.take()?;
        let next = loop {
            match old.rtc.poll_output() {
                Ok(Output::Timeout(t)) => break t,
                Ok(Output::Transmit(t)) => self.transmit(t.destination, t.contents.into()),
                Ok(Output::Event(e)) => self.on_retiring_event(&old, e),
                Err(e) => {
                    // The old keys' end comes early; the new instance carries the call.
                    tracing::debug!(%e, "the retiring instance failed");
                    return None;
                }
            }
        };
        self.retiring = Some(old);
        Some(next)
    }

    /// The retiring instance's timers; it goes when its grace has passed.
    pub(super) fn retiring_timeout(&mut self, now: Instant) {
        let Some(old) = self.retiring.as_mut() else {
            return;
        };
        if old.until.is_some_and(|t| now >= t) {
            self.retiring = None;
            tracing::info!("key change done: the old keys retired");
        } else if old.rtc.handle_input(Input::Timeout(now)).is_err() {
            self.retiring = None;
        }
    }

    /// A key change begins: `k` becomes the instance; the current one retires but carries the
    /// media until `k` is connected.
    pub(super) fn begin_rekey(&mut self, now: Instant, k: Rekey) {
        let old = std::mem::replace(&mut self.rtc, *k.rtc);
        // A change before the previous one finished: the oldest keys go now.
        self.retiring = Some(Retiring {
            rtc: old,
            media_pt: self.media_pt,
            until: None,
            sender_switched: false,
        });
        self.mid = k.mid;
        self.early.clear();
        self.rekey_started = Some(now);
        self.report.rekeys += 1;
        self.report.sidekick_at_rekey = self.side.as_ref().map(WebrtcSidekick::counters);
        // The far peer's new instance sends from a new SSRC, possibly before this one connects.
        if let Some(s) = self.side.as_mut() {
            s.media_restarting();
        }
        tracing::info!("key change begun");
    }

    /// What the retiring instance reports: its media and NACK/RTX counts, nothing about its
    /// connection (its ICE consent lapses: the new instance answers the STUN).
    pub(super) fn on_retiring_event(&mut self, old: &Retiring, e: Event) {
        match e {
            Event::RtpPacket(p) => {
                self.on_media(old.media_pt, &p);
            }
            Event::RawPacket(raw) => self.on_raw(old.media_pt, &raw),
            _ => {}
        }
    }

    /// The new instance of a key change is connected: the sender moves its media to it, the
    /// datagrams it got too early are replayed, and the old one retires after the grace.
    pub(super) fn on_reconnected(&mut self, now: Instant) {
        let Some(old) = self.retiring.as_mut() else {
            return;
        };
        old.until = Some(now + RETIRE_GRACE);
        self.report.rekey_connect_ms = self
            .rekey_started
            .map(|t| now.duration_since(t).as_secs_f64() * 1000.0);
        self.switch_sender();
    }

    /// The sender's stream on the new instance (its SSRC; the sequence numbers go on).
    pub(super) fn switch_sender(&mut self) {
        let (Some(old), Some(s), Some(mid), Some((pt, _))) = (
            self.retiring.as_mut(),
            self.sending.as_mut(),
            self.mid,
            self.media_pt,
        ) else {
            return;
        };
        if old.sender_switched || old.until.is_none() {
            return;
        }
        if let Some(tx) = self.rtc.direct_api().stream_tx_by_mid(mid, None) {
            s.ssrc = tx.ssrc();
            s.pt = pt;
            old.sender_switched = true;
        }
    }

    /// The instance the sender's media goes out on: the retiring one until the new one has its
    /// stream.
    pub(super) fn sending_rtc(&mut self) -> &mut Rtc {
        match self.retiring.as_mut() {
            Some(old) if !old.sender_switched => &mut old.rtc,
            _ => &mut self.rtc,
        }
    }
}
