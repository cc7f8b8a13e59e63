//! The sessions of `sidekick-media` and `sidekick-media-fec` as sans-IO state machines with an
//! explicit `now` (time since the session started): when to send the next packet, when to repeat
//! FIN, when a receiver gives up waiting. The tokio adapters ([`crate::media_io`]) drive them with
//! sockets and the wall clock, the simulator (`sidekick-sim`) in virtual time, so both run the
//! same sessions.
//!
//! Session protocol (both applications): the media *sender* streams DATA for the requested
//! duration, then repeats FIN (every [`FIN_EVERY`]) until the receiver's SUMMARY arrives,
//! answering NACKs meanwhile. The *receiver* NACKs, and once FIN arrived and every packet is in
//! (or a linger time has passed) sends its SUMMARY (JSON metrics), repeating it for every further
//! FIN.
//!
//! ```
//! use std::time::Duration;
//! use sidekick_examples::media::{MediaConfig, MediaSender};
//! use sidekick_examples::media_session::{MediaReceiverSession, ReceiverTiming, SenderSession, Sent};
//!
//! let cfg = MediaConfig::default();
//! let ms = Duration::from_millis;
//! let mut tx = MediaSender::new(&cfg, 1);
//! let mut s = SenderSession::new(0, cfg.interval, ms(60), ms(1000));
//! let mut rx: Option<MediaReceiverSession> = None;
//! let mut now = Duration::ZERO;
//! while !s.is_done() {
//!     let mut out = Vec::new();
//!     s.on_timeout(now, &mut tx, &mut out);
//!     for d in out {
//!         let bytes = match d { Sent::Media { datagram, .. } | Sent::Control(datagram) => datagram };
//!         let r = rx.get_or_insert_with(|| MediaReceiverSession::new(&cfg, ReceiverTiming::default(), now));
//!         r.on_datagram(&bytes, now, 0);
//!         if r.is_finished(now) {
//!             s.on_datagram(&r.summary(), &mut tx, &mut Vec::new());
//!         }
//!     }
//!     now = s.next_deadline(now).unwrap_or(now);
//! }
//! assert_eq!(s.summary().map(|j| j.contains("\"packets_received\":3")), Some(true));
//! ```

use std::time::Duration;

use serde::Serialize;

use crate::fec::{FecConfig, FecMetrics, FecReceiver};
use crate::media::{MediaConfig, MediaReceiver, MediaSender, ReceiverMetrics, SenderCounters};
use crate::transfer::SidekickCounters;
use crate::wire::{encode_fin, encode_hello, encode_summary};

/// The sender repeats FIN this often after the stream until the SUMMARY arrives.
pub const FIN_EVERY: Duration = Duration::from_millis(100);

/// A player without media re-sends its HELLO this often.
pub const HELLO_EVERY: Duration = Duration::from_millis(200);

/// A datagram the sender puts on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Media data for `seq` (an original, or a resend answering a NACK).
    Media {
        /// The packet's sequence number.
        seq: u32,
        /// The datagram.
        datagram: Vec<u8>,
        /// Whether it is a resend.
        retransmission: bool,
    },
    /// A control datagram (FIN).
    Control(Vec<u8>),
}

/// The sender's session: one packet per interval for the duration, then FIN every
/// [`FIN_EVERY`] until the receiver's SUMMARY arrives or `summary_wait` has passed.
#[derive(Debug, Clone)]
pub struct SenderSession {
    start_unix_us: u64,
    interval: Duration,
    stream_end: Duration,
    next_tick: Duration,
    next_fin: Duration,
    give_up: Duration,
    summary: Option<String>,
    gave_up: bool,
}

impl SenderSession {
    /// A session started at `start_unix_us` (the sender's `CLOCK_REALTIME`, µs): packets every
    /// `interval` for `duration`, then FIN until the SUMMARY, for at most `summary_wait`.
    pub fn new(
        start_unix_us: u64,
        interval: Duration,
        duration: Duration,
        summary_wait: Duration,
    ) -> Self {
        Self {
            start_unix_us,
            interval: interval.max(Duration::from_micros(1)),
            stream_end: duration,
            next_tick: Duration::ZERO,
            next_fin: duration,
            give_up: duration + summary_wait,
            summary: None,
            gave_up: false,
        }
    }

    /// Whether the stream is still running at `now`.
    pub fn streaming(&self, now: Duration) -> bool {
        now < self.stream_end
    }

