//! tokio UDP adapters around the sans-IO media cores ([`crate::media`], [`crate::fec`]).
//!
//! The sessions themselves (when to send, when to repeat FIN, when to give up) are the sans-IO
//! state machines of [`crate::media_session`], which the simulator drives in virtual time; these
//! adapters give them sockets and the wall clock.
//!
//! - `sidekick-media` (Robin #1): the client is the sender, the server the receiver.
//! - `sidekick-media-fec` (Packrat): the client sends HELLO, the server is the sender.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use ring::rand::SecureRandom as _;
use tokio::net::UdpSocket;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::sleep_until;

use crate::fec::{FecConfig, FecMetrics, FecReceiver};
use crate::media::{MediaConfig, MediaReceiver, MediaSender, ReceiverMetrics, SendObserver};
pub use crate::media_session::ReceiverTiming;
use crate::media_session::{FecClientSession, MediaReceiverSession, SenderSession, Sent};
use crate::wire::{Codec, Message};

/// Microseconds since the Unix epoch (`CLOCK_REALTIME`), shared by namespaces on one host.
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A random nonce start for a sender's AEAD counter.
pub fn random_nonce_start() -> u64 {
    let mut b = [0u8; 8];
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        // Fall back to the clock: uniqueness across runs is all that matters for a test key.
        return unix_us();
    }
    u64::from_be_bytes(b)
}

async fn send(socket: &UdpSocket, buf: &[u8], to: SocketAddr) {
    if let Err(e) = socket.send_to(buf, to).await {
        tracing::debug!(%to, "send failed: {e}");
    }
}

/// How a sender run ends.
#[derive(Debug)]
pub struct SenderOutcome {
    /// The receiver's SUMMARY JSON, if it arrived before `summary_wait` expired.
    pub summary: Option<String>,
}

/// Stream media from `sender` to `peer` over `socket` for `duration`, one packet per `interval`;
/// answer NACKs; take "retransmit seq now" requests from `retransmit` (the sidekick hook); report
/// every datagram to `observer`; then FIN until the SUMMARY arrives or `summary_wait` expires.
#[allow(clippy::too_many_arguments)]
pub async fn run_sender(
    socket: &UdpSocket,
    peer: SocketAddr,
    sender: &mut MediaSender,
    interval: Duration,
    duration: Duration,
    mut retransmit: Option<UnboundedReceiver<u32>>,
    observer: &mut dyn SendObserver,
    summary_wait: Duration,
) -> SenderOutcome {
    let start = Instant::now();
    let mut session = SenderSession::new(unix_us(), interval, duration, summary_wait);
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::new();
    loop {
        let elapsed = start.elapsed();
        session.on_timeout(elapsed, sender, &mut out);
        send_all(socket, peer, &mut out, observer).await;
        let Some(next) = session.next_deadline(elapsed) else {
            return SenderOutcome {
                summary: session.summary().map(str::to_owned),
            };
        };
        tokio::select! {
            () = sleep_until(tokio::time::Instant::from_std(start + next)) => {}
            r = socket.recv_from(&mut buf) => {
                let (n, from) = match r {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::debug!("recv failed: {e}");
                        continue;
                    }
                };
                if from != peer || observer.on_receive(&buf[..n]) {
                    continue;
                }
                session.on_datagram(&buf[..n], sender, &mut out);
                send_all(socket, peer, &mut out, observer).await;
            }
            Some(seq) = async {
                match retransmit.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(d) = sender.retransmit(seq, 0) {
                    send(socket, &d, peer).await;
                    observer.on_send(seq, &d, true);
                }
            }
        }
    }
}

/// Sends the session's datagrams, reporting each to `observer`.
async fn send_all(
    socket: &UdpSocket,
    peer: SocketAddr,
    out: &mut Vec<Sent>,
    observer: &mut dyn SendObserver,
) {
    for d in out.drain(..) {
        match d {
            Sent::Media {
                seq,
                datagram,
                retransmission,
            } => {
                send(socket, &datagram, peer).await;
                observer.on_send(seq, &datagram, retransmission);
            }
            Sent::Control(datagram) => {
                send(socket, &datagram, peer).await;
                observer.on_control_sent(&datagram);
            }
        }
    }
}

/// A finished receiver session of `sidekick-media`.
#[derive(Debug)]
pub struct MediaSession {
    /// The sender's address.
    pub peer: SocketAddr,
    /// Final state (metrics, trace).
    pub receiver: MediaReceiver,
}

