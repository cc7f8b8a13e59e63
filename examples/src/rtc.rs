//! RTC frames over QUIC (PEMI §6.1.2, "Application2: RTC frames"): a server sends media
//! frames at a constant frame rate and bit rate (30 fps, 3000 kbit/s: 12 500 bytes every 33.3 ms)
//! to a client, which measures frame delay and frame-level jitter as Michel et al. (IMC '22) and
//! PEMI §6.2.2 do. Binary `sidekick-rtc`, on quinn and on quiche ([`quinn_stack`],
//! [`quiche_stack`]), interoperable through the ALPN [`ALPN`].
//!
//! # Application protocol
//!
//! 1. The client opens the first client-initiated bidirectional stream (id 0) and writes an
//!    [`RtcRequest`] (8 bytes: magic `SKR1`, duration in ms `u32`), then finishes its side.
//!    Frame rate and bit rate are the server's (`--fps`, `--kbps`).
//! 2. The server sends [`FrameParams::frame_count`] frames, frame `i` created at
//!    `start + i/fps` on an absolute schedule (no drift; a late timer makes the frame late, never
//!    skipped). Each frame travels on its **own new server-initiated unidirectional stream**
//!    (ids 3, 7, 11, …): a [`FrameHeader`] (20 bytes: magic `SKF1`, index `u32`, creation time
//!    `u64` ns since the Unix epoch (`CLOCK_REALTIME`), payload length `u32`) and the payload,
//!    then FIN. The oldest frame goes first, retransmissions included, as a media sender wants
//!    it: quinn gives frame `i` the stream priority `−i`; quiche sends non-incremental streams of
//!    equal urgency in stream-id order. (With one priority for all, quinn re-queues a stream with
//!    lost data behind the whole backlog: under loss a frame waited for seconds.)
//! 3. After the last frame is handed to the transport, the server writes an [`EndOfFrames`]
//!    (8 bytes: magic `SKE1`, frames sent `u32`) on stream 0 and finishes it.
//! 4. The client closes the connection once it has the end marker and every frame it announces.
//!
//! All integers are big-endian.
//!
//! # Metrics (client)
//!
//! - **Frame delay** of a completely received frame: `completion − created_at`, where completion
//!   is the client's `CLOCK_REALTIME` when the frame's stream ended. Server and client must share
//!   a clock: in the lab they run in network namespaces of one host; across hosts, synchronise
//!   them (the delay is off by the clock offset otherwise).
//! - **Frame-level jitter** of frame `i > 0` (in index order among received frames): the RFC 3550
//!   §6.4.1 difference `D(i−1, i) = |(arrival_i − arrival_{i−1}) − (created_i − created_{i−1})|`,
//!   in ms. (PEMI describes it as "statistical variance of the RTP frame interarrival time";
//!   the percentiles of `D` are the usual reading of that.)
//! - **Goodput**: payload bytes received × 8 / `duration_s`, where `duration_s` runs from the
//!   client writing its request (after the handshake) to the completion of the last frame.
//!
//! The report ([`RtcReport`]) has percentiles p50/p90/p99 (nearest rank, [`crate::stats`]).

with_stacks! {
    pub mod quiche_stack;
    pub mod quinn_stack;
}

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::stats::percentile;
pub use crate::transfer::Stack;

/// ALPN of the RTC application (both stacks).
pub const ALPN: &[u8] = b"sidekick-rtc";

/// Frame rate of PEMI §6.1.2.
pub const DEFAULT_FPS: u32 = 30;

/// Bit rate of PEMI §6.1.2, kbit/s.
pub const DEFAULT_KBPS: u32 = 3000;

/// Longest run a server accepts (one hour).
pub const MAX_DURATION_MS: u32 = 3_600_000;

/// Frames created but not yet handed to the transport a server holds before it gives up on the
/// connection (100 s at 30 fps): frames are never skipped, so a peer that stops reading would
/// otherwise grow the queue without bound.
pub const MAX_BACKLOG_FRAMES: usize = 3000;

