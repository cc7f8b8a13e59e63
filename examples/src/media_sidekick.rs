//! Robin #1 for the low-latency media sender (Sidekick (NSDI '24) §2, §4.3, Table 5 #1): the SDK's sans-IO
//! session and Robin engine on plain UDP datagrams.
//!
//! Every media datagram ends with its Poly1305 tag, pseudorandom like a QUIC packet's AEAD tag,
//! so the quACK identifier is read at the same place as for QUIC (the last 4 bytes,
//! `IdentifierSpec::quic_default`). The sender logs every datagram it puts on the wire
//! ([`SidekickObserver`], a [`SendObserver`]); the proxy quACKs what it forwarded (every 2
//! packets, t = 8 by default); when a quACK shows a datagram lost on the near segment the SDK
//! hands back an identical copy, which the driver task resends on the base socket at once — the
//! receiver takes whichever copy arrives first, as with a NACK-triggered retransmission, but
//! without waiting for the far segment's round trip. No proxy, or anything inconsistent: the SDK
//! falls back and the stream continues with end-to-end NACKs only.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sidekick::session::{SidekickClient, SidekickConfig, Transmit};
use sidekick_protocol::is_discovery_reply;
use tokio::net::UdpSocket;
use tokio::sync::Notify;

use crate::media::SendObserver;
use crate::media_io::FecHooks;
use crate::transfer::sidekick::{EngineSample, Mode, SidekickCounters};

/// Robin #1 settings (Sidekick (NSDI '24) Table 5): a quACK every `every_packets` packets (2) and/or
/// `interval_ms`, threshold `threshold` (8); a hole is lost once `reorder_threshold` later
/// packets were received — 1 for media: "when it receives a quACK, it detects lost packets
/// without reordering and immediately retransmits them" (Sidekick (NSDI '24) §5.2), where bulk transfers
/// use TCP's 3 (§4.3.1). `quack_on_gap_percent` (0: off) asks the proxy for a quACK at once
/// when a packet follows a silence (the loss of the one before it), see
/// `sidekick_protocol::messages::RobinConfig`.
///
/// ```
/// let c = sidekick_examples::media_sidekick::media_config(2, 8, 0, 1, 150);
/// let r = c.protocol.session.robin.unwrap();
/// assert_eq!((r.interval_packets, r.threshold, r.interval_ms), (2, 8, 0));
/// assert_eq!(r.quack_on_gap_percent, 150);
/// assert_eq!(c.robin.reorder_threshold, 1);
/// ```
pub fn media_config(
    every_packets: u32,
    threshold: u32,
    interval_ms: u32,
    reorder_threshold: u32,
    quack_on_gap_percent: u32,
) -> SidekickConfig {
    let mut c = SidekickConfig::robin(interval_ms, threshold);
    if let Some(r) = c.protocol.session.robin.as_mut() {
        r.interval_packets = every_packets;
        r.quack_on_gap_percent = quack_on_gap_percent;
    }
    c.robin.reorder_threshold = reorder_threshold.max(1);
    c
}

/// The media applications' sidekick, sans IO: the SDK session with the calls the media sender
/// (Robin) or player (Packrat) makes around its datagrams, at explicit instants. The tokio driver
/// ([`MediaSidekick`]) and the simulator (`sidekick-sim`) both run it.
#[derive(Debug)]
pub struct MediaSidekickCore {
    client: SidekickClient,
    sample: EngineSample,
    last_sample: Option<Instant>,
    mode: Mode,
}

impl MediaSidekickCore {
    /// The session of a media sender (`Mode::Robin`) or player (`Mode::Packrat`) whose peer is
    /// `peer`; `local` are the host's own addresses (a sidekick may not point back into the host,
    /// unless the peer is on it too).
    pub fn new(
        mut client: SidekickClient,
        peer: SocketAddr,
        local: impl IntoIterator<Item = std::net::IpAddr>,
        mode: Mode,
    ) -> Self {
        client.set_base_peer(peer);
        client.add_local_addrs(local);
        Self {
            client,
            sample: EngineSample::default(),
            last_sample: None,
            mode,
        }
    }

