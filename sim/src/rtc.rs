//! The RTC frames application (`sidekick-rtc`, app kind `rtc`, PEMI §6.1.2) over quinn-proto
//! connections in virtual time: the application protocol of examples/src/rtc.rs with its own
//! sans-IO pieces ([`FrameParams`] for the schedule and sizes, [`encode_frame`], [`FrameReader`]
//! for each frame stream, [`FrameLog`] for the report), driven the way
//! examples/src/rtc/quinn_stack.rs drives quinn:
//!
//! - the server reads the [`RtcRequest`] on the first bidirectional stream, creates frame `i` at
//!   `start + i/fps` (no drift), and one writer hands the frames to the transport in order, each
//!   on a new unidirectional stream with priority `−i`, written whole and finished before the
//!   next; more than [`MAX_BACKLOG_FRAMES`] frames waiting is an error; then the
//!   [`EndOfFrames`] on stream 0;
//! - the client writes the request after the handshake (the start of `duration_s`), reads every
//!   frame stream to its FIN (completion time = `CLOCK_REALTIME` then), and closes once it has
//!   the end marker and as many frames as it announces.
//!
//! The transport settings are the binary's on top of the transfer's: `send_fairness(false)` on
//! the server, [`QUINN_CLIENT_MAX_CONCURRENT_UNI`](sidekick_examples::rtc::QUINN_CLIENT_MAX_CONCURRENT_UNI) concurrent unidirectional streams on the
//! client.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use quinn_proto::{Connection, Dir, StreamId, VarInt};
use sidekick_examples::rtc::{
    EndOfFrames, FrameLog, FrameParams, FrameReader, MAX_BACKLOG_FRAMES, MAX_DURATION_MS,
    RtcReport, RtcRequest, Stack, encode_frame,
};
use sidekick_examples::transfer::fill_pattern;

/// `CLOCK_REALTIME` at virtual zero, ns (both hosts share it, as the lab's namespaces do).
const EPOCH_UNIX_NS: u64 = 1_764_000_000_000_000_000;

fn unix_ns(t: Duration) -> u64 {
    EPOCH_UNIX_NS + u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)
}

/// The measuring client.
#[derive(Debug)]
pub struct RtcClient {
    request: RtcRequest,
    stream: Option<StreamId>,
    end: Vec<u8>,
    frames_sent: Option<u32>,
    readers: BTreeMap<StreamId, FrameReader>,
    log: FrameLog,
    started: Option<Duration>,
    last: Option<Duration>,
    closed: bool,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

impl RtcClient {
    /// A client asking for `duration` of frames.
    pub fn new(duration: Duration) -> Self {
        Self {
            request: RtcRequest {
                duration_ms: u32::try_from(duration.as_millis()).unwrap_or(u32::MAX),
            },
            stream: None,
            end: Vec::new(),
            frames_sent: None,
            readers: BTreeMap::new(),
            log: FrameLog::default(),
            started: None,
            last: None,
            closed: false,
            error: None,
        }
    }

    /// Whether the client is done (closed after every frame) or failed.
    pub fn done(&self) -> bool {
        self.closed || self.error.is_some()
    }