/// Serve `sidekick-media` streams on `socket`, one session at a time; `on_session` is called with
/// every finished session. With `once`, returns after the first session (having answered repeated
/// FINs for a short while).
pub async fn serve_media(
    socket: &UdpSocket,
    cfg: &MediaConfig,
    timing: ReceiverTiming,
    once: bool,
    mut on_session: impl FnMut(&MediaSession),
) -> std::io::Result<()> {
    let codec = Codec::new(0);
    let mut buf = vec![0u8; 65_536];
    // Last finished session: answer its repeated FINs with its summary.
    let mut done: Option<(SocketAddr, Vec<u8>)> = None;
    loop {
        // Wait for the first DATA of a new session.
        let (first, peer) = loop {
            let (n, from) = socket.recv_from(&mut buf).await?;
            match codec.decode(&buf[..n]) {
                Ok(Message::Fin { .. }) => {
                    if let Some((p, s)) = &done
                        && *p == from
                    {
                        send(socket, s, from).await;
                    }
                }
                Ok(Message::Data(_)) if done.as_ref().is_none_or(|(p, _)| *p != from) => {
                    break (buf[..n].to_vec(), from);
                }
                _ => {}
            }
        };
        let (summary, session) = run_media_session(socket, cfg, timing, peer, &first).await;
        send(socket, &summary, peer).await;
        on_session(&session);
        done = Some((peer, summary));
        if once {
            // Answer repeated FINs for a moment in case the summary was lost.
            let until = tokio::time::Instant::now() + Duration::from_secs(1);
            while let Ok(Ok((n, from))) =
                tokio::time::timeout_at(until, socket.recv_from(&mut buf)).await
            {
                if from == peer
                    && matches!(codec.decode(&buf[..n]), Ok(Message::Fin { .. }))
                    && let Some((_, s)) = &done
                {
                    send(socket, s, peer).await;
                }
            }
            return Ok(());
        }
    }
}