    /// Robin: the sender put a media datagram on the wire (original or resend). The first one
    /// starts discovery.
    pub fn on_media_sent(&mut self, now: Instant, datagram: &[u8]) {
        if self.client.is_idle()
            && let Err(e) = self.client.start(now)
        {
            tracing::debug!(%e, "sidekick discovery did not start");
        }
        // NACK-triggered resends are new datagrams (fresh nonce, new tag): logged like any other.
        self.client.on_base_sent(now, datagram);
    }

    /// Robin: the sender put a control datagram (FIN) on the wire. The proxy counts every
    /// datagram of the flow: a FIN it forwarded but Robin never saw would read as "received but
    /// never sent" and end the session.
    pub fn on_control_sent(&mut self, now: Instant, datagram: &[u8]) {
        self.client.on_base_sent(now, datagram);
    }

    /// Robin: a datagram arrived from the peer's address; true if it was the sidekick's
    /// (a discovery reply, which the proxy sends "from" the peer) and the sender must not see it.
    pub fn on_sender_received(&mut self, now: Instant, datagram: &[u8]) -> bool {
        if !is_discovery_reply(datagram) {
            return false;
        }
        self.client.on_base_received(now, datagram.to_vec());
        // Nothing else is ever passed in, so nothing waits for delivery.
        while self.client.poll_deliver().is_some() {}
        true
    }

    /// Packrat: the player sent a datagram to the server; the first one starts discovery.
    pub fn on_player_sent(&mut self, now: Instant) {
        if self.client.is_idle()
            && let Err(e) = self.client.start(now)
        {
            tracing::debug!(%e, "sidekick discovery did not start");
        }
    }

    /// Packrat: a datagram arrived from the server's address (before the player sees it); true
    /// if it was a discovery reply, which the player must not see.
    pub fn on_player_received(&mut self, now: Instant, datagram: &[u8]) -> bool {
        let discovery = is_discovery_reply(datagram);
        self.client.on_base_received(now, datagram.to_vec());
        // The player reads the datagram itself; the SDK's copy is only for the eACK.
        while self.client.poll_deliver().is_some() {}
        discovery
    }

    /// Packrat: as [`Self::on_player_received`], with the media sequence number `seq` of a DATA
    /// datagram. With NACK-driven eACKs ([`fec_nack_config`]) the sequence number is the SDK's
    /// packet number: a gap in it — where the player's NACK layer sees a missing packet — sends
    /// an eACK at once and again every eACK interval while the gap is open (selective eACKs,
    /// Packrat (CoNEXT '26) §5.2.3, §6.2); periodic eACKs ignore it.
    pub fn on_player_received_seq(
        &mut self,
        now: Instant,
        datagram: &[u8],
        seq: Option<u32>,
    ) -> bool {
        if !self.numbered() {
            return self.on_player_received(now, datagram);
        }
        let discovery = is_discovery_reply(datagram);
        self.client
            .on_base_received_with_pn(now, datagram.to_vec(), seq.map(u64::from));
        while self.client.poll_deliver().is_some() {}
        discovery
    }

    /// Packrat with NACK-driven eACKs: how long the player holds its end-to-end NACK of a
    /// missing frame — the SDK's hold window (the reorder window), during which the SDK eACKs
    /// the gap and the proxy repairs it — while the session is active; `None` otherwise (no
    /// proxy, fallback, periodic eACKs: NACK at once).
    pub fn nack_hold(&self) -> Option<Duration> {
        if !self.numbered() || !self.client.is_active() {
            return None;
        }
        self.client
            .packrat()
            .map(sidekick::packrat::PackratReceiver::hold_window)
    }

    /// A Packrat session with selective eACKs: the player's sequence numbers are its packet
    /// numbers (NACK-driven eACKs, [`fec_nack_config`]).
    fn numbered(&self) -> bool {
        self.mode == Mode::Packrat && self.client.packrat().is_some_and(|p| p.config().selective)
    }