    /// Makes what progress the connection allows at virtual time `t`.
    pub fn drive(&mut self, t: Duration, now: Instant, conn: &mut Connection) {
        while let Some(ev) = conn.poll() {
            if let quinn_proto::Event::ConnectionLost { reason } = ev
                && !self.closed
            {
                self.error = Some(format!(
                    "connection lost while receiving frames: {reason} (after {} frames)",
                    self.log.len()
                ));
            }
        }
        if self.done() || conn.is_handshaking() {
            return;
        }
        let id = if let Some(id) = self.stream {
            id
        } else {
            let Some(id) = conn.streams().open(Dir::Bi) else {
                return;
            };
            let mut s = conn.send_stream(id);
            if s.write(&self.request.encode()) != Ok(RtcRequest::LEN) || s.finish().is_err() {
                self.error = Some("sending the request failed".into());
                return;
            }
            self.stream = Some(id);
            self.started = Some(t);
            id
        };
        while let Some(s) = conn.streams().accept(Dir::Uni) {
            self.readers.insert(s, FrameReader::default());
        }
        let ids: Vec<StreamId> = self.readers.keys().copied().collect();
        for s in ids {
            let mut fin = false;
            let mut bad = None;
            if let Ok(mut chunks) = conn.recv_stream(s).read(true) {
                loop {
                    match chunks.next(usize::MAX) {
                        Ok(Some(c)) => {
                            if let Some(r) = self.readers.get_mut(&s)
                                && let Err(e) = r.push(&c.bytes)
                            {
                                bad = Some(e.to_string());
                                break;
                            }
                        }
                        Ok(None) => {
                            fin = true;
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let _ = chunks.finalize();
            }
            if let Some(e) = bad {
                self.error = Some(format!("receiving frame: {e}"));
                return;
            }
            if fin && let Some(r) = self.readers.remove(&s) {
                match r.finish() {
                    Ok(h) => {
                        if self.log.record(&h, unix_ns(t)) {
                            self.last = Some(t);
                        }
                    }
                    Err(e) => {
                        self.error = Some(format!("frame: {e}"));
                        return;
                    }
                }
            }
        }
        if self.frames_sent.is_none() {
            if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                while let Ok(Some(c)) = chunks.next(usize::MAX) {
                    self.end.extend_from_slice(&c.bytes);
                }
                let _ = chunks.finalize();
            }
            if self.end.len() >= EndOfFrames::LEN {
                match EndOfFrames::decode(&self.end) {
                    Ok(e) => self.frames_sent = Some(e.frames_sent),
                    Err(e) => {
                        self.error = Some(format!("end marker: {e}"));
                        return;
                    }
                }
            }
        }
        if let Some(n) = self.frames_sent
            && self.log.len() >= n as usize
        {
            conn.close(now, VarInt::from_u32(0), bytes::Bytes::from_static(b"done"));
            self.closed = true;
        }
    }

    /// The client's report, once done.
    pub fn report(&self) -> Option<RtcReport> {
        let n = self.frames_sent.filter(|_| self.closed)?;
        let d = self.last?.saturating_sub(self.started?);
        Some(self.log.report(Stack::Quinn, n, d))
    }
}

/// The frame-sending server.
#[derive(Debug)]
pub struct RtcServer {
    params: FrameParams,
    payload: Vec<u8>,
    stream: Option<StreamId>,
    request: Vec<u8>,
    /// (schedule start, frames to send), once the request is read.
    schedule: Option<(Duration, u32)>,
    created: u32,
    backlog: VecDeque<(u32, Vec<u8>)>,
    /// The frame being written: its stream, bytes, bytes written.
    writing: Option<(StreamId, Vec<u8>, usize)>,
    ended: bool,
    /// Why the server failed, if it did.
    pub error: Option<String>,
}

impl RtcServer {
    /// A server with the binary's frame parameters.
    pub fn new(params: FrameParams) -> Self {
        let mut payload = vec![0u8; params.frame_bytes()];
        fill_pattern(&mut payload);
        Self {
            params,
            payload,
            stream: None,
            request: Vec::new(),
            schedule: None,
            created: 0,
            backlog: VecDeque::new(),
            writing: None,
            ended: false,
            error: None,
        }
    }

    /// When the next frame is created, if any remains.
    pub fn next_timer(&self) -> Option<Duration> {
        let (start, n) = self.schedule?;
        (self.created < n && self.error.is_none()).then(|| start + self.params.due(self.created))
    }

    /// Makes what progress the connection allows at virtual time `t`.
    pub fn drive(&mut self, t: Duration, conn: &mut Connection) {
        while conn.poll().is_some() {}
        if self.ended || self.error.is_some() {
            return;
        }
        let id = if let Some(id) = self.stream {
            id
        } else {
            let Some(id) = conn.streams().accept(Dir::Bi) else {
                return;
            };
            self.stream = Some(id);
            id
        };
        if self.schedule.is_none() {
            if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                while let Ok(Some(c)) = chunks.next(usize::MAX) {
                    self.request.extend_from_slice(&c.bytes);
                }
                let _ = chunks.finalize();
            }
            if self.request.len() < RtcRequest::LEN {
                return;
            }
            match RtcRequest::decode(&self.request) {
                Ok(r) if r.duration_ms <= MAX_DURATION_MS => {
                    self.schedule = Some((t, self.params.frame_count(r.duration_ms)));
                }
                Ok(r) => {
                    self.error = Some(format!("asked for {} ms", r.duration_ms));
                    return;
                }
                Err(e) => {
                    self.error = Some(format!("request: {e}"));
                    return;
                }
            }
        }
        let Some((start, n)) = self.schedule else {
            return;
        };
        // The timer loop: frames created on schedule.
        while self.created < n && start + self.params.due(self.created) <= t {
            let i = self.created;
            self.backlog
                .push_back((i, encode_frame(i, unix_ns(t), &self.payload)));
            self.created += 1;
            if self.backlog.len() > MAX_BACKLOG_FRAMES {
                self.error = Some(format!(
                    "more than {MAX_BACKLOG_FRAMES} frames waiting for the transport"
                ));
                return;
            }
        }
        // The writer: one frame at a time, whole, in order.
        loop {
            if self.writing.is_none() {
                let Some((i, frame)) = self.backlog.pop_front() else {
                    break;
                };
                let Some(s) = conn.streams().open(Dir::Uni) else {
                    self.backlog.push_front((i, frame));
                    break;
                };
                let prio = i32::try_from(i).map_or(i32::MIN, |i| -i);
                if conn.send_stream(s).set_priority(prio).is_err() {
                    self.error = Some("frame priority".into());
                    return;
                }
                self.writing = Some((s, frame, 0));
            }
            let Some((s, frame, off)) = self.writing.as_mut() else {
                break;
            };
            match conn.send_stream(*s).write(&frame[*off..]) {
                Ok(k) => *off += k,
                Err(quinn_proto::WriteError::Blocked) => break,
                Err(e) => {
                    self.error = Some(format!("sending frame: {e}"));
                    return;
                }
            }
            if *off < frame.len() {
                break;
            }
            if conn.send_stream(*s).finish().is_err() {
                self.error = Some("finishing frame stream".into());
                return;
            }
            self.writing = None;
        }
        if self.created == n && self.backlog.is_empty() && self.writing.is_none() {
            let mut s = conn.send_stream(id);
            let end = EndOfFrames { frames_sent: n }.encode();
            if s.write(&end) != Ok(EndOfFrames::LEN) || s.finish().is_err() {
                self.error = Some("sending end marker".into());
            }
            self.ended = true;
        }
    }
}