/// Frames a client logs (one per index); further frames are counted in
/// [`FrameLog::over_cap`] only.
pub const MAX_LOGGED_FRAMES: usize = 1 << 20;

/// Server-initiated unidirectional streams a quiche client allows at first (quiche raises the
/// limit as streams complete; a high start avoids stalls on long runs and lossy paths).
pub const QUICHE_CLIENT_MAX_STREAMS_UNI: u64 = 100_000;

/// Concurrently open server-initiated unidirectional streams a quinn client allows (quinn's
/// limit is a concurrency limit, renewed as streams complete): 33 s of frames at 30 fps.
pub const QUINN_CLIENT_MAX_CONCURRENT_UNI: u32 = 1000;

/// Errors of the RTC wire format.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RtcWireError {
    /// Fewer bytes than the fixed size.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// Magic mismatch.
    #[error("bad magic")]
    BadMagic,
    /// A frame stream carried a payload of another length than its header declares.
    #[error("frame {index}: header declares {declared} payload bytes, stream carried {got}")]
    PayloadLength {
        /// Frame index.
        index: u32,
        /// Declared length.
        declared: u32,
        /// Bytes received (so far, when too many).
        got: u64,
    },
}

fn fixed<const N: usize>(buf: &[u8], magic: [u8; 4]) -> Result<&[u8], RtcWireError> {
    let b = buf.get(..N).ok_or(RtcWireError::Truncated {
        need: N,
        have: buf.len(),
    })?;
    if b[..4] != magic {
        return Err(RtcWireError::BadMagic);
    }
    Ok(&b[4..])
}

fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The client's request, on stream 0.
///
/// ```
/// use sidekick_examples::rtc::RtcRequest;
/// let r = RtcRequest { duration_ms: 20_000 };
/// assert_eq!(RtcRequest::decode(&r.encode()), Ok(r));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtcRequest {
    /// How long the server sends frames, ms.
    pub duration_ms: u32,
}

impl RtcRequest {
    /// Encoded size.
    pub const LEN: usize = 8;
    const MAGIC: [u8; 4] = *b"SKR1";

    /// Encode to the wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(&Self::MAGIC);
        out[4..].copy_from_slice(&self.duration_ms.to_be_bytes());
        out
    }

    /// Decode the first [`RtcRequest::LEN`] bytes.
    pub fn decode(buf: &[u8]) -> Result<Self, RtcWireError> {
        let b = fixed::<{ Self::LEN }>(buf, Self::MAGIC)?;
        Ok(Self {
            duration_ms: be_u32(b),
        })
    }
}

/// The header at the start of every frame stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Frame index, from 0.
    pub index: u32,
    /// Creation time at the server, ns since the Unix epoch (`CLOCK_REALTIME`).
    pub created_unix_ns: u64,
    /// Payload bytes following the header.
    pub payload_len: u32,
}

impl FrameHeader {
    /// Encoded size.
    pub const LEN: usize = 20;
    const MAGIC: [u8; 4] = *b"SKF1";

    /// Encode to the wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(&Self::MAGIC);
        out[4..8].copy_from_slice(&self.index.to_be_bytes());
        out[8..16].copy_from_slice(&self.created_unix_ns.to_be_bytes());
        out[16..].copy_from_slice(&self.payload_len.to_be_bytes());
        out
    }

    /// Decode the first [`FrameHeader::LEN`] bytes.
    pub fn decode(buf: &[u8]) -> Result<Self, RtcWireError> {
        let b = fixed::<{ Self::LEN }>(buf, Self::MAGIC)?;
        Ok(Self {
            index: be_u32(&b[..4]),
            created_unix_ns: be_u64(&b[4..12]),
            payload_len: be_u32(&b[12..16]),
        })
    }
}

/// The whole content of a frame stream: header, then `payload` (whose length the header
/// declares).
pub fn encode_frame(index: u32, created_unix_ns: u64, payload: &[u8]) -> Vec<u8> {
    let h = FrameHeader {
        index,
        created_unix_ns,
        payload_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
    };
    let mut out = Vec::with_capacity(FrameHeader::LEN + payload.len());
    out.extend_from_slice(&h.encode());
    out.extend_from_slice(&payload[..h.payload_len as usize]);
    out
}