    /// The SUMMARY arrived, or the sender gave up waiting for it.
    pub fn is_done(&self) -> bool {
        self.summary.is_some() || self.gave_up
    }

    /// The receiver's SUMMARY JSON, once it arrived.
    pub fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    /// When [`SenderSession::on_timeout`] next has work (`None` when done).
    pub fn next_deadline(&self, now: Duration) -> Option<Duration> {
        if self.is_done() {
            None
        } else if self.streaming(now) {
            Some(self.next_tick.min(self.stream_end))
        } else {
            Some(self.next_fin.min(self.give_up))
        }
    }

    /// Sends what is due at `now`: the stream's packets (missed ticks in a burst), FINs, or
    /// gives up.
    pub fn on_timeout(&mut self, now: Duration, sender: &mut MediaSender, out: &mut Vec<Sent>) {
        if self.is_done() {
            return;
        }
        while self.streaming(now) && self.next_tick <= now {
            let seq = sender.total();
            // Production time of the packet's newest data: its scheduled time, so a sender
            // delayed by the OS still reports how old the data really is.
            let step = u64::try_from(self.interval.as_micros()).unwrap_or(u64::MAX);
            let gen_us = self
                .start_unix_us
                .saturating_add(u64::from(seq).saturating_mul(step));
            out.push(Sent::Media {
                seq,
                datagram: sender.next_packet(gen_us),
                retransmission: false,
            });
            self.next_tick += self.interval;
        }
        if self.streaming(now) {
            return;
        }
        if now >= self.give_up {
            self.gave_up = true;
            return;
        }
        while self.next_fin <= now {
            out.push(Sent::Control(encode_fin(sender.total())));
            self.next_fin += FIN_EVERY;
        }
    }

    /// A datagram from the receiver: the SUMMARY ends the session, a NACK is answered with
    /// resends.
    pub fn on_datagram(&mut self, buf: &[u8], sender: &mut MediaSender, out: &mut Vec<Sent>) {
        if let Some(s) = sender.summary_of(buf) {
            self.summary = Some(s);
            return;
        }
        for (seq, datagram) in sender.on_datagram(buf) {
            out.push(Sent::Media {
                seq,
                datagram,
                retransmission: true,
            });
        }
    }
}

/// Timing knobs of a receiver.
#[derive(Debug, Clone, Copy)]
pub struct ReceiverTiming {
    /// After FIN, how long to keep NACKing for missing packets before giving up.
    pub linger: Duration,
    /// End a session after this long without any datagram.
    pub idle: Duration,
}

impl Default for ReceiverTiming {
    fn default() -> Self {
        Self {
            linger: Duration::from_secs(2),
            idle: Duration::from_secs(5),
        }
    }
}

/// The receiver's side of one `sidekick-media` session (Robin #1's server): NACKs, re-NACKs,
/// and the end of the session (every packet in after FIN, the linger time after FIN, or the
/// idle time without datagrams). Times are since the session started.
#[derive(Debug)]
pub struct MediaReceiverSession {
    rx: MediaReceiver,
    timing: ReceiverTiming,
    last_rx: Duration,
    fin_at: Option<Duration>,
}

impl MediaReceiverSession {
    /// A session whose first datagram arrives at `now`.
    pub fn new(cfg: &MediaConfig, timing: ReceiverTiming, now: Duration) -> Self {
        Self {
            rx: MediaReceiver::new(cfg),
            timing,
            last_rx: now,
            fin_at: None,
        }
    }

    /// A datagram from the sender at `now` / `wall_unix_us`: the NACKs to send back.
    pub fn on_datagram(&mut self, buf: &[u8], now: Duration, wall_unix_us: u64) -> Vec<Vec<u8>> {
        self.last_rx = now;
        let out = self.rx.on_datagram(buf, now, wall_unix_us);
        if self.fin_at.is_none() && self.rx.fin_received() {
            self.fin_at = Some(now);
        }
        out
    }

    /// Re-NACKs due at `now`.
    pub fn on_timeout(&mut self, now: Duration) -> Vec<Vec<u8>> {
        self.rx.on_timeout(now)
    }

    /// Holds the end-to-end NACK of packets that go missing from now on (`None`: NACK at
    /// once), see [`MediaReceiver::set_nack_hold`].
    pub fn set_nack_hold(&mut self, hold: Option<Duration>) {
        self.rx.set_nack_hold(hold);
    }

