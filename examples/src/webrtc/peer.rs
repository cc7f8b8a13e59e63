//! One WebRTC peer: [`PeerCore`], str0m and the call's logic without I/O (explicit `now`, the
//! datagrams it sends polled out), and [`Peer`], the tokio loop that owns the UDP sockets and
//! the clock (its private `io` module). With `--sidekick` the core also runs the SDK
//! ([`super::sidekick::WebrtcSidekick`]).
//!
//! str0m runs in RTP mode: the sender writes the RTP packets of each frame itself (VP8 payload
//! type, our payload header, [`super::source`]), paced evenly over the frame interval, nackable,
//! so str0m answers NACKs with RTX; the receiver gets every packet (`Event::RtpPacket`, RTX
//! already unwrapped) into its jitter buffer ([`super::playout`]). str0m does ICE, DTLS, SRTP,
//! RTCP (SR/RR, NACK every 33 ms for open gaps, up to 5 times per packet) and RTX. Its raw-packet
//! events count NACKs and RTX packets on both sides. The loop keeps str0m's contract: every
//! mutation (input, timeout, write) is followed by a full drain of `poll_output`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sidekick::session::Transmit as SkTransmit;
use str0m::format::Codec;
use str0m::media::{Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::rtp::RawPacket;
use str0m::rtp::rtcp::{Nack, Rtcp};
use str0m::{Event, IceConnectionState, Input, Output, Rtc, RtcConfig};

use super::playout::{Playout, PlayoutMetrics};
use super::rekey::{EARLY_CAP, Rekey, Retiring};
use super::rtp_lens::{Kind, classify};
use super::sidekick::WebrtcSidekick;
use super::source::{PayloadHeader, SourceConfig};
use super::vp8::EncodedFrame;
use crate::transfer::sidekick::SidekickCounters;

mod io;
mod key_change;
mod sending;

use sending::Sending;

pub use io::Peer;

/// Which way media flows at this peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sends the video-like stream.
    Sender,
    /// Receives it into a jitter buffer.
    Receiver,
}

/// A peer's parameters.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Sender or receiver.
    pub role: Role,
    /// The source (sender) / what to expect (receiver).
    pub source: SourceConfig,
    /// Frames to send / expect.
    pub frames: u32,
    /// Jitter buffer target beyond the smallest frame delay (receiver).
    pub playout_delay: Duration,
    /// After the last frame: how long the sender keeps answering NACKs, how long the receiver
    /// waits for missing packets.
    pub linger: Duration,
    /// Frame-size seed.
    pub seed: u64,
    /// End by itself once done (the client); the server's peer ends on its stop signal.
    pub stop_when_done: bool,
    /// ICE and DTLS must complete within this.
    pub connect_timeout: Duration,
    /// Hard limit on the call.
    pub max_duration: Duration,
    /// Write the receiver's per-packet trace (CSV) here at the end.
    pub trace: Option<std::path::PathBuf>,
    /// Sender: real VP8 frames to send, one per frame slot, instead of the synthetic payloads
    /// (a far peer that decodes: [`super::browser`]).
    pub vp8: Option<Arc<[EncodedFrame]>>,
}

