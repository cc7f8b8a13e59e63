//! The sidekick next to a WebRTC stack, on the datagrams it sends and receives (the SDK's
//! sans-IO [`SidekickClient`]; the peer loop owns the sockets and the clock).
//!
//! - **Sender, Robin** (Sidekick (NSDI '24) §4.3, Robin #1's setting): every datagram str0m puts
//!   on the wire — SRTP, SRTCP, STUN, DTLS — is logged; its quACK identifier is the last 4 bytes,
//!   the end of the SRTP authentication tag (pseudorandom like a QUIC AEAD tag). When a quACK
//!   shows a datagram lost on the near segment, the SDK hands back the identical SRTP datagram
//!   and it is resent at once: the receiver's SRTP replay window accepts whichever copy arrives
//!   first, and str0m's NACK register marks the packet received, so no NACK round trip is spent.
//!   Discovery starts with the first RTP datagram (after ICE and DTLS).
//! - **Receiver, Packrat** (Packrat (CoNEXT '26) §4, §6.2): every received datagram goes into the
//!   eACK; the media stream's RTP sequence number (in the clear, [`super::rtp_lens`]) is the packet
//!   number, so a gap in it — where the player would NACK — opens a hold and triggers an eACK at
//!   once (selective eACKs, §5.2.3), and the proxy resends the cached SRTP datagram. The
//!   datagrams after the gap wait in the SDK for the reorder window before str0m sees them, so
//!   str0m's NACK for the gap is held while the proxy repairs; they keep their socket arrival
//!   time (str0m's `Input::Receive` takes it), so the jitter buffer's metrics are unchanged by
//!   the hold. Discovery starts with the first RTP datagram received.
//!
//! No proxy, or anything inconsistent: the SDK falls back and the call continues end to end
//! (NACK/RTX only).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sidekick::session::{SidekickClient, SidekickConfig, Transmit};
use sidekick_protocol::is_discovery_reply;

use super::rtp_lens::{Kind, RtpLens, classify};
use crate::media_sidekick::media_config;
use crate::transfer::sidekick::{EngineSample, Mode, SidekickCounters};

/// Robin settings for a video sender: a quACK every `every_packets` packets and at once with a
/// packet that follows a silence longer than `gap_percent` % of the smoothed spacing (the frames
/// are paced evenly, so a near-link loss is such a silence), threshold `threshold`, reorder
/// threshold 1 (Sidekick (NSDI '24) §5.2: media "detects lost packets without reordering and
/// immediately retransmits them").
///
/// ```
/// let c = sidekick_examples::webrtc::sidekick::robin_config(128, 8, 150);
/// let r = c.protocol.session.robin.unwrap();
/// assert_eq!((r.interval_packets, r.threshold, r.quack_on_gap_percent), (128, 8, 150));
/// ```
pub fn robin_config(every_packets: u32, threshold: u32, gap_percent: u32) -> SidekickConfig {
    media_config(every_packets, threshold, 0, 1, gap_percent)
}

/// Packrat settings for a video receiver: selective eACKs (only while a gap is open; the first
/// at once when it opens), at most every `eack_interval_ms` / `eack_packets` packets meanwhile,
/// up to `symbols` coded symbols, each sized for the open gaps plus `inflight` packets the proxy
/// forwarded that have not arrived yet; a `cache_bytes` cache asked of the proxy; a reorder
/// window of `reorder_ms`.
///
/// ```
/// let c = sidekick_examples::webrtc::sidekick::packrat_config(10, 4, 160, 24, 64_000, 80);
/// let p = c.protocol.session.packrat.unwrap();
/// assert_eq!((p.eack_interval_ms, p.reorder_delay_ms, p.cache_capacity_bytes), (10, 80, 64_000));
/// assert!(c.packrat.selective);
/// ```
pub fn packrat_config(
    eack_interval_ms: u32,
    eack_packets: u32,
    symbols: u32,
    inflight: usize,
    cache_bytes: u32,
    reorder_ms: u32,
) -> SidekickConfig {
    let mut c = SidekickConfig::packrat();
    if let Some(p) = c.protocol.session.packrat.as_mut() {
        p.eack_interval_ms = eack_interval_ms;
        p.eack_interval_packets = eack_packets;
        p.local_symbols = symbols;
        p.cache_capacity_bytes = u64::from(cache_bytes);
        p.reorder_delay_ms = reorder_ms;
    }
    c.packrat.selective = true;
    c.packrat.inflight_allowance = inflight;
    c.packrat.success_probability = 0.99;
    c
}

/// Socket arrival times of datagrams the SDK holds, by (SSRC, sequence number); bounded.
#[derive(Debug, Default)]
struct Arrivals {
    map: HashMap<(u32, u16), Instant>,
    order: VecDeque<(u32, u16)>,
}

const MAX_ARRIVALS: usize = 4096;

impl Arrivals {
    fn insert(&mut self, key: (u32, u16), at: Instant) {
        if self.map.insert(key, at).is_none() {
            self.order.push_back(key);
            if self.order.len() > MAX_ARRIVALS
                && let Some(old) = self.order.pop_front()
            {
                self.map.remove(&old);
            }
        }
    }

    fn take(&mut self, d: &[u8]) -> Option<Instant> {
        match classify(d) {
            // Left in `order` until it ages out: the map entry alone decides.
            Kind::Rtp { seq, ssrc, .. } => self.map.remove(&(ssrc, seq)),
            _ => None,
        }
    }
}

