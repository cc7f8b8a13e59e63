//! tokio UDP adapters around the sans-IO media cores ([`crate::media`], [`crate::fec`]).
//!
//! Session protocol (both applications): the media *sender* streams DATA for the requested
//! duration, then repeats FIN (every 100 ms) until the receiver's SUMMARY arrives, answering NACKs
//! meanwhile. The *receiver* NACKs, and once FIN arrived and every packet is in (or a linger time
//! has passed) sends its SUMMARY (JSON metrics), repeating it for every further FIN.
//!
//! - `sidekick-media` (Robin #1): the client is the sender, the server the receiver.
//! - `sidekick-media-fec` (Packrat): the client sends HELLO, the server is the sender.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use ring::rand::SecureRandom as _;
use tokio::net::UdpSocket;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::{MissedTickBehavior, sleep_until};

use crate::fec::{FecConfig, FecMetrics, FecReceiver};
use crate::media::{MediaConfig, MediaReceiver, MediaSender, ReceiverMetrics, SendObserver};
use crate::wire::{Codec, Message, encode_fin, encode_hello, encode_summary};

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

const FIN_EVERY: Duration = Duration::from_millis(100);

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
    let start_unix_us = unix_us();
    let stream_end = tokio::time::Instant::from_std(start + duration);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut fin_tick = tokio::time::interval_at(stream_end, FIN_EVERY);
    let give_up = stream_end + summary_wait;
    let mut buf = vec![0u8; 65_536];
    loop {
        let streaming = tokio::time::Instant::now() < stream_end;
        tokio::select! {
            _ = tick.tick(), if streaming => {
                let seq = sender.total();
                // Production time of the packet's newest data: its scheduled time, so a sender
                // delayed by the OS still reports how old the data really is.
                let gen_us = start_unix_us.saturating_add(
                    u64::from(seq).saturating_mul(u64::try_from(interval.as_micros()).unwrap_or(u64::MAX)),
                );
                let d = sender.next_packet(gen_us);
                send(socket, &d, peer).await;
                observer.on_send(seq, &d, false);
            }
            _ = fin_tick.tick(), if !streaming => {
                let fin = encode_fin(sender.total());
                send(socket, &fin, peer).await;
                observer.on_control_sent(&fin);
            }
            () = sleep_until(give_up), if !streaming => {
                return SenderOutcome { summary: None };
            }
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
                if let Some(s) = sender.summary_of(&buf[..n]) {
                    return SenderOutcome { summary: Some(s) };
                }
                for (seq, d) in sender.on_datagram(&buf[..n]) {
                    send(socket, &d, peer).await;
                    observer.on_send(seq, &d, true);
                }
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
                    if let Some((p, s)) = &done {
                        if *p == from {
                            send(socket, s, from).await;
                        }
                    }
                }
                Ok(Message::Data(_)) if done.as_ref().is_none_or(|(p, _)| *p != from) => {
                    break (buf[..n].to_vec(), from);
                }
                _ => {}
            }
        };
        let session = run_media_session(socket, cfg, timing, peer, &first).await;
        let json = serde_json::to_string(&session.receiver.metrics()).unwrap_or_default();
        let summary = encode_summary(&json);
        send(socket, &summary, peer).await;
        on_session(&session);
        done = Some((peer, summary));
        if once {
            // Answer repeated FINs for a moment in case the summary was lost.
            let until = tokio::time::Instant::now() + Duration::from_secs(1);
            while let Ok(Ok((n, from))) =
                tokio::time::timeout_at(until, socket.recv_from(&mut buf)).await
            {
                if from == peer && matches!(codec.decode(&buf[..n]), Ok(Message::Fin { .. })) {
                    if let Some((_, s)) = &done {
                        send(socket, s, peer).await;
                    }
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
) -> MediaSession {
    let start = Instant::now();
    let mut rx = MediaReceiver::new(cfg);
    let mut buf = vec![0u8; 65_536];
    for d in rx.on_datagram(first, start.elapsed(), unix_us()) {
        send(socket, &d, peer).await;
    }
    let mut last_rx = Instant::now();
    let mut fin_at: Option<Instant> = None;
    loop {
        if rx.is_complete() {
            break;
        }
        let mut deadline = last_rx + timing.idle;
        if let Some(f) = fin_at {
            deadline = deadline.min(f + timing.linger);
        }
        if let Some(t) = rx.next_timeout() {
            deadline = deadline.min(start + t);
        }
        let now = Instant::now();
        if fin_at.is_some_and(|f| now >= f + timing.linger) || now >= last_rx + timing.idle {
            break;
        }
        match tokio::time::timeout_at(deadline.into(), socket.recv_from(&mut buf)).await {
            Ok(Ok((n, from))) if from == peer => {
                last_rx = Instant::now();
                for d in rx.on_datagram(&buf[..n], start.elapsed(), unix_us()) {
                    send(socket, &d, peer).await;
                }
                if fin_at.is_none() && rx.fin_received() {
                    fin_at = Some(Instant::now());
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!("recv failed: {e}"),
            Err(_) => {
                for d in rx.on_timeout(start.elapsed()) {
                    send(socket, &d, peer).await;
                }
            }
        }
    }
    MediaSession { peer, receiver: rx }
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
    /// discovery reply). Media datagrams are seen here before the player gets them.
    fn on_received(&mut self, _datagram: &[u8]) -> bool {
        false
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
    let mut rx = FecReceiver::new(cfg);
    let mut buf = vec![0u8; 65_536];
    let hello = encode_hello(u32::try_from(duration.as_millis()).unwrap_or(u32::MAX));
    let mut last_rx = Instant::now();
    let mut last_hello: Option<Instant> = None;
    let mut fin_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if rx.is_complete()
            || fin_at.is_some_and(|f| now >= f + timing.linger)
            || now >= last_rx + timing.idle
        {
            break;
        }
        if !rx.started() && last_hello.is_none_or(|h| now >= h + Duration::from_millis(200)) {
            send(socket, &hello, server).await;
            hooks.on_sent(&hello);
            last_hello = Some(now);
        }
        let mut deadline = last_rx + timing.idle;
        if !rx.started() {
            deadline = deadline.min(now + Duration::from_millis(200));
        }
        if let Some(f) = fin_at {
            deadline = deadline.min(f + timing.linger);
        }
        if let Some(t) = rx.next_timeout() {
            deadline = deadline.min(start + t);
        }
        match tokio::time::timeout_at(deadline.into(), socket.recv_from(&mut buf)).await {
            Ok(Ok((n, from))) if from == server => {
                if hooks.on_received(&buf[..n]) {
                    continue;
                }
                last_rx = Instant::now();
                for d in rx.on_datagram(&buf[..n], start.elapsed(), unix_us()) {
                    send(socket, &d, server).await;
                    hooks.on_sent(&d);
                }
                if fin_at.is_none() && rx.fin_received() {
                    fin_at = Some(Instant::now());
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!("recv failed: {e}"),
            Err(_) => {
                for d in rx.on_timeout(start.elapsed()) {
                    send(socket, &d, server).await;
                    hooks.on_sent(&d);
                }
            }
        }
    }
    if !rx.started() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no media from {server}"),
        ));
    }
    let metrics = rx.metrics();
    let summary = encode_summary(&serde_json::to_string(&metrics).unwrap_or_default());
    send(socket, &summary, server).await;
    // Answer FINs that were in flight (the server repeats FIN until it has our summary).
    let until = tokio::time::Instant::now() + Duration::from_millis(300);
    let codec = Codec::new(0);
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