    /// A datagram arrived on the sidekick socket.
    pub fn on_sidekick_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.client.on_sidekick_datagram(now, from, datagram);
    }

    /// The session's next timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.client.poll_timeout()
    }

    /// Runs the session's timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.client.handle_timeout(now);
    }

    /// What the session must send now (on the base or the sidekick socket); its events are
    /// dropped (no congestion controller to feed); the engines' counters are sampled every
    /// 20 ms for the report (the SDK drops its engines on fallback).
    pub fn poll_transmits(&mut self, now: Instant) -> Vec<Transmit> {
        let mut out = Vec::new();
        while let Some(t) = self.client.poll_transmit() {
            out.push(t);
        }
        while self.client.poll_event().is_some() {}
        match self.last_sample {
            None => self.last_sample = Some(now),
            Some(l) if now.saturating_duration_since(l) >= Duration::from_millis(20) => {
                self.last_sample = Some(now);
                self.sample.update(&self.client);
            }
            Some(_) => {}
        }
        out
    }

    /// The session's counters for the report.
    pub fn counters(&self) -> SidekickCounters {
        SidekickCounters::collect(self.mode, &self.client, &self.sample, 0)
    }
}

struct Shared {
    core: Mutex<MediaSidekickCore>,
    wake: Notify,
}

impl Shared {
    fn core(&self) -> MutexGuard<'_, MediaSidekickCore> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sidekick running next to a media sender: an observer for `run_sender` and a driver task
/// that owns the sidekick socket. Create inside a tokio runtime.
pub struct MediaSidekick {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

/// The [`SendObserver`] half: logs sent datagrams, consumes discovery replies.
pub struct SidekickObserver {
    shared: Arc<Shared>,
}

impl MediaSidekick {
    /// Starts the driver for a media *sender* (Robin): `base` is the media socket (for early
    /// retransmissions and discovery), `peer` the receiver, `sidekick` a second socket for the
    /// sidekick connection.
    pub fn spawn(
        client: SidekickClient,
        base: Arc<UdpSocket>,
        peer: SocketAddr,
        sidekick: UdpSocket,
    ) -> (Self, SidekickObserver) {
        let me = Self::start(client, base, peer, sidekick, Mode::Robin);
        let obs = SidekickObserver {
            shared: me.shared.clone(),
        };
        (me, obs)
    }

    /// Starts the driver for a media *receiver* (Packrat): the hooks feed every received media
    /// datagram to the eACK and start discovery with the first datagram sent (HELLO).
    pub fn spawn_receiver(
        client: SidekickClient,
        base: Arc<UdpSocket>,
        peer: SocketAddr,
        sidekick: UdpSocket,
    ) -> (Self, PackratHooks) {
        let me = Self::start(client, base, peer, sidekick, Mode::Packrat);
        let hooks = PackratHooks {
            shared: me.shared.clone(),
        };
        (me, hooks)
    }

    fn start(
        client: SidekickClient,
        base: Arc<UdpSocket>,
        peer: SocketAddr,
        sidekick: UdpSocket,
        mode: Mode,
    ) -> Self {
        let core =
            MediaSidekickCore::new(client, peer, sidekick::local_addrs::host_addresses(), mode);
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            wake: Notify::new(),
        });
        let task = tokio::spawn(drive(shared.clone(), base, peer, sidekick));
        Self { shared, task }
    }

    /// The session's counters for the report.
    pub fn counters(&self) -> SidekickCounters {
        self.shared.core().counters()
    }

    /// Stops the driver task.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl SendObserver for SidekickObserver {
    fn on_send(&mut self, _seq: u32, datagram: &[u8], _retransmission: bool) {
        self.shared.core().on_media_sent(Instant::now(), datagram);
        self.shared.wake.notify_one();
    }

    fn on_control_sent(&mut self, datagram: &[u8]) {
        self.shared.core().on_control_sent(Instant::now(), datagram);
        self.shared.wake.notify_one();
    }