/// One peer's half of the report (JSON field names are the lab's metric names).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PeerReport {
    /// Frames sent (sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_sent: Option<u64>,
    /// Media RTP packets sent, RTX excluded (sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_sent: Option<u64>,
    /// RTX packets str0m sent in answer to NACKs (sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtx_sent: Option<u64>,
    /// Sequence numbers NACKed by the receiver, as the sender received them (sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nacks_received: Option<u64>,
    /// Jitter-buffer metrics (receiver).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub playout: Option<PlayoutMetrics>,
    /// Sequence numbers the receiver NACKed (each repeat counts) (receiver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nacks: Option<u64>,
    /// RTCP NACK packets the receiver sent (receiver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nack_packets: Option<u64>,
    /// Of [`Self::nacks`], those sent while the receiver's sidekick session was active: what
    /// Packrat's repairs leave to NACK/RTX, apart from the call's start before the session
    /// (receiver with a sidekick).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nacks_while_active: Option<u64>,
    /// Time from DTLS connected to the sidekick session's first activation, ms (discovery and
    /// Init; longer when their datagrams are lost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick_setup_ms: Option<f64>,
    /// RTX packets that reached the receiver (receiver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmissions: Option<u64>,
    /// Time from the start of the peer to DTLS connected, ms.
    pub connect_ms: Option<f64>,
    /// Datagrams str0m could not classify (not STUN/DTLS/RTP/RTCP), dropped.
    pub datagrams_refused: u64,
    /// Datagrams str0m refused as input (logged, dropped).
    pub input_errors: u64,
    /// How the call ended: `done`, `stopped`, `disconnected`, `timeout`.
    pub end: &'static str,
    /// Key changes (a new DTLS handshake, new SRTP keys, [`super::rekey`]) begun during the call.
    #[serde(skip_serializing_if = "is_zero")]
    pub rekeys: u32,
    /// From the last key change's start (offer/answer done) to the new keys' connection, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rekey_connect_ms: Option<f64>,
    /// Media packets under the new keys after a key change: written (sender) or decrypted
    /// (receiver) by the new instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_after_rekey: Option<u64>,
    /// Why a key change did not happen (the call went on with the old keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rekey_error: Option<String>,
    /// The sidekick's counters when the last key change began (what was assisted after it is
    /// the difference to `sidekick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick_at_rekey: Option<SidekickCounters>,
    /// The sidekick session (with `--sidekick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick: Option<SidekickCounters>,
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A str0m instance configured for these calls: RTP mode, VP8 only (with RTX), raw-packet events
/// for the NACK/RTX counters, the crate's crypto provider.
pub fn new_rtc(now: Instant) -> Rtc {
    RtcConfig::new()
        .set_crypto_provider(Arc::new(super::dtls::crypto_provider()))
        .clear_codecs()
        .enable_vp8(true)
        .set_rtp_mode(true)
        .enable_raw_packets(true)
        .build(now)
}

fn nack_seqs(n: &Nack) -> u64 {
    n.reports
        .iter()
        .map(|e| 1 + u64::from(e.blp.count_ones()))
        .sum()
}

/// Wall-clock conversion for `Instant`s (receiver `CLOCK_REALTIME`, as the sender's capture
/// time).
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    base: Instant,
    base_unix_ns: u64,
}

impl WallClock {
    /// `CLOCK_REALTIME` now.
    pub fn now() -> Self {
        Self::at(Instant::now(), unix_ns(SystemTime::now()))
    }

    /// A clock that reads `base_unix_ns` at `base` (a simulator's virtual wall clock).
    pub fn at(base: Instant, base_unix_ns: u64) -> Self {
        Self { base, base_unix_ns }
    }

    /// Nanoseconds since the Unix epoch at `t`.
    pub fn unix_ns(&self, t: Instant) -> u64 {
        if t >= self.base {
            self.base_unix_ns + t.duration_since(self.base).as_nanos() as u64
        } else {
            self.base_unix_ns
                .saturating_sub(self.base.duration_since(t).as_nanos() as u64)
        }
    }
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Which of a peer's sockets a datagram leaves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Socket {
    /// The media socket (str0m's datagrams, the sidekick's early resends and discovery).
    Base,
    /// The sidekick's own socket (quACKs, eACKs, session messages).
    Sidekick,
}

/// A datagram the peer sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The socket.
    pub socket: Socket,
    /// Destination.
    pub to: SocketAddr,
    /// Payload.
    pub data: Vec<u8>,
}