/// The sidekick of one WebRTC peer (sans-IO: the peer owns the sockets and the clock).
pub struct WebrtcSidekick {
    client: SidekickClient,
    mode: Mode,
    lens: Option<RtpLens>,
    arrivals: Arrivals,
    sample: EngineSample,
    last_sample: Option<Instant>,
    /// Datagrams the SDK released, with their socket arrival time.
    deliver: VecDeque<(Vec<u8>, Instant)>,
    /// The media peer whose datagrams the session covers: the far end of the first RTP datagram
    /// (sent for Robin, received for Packrat). ICE also sends STUN checks to other candidates;
    /// those never cross the proxy's flow, so logging them would make every one a "loss" (seen:
    /// 7 false losses and early resends per 3 s call at 0 % loss, each a STUN check resent to
    /// the media peer).
    peer: Option<SocketAddr>,
}

impl WebrtcSidekick {
    /// A sidekick for a sender (`Mode::Robin`) or receiver (`Mode::Packrat`).
    pub fn new(client: SidekickClient, mode: Mode) -> Self {
        Self {
            client,
            mode,
            lens: None,
            arrivals: Arrivals::default(),
            sample: EngineSample::default(),
            last_sample: None,
            deliver: VecDeque::new(),
            peer: None,
        }
    }

    /// The media peer the session covers (see the field), once known: early retransmissions go
    /// there, and released datagrams came from there.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The negotiated payload type of the media stream (receiver: its sequence numbers are
    /// Packrat's packet numbers). A payload type already followed changes nothing.
    pub fn set_media_pt(&mut self, pt: u8) {
        if self.lens.as_ref().is_none_or(|l| l.pt() != pt) {
            self.lens = Some(RtpLens::new(pt));
        }
    }

    /// The payload type whose packets the sidekick numbers (`None` until it is known).
    pub fn media_pt(&self) -> Option<u8> {
        self.lens.as_ref().map(RtpLens::pt)
    }

    /// The media session is restarting with new keys (a key change, [`super::peer`]): a new
    /// SSRC will carry the stream, and its numbering goes on ([`RtpLens::restart`]).
    pub fn media_restarting(&mut self) {
        if let Some(l) = self.lens.as_mut() {
            l.restart();
        }
    }

    /// The stack sends `d` to `to` on the base socket at `now` (call before sending it).
    pub fn on_sent(&mut self, now: Instant, to: SocketAddr, d: &[u8]) {
        if self.peer.is_some_and(|p| p != to) {
            return;
        }
        if self.mode == Mode::Robin
            && self.client.is_idle()
            && matches!(classify(d), Kind::Rtp { .. })
        {
            self.peer = Some(to);
            if let Err(e) = self.client.start(now) {
                tracing::debug!(%e, "sidekick discovery did not start");
            }
        }
        self.client.on_base_sent(now, d);
    }

    /// A datagram from `from` arrived on the base socket at `at`. Returns it when the stack may
    /// have it at once (the sender's case, minus discovery replies, and anything not from the
    /// media peer); a receiver's media datagrams come out of [`Self::poll_deliver`].
    pub fn on_received(&mut self, at: Instant, from: SocketAddr, d: Vec<u8>) -> Option<Vec<u8>> {
        if self.peer.is_some_and(|p| p != from) {
            return Some(d);
        }
        match self.mode {
            Mode::Robin => {
                if is_discovery_reply(&d) {
                    self.client.on_base_received(at, d);
                    while self.client.poll_deliver().is_some() {}
                    return None;
                }
                Some(d)
            }
            // The call's receiving side (a call has no two-way sidekick yet: `Both` is the
            // transfer's).
            Mode::Packrat | Mode::Both => {
                let kind = classify(&d);
                if self.client.is_idle() && matches!(kind, Kind::Rtp { .. }) {
                    self.peer = Some(from);
                    if let Err(e) = self.client.start(at) {
                        tracing::debug!(%e, "sidekick discovery did not start");
                    }
                }
                let pn = self.lens.as_mut().and_then(|l| l.packet_number(&d));
                if let Kind::Rtp { seq, ssrc, .. } = kind {
                    self.arrivals.insert((ssrc, seq), at);
                }
                self.client.on_base_received_with_pn(at, d, pn);
                self.collect(at);
                None
            }
        }
    }

    fn collect(&mut self, now: Instant) {
        while let Some(d) = self.client.poll_deliver() {
            let at = self.arrivals.take(&d).unwrap_or(now);
            self.deliver.push_back((d, at));
        }
    }

    /// Datagrams the stack may have now, with their socket arrival times.
    pub fn poll_deliver(&mut self) -> Option<(Vec<u8>, Instant)> {
        self.deliver.pop_front()
    }

    /// A datagram from the sidekick's own socket.
    pub fn on_sidekick_datagram(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        self.client.on_sidekick_datagram(now, from, d);
        self.collect(now);
    }

    /// When [`Self::handle_timeout`] must run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.client.poll_timeout()
    }

    /// Runs the SDK's timers (and samples its engine counters every 20 ms).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.client.handle_timeout(now);
        self.collect(now);
        if self
            .last_sample
            .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_millis(20))
        {
            self.sample.update(&self.client);
            self.last_sample = Some(now);
        }
    }

    /// Next datagram to send (base socket: discovery, early retransmissions; or the sidekick
    /// socket). Events are drained: no congestion controller to feed.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        while self.client.poll_event().is_some() {}
        self.client.poll_transmit()
    }

    /// Whether the sidekick session is in use.
    pub fn is_active(&self) -> bool {
        self.client.is_active()
    }

    /// The session's counters for the report.
    pub fn counters(&self) -> SidekickCounters {
        SidekickCounters::collect(self.mode, &self.client, &self.sample, 0)
    }

    /// Gives up on the sidekick (the application's choice).
    pub fn fall_back(&mut self, now: Instant) {
        self.client
            .fall_back(now, sidekick::session::FallbackCause::Application);
        self.collect(now);
    }
}
