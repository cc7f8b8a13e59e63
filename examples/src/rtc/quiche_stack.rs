//! quiche server and client of the RTC application: the bulk transfer's blocking event loop
//! ([`crate::transfer::quiche_stack`]: one datagram per `send`, quiche's pacing honoured) with the
//! ALPN [`ALPN`]. The server's loop also wakes for the next frame's creation time.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};

use super::{
    ALPN, EndOfFrames, FrameLog, FrameParams, FrameReader, MAX_BACKLOG_FRAMES, MAX_DURATION_MS,
    QUICHE_CLIENT_MAX_STREAMS_UNI, RtcReport, RtcRequest, Stack, encode_frame,
};
use crate::transfer::quiche_stack::{
    Driver, Io, accept, config_with_alpn, connect_to, server_config,
};
use crate::transfer::{TransportOptions, fill_pattern, udp_socket, unix_ns};

/// The client-initiated bidirectional stream carrying the request and the end marker.
const REQUEST_STREAM: u64 = 0;
/// The first server-initiated unidirectional stream; the next ones follow every 4.
const FIRST_FRAME_STREAM: u64 = 3;
/// quiche's default stream urgency; frames are non-incremental at equal urgency, so quiche sends
/// them in stream-id order, i.e. the oldest frame first.
const FRAME_URGENCY: u8 = 127;

/// Serve RTC runs on `listen` with `params`, one connection at a time; with `once`, return after
/// the first connection.
pub fn serve(listen: SocketAddr, once: bool, params: FrameParams) -> anyhow::Result<()> {
    let socket = udp_socket(listen).with_context(|| format!("binding {listen}"))?;
    serve_socket(socket, once, params)
}

/// [`serve`] on an already bound socket.
pub fn serve_socket(socket: UdpSocket, once: bool, params: FrameParams) -> anyhow::Result<()> {
    let mut cfg = server_config(&TransportOptions::default(), Some(ALPN))?;
    let mut io = Io::new(socket)?;
    loop {
        let (mut conn, from) = accept(&mut io, &mut cfg)?;
        match serve_connection(&mut io, &mut conn, from, params) {
            Ok(()) => tracing::info!(%from, "connection done"),
            Err(e) => tracing::warn!(%from, "connection failed: {e:#}"),
        }
        if once {
            return Ok(());
        }
    }
}

/// The server connection plus the frame timer, so that [`Io::step`] does not block past the
/// next frame's creation time.
struct Timed<'a> {
    conn: &'a mut quiche::Connection,
    next_frame: Option<Instant>,
}

impl Driver for Timed<'_> {
    fn conn(&mut self) -> &mut quiche::Connection {
        self.conn
    }

    fn send_datagram(&mut self, out: &mut [u8]) -> quiche::Result<(usize, quiche::SendInfo)> {
        self.conn.send(out)
    }

    fn recv_datagram(&mut self, buf: &mut [u8], info: quiche::RecvInfo) -> quiche::Result<usize> {
        self.conn.recv(buf, info)
    }

    fn next_timeout(&self) -> Option<Duration> {
        self.conn.timeout()
    }

    fn fire_timers(&mut self, _peer: SocketAddr, _local: SocketAddr) {
        self.conn.on_timeout();
    }

    fn poll_interval(&self) -> Option<Duration> {
        self.next_frame
            .map(|t| t.saturating_duration_since(Instant::now()))
    }
}

/// Bytes queued for one stream, written with FIN once all are in.
struct Pending {
    stream: u64,
    data: Vec<u8>,
    off: usize,
}

impl Pending {
    /// Hand as much as quiche takes; true once everything (and the FIN) is in. A stream over
    /// the peer's stream limit waits.
    fn pump(&mut self, conn: &mut quiche::Connection) -> anyhow::Result<bool> {
        if self.off == 0 && self.stream != REQUEST_STREAM {
            match conn.stream_priority(self.stream, FRAME_URGENCY, false) {
                Ok(()) => {}
                Err(quiche::Error::StreamLimit) => return Ok(false),
                Err(e) => bail!("stream_priority({}): {e}", self.stream),
            }
        }
        match conn.stream_send(self.stream, &self.data[self.off..], true) {
            Ok(n) => self.off += n,
            Err(quiche::Error::Done | quiche::Error::StreamLimit) => {}
            Err(e) => bail!("stream_send({}): {e}", self.stream),
        }
        Ok(self.off == self.data.len())
    }
}