/// One peer of a call without I/O: str0m, the sender's pacing or the receiver's jitter buffer,
/// the NACK/RTX counters, the sidekick and key changes.
///
/// Call order, each with the current time (the last one given is the peer's clock):
/// 1. [`PeerCore::handle_datagram`] / [`PeerCore::handle_sidekick_datagram`] for what arrives,
///    [`PeerCore::handle_rekey`] for a new str0m instance, [`PeerCore::handle_timeout`] once
///    [`PeerCore::poll_timeout`] has passed;
/// 2. then [`PeerCore::poll_transmit`] until `None`, sending each datagram on its socket;
/// 3. [`PeerCore::finished`] says when the call is over for this peer; then
///    [`PeerCore::close`], a last round of `poll_transmit`, and [`PeerCore::into_report`].
///
/// ```
/// use std::time::{Duration, Instant};
/// use sidekick_examples::webrtc::call::source_config;
/// use sidekick_examples::webrtc::peer::{PeerConfig, PeerCore, Role, Socket, WallClock};
/// use sidekick_examples::webrtc::rekey::{self, Offer};
///
/// let t0 = Instant::now();
/// let (c, s) = ("10.0.2.2:5000".parse().unwrap(), "10.0.1.1:4433".parse().unwrap());
/// // Offer and answer (over the signalling endpoint in the binary).
/// let offer = Offer::new(c, Role::Sender, t0).unwrap();
/// let (_server_rtc, answer) = rekey::answer(s, &offer.sdp, t0).unwrap();
/// let k = offer.accept(&answer).unwrap();
/// let cfg = PeerConfig {
///     role: Role::Sender,
///     source: source_config(30, 1500, 60, 4.0),
///     frames: 30,
///     playout_delay: Duration::from_millis(100),
///     linger: Duration::from_millis(500),
///     seed: 1,
///     stop_when_done: true,
///     connect_timeout: Duration::from_secs(10),
///     max_duration: Duration::from_secs(60),
///     trace: None,
///     vp8: None,
/// };
/// let mut peer = PeerCore::new(*k.rtc, c, k.mid, cfg, None, t0, WallClock::at(t0, 0));
/// peer.handle_timeout(t0).unwrap();
/// // ICE starts: a connectivity check towards the server's candidate.
/// let d = peer.poll_transmit().unwrap();
/// assert_eq!((d.socket, d.to), (Socket::Base, s));
/// assert!(peer.finished(t0).is_none());
/// assert!(peer.poll_timeout() >= t0);
/// ```
pub struct PeerCore {
    rtc: Rtc,
    local: SocketAddr,
    remote: Option<SocketAddr>,
    cfg: PeerConfig,
    side: Option<WebrtcSidekick>,
    mid: Option<Mid>,
    media_pt: Option<(Pt, Option<Pt>)>,
    sending: Option<Sending>,
    playout: Playout,
    wall: WallClock,
    started: Instant,
    connected_at: Option<Instant>,
    last_sent_at: Option<Instant>,
    /// Arrival of the newest media packet (receiver).
    last_media_at: Option<Instant>,
    disconnected: bool,
    report: PeerReport,
    packets_sent: u64,
    rtx: u64,
    nacks: u64,
    nack_packets: u64,
    /// NACKed sequence numbers sent while the sidekick session was active.
    nacks_while_active: u64,
    /// When the sidekick session first became active.
    sidekick_active_at: Option<Instant>,
    /// The instance a key change is replacing.
    retiring: Option<Retiring>,
    /// When the last key change began.
    rekey_started: Option<Instant>,
    /// SRTP/SRTCP that reached the instance before it connected (replayed when it does).
    early: VecDeque<(Instant, SocketAddr, Vec<u8>)>,
    /// The peer's clock: the time of the call being handled.
    now: Instant,
    /// str0m's next timeout, from the last drain.
    rtc_timeout: Instant,
    /// Datagrams to send.
    out: VecDeque<Datagram>,
}

/// The VP8 payload type (and its RTX type) the offer/answer of `rtc` settled on.
fn negotiated_vp8(rtc: &Rtc) -> Option<(Pt, Option<Pt>)> {
    rtc.codec_config()
        .find(|p| p.spec().codec == Codec::Vp8)
        .map(|p| (p.pt(), p.resend()))
}

impl PeerCore {
    /// A peer on `rtc` (offer/answer done) starting at `now`; `local` is the address of its host
    /// candidate (the destination of what it receives), `mid` the media line when known (the
    /// offerer's; the answerer learns it from `MediaAdded`), `wall` its `CLOCK_REALTIME`.
    pub fn new(
        rtc: Rtc,
        local: SocketAddr,
        mid: Option<Mid>,
        cfg: PeerConfig,
        mut side: Option<WebrtcSidekick>,
        now: Instant,
        wall: WallClock,
    ) -> Self {
        // The offer/answer fixed the media's payload type: the sidekick numbers the stream from
        // its first packet, also those that arrive before this side's DTLS has completed (the
        // far side may stream a second or more earlier when a DTLS flight is lost here; until
        // 27 Nov the lens waited for `Connected`, so Packrat could not see, and the proxy not
        // repair, the losses of that time — 12–16 packets in a simulator trial whose client
        // connected 1.7 s after its server).
        let media_pt = negotiated_vp8(&rtc);
        if let (Some(s), Some((pt, _))) = (side.as_mut(), media_pt) {
            s.set_media_pt(*pt);
        }
        Self {
            rtc,
            local,
            remote: None,
            playout: Playout::new(cfg.playout_delay),
            cfg,
            side,
            mid,
            media_pt,
            sending: None,
            wall,
            started: now,
            connected_at: None,
            last_sent_at: None,
            last_media_at: None,
            disconnected: false,
            report: PeerReport::default(),
            packets_sent: 0,
            rtx: 0,
            nacks: 0,
            nack_packets: 0,
            nacks_while_active: 0,
            sidekick_active_at: None,
            retiring: None,
            rekey_started: None,
            early: VecDeque::new(),
            now,
            rtc_timeout: now,
            out: VecDeque::new(),
        }
    }