/// The server's end marker, last bytes on stream 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndOfFrames {
    /// Frames the server sent (indices `0..frames_sent`).
    pub frames_sent: u32,
}

impl EndOfFrames {
    /// Encoded size.
    pub const LEN: usize = 8;
    const MAGIC: [u8; 4] = *b"SKE1";

    /// Encode to the wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(&Self::MAGIC);
        out[4..].copy_from_slice(&self.frames_sent.to_be_bytes());
        out
    }

    /// Decode the first [`EndOfFrames::LEN`] bytes.
    pub fn decode(buf: &[u8]) -> Result<Self, RtcWireError> {
        let b = fixed::<{ Self::LEN }>(buf, Self::MAGIC)?;
        Ok(Self {
            frames_sent: be_u32(b),
        })
    }
}

/// Fuzz body for the RTC framing: decoding arbitrary bytes never panics, a successful decode
/// re-encodes to the same prefix, and a [`FrameReader`] fed the bytes in two pieces never panics.
pub fn fuzz_parse(data: &[u8]) {
    if let Ok(r) = RtcRequest::decode(data) {
        assert_eq!(&r.encode()[..], &data[..RtcRequest::LEN]);
    }
    if let Ok(h) = FrameHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..FrameHeader::LEN]);
    }
    if let Ok(e) = EndOfFrames::decode(data) {
        assert_eq!(&e.encode()[..], &data[..EndOfFrames::LEN]);
    }
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut r = FrameReader::default();
    if r.push(&data[..split]).is_ok() && r.push(&data[split..]).is_ok() {
        let _ = r.finish();
    }
}

/// Frame rate and bit rate of a server.
///
/// ```
/// use std::time::Duration;
/// use sidekick_examples::rtc::FrameParams;
/// let p = FrameParams::default(); // 30 fps, 3000 kbit/s
/// assert_eq!(p.frame_bytes(), 12_500);
/// assert_eq!(p.frame_count(2_000), 60);
/// assert_eq!(p.due(30), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameParams {
    /// Frames per second (≥ 1).
    pub fps: u32,
    /// Bit rate, kbit/s (1000 bit/s).
    pub kbps: u32,
}

impl Default for FrameParams {
    fn default() -> Self {
        Self {
            fps: DEFAULT_FPS,
            kbps: DEFAULT_KBPS,
        }
    }
}

impl FrameParams {
    /// Payload bytes per frame: `kbps · 1000 / 8 / fps`, rounded to the nearest byte.
    pub fn frame_bytes(&self) -> usize {
        let fps = u64::from(self.fps.max(1));
        ((u64::from(self.kbps) * 1000 + 4 * fps) / (8 * fps)) as usize
    }