/// Frames after the request: the schedule's start, frames created so far, and the total.
struct Run {
    start: Instant,
    created: u32,
    frames: u32,
}

fn serve_connection(
    io: &mut Io,
    conn: &mut quiche::Connection,
    peer: SocketAddr,
    params: FrameParams,
) -> anyhow::Result<()> {
    let mut d = Timed {
        conn,
        next_frame: None,
    };
    let mut payload = vec![0u8; params.frame_bytes()];
    fill_pattern(&mut payload);
    let mut req_buf = Vec::with_capacity(RtcRequest::LEN);
    let mut run: Option<Run> = None;
    let mut queue: VecDeque<Pending> = VecDeque::new();
    let mut next_stream = FIRST_FRAME_STREAM;
    let mut end: Option<Pending> = None;
    let mut buf = vec![0u8; 4096];
    loop {
        io.flush(&mut d)?;
        if d.conn.is_closed() {
            io.drain()?;
            break;
        }
        io.step(&mut d, peer)?;
        let readable: Vec<u64> = d.conn.readable().collect();
        for sid in readable {
            loop {
                let (n, fin) = match d.conn.stream_recv(sid, &mut buf) {
                    Ok(v) => v,
                    Err(quiche::Error::Done | quiche::Error::InvalidStreamState(_)) => break,
                    Err(e) => bail!("stream_recv: {e}"),
                };
                if sid == REQUEST_STREAM && run.is_none() {
                    let take = (RtcRequest::LEN - req_buf.len()).min(n);
                    req_buf.extend_from_slice(&buf[..take]);
                    if req_buf.len() == RtcRequest::LEN {
                        let req = RtcRequest::decode(&req_buf).context("request")?;
                        if req.duration_ms > MAX_DURATION_MS {
                            bail!(
                                "asked for {} ms (at most {MAX_DURATION_MS})",
                                req.duration_ms
                            );
                        }
                        let frames = params.frame_count(req.duration_ms);
                        tracing::info!(%peer, ?req, frames, ?params, "request");
                        run = Some(Run {
                            start: Instant::now(),
                            created: 0,
                            frames,
                        });
                    }
                }
                if fin {
                    break;
                }
            }
        }
        if let Some(r) = &mut run {
            let now = Instant::now();
            while r.created < r.frames && r.start + params.due(r.created) <= now {
                if queue.len() >= MAX_BACKLOG_FRAMES {
                    bail!("more than {MAX_BACKLOG_FRAMES} frames waiting for the transport");
                }
                let data = encode_frame(r.created, unix_ns(SystemTime::now()), &payload);
                queue.push_back(Pending {
                    stream: next_stream,
                    data,
                    off: 0,
                });
                next_stream += 4;
                r.created += 1;
            }
            d.next_frame = (r.created < r.frames).then(|| r.start + params.due(r.created));
            while let Some(p) = queue.front_mut() {
                if !p.pump(d.conn)? {
                    break;
                }
                queue.pop_front();
            }
            if r.created == r.frames && queue.is_empty() && end.is_none() {
                end = Some(Pending {
                    stream: REQUEST_STREAM,
                    data: EndOfFrames {
                        frames_sent: r.frames,
                    }
                    .encode()
                    .to_vec(),
                    off: 0,
                });
            }
        }
        // Only until the marker and its FIN are in: the client may stop stream 0 once it has
        // read the marker (quinn does when it drops the stream), and a further (empty)
        // stream_send would then fail with StreamStopped while a lost frame still needs
        // retransmitting.
        if let Some(e) = end.as_mut().filter(|e| e.off < e.data.len()) {
            e.pump(d.conn)?;
        }
    }
    if let Some(e) = d.conn.peer_error()
        && e.error_code != 0
    {
        bail!("peer closed with error {e:?}");
    }
    match (&run, &end) {
        (Some(r), Some(e)) if e.off == e.data.len() => {
            tracing::info!(%peer, frames = r.frames, "connection closed");
            Ok(())
        }
        _ => bail!("connection closed before every frame was sent"),
    }
}