async fn run_media_session(
    socket: &UdpSocket,
    cfg: &MediaConfig,
    timing: ReceiverTiming,
    peer: SocketAddr,
    first: &[u8],
) -> (Vec<u8>, MediaSession) {
    let start = Instant::now();
    let mut session = MediaReceiverSession::new(cfg, timing, Duration::ZERO);
    let mut buf = vec![0u8; 65_536];
    for d in session.on_datagram(first, start.elapsed(), unix_us()) {
        send(socket, &d, peer).await;
    }
    while !session.is_finished(start.elapsed()) {
        let deadline = start + session.next_deadline();
        match tokio::time::timeout_at(deadline.into(), socket.recv_from(&mut buf)).await {
            Ok(Ok((n, from))) if from == peer => {
                for d in session.on_datagram(&buf[..n], start.elapsed(), unix_us()) {
                    send(socket, &d, peer).await;
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!("recv failed: {e}"),
            Err(_) => {
                for d in session.on_timeout(start.elapsed()) {
                    send(socket, &d, peer).await;
                }
            }
        }
    }
    (
        session.summary(),
        MediaSession {
            peer,
            receiver: session.into_receiver(),
        },
    )
}

/// Parse a receiver SUMMARY of `sidekick-media`.
pub fn parse_media_summary(json: &str) -> Result<ReceiverMetrics, serde_json::Error> {
    serde_json::from_str(json)
}

/// Serve `sidekick-media-fec` streams: wait for a HELLO, stream to its sender for the requested
/// duration (capped by `max_duration`), repeat. With `once`, return after one stream.
pub async fn serve_fec(
    socket: &UdpSocket,
    cfg: &FecConfig,
    max_duration: Duration,
    once: bool,
) -> std::io::Result<()> {
    let codec = Codec::new(0);
    let mut buf = vec![0u8; 65_536];
    loop {
        let (peer, duration_ms) = loop {
            let (n, from) = socket.recv_from(&mut buf).await?;
            if let Ok(Message::Hello { duration_ms }) = codec.decode(&buf[..n]) {
                break (from, duration_ms);
            }
        };
        let duration = Duration::from_millis(u64::from(duration_ms)).min(max_duration);
        tracing::info!(%peer, ?duration, "streaming");
        let mut sender = MediaSender::new(&cfg.sender_config(), random_nonce_start());
        let out = run_sender(
            socket,
            peer,
            &mut sender,
            cfg.frame,
            duration,
            None,
            &mut crate::media::NoObserver,
            Duration::from_secs(10),
        )
        .await;
        tracing::info!(%peer, counters = ?sender.counters(), got_summary = out.summary.is_some(), "stream done");
        if once {
            return Ok(());
        }
    }
}

/// Result of a `sidekick-media-fec` client run.
#[derive(Debug)]
pub struct FecOutcome {
    /// Final client state.
    pub receiver: FecReceiver,
    /// Its metrics.
    pub metrics: FecMetrics,
}

/// Run a `sidekick-media-fec` client: HELLO until media flows, NACK, and after FIN (plus at most
/// `timing.linger` for missing frames) send the SUMMARY back. Fails if nothing arrives within
/// `timing.idle`.
pub async fn run_fec_client(
    socket: &UdpSocket,
    server: SocketAddr,
    cfg: &FecConfig,
    duration: Duration,
    timing: ReceiverTiming,
) -> std::io::Result<FecOutcome> {
    run_fec_client_with(socket, server, cfg, duration, timing, &mut NoHooks).await
}

/// Datagram hooks of [`run_fec_client_with`] (e.g. a Packrat receiver engine).
pub trait FecHooks: Send {
    /// A datagram was sent to the server.
    fn on_sent(&mut self, _datagram: &[u8]) {}
    /// A datagram arrived from the server's address; return true to consume it (a sidekick
    /// discovery reply). Media datagrams are seen here before the player gets them, with their
    /// sequence number `seq` (`None` for anything that is not media DATA).
    fn on_received(&mut self, _datagram: &[u8], _seq: Option<u32>) -> bool {
        false
    }
    /// How long the player holds the end-to-end NACK of a frame that goes missing (`None`:
    /// NACK at once): while a proxy repairs losses (Packrat (CoNEXT '26) §6.2). Asked after
    /// every datagram.
    fn nack_hold(&self) -> Option<Duration> {
        None
    }
}

/// The sequence number of a media DATA datagram (`None` for any other datagram).
pub fn data_seq(codec: &Codec, datagram: &[u8]) -> Option<u32> {
    match codec.decode(datagram) {
        Ok(Message::Data(p)) => Some(p.seq),
        _ => None,
    }
}

/// Hooks that do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl FecHooks for NoHooks {}

/// [`run_fec_client`] with datagram hooks.
pub async fn run_fec_client_with(
    socket: &UdpSocket,
    server: SocketAddr,
    cfg: &FecConfig,
    duration: Duration,
    timing: ReceiverTiming,
    hooks: &mut dyn FecHooks,
) -> std::io::Result<FecOutcome> {
    let start = Instant::now();
    let mut session = FecClientSession::new(cfg, duration, timing);
    let mut buf = vec![0u8; 65_536];
    let codec = Codec::new(0);
    loop {
        let now = start.elapsed();
        if session.is_finished(now) {
            break;
        }
        if let Some(hello) = session.poll_hello(now) {
            send(socket, &hello, server).await;
            hooks.on_sent(&hello);
        }
        let deadline = start + session.next_deadline(now);
        match tokio::time::timeout_at(deadline.into(), socket.recv_from(&mut buf)).await {
            Ok(Ok((n, from))) if from == server => {
                if hooks.on_received(&buf[..n], data_seq(&codec, &buf[..n])) {
                    continue;
                }
                session.set_nack_hold(hooks.nack_hold());
                for d in session.on_datagram(&buf[..n], start.elapsed(), unix_us()) {
                    send(socket, &d, server).await;
                    hooks.on_sent(&d);
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!("recv failed: {e}"),
            Err(_) => {
                for d in session.on_timeout(start.elapsed()) {
                    send(socket, &d, server).await;
                    hooks.on_sent(&d);
                }
            }
        }
    }
    if !session.started() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no media from {server}"),
        ));
    }
    let (rx, metrics, summary) = session.finish();
    send(socket, &summary, server).await;
    // Answer FINs that were in flight (the server repeats FIN until it has our summary).
    let until = tokio::time::Instant::now() + Duration::from_millis(300);
    while let Ok(Ok((n, from))) = tokio::time::timeout_at(until, socket.recv_from(&mut buf)).await {
        if from == server && matches!(codec.decode(&buf[..n]), Ok(Message::Fin { .. })) {
            send(socket, &summary, server).await;
        }
    }
    Ok(FecOutcome {
        receiver: rx,
        metrics,
    })
}