    /// Frames in a run of `duration_ms`: `duration · fps`, rounded to the nearest frame.
    pub fn frame_count(&self, duration_ms: u32) -> u32 {
        let n = (u64::from(duration_ms) * u64::from(self.fps) + 500) / 1000;
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Creation time of frame `index` after the start of the schedule: `index / fps` (computed
    /// from the index, so the schedule does not drift).
    pub fn due(&self, index: u32) -> Duration {
        Duration::from_nanos(u64::from(index) * 1_000_000_000 / u64::from(self.fps.max(1)))
    }
}

/// Incremental parser of one frame stream (sans-IO): feed the stream's bytes in any pieces, then
/// [`FrameReader::finish`] at its FIN.
///
/// ```
/// use sidekick_examples::rtc::{FrameReader, encode_frame};
/// let bytes = encode_frame(7, 1_000, &[0u8; 100]);
/// let mut r = FrameReader::default();
/// r.push(&bytes[..5]).unwrap();
/// r.push(&bytes[5..]).unwrap();
/// let h = r.finish().unwrap();
/// assert_eq!((h.index, h.created_unix_ns, h.payload_len), (7, 1_000, 100));
/// ```
#[derive(Debug, Default, Clone)]
pub struct FrameReader {
    head: Vec<u8>,
    header: Option<FrameHeader>,
    payload: u64,
}

impl FrameReader {
    /// Bytes of the stream, in order.
    pub fn push(&mut self, mut data: &[u8]) -> Result<(), RtcWireError> {
        if self.header.is_none() {
            let take = (FrameHeader::LEN - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.head.len() == FrameHeader::LEN {
                self.header = Some(FrameHeader::decode(&self.head)?);
            }
        }
        self.payload += data.len() as u64;
        if let Some(h) = self.header
            && self.payload > u64::from(h.payload_len)
        {
            return Err(RtcWireError::PayloadLength {
                index: h.index,
                declared: h.payload_len,
                got: self.payload,
            });
        }
        Ok(())
    }

    /// Payload bytes seen so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload
    }

    /// The stream ended: its header, if the stream carried exactly a header and the payload it
    /// declares.
    pub fn finish(&self) -> Result<FrameHeader, RtcWireError> {
        let h = self.header.ok_or(RtcWireError::Truncated {
            need: FrameHeader::LEN,
            have: self.head.len(),
        })?;
        if self.payload != u64::from(h.payload_len) {
            return Err(RtcWireError::PayloadLength {
                index: h.index,
                declared: h.payload_len,
                got: self.payload,
            });
        }
        Ok(h)
    }
}

/// Received frames of a run (one entry per index, at most [`MAX_LOGGED_FRAMES`]) and the metrics
/// computed from them.
///
/// ```
/// use sidekick_examples::rtc::{FrameHeader, FrameLog};
/// let mut log = FrameLog::default();
/// let ms = 1_000_000;
/// // Created every 33 ms; the second frame completes 10 ms later than its schedule.
/// for (i, arrival) in [(0u32, 20 * ms), (1, 63 * ms), (2, 86 * ms)] {
///     let h = FrameHeader { index: i, created_unix_ns: u64::from(i) * 33 * ms, payload_len: 100 };
///     log.record(&h, arrival);
/// }
/// assert_eq!(log.delays_ms(), vec![20.0, 30.0, 20.0]);
/// assert_eq!(log.jitters_ms(), vec![10.0, 10.0]);
/// ```
#[derive(Debug, Default, Clone)]
pub struct FrameLog {
    frames: BTreeMap<u32, (u64, u64)>,
    payload_bytes: u64,
    /// Frames received again with an index already logged (not counted twice).
    pub duplicates: u64,
    /// Frames not logged because [`MAX_LOGGED_FRAMES`] were.
    pub over_cap: u64,
}

impl FrameLog {
    /// A frame whose stream completed at `completed_unix_ns` (`CLOCK_REALTIME`). Returns whether
    /// it was logged (false for a duplicate index or over the cap).
    pub fn record(&mut self, h: &FrameHeader, completed_unix_ns: u64) -> bool {
        if self.frames.contains_key(&h.index) {
            self.duplicates += 1;
            return false;
        }
        if self.frames.len() >= MAX_LOGGED_FRAMES {
            self.over_cap += 1;
            return false;
        }
        self.frames
            .insert(h.index, (h.created_unix_ns, completed_unix_ns));
        self.payload_bytes += u64::from(h.payload_len);
        true
    }

    /// Distinct frames received.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// No frame received.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Payload bytes of the logged frames.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Frame delays (completion − creation), ms, in index order.
    pub fn delays_ms(&self) -> Vec<f64> {
        self.frames
            .values()
            .map(|&(created, done)| ns_diff_ms(done, created))
            .collect()
    }

    /// RFC 3550 jitter samples `|(arrival_i − arrival_j) − (created_i − created_j)|`, ms, for each
    /// received frame `i` and the received frame `j` with the next lower index.
    pub fn jitters_ms(&self) -> Vec<f64> {
        let v: Vec<&(u64, u64)> = self.frames.values().collect();
        v.windows(2)
            .map(|w| {
                let (c0, a0) = *w[0];
                let (c1, a1) = *w[1];
                let d = (i128::from(a1) - i128::from(a0)) - (i128::from(c1) - i128::from(c0));
                d.unsigned_abs() as f64 / 1e6
            })
            .collect()
    }

    /// The run's report: `frames_sent` from the server's end marker, `duration` from the request
    /// to the last frame's completion.
    pub fn report(&self, stack: Stack, frames_sent: u32, duration: Duration) -> RtcReport {
        let delays = self.delays_ms();
        let jitters = self.jitters_ms();
        let secs = duration.as_secs_f64();
        RtcReport {
            stack: stack.name(),
            frames_sent,
            frames_received: u32::try_from(self.len()).unwrap_or(u32::MAX),
            frame_delay_p50_ms: percentile(&delays, 50.0),
            frame_delay_p90_ms: percentile(&delays, 90.0),
            frame_delay_p99_ms: percentile(&delays, 99.0),
            frame_jitter_p50_ms: percentile(&jitters, 50.0),
            frame_jitter_p90_ms: percentile(&jitters, 90.0),
            frame_jitter_p99_ms: percentile(&jitters, 99.0),
            goodput_mbps: if secs > 0.0 {
                self.payload_bytes as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            },
            duration_s: secs,
        }
    }
}

/// `a − b` in ms (negative if `a < b`).
fn ns_diff_ms(a: u64, b: u64) -> f64 {
    (i128::from(a) - i128::from(b)) as f64 / 1e6
}

/// The client's one-line report (`--json`). Percentiles are `null` when there is no sample (no
/// frame received; jitter needs two).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RtcReport {
    /// Client stack.
    pub stack: &'static str,
    /// Frames the server sent (its end marker).
    pub frames_sent: u32,
    /// Distinct frames completely received.
    pub frames_received: u32,
    /// Median frame delay, ms.
    pub frame_delay_p50_ms: Option<f64>,
    /// 90th-percentile frame delay, ms.
    pub frame_delay_p90_ms: Option<f64>,
    /// 99th-percentile frame delay, ms.
    pub frame_delay_p99_ms: Option<f64>,
    /// Median frame-level jitter, ms.
    pub frame_jitter_p50_ms: Option<f64>,
    /// 90th-percentile frame-level jitter, ms.
    pub frame_jitter_p90_ms: Option<f64>,
    /// 99th-percentile frame-level jitter, ms.
    pub frame_jitter_p99_ms: Option<f64>,
    /// Payload bits received / `duration_s`, Mbit/s.
    pub goodput_mbps: f64,
    /// Request written → last frame completed, seconds.
    pub duration_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte strings of examples/quic-go/wire_test.go: the quic-go server speaks this format.
    #[test]
    fn wire_vectors_match_the_go_server() {
        fn unhex(s: &str) -> Vec<u8> {
            let s: Vec<u8> = s.bytes().filter(|b| *b != b' ').collect();
            s.chunks(2)
                .map(|p| {
                    u8::from_str_radix(std::str::from_utf8(p).unwrap_or("zz"), 16).unwrap_or(0)
                })
                .collect()
        }
        let req = RtcRequest {
            duration_ms: 20_000,
        };
        assert_eq!(req.encode().to_vec(), unhex("534b52310000 4e20"));
        assert_eq!(
            encode_frame(7, 1000, &[1, 2, 3]),
            unhex("534b4631 00000007 00000000000003e8 00000003 010203")
        );
        let end = EndOfFrames { frames_sent: 600 };
        assert_eq!(end.encode().to_vec(), unhex("534b4531 00000258"));
    }

    #[test]
    fn wire_roundtrips_and_errors() {
        let h = FrameHeader {
            index: 3,
            created_unix_ns: 1_700_000_000_000_000_000,
            payload_len: 12_500,
        };
        assert_eq!(FrameHeader::decode(&h.encode()), Ok(h));
        let e = EndOfFrames { frames_sent: 600 };
        assert_eq!(EndOfFrames::decode(&e.encode()), Ok(e));
        assert_eq!(
            RtcRequest::decode(b"SKR"),
            Err(RtcWireError::Truncated { need: 8, have: 3 })
        );
        assert_eq!(
            EndOfFrames::decode(&RtcRequest { duration_ms: 1 }.encode()),
            Err(RtcWireError::BadMagic)
        );
    }

    #[test]
    fn frame_reader_checks_length() {
        let bytes = encode_frame(1, 5, &[1u8; 10]);
        let mut r = FrameReader::default();
        r.push(&bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(r.payload_bytes(), 9);
        assert_eq!(
            r.finish(),
            Err(RtcWireError::PayloadLength {
                index: 1,
                declared: 10,
                got: 9
            })
        );
        r.push(&bytes[bytes.len() - 1..]).unwrap();
        assert!(r.finish().is_ok());
        assert!(r.push(&[0]).is_err());
        assert_eq!(
            FrameReader::default().finish(),
            Err(RtcWireError::Truncated { need: 20, have: 0 })
        );
    }

    #[test]
    fn schedule_has_no_drift() {
        let p = FrameParams::default();
        // 20 s at 30 fps: frame 600 would be due at exactly 20 s.
        assert_eq!(p.frame_count(20_000), 600);
        assert_eq!(p.due(600), Duration::from_secs(20));
        assert_eq!(p.due(1), Duration::from_nanos(33_333_333));
        let p = FrameParams {
            fps: 25,
            kbps: 1000,
        };
        assert_eq!(p.frame_bytes(), 5000);
        assert_eq!(p.frame_count(1_020), 26);
    }

    #[test]
    fn metrics_skip_gaps_and_duplicates() {
        let ms = 1_000_000u64;
        let mut log = FrameLog::default();
        let h = |i: u32| FrameHeader {
            index: i,
            created_unix_ns: 1_000 * ms + u64::from(i) * 33 * ms,
            payload_len: 1000,
        };
        // Frame 1 is missing; frame 2 completes 66 ms after frame 0 (as created): jitter 0.
        assert!(log.record(&h(0), 1_005 * ms));
        assert!(log.record(&h(2), 1_071 * ms));
        assert!(!log.record(&h(2), 1_080 * ms));
        assert_eq!(log.duplicates, 1);
        assert_eq!(log.jitters_ms(), vec![0.0]);
        assert_eq!(log.delays_ms(), vec![5.0, 5.0]);
        let r = log.report(Stack::Quinn, 3, Duration::from_millis(100));
        assert_eq!(r.frames_received, 2);
        assert!((r.goodput_mbps - 0.16).abs() < 1e-9);
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.starts_with(
                r#"{"stack":"quinn","frames_sent":3,"frames_received":2,"frame_delay_p50_ms":5.0"#
            ),
            "{line}"
        );
        let empty = FrameLog::default().report(Stack::Quiche, 0, Duration::ZERO);
        assert_eq!(empty.frame_jitter_p90_ms, None);
        assert_eq!(empty.goodput_mbps, 0.0);
    }

    proptest! {
        #[test]
        fn fuzz_parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            fuzz_parse(&data);
        }

        #[test]
        fn frame_reader_any_split(
            len in 0usize..300,
            split in 0usize..400,
            idx in any::<u32>(),
            t in any::<u64>(),
        ) {
            let bytes = encode_frame(idx, t, &vec![7u8; len]);
            let split = split.min(bytes.len());
            let mut r = FrameReader::default();
            r.push(&bytes[..split]).unwrap();
            r.push(&bytes[split..]).unwrap();
            let h = r.finish().unwrap();
            prop_assert_eq!((h.index, h.created_unix_ns, h.payload_len as usize), (idx, t, len));
        }

        #[test]
        fn jitter_is_nonnegative(
            arrivals in proptest::collection::vec(0u64..10_000_000_000, 2..50),
        ) {
            let mut log = FrameLog::default();
            for (i, a) in arrivals.iter().enumerate() {
                let h = FrameHeader {
                    index: i as u32,
                    created_unix_ns: i as u64 * 33_333_333,
                    payload_len: 1,
                };
                log.record(&h, *a);
            }
            let j = log.jitters_ms();
            prop_assert_eq!(j.len(), arrivals.len() - 1);
            prop_assert!(j.iter().all(|x| *x >= 0.0 && x.is_finite()));
        }
    }
}
