//! `sidekick-transfer client --stack quiche --both BYTES`: an upload and a download of BYTES each
//! at once on one quiche connection, each on a client-initiated bidirectional stream of its own
//! with the raw-stream protocol of [`super`] — what the quinn client does with two `open_bi`, so
//! either client works against either server.
//!
//! The loop is the one-way client's ([`super::quiche_stack`]) with a [`Leg`] per direction. Both
//! requests leave when the handshake completes; the download's request (and the client's FIN
//! once it holds every byte) is pumped before the upload's payload, which would otherwise take
//! all of quiche's send capacity. The connection closes once both summaries arrived.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};

use super::quiche_outbox::{Outbox, Segment};
use super::quiche_stack::{Driver, Io, direction_result};
use super::{
    CHUNK, Request, SenderStats, Stack, Summary, TransferDirection, TransferReport, unix_ns,
};

/// The upload's stream: the client's first bidirectional one, as on quinn (either order works
/// with both servers, which serve every stream the client opens).
const UPLOAD_STREAM: u64 = 0;
/// The download's stream: the client's second bidirectional one.
const DOWNLOAD_STREAM: u64 = 4;

/// One direction of the pair on its stream.
struct Leg {
    req: Request,
    out: Outbox,
    /// Payload bytes of a download received so far.
    got: u64,
    /// Request → last payload byte of a download.
    t_end: Option<Duration>,
    /// The server's summary's bytes so far (after a download's payload).
    summary: Vec<u8>,
    /// Duration and data sender's counters, once the summary arrived.
    result: Option<(Duration, SenderStats)>,
}

impl Leg {
    fn new(stream: u64, direction: TransferDirection, bytes: u64) -> Self {
        Self {
            req: Request { direction, bytes },
            out: Outbox::new(stream),
            got: 0,
            t_end: None,
            summary: Vec::with_capacity(Summary::LEN),
            result: None,
        }
    }

    /// Queue the request (an upload's payload and FIN with it).
    fn start(&mut self) {
        self.out
            .queue
            .push_back(Segment::Bytes(self.req.encode().to_vec(), 0));
        match self.req.direction {
            TransferDirection::Upload => {
                self.out.queue.push_back(Segment::Pattern(self.req.bytes));
                self.out.fin = true;
            }
            // Nothing to wait for: finish at once, as quinn's client does.
            TransferDirection::Download if self.req.bytes == 0 => {
                self.t_end = Some(Duration::ZERO);
                self.out.fin = true;
            }
            TransferDirection::Download => {}
        }
    }

    /// Take `data` read from the stream (`fin`: the server's side ended with it): a download's
    /// payload, then the summary. `start` is when the requests were written, `t0` when the
    /// connection started (for the time to first byte, set in `ttfb`).
    fn on_data(
        &mut self,
        mut data: &[u8],
        fin: bool,
        start: Option<Instant>,
        t0: Instant,
        ttfb: &mut Option<Duration>,
    ) -> anyhow::Result<()> {
        let bytes = self.req.bytes;
        if self.req.direction == TransferDirection::Download && self.got < bytes {
            let take = usize::try_from(bytes - self.got)
                .unwrap_or(usize::MAX)
                .min(data.len());
            if self.got == 0 && take > 0 {
                *ttfb = Some(t0.elapsed());
            }
            self.got += take as u64;
            data = &data[take..];
            if self.got == bytes {
                self.t_end = start.map(|s| s.elapsed());
                // The server sends its summary once the client finished its side.
                self.out.fin = true;
            }
        }
        let room = Summary::LEN
            .saturating_sub(self.summary.len())
            .min(data.len());
        self.summary.extend_from_slice(&data[..room]);
        if fin && self.summary.len() < Summary::LEN {
            bail!(
                "the server finished the {} stream without a summary ({} of {bytes} payload bytes)",
                self.req.direction.name(),
                self.got
            );
        }
        Ok(())
    }

    /// Once the whole summary arrived: the direction's result (counters read now).
    fn finish(
        &mut self,
        conn: &quiche::Connection,
        start: Option<(Instant, u64)>,
    ) -> anyhow::Result<()> {
        if self.result.is_some() || self.summary.len() < Summary::LEN {
            return Ok(());
        }
        let summary = Summary::decode(&self.summary)?;
        let start = start.context("summary before request")?;
        self.result = Some(direction_result(
            self.req, &summary, start, self.t_end, conn,
        )?);
        Ok(())
    }
}

/// The `--both` transfer on the connection `d` drives; fails after `deadline` (`timeout` from
/// the start, for the message). `t0`: when the connection started.
pub(super) fn client_loop(
    io: &mut Io,
    d: &mut dyn Driver,
    connect: SocketAddr,
    bytes: u64,
    (t0, deadline): (Instant, Instant),
    timeout: Duration,
) -> anyhow::Result<TransferReport> {
    let mut legs = [
        Leg::new(UPLOAD_STREAM, TransferDirection::Upload, bytes),
        Leg::new(DOWNLOAD_STREAM, TransferDirection::Download, bytes),
    ];
    let mut start: Option<(Instant, u64)> = None;
    let mut ttfb: Option<Duration> = None;
    let mut buf = vec![0u8; CHUNK];
    let done = |legs: &[Leg]| legs.iter().all(|l| l.result.is_some());
    loop {
        io.flush(d)?;
        if done(&legs) || d.conn().is_closed() {
            io.drain()?;
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "timed out after {timeout:?} (download: {} of {bytes} bytes; summaries: upload {}, \
                 download {})",
                legs[1].got,
                legs[0].result.is_some(),
                legs[1].result.is_some()
            );
        }
        io.step(d, connect)?;
        let conn = d.conn();
        if conn.is_established() && start.is_none() {
            start = Some((Instant::now(), unix_ns(SystemTime::now())));
            for leg in &mut legs {
                leg.start();
            }
        }
        let readable: Vec<u64> = conn.readable().collect();
        for sid in readable {
            loop {
                let (n, fin) = match conn.stream_recv(sid, &mut buf) {
                    Ok(v) => v,
                    // A stream complete in both directions is collected by quiche.
                    Err(quiche::Error::Done | quiche::Error::InvalidStreamState(_)) => break,
                    Err(e) => bail!("stream_recv: {e}"),
                };
                if let Some(leg) = legs.iter_mut().find(|l| l.out.stream == sid) {
                    leg.on_data(&buf[..n], fin, start.map(|s| s.0), t0, &mut ttfb)?;
                }
                if fin {
                    break;
                }
            }
        }
        for bulk in [false, true] {
            for leg in legs.iter_mut().filter(|l| l.out.is_bulk() == bulk) {
                leg.out.pump(conn)?;
            }
        }
        for leg in &mut legs {
            leg.finish(conn, start)?;
        }
        if done(&legs) {
            conn.close(true, 0, b"done").ok();
        }
    }
    let conn = d.conn();
    tracing::info!(stats = ?conn.stats(), path = ?conn.path_stats().next(), "client connection");
    let [Some(up), Some(down)] = legs.each_ref().map(|l| l.result) else {
        bail!(
            "connection closed before both transfers completed (download: {} of {bytes} bytes; \
             summaries: upload {}, download {}; peer error {:?}, local error {:?})",
            legs[1].got,
            legs[0].result.is_some(),
            legs[1].result.is_some(),
            conn.peer_error(),
            conn.local_error()
        );
    };
    let mut report = TransferReport::both(Stack::Quiche, bytes, up, down);
    report.ttfb_ms = ttfb.map(|d| d.as_secs_f64() * 1e3);
    Ok(report)
}
