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

struct Shared {
    client: Mutex<SidekickClient>,
    sample: Mutex<EngineSample>,
    wake: Notify,
}

impl Shared {
    fn client(&self) -> MutexGuard<'_, SidekickClient> {
        self.client.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sidekick running next to a media sender: an observer for `run_sender` and a driver task
/// that owns the sidekick socket. Create inside a tokio runtime.
pub struct MediaSidekick {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
    mode: Mode,
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
        let mut client = client;
        // The sidekick may not point back into this host (unless the receiver is on it too).
        client.set_base_peer(peer);
        client.add_local_addrs(sidekick::local_addrs::host_addresses());
        let shared = Arc::new(Shared {
            client: Mutex::new(client),
            sample: Mutex::new(EngineSample::default()),
            wake: Notify::new(),
        });
        let task = tokio::spawn(drive(shared.clone(), base, peer, sidekick));
        Self { shared, task, mode }
    }

    /// The session's counters for the report.
    pub fn counters(&self) -> SidekickCounters {
        let sample = *self
            .shared
            .sample
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        SidekickCounters::collect(self.mode, &self.shared.client(), &sample, 0)
    }

    /// Stops the driver task.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl SendObserver for SidekickObserver {
    fn on_send(&mut self, _seq: u32, datagram: &[u8], retransmission: bool) {
        let now = Instant::now();
        let mut c = self.shared.client();
        if c.is_idle() {
            if let Err(e) = c.start(now) {
                tracing::debug!(%e, "sidekick discovery did not start");
            }
        }
        // NACK-triggered resends are new datagrams (fresh nonce, new tag): logged like any other.
        let _ = retransmission;
        c.on_base_sent(now, datagram);
        drop(c);
        self.shared.wake.notify_one();
    }

    fn on_control_sent(&mut self, datagram: &[u8]) {
        // The proxy counts every datagram of the flow: a FIN it forwarded but Robin never saw
        // would read as "received but never sent" and end the session.
        let mut c = self.shared.client();
        c.on_base_sent(Instant::now(), datagram);
        drop(c);
        self.shared.wake.notify_one();
    }

    fn on_receive(&mut self, datagram: &[u8]) -> bool {
        if !is_discovery_reply(datagram) {
            return false;
        }
        let mut c = self.shared.client();
        c.on_base_received(Instant::now(), datagram.to_vec());
        // Nothing else is ever passed in, so nothing waits for delivery.
        while c.poll_deliver().is_some() {}
        drop(c);
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

/// Differences a media eACK is sized to decode. At 50 packets/s over a 30 ms last hop the
/// proxy's set holds about 3 packets the client has not received yet (one-way delay plus the
/// eACK's own trip), plus every loss awaiting its repair (≈ 100 ms each; at 10 % loss about 1)
/// and the repairs in flight; a burst adds more. An eACK that does not decode resets the epoch
/// and empties the proxy's cache, losing the repairs under way, so it is sized with margin: 8
/// (with 4 at p = 0.95, 13 symbols, about 3 % of the eACKs failed on the satellite link).
pub const MEDIA_EACK_EXPECTED: usize = 8;

/// Decoding probability a media eACK is sized for (with [`MEDIA_EACK_EXPECTED`]: 32 symbols).
pub const MEDIA_EACK_PROBABILITY: f64 = 0.99;

/// The [`FecHooks`] half for a Packrat media receiver.
pub struct PackratHooks {
    shared: Arc<Shared>,
}

impl FecHooks for PackratHooks {
    fn on_sent(&mut self, _datagram: &[u8]) {
        let mut c = self.shared.client();
        if c.is_idle() {
            if let Err(e) = c.start(Instant::now()) {
                tracing::debug!(%e, "sidekick discovery did not start");
            }
            drop(c);
            self.shared.wake.notify_one();
        }
    }

    fn on_received(&mut self, datagram: &[u8]) -> bool {
        let mut c = self.shared.client();
        let discovery = is_discovery_reply(datagram);
        c.on_base_received(Instant::now(), datagram.to_vec());
        // The player reads the datagram itself; the SDK's copy is only for the eACK.
        while c.poll_deliver().is_some() {}
        drop(c);
        self.shared.wake.notify_one();
        discovery
    }
}

async fn drive(shared: Arc<Shared>, base: Arc<UdpSocket>, peer: SocketAddr, sk: UdpSocket) {
    let mut buf = vec![0u8; 65_536];
    let mut last_sample = Instant::now();
    loop {
        // Send what the client queued; drop events (no congestion controller to feed).
        let mut out = Vec::new();
        let deadline = {
            let mut c = shared.client();
            while let Some(t) = c.poll_transmit() {
                out.push(t);
            }
            while c.poll_event().is_some() {}
            if last_sample.elapsed() >= Duration::from_millis(20) {
                last_sample = Instant::now();
                shared
                    .sample
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .update(&c);
            }
            c.poll_timeout()
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
                    shared.client().on_sidekick_datagram(Instant::now(), from, &buf[..n]);
                }
            }
            () = tokio::time::sleep(sleep_for) => {
                shared.client().handle_timeout(Instant::now());
            }
            () = shared.wake.notified() => {}
        }
    }
}