    fn on_receive(&mut self, datagram: &[u8]) -> bool {
        if !self
            .shared
            .core()
            .on_sender_received(Instant::now(), datagram)
        {
            return false;
        }
        self.shared.wake.notify_one();
        true
    }
}
/// Packrat media config (Packrat (CoNEXT '26) Table 4, media: 40 symbols, 20 kB cache): eACKs every
/// `every_packets` packets or `interval_ms`. Media datagrams carry no QUIC packet number, so
/// the reorder window never holds anything (the player has no ACKs to withhold) and the client
/// cannot count its open gaps: each eACK is sized for [`MEDIA_EACK_EXPECTED`] differences at
/// [`MEDIA_EACK_PROBABILITY`] (32 of the 40 symbols).
///
/// ```
/// use sidekick_examples::media_sidekick::{MEDIA_EACK_EXPECTED, fec_config};
/// let c = fec_config(2, 40, 40);
/// let p = c.protocol.session.packrat.unwrap();
/// assert_eq!((p.eack_interval_packets, p.eack_interval_ms, p.local_symbols), (2, 40, 40));
/// assert_eq!(c.packrat.inflight_allowance, MEDIA_EACK_EXPECTED);
/// ```
pub fn fec_config(every_packets: u32, interval_ms: u32, symbols: u32) -> SidekickConfig {
    let mut c = SidekickConfig::packrat();
    if let Some(p) = c.protocol.session.packrat.as_mut() {
        p.eack_interval_packets = every_packets;
        p.eack_interval_ms = interval_ms;
        p.local_symbols = symbols;
        p.cache_capacity_bytes = 20_000;
        p.reorder_delay_ms = 0;
    }
    c.packrat.inflight_allowance = MEDIA_EACK_EXPECTED;
    c.packrat.success_probability = MEDIA_EACK_PROBABILITY;
    c
}

/// Packrat media config with NACK-driven eACKs (Packrat (CoNEXT '26) §5.2.3, §6.2): selective
/// eACKs — one at once when a media packet goes missing (the player passes its sequence
/// numbers as packet numbers), then every `interval_ms` while the gap is open, none while
/// nothing is missing; a gap stays open for `reorder_ms` (the hold window), and the player holds
/// its own end-to-end NACK that long ([`MediaSidekickCore::nack_hold`]). `symbols` local
/// symbols, a 20 kB cache (Table 4, media); each eACK is sized for the open gaps plus
/// [`MEDIA_EACK_EXPECTED`] at [`MEDIA_EACK_PROBABILITY`].
///
/// ```
/// use sidekick_examples::media_sidekick::fec_nack_config;
/// let c = fec_nack_config(60, 40, 130);
/// let p = c.protocol.session.packrat.unwrap();
/// assert_eq!((p.eack_interval_ms, p.reorder_delay_ms, p.local_symbols), (60, 130, 40));
/// assert!(c.packrat.selective);
/// ```
pub fn fec_nack_config(interval_ms: u32, symbols: u32, reorder_ms: u32) -> SidekickConfig {
    let mut c = fec_config(0, interval_ms, symbols);
    if let Some(p) = c.protocol.session.packrat.as_mut() {
        p.reorder_delay_ms = reorder_ms;
    }
    // Time-driven only while a gap is open: no eACK for a count of packets.
    c.packrat.eack_every_packets = u32::MAX;
    c.packrat.selective = true;
    c
}

/// When a Packrat media player (`sidekick-media-fec`, `sidekick-multicast`) sends eACKs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EackMode {
    /// Every N packets or MS ([`fec_config`]).
    Periodic,
    /// Where the NACK layer sees a missing packet (selective eACKs, [`fec_nack_config`]); the
    /// player's NACKs held meanwhile.
    Nack,
}

/// The player's SDK configuration for `mode`: [`fec_config`] or [`fec_nack_config`] with the
/// flags that apply to it.
///
/// ```
/// use sidekick_examples::media_sidekick::{EackMode, player_config};
/// assert!(player_config(EackMode::Nack, 25, 2, 40, 50).packrat.selective);
/// assert!(!player_config(EackMode::Periodic, 25, 2, 40, 50).packrat.selective);
/// ```
pub fn player_config(
    mode: EackMode,
    interval_ms: u32,
    every_packets: u32,
    symbols: u32,
    reorder_ms: u32,
) -> SidekickConfig {
    match mode {
        EackMode::Periodic => fec_config(every_packets, interval_ms, symbols),
        EackMode::Nack => fec_nack_config(interval_ms, symbols, reorder_ms),
    }
}