    /// When the session next has something to do (a re-NACK, or its end).
    pub fn next_deadline(&self) -> Duration {
        let mut d = self.last_rx + self.timing.idle;
        if let Some(f) = self.fin_at {
            d = d.min(f + self.timing.linger);
        }
        if let Some(t) = self.rx.next_timeout() {
            d = d.min(t);
        }
        d
    }

    /// Whether the session is over at `now`.
    pub fn is_finished(&self, now: Duration) -> bool {
        self.rx.is_complete()
            || self.fin_at.is_some_and(|f| now >= f + self.timing.linger)
            || now >= self.last_rx + self.timing.idle
    }

    /// The SUMMARY datagram (the receiver's metrics as JSON).
    pub fn summary(&self) -> Vec<u8> {
        encode_summary(&serde_json::to_string(&self.rx.metrics()).unwrap_or_default())
    }

    /// The receiver state.
    pub fn receiver(&self) -> &MediaReceiver {
        &self.rx
    }

    /// The receiver state, consuming the session.
    pub fn into_receiver(self) -> MediaReceiver {
        self.rx
    }
}

/// The player of `sidekick-media-fec` (Packrat's media client): HELLO every [`HELLO_EVERY`]
/// until media flows, NACKs and re-NACKs, and the end of the session (every frame in after FIN,
/// the linger time after FIN, or the idle time without datagrams). Times are since the client
/// started.
#[derive(Debug)]
pub struct FecClientSession {
    rx: FecReceiver,
    timing: ReceiverTiming,
    hello: Vec<u8>,
    last_rx: Duration,
    last_hello: Option<Duration>,
    fin_at: Option<Duration>,
}

impl FecClientSession {
    /// A client asking for `duration` of media, started at time zero.
    pub fn new(cfg: &FecConfig, duration: Duration, timing: ReceiverTiming) -> Self {
        Self {
            rx: FecReceiver::new(cfg),
            timing,
            hello: encode_hello(u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)),
            last_rx: Duration::ZERO,
            last_hello: None,
            fin_at: None,
        }
    }

    /// The HELLO to send at `now`, if one is due (no media yet).
    pub fn poll_hello(&mut self, now: Duration) -> Option<Vec<u8>> {
        if self.rx.started() || self.last_hello.is_some_and(|h| now < h + HELLO_EVERY) {
            return None;
        }
        self.last_hello = Some(now);
        Some(self.hello.clone())
    }

    /// A datagram from the server at `now` / `wall_unix_us`: the NACKs to send back.
    pub fn on_datagram(&mut self, buf: &[u8], now: Duration, wall_unix_us: u64) -> Vec<Vec<u8>> {
        self.last_rx = now;
        let out = self.rx.on_datagram(buf, now, wall_unix_us);
        if self.fin_at.is_none() && self.rx.fin_received() {
            self.fin_at = Some(now);
        }
        out
    }

    /// Re-NACKs due at `now`.
    pub fn on_timeout(&mut self, now: Duration) -> Vec<Vec<u8>> {
        self.rx.on_timeout(now)
    }

    /// Holds the end-to-end NACK of frames that go missing from now on (`None`: NACK at once),
    /// see [`FecReceiver::set_nack_hold`].
    pub fn set_nack_hold(&mut self, hold: Option<Duration>) {
        self.rx.set_nack_hold(hold);
    }

    /// When the client next has something to do (HELLO, re-NACK, its end), seen at `now`.
    pub fn next_deadline(&self, now: Duration) -> Duration {
        let mut d = self.last_rx + self.timing.idle;
        if !self.rx.started() {
            d = d.min(self.last_hello.map_or(now, |h| h + HELLO_EVERY));
        }
        if let Some(f) = self.fin_at {
            d = d.min(f + self.timing.linger);
        }
        if let Some(t) = self.rx.next_timeout() {
            d = d.min(t);
        }
        d
    }

    /// Whether the client stops at `now`.
    pub fn is_finished(&self, now: Duration) -> bool {
        self.rx.is_complete()
            || self.fin_at.is_some_and(|f| now >= f + self.timing.linger)
            || now >= self.last_rx + self.timing.idle
    }

    /// Whether any media arrived.
    pub fn started(&self) -> bool {
        self.rx.started()
    }

    /// The player state.
    pub fn receiver(&self) -> &FecReceiver {
        &self.rx
    }

    /// The player state and its SUMMARY datagram, consuming the session.
    pub fn finish(self) -> (FecReceiver, FecMetrics, Vec<u8>) {
        let metrics = self.rx.metrics();
        let summary = encode_summary(&serde_json::to_string(&metrics).unwrap_or_default());
        (self.rx, metrics, summary)
    }
}