    /// A datagram from `from` on the media socket.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: Vec<u8>,
    ) -> anyhow::Result<()> {
        self.now = now;
        self.on_base(now, from, d)?;
        self.settle()
    }

    /// A datagram from `from` on the sidekick socket.
    pub fn handle_sidekick_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: &[u8],
    ) -> anyhow::Result<()> {
        self.now = now;
        if let Some(s) = self.side.as_mut() {
            s.on_sidekick_datagram(now, from, d);
        }
        self.feed_released()?;
        self.settle()
    }

    /// A key change: `k` (offer/answer done) replaces the current instance, make-before-break
    /// ([`super::rekey`]).
    pub fn handle_rekey(&mut self, now: Instant, k: Rekey) -> anyhow::Result<()> {
        self.now = now;
        self.begin_rekey(now, k);
        self.settle()
    }

    /// A key change that did not happen: reported, and the call goes on with the old keys.
    pub fn handle_rekey_error(&mut self, e: String) {
        tracing::warn!("key change: {e}");
        self.report.rekey_error = Some(e);
    }

    /// Timers (str0m's, the sender's pacing, the sidekick's, a retiring instance's).
    pub fn handle_timeout(&mut self, now: Instant) -> anyhow::Result<()> {
        self.now = now;
        self.on_timer(now)?;
        self.settle()
    }

    /// After any input: str0m drained, early datagrams replayed, the sidekick's output queued.
    fn settle(&mut self) -> anyhow::Result<()> {
        self.rtc_timeout = self.drain()?;
        self.replay_early()?;
        self.collect_sidekick();
        if self.sidekick_active_at.is_none()
            && self.side.as_ref().is_some_and(WebrtcSidekick::is_active)
        {
            self.sidekick_active_at = Some(self.now);
        }
        Ok(())
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Datagram> {
        self.out.pop_front()
    }

    /// When [`Self::handle_timeout`] must run next.
    pub fn poll_timeout(&self) -> Instant {
        [
            Some(self.rtc_timeout),
            self.next_send(),
            self.side.as_ref().and_then(WebrtcSidekick::poll_timeout),
            self.retiring.as_ref().and_then(|r| r.until),
            Some(self.started + self.cfg.max_duration),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.rtc_timeout)
    }

    /// ICE and DTLS have not completed within the configured time.
    pub fn connect_timed_out(&self, now: Instant) -> bool {
        self.connected_at.is_none() && now.duration_since(self.started) > self.cfg.connect_timeout
    }

    /// Ends the call: str0m disconnects (its last datagrams are queued).
    pub fn close(&mut self, now: Instant) {
        self.now = now;
        self.rtc.disconnect();
        let _ = self.drain();
        self.collect_sidekick();
    }

    /// The receiver's per-packet trace (CSV: seq, arrival ms, de-jitter ms).
    pub fn trace_csv(&self) -> String {
        self.playout.trace_csv()
    }

    /// The configuration.
    pub fn config(&self) -> &PeerConfig {
        &self.cfg
    }

    /// This peer's report, the call having ended with `end`.
    pub fn into_report(mut self, end: &'static str) -> PeerReport {
        let mut r = std::mem::take(&mut self.report);
        r.end = end;
        r.connect_ms = self
            .connected_at
            .map(|t| t.duration_since(self.started).as_secs_f64() * 1000.0);
        match self.cfg.role {
            Role::Sender => {
                r.frames_sent = Some(self.sending.as_ref().map_or(0, |s| u64::from(s.next_frame)));
                r.packets_sent = Some(self.packets_sent);
                r.rtx_sent = Some(self.rtx);
                r.nacks_received = Some(self.nacks);
            }
            Role::Receiver => {
                r.playout = Some(self.playout.metrics());
                r.nacks = Some(self.nacks);
                r.nack_packets = Some(self.nack_packets);
                if self.side.is_some() {
                    r.nacks_while_active = Some(self.nacks_while_active);
                }
                r.retransmissions = Some(self.rtx);
            }
        }
        r.sidekick = self.side.as_ref().map(WebrtcSidekick::counters);
        r.sidekick_setup_ms = self
            .connected_at
            .zip(self.sidekick_active_at)
            .map(|(c, a)| a.saturating_duration_since(c).as_secs_f64() * 1000.0);
        r
    }

    /// `Some(reason)` once the call is over for this peer.
    pub fn finished(&self, now: Instant) -> Option<&'static str> {
        if self.disconnected {
            return Some("disconnected");
        }
        if now >= self.started + self.cfg.max_duration {
            return Some("timeout");
        }
        if !self.cfg.stop_when_done {
            return None;
        }
        let connected = self.connected_at?;
        let stream_end =
            connected + self.cfg.source.frame_interval() * self.cfg.frames + self.cfg.linger;
        match self.cfg.role {
            Role::Sender => {
                let s = self.sending.as_ref()?;
                let all_sent = s.next_frame >= self.cfg.frames && s.queue.is_empty();
                let lingered = self
                    .last_sent_at
                    .is_some_and(|t| now >= t + self.cfg.linger);
                (all_sent && lingered).then_some("done")
            }
            Role::Receiver => {
                if self.playout.frames_complete() >= u64::from(self.cfg.frames) {
                    Some("done")
                } else {
                    // A sender behind schedule (a loaded machine) is still sending: wait until
                    // the stream has been quiet for the linger too.
                    let quiet = self
                        .last_media_at
                        .is_none_or(|t| now >= t + self.cfg.linger);
                    (now >= stream_end && quiet).then_some("done")
                }
            }
        }
    }

    /// Drains str0m's output (both instances during a key change); returns the next timeout.
    fn drain(&mut self) -> anyhow::Result<Instant> {
        let next = loop {
            match self.rtc.poll_output()? {
                Output::Timeout(t) => break t,
                Output::Transmit(t) => self.transmit(t.destination, t.contents.into()),
                Output::Event(e) => self.on_event(e),
            }
        };
        Ok(self.drain_retiring().map_or(next, |t| t.min(next)))
    }

    /// Queues str0m's datagram `d` (its own buffer, moved: no copy per packet).
    fn transmit(&mut self, to: SocketAddr, d: Vec<u8>) {
        self.remote = Some(to);
        if let Some(s) = self.side.as_mut() {
            s.on_sent(self.now, to, &d);
        }
        self.out.push_back(Datagram {
            socket: Socket::Base,
            to,
            data: d,
        });
    }

    fn on_event(&mut self, e: Event) {
        match e {
            Event::Connected => {
                let now = self.now;
                self.connected_at.get_or_insert(now);
                let vp8 = negotiated_vp8(&self.rtc);
                self.media_pt = vp8;
                if let (Some(s), Some((pt, _))) = (self.side.as_mut(), vp8) {
                    s.set_media_pt(*pt);
                }
                tracing::info!(?vp8, "connected");
                self.on_reconnected(now);
            }
            Event::MediaAdded(m) => {
                self.mid.get_or_insert(m.mid);
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) | Event::Closed => {
                self.disconnected = true;
            }
            Event::RtpPacket(p) => {
                let media = self.on_media(self.media_pt, &p);
                if media && self.report.rekeys > 0 {
                    *self.report.media_after_rekey.get_or_insert(0) += 1;
                }
            }
            Event::RawPacket(raw) => self.on_raw(self.media_pt, &raw),
            _ => {}
        }
    }

    /// A media packet for the jitter buffer; false if `p` is not one.
    fn on_media(&mut self, media_pt: Option<(Pt, Option<Pt>)>, p: &str0m::rtp::RtpPacket) -> bool {
        let Some((pt, _)) = media_pt else {
            return false;
        };
        if p.header.payload_type != pt {
            return false;
        }
        self.last_media_at = Some(self.now);
        match PayloadHeader::parse(&p.payload) {
            Ok(h) => {
                let at = self.wall.unix_ns(p.timestamp);
                self.playout.on_packet(*p.seq_no, at, h);
            }
            Err(e) => tracing::debug!(%e, "RTP payload without our header"),
        }
        true
    }

    fn on_raw(&mut self, media_pt: Option<(Pt, Option<Pt>)>, raw: &RawPacket) {
        let rtx_pt = media_pt.and_then(|(_, r)| r);
        match raw {
            RawPacket::RtcpTx(Rtcp::Nack(n)) if self.cfg.role == Role::Receiver => {
                self.nack_packets += 1;
                self.nacks += nack_seqs(n);
                if self.side.as_ref().is_some_and(WebrtcSidekick::is_active) {
                    self.nacks_while_active += nack_seqs(n);
                }
            }
            RawPacket::RtcpRx(Rtcp::Nack(n)) if self.cfg.role == Role::Sender => {
                self.nacks += nack_seqs(n);
            }
            RawPacket::RtpTx(h, _)
                if self.cfg.role == Role::Sender && Some(h.payload_type) == rtx_pt =>
            {
                self.rtx += 1;
            }
            RawPacket::RtpRx(h, _)
                if self.cfg.role == Role::Receiver && Some(h.payload_type) == rtx_pt =>
            {
                self.rtx += 1;
            }
            _ => {}
        }
    }

    /// Replays what the instance got before it connected.
    fn replay_early(&mut self) -> anyhow::Result<()> {
        if self.early.is_empty() || !self.rtc.is_connected() {
            return Ok(());
        }
        for (at, from, d) in std::mem::take(&mut self.early) {
            self.feed(at, from, &d)?;
        }
        Ok(())
    }

    /// Feeds one datagram to str0m (with its socket arrival time) and drains.
    ///
    /// SRTP and SRTCP that arrive before DTLS has completed here (the far peer may finish its
    /// side a round trip or a lost flight earlier, and start sending) are kept and replayed once
    /// it has, instead of being dropped. During a key change they also go to the retiring
    /// instance (each authenticates its own keys' packets and drops the rest); STUN and DTLS are
    /// the new one's.
    fn feed(&mut self, at: Instant, from: SocketAddr, d: &[u8]) -> anyhow::Result<()> {
        let srtp = matches!(classify(d), Kind::Rtp { .. } | Kind::Rtcp { .. });
        if srtp {
            if let Some(old) = self.retiring.as_mut()
                && let Ok(r) = Receive::new(Protocol::Udp, from, self.local, d)
            {
                let _ = old.rtc.handle_input(Input::Receive(at, r));
            }
            if !self.rtc.is_connected() {
                if self.early.len() < EARLY_CAP {
                    self.early.push_back((at, from, d.to_vec()));
                }
                self.drain()?;
                return Ok(());
            }
        }
        match Receive::new(Protocol::Udp, from, self.local, d) {
            Ok(r) => {
                if let Err(e) = self.rtc.handle_input(Input::Receive(at, r))
                    // The other keys' packets are expected to fail during a key change.
                    && !(srtp && self.retiring.is_some())
                {
                    self.report.input_errors += 1;
                    tracing::debug!(%e, "str0m refused a datagram");
                }
            }
            Err(_) => self.report.datagrams_refused += 1,
        }
        self.drain()?;
        Ok(())
    }

    fn on_base(&mut self, now: Instant, from: SocketAddr, d: Vec<u8>) -> anyhow::Result<()> {
        self.remote.get_or_insert(from);
        let pass = match self.side.as_mut() {
            Some(s) => s.on_received(now, from, d),
            None => Some(d),
        };
        if let Some(d) = pass {
            self.feed(now, from, &d)?;
        }
        self.feed_released()
    }

    /// Datagrams the sidekick released (after a gap filled or the reorder window ran out).
    fn feed_released(&mut self) -> anyhow::Result<()> {
        let Some(from) = self
            .side
            .as_ref()
            .and_then(WebrtcSidekick::peer)
            .or(self.remote)
        else {
            return Ok(());
        };
        while let Some((d, at)) = self.side.as_mut().and_then(WebrtcSidekick::poll_deliver) {
            self.feed(at, from, &d)?;
        }
        Ok(())
    }

    /// Queues what the sidekick sends (early resends and discovery on the media socket).
    fn collect_sidekick(&mut self) {
        let Some(s) = self.side.as_mut() else { return };
        while let Some(t) = s.poll_transmit() {
            let d = match t {
                SkTransmit::Base(data) => match s.peer().or(self.remote) {
                    Some(to) => Datagram {
                        socket: Socket::Base,
                        to,
                        data,
                    },
                    None => continue,
                },
                SkTransmit::Sidekick(to, data) => Datagram {
                    socket: Socket::Sidekick,
                    to,
                    data,
                },
            };
            self.out.push_back(d);
        }
    }

    fn on_timer(&mut self, now: Instant) -> anyhow::Result<()> {
        if let Some(s) = self.side.as_mut()
            && s.poll_timeout().is_some_and(|t| t <= now)
        {
            s.handle_timeout(now);
        }
        self.feed_released()?;
        if self.cfg.role == Role::Sender {
            self.send_due(now)?;
        }
        self.rtc.handle_input(Input::Timeout(now))?;
        self.retiring_timeout(now);
        self.drain()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