/// Differences a media eACK is sized to decode. At 50 packets/s over a 30 ms last hop the
/// proxy's set holds about 3 packets the client has not received yet (one-way delay plus the
/// eACK's own trip), plus every loss awaiting its repair (≈ 100 ms each; at 10 % loss about 1)
/// and the repairs in flight; a burst adds more. An eACK that does not decode resets the epoch
/// and empties the proxy's cache, losing the repairs under way, so it is sized with margin: 8
/// (with 4 at p = 0.95, 13 symbols, about 3 % of the eACKs failed on the satellite link).
pub const MEDIA_EACK_EXPECTED: usize = 8;

/// Decoding probability a media eACK is sized for (with [`MEDIA_EACK_EXPECTED`]: 32 symbols).
pub const MEDIA_EACK_PROBABILITY: f64 = 0.99;

/// The [`FecHooks`] of a player whose event loop owns its [`MediaSidekickCore`] (or has none),
/// at the instant `now` of the call they are passed to (the simulator's multicast receivers).
pub struct CoreHooks<'a> {
    /// The receiver's sidekick, if it runs one.
    pub core: Option<&'a mut MediaSidekickCore>,
    /// The instant of the call.
    pub now: Instant,
}

impl FecHooks for CoreHooks<'_> {
    fn on_sent(&mut self, _datagram: &[u8]) {
        if let Some(c) = self.core.as_deref_mut() {
            c.on_player_sent(self.now);
        }
    }

    fn on_received(&mut self, datagram: &[u8], seq: Option<u32>) -> bool {
        self.core
            .as_deref_mut()
            .is_some_and(|c| c.on_player_received_seq(self.now, datagram, seq))
    }

    fn nack_hold(&self) -> Option<Duration> {
        self.core.as_deref().and_then(MediaSidekickCore::nack_hold)
    }
}

/// The [`FecHooks`] half for a Packrat media receiver.
pub struct PackratHooks {
    shared: Arc<Shared>,
}

impl FecHooks for PackratHooks {
    fn on_sent(&mut self, _datagram: &[u8]) {
        let mut c = self.shared.core();
        let idle = c.client.is_idle();
        c.on_player_sent(Instant::now());
        drop(c);
        if idle {
            self.shared.wake.notify_one();
        }
    }

    fn on_received(&mut self, datagram: &[u8], seq: Option<u32>) -> bool {
        let discovery = self
            .shared
            .core()
            .on_player_received_seq(Instant::now(), datagram, seq);
        self.shared.wake.notify_one();
        discovery
    }

    fn nack_hold(&self) -> Option<Duration> {
        self.shared.core().nack_hold()
    }
}

async fn drive(shared: Arc<Shared>, base: Arc<UdpSocket>, peer: SocketAddr, sk: UdpSocket) {
    let mut buf = vec![0u8; 65_536];
    loop {
        // Send what the client queued.
        let (out, deadline) = {
            let mut c = shared.core();
            (c.poll_transmits(Instant::now()), c.poll_timeout())
        };
        for t in out {
            // Best effort: the end-to-end NACKs recover what is not sent.
            let r = match t {
                Transmit::Base(d) => base.send_to(&d, peer).await,
                Transmit::Sidekick(to, d) => sk.send_to(&d, to).await,
            };
            if let Err(e) = r {
                tracing::debug!("sidekick send: {e}");
            }
        }
        let sleep_for = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            r = sk.recv_from(&mut buf) => {
                if let Ok((n, from)) = r {
                    shared.core().on_sidekick_datagram(Instant::now(), from, &buf[..n]);
                }
            }
            () = tokio::time::sleep(sleep_for) => {
                shared.core().handle_timeout(Instant::now());
            }
            () = shared.wake.notified() => {}
        }
    }
}