/// The JSON line `sidekick-media client --json` prints (and the lab reads).
#[derive(Debug, Serialize)]
pub struct MediaReport {
    /// Always `media`.
    pub app: &'static str,
    /// Stream duration, seconds.
    pub duration_s: f64,
    /// The sender's counters.
    #[serde(flatten)]
    pub sender: SenderCounters,
    /// The receiver's metrics (its SUMMARY).
    #[serde(flatten)]
    pub receiver: ReceiverMetrics,
    /// Sidekick counters (with `--sidekick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick: Option<SidekickCounters>,
}

/// The JSON line `sidekick-media-fec client --json` prints (and the lab reads).
#[derive(Debug, Serialize)]
pub struct FecReport {
    /// Always `media-fec`.
    pub app: &'static str,
    /// Stream duration, seconds.
    pub duration_s: f64,
    /// The player's metrics.
    #[serde(flatten)]
    pub metrics: FecMetrics,
    /// Sidekick counters (with `--sidekick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick: Option<SidekickCounters>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn sender_streams_then_repeats_fin_then_gives_up() {
        let cfg = MediaConfig::default();
        let mut tx = MediaSender::new(&cfg, 0);
        let mut s = SenderSession::new(1_000, MS(20), MS(100), MS(250));
        let mut out = Vec::new();
        // A late wake-up sends the missed ticks in a burst.
        s.on_timeout(MS(45), &mut tx, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(s.next_deadline(MS(45)), Some(MS(60)));
        out.clear();
        s.on_timeout(MS(99), &mut tx, &mut out);
        assert_eq!(out.len(), 2, "ticks at 60 and 80 ms");
        assert_eq!(tx.total(), 5);
        assert_eq!(s.next_deadline(MS(100)), Some(MS(100)));
        out.clear();
        s.on_timeout(MS(100), &mut tx, &mut out);
        assert!(matches!(out.as_slice(), [Sent::Control(_)]));
        assert_eq!(s.next_deadline(MS(100)), Some(MS(200)));
        out.clear();
        s.on_timeout(MS(340), &mut tx, &mut out);
        assert_eq!(out.len(), 2, "FINs at 200 and 300 ms");
        s.on_timeout(MS(350), &mut tx, &mut out);
        assert!(s.is_done() && s.summary().is_none());
        assert_eq!(s.next_deadline(MS(350)), None);
    }

    #[test]
    fn receiver_session_ends_after_linger_or_when_complete() {
        let cfg = MediaConfig::default();
        let mut tx = MediaSender::new(&cfg, 0);
        let timing = ReceiverTiming {
            linger: MS(500),
            idle: MS(5000),
        };
        let p0 = tx.next_packet(0);
        let _lost = tx.next_packet(0);
        let mut r = MediaReceiverSession::new(&cfg, timing, MS(0));
        assert!(r.on_datagram(&p0, MS(0), 0).is_empty());
        let nacks = r.on_datagram(&encode_fin(2), MS(50), 0);
        assert_eq!(nacks.len(), 1);
        assert!(!r.is_finished(MS(100)));
        assert!(r.next_deadline() <= MS(550));
        assert!(r.is_finished(MS(550)));
        assert_eq!(r.receiver().metrics().packets_missing, 1);
        assert!(tx.summary_of(&r.summary()).is_some());
    }

    #[test]
    fn fec_client_says_hello_until_media_flows() {
        let cfg = FecConfig::default();
        let mut c = FecClientSession::new(&cfg, MS(1000), ReceiverTiming::default());
        assert!(c.poll_hello(MS(0)).is_some());
        assert!(c.poll_hello(MS(100)).is_none());
        assert_eq!(c.next_deadline(MS(100)), MS(200));
        assert!(c.poll_hello(MS(200)).is_some());
        let mut tx = MediaSender::new(&cfg.sender_config(), 0);
        c.on_datagram(&tx.next_packet(0), MS(250), 0);
        assert!(c.started());
        assert!(c.poll_hello(MS(400)).is_none());
        assert!(!c.is_finished(MS(400)));
        assert!(c.is_finished(MS(5250)), "idle");
        let (_, m, summary) = c.finish();
        assert_eq!(m.packets_received, 1);
        assert!(!summary.is_empty());
    }
}