/// Run one RTC session of `duration` as a quiche client against `connect`; fails after
/// `timeout`.
pub fn run_client(
    connect: SocketAddr,
    duration: Duration,
    timeout: Duration,
) -> anyhow::Result<RtcReport> {
    let deadline = Instant::now() + timeout;
    let req = RtcRequest {
        duration_ms: u32::try_from(duration.as_millis()).context("duration too long")?,
    };
    let mut cfg = config_with_alpn(&TransportOptions::default(), ALPN)?;
    cfg.verify_peer(false);
    cfg.set_initial_max_streams_uni(QUICHE_CLIENT_MAX_STREAMS_UNI);
    let (mut io, mut conn) = connect_to(connect, &mut cfg)?;
    let mut request = Pending {
        stream: REQUEST_STREAM,
        data: req.encode().to_vec(),
        off: 0,
    };
    let mut start: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut end_buf = Vec::with_capacity(EndOfFrames::LEN);
    let mut frames_sent: Option<u32> = None;
    // One reader per open frame stream; quiche's stream limit bounds how many are open.
    let mut readers: HashMap<u64, FrameReader> = HashMap::new();
    let mut log = FrameLog::default();
    let mut done = false;
    let mut buf = vec![0u8; 65_536];
    loop {
        io.flush(&mut conn)?;
        if done || conn.is_closed() {
            io.drain()?;
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "timed out after {timeout:?} ({} frames received, end marker {:?})",
                log.len(),
                frames_sent
            );
        }
        io.step(&mut conn, connect)?;
        if conn.is_established() && start.is_none() {
            start = Some(Instant::now());
        }
        if start.is_some() && request.off < request.data.len() {
            request.pump(&mut conn)?;
        }
        let readable: Vec<u64> = conn.readable().collect();
        for sid in readable {
            loop {
                let (n, fin) = match conn.stream_recv(sid, &mut buf) {
                    Ok(v) => v,
                    Err(quiche::Error::Done | quiche::Error::InvalidStreamState(_)) => break,
                    Err(e) => bail!("stream_recv: {e}"),
                };
                if sid == REQUEST_STREAM {
                    let take = (EndOfFrames::LEN - end_buf.len()).min(n);
                    end_buf.extend_from_slice(&buf[..take]);
                    if end_buf.len() == EndOfFrames::LEN && frames_sent.is_none() {
                        frames_sent = Some(EndOfFrames::decode(&end_buf)?.frames_sent);
                    }
                } else if sid % 4 == 3 {
                    let reader = readers.entry(sid).or_default();
                    reader
                        .push(&buf[..n])
                        .with_context(|| format!("frame stream {sid}"))?;
                    if fin {
                        let done_ns = unix_ns(SystemTime::now());
                        let h = reader
                            .finish()
                            .with_context(|| format!("frame stream {sid}"))?;
                        readers.remove(&sid);
                        if log.record(&h, done_ns) {
                            last = Some(Instant::now());
                        }
                    }
                }
                if fin {
                    break;
                }
            }
        }
        if let Some(n) = frames_sent
            && log.len() >= n as usize
        {
            conn.close(true, 0, b"done").ok();
            done = true;
        }
    }
    tracing::info!(stats = ?conn.stats(), path = ?conn.path_stats().next(), "client connection");
    let (Some(n), true) = (frames_sent, done) else {
        bail!(
            "connection closed after {} frames (end marker {frames_sent:?}; peer error {:?}, local error {:?})",
            log.len(),
            conn.peer_error(),
            conn.local_error()
        );
    };
    let (Some(s), Some(l)) = (start, last) else {
        return Ok(log.report(Stack::Quiche, n, Duration::ZERO));
    };
    Ok(log.report(Stack::Quiche, n, l - s))
}
