//! The video-like source: frame sizes that vary like an encoder's (a large keyframe every
//! `keyframe_interval` frames, delta frames that vary around the mean), cut into RTP payloads of
//! at most `max_payload` bytes, each starting with a small header the receiver needs for its
//! metrics (frame index, packet index and count, capture time).
//!
//! The packets of a frame are paced evenly over the frame interval (`spacing = interval / n`),
//! as a smoothing pacer does: the stream then has no per-frame bursts, and a lost packet shows on
//! the near link as a silence twice the spacing — what the proxy's gap-triggered quACK looks
//! for (Sidekick (NSDI '24) §5.2, docs/proxy.md).
//!
//! ```
//! use sidekick_examples::webrtc::source::{FrameSource, SourceConfig};
//! let cfg = SourceConfig::default(); // 30 fps, 1500 kbit/s, keyframe every 60 frames
//! let mut src = FrameSource::new(&cfg, 1);
//! let key = src.next_frame();
//! let delta = src.next_frame();
//! assert!(key.keyframe && !delta.keyframe);
//! assert!(key.size > 2 * delta.size);
//! assert!(key.packets(&cfg) > 3);
//! ```

use std::time::Duration;

/// Bytes of the payload header.
pub const HEADER_LEN: usize = 20;

const MAGIC: [u8; 2] = *b"SW";

/// Source parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SourceConfig {
    /// Frames per second.
    pub fps: u32,
    /// Mean bit rate in kbit/s (payload bytes, headers excluded).
    pub kbps: u32,
    /// A keyframe every this many frames (the first frame is one).
    pub keyframe_interval: u32,
    /// Keyframe size as a multiple of a delta frame's mean size.
    pub keyframe_factor: f64,
    /// Delta frames vary uniformly within ± this fraction of their mean.
    pub delta_spread: f64,
    /// Largest RTP payload (header included).
    pub max_payload: usize,
}

impl Default for SourceConfig {
    /// 30 fps at 1500 kbit/s, a keyframe every 2 s four times a delta frame's size, delta frames
    /// ± 20 %, payloads up to 1100 bytes (about 6 packets per delta frame, 21 per keyframe).
    fn default() -> Self {
        Self {
            fps: 30,
            kbps: 1500,
            keyframe_interval: 60,
            keyframe_factor: 4.0,
            delta_spread: 0.2,
            max_payload: 1100,
        }
    }
}

impl SourceConfig {
    /// Time between frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / f64::from(self.fps.max(1)))
    }

    /// Mean delta-frame size such that the mean over a keyframe period is the bit rate.
    fn delta_mean(&self) -> f64 {
        let per_frame = f64::from(self.kbps) * 1000.0 / 8.0 / f64::from(self.fps.max(1));
        let n = f64::from(self.keyframe_interval.max(1));
        per_frame * n / (n - 1.0 + self.keyframe_factor.max(1.0))
    }
}

/// One encoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Frame index from 0.
    pub index: u32,
    /// Encoded size in bytes (payload headers excluded).
    pub size: usize,
    /// Whether this is a keyframe.
    pub keyframe: bool,
}

impl Frame {
    /// RTP packets this frame needs.
    pub fn packets(&self, cfg: &SourceConfig) -> u16 {
        let room = cfg.max_payload.saturating_sub(HEADER_LEN).max(1);
        self.size.div_ceil(room).clamp(1, usize::from(u16::MAX)) as u16
    }

    /// The RTP payloads of this frame, captured at `capture_unix_ns`.
    pub fn payloads(&self, cfg: &SourceConfig, capture_unix_ns: u64) -> Vec<Vec<u8>> {
        let n = self.packets(cfg);
        let room = cfg.max_payload.saturating_sub(HEADER_LEN).max(1);
        let mut left = self.size;
        (0..n)
            .map(|i| {
                let body = left.min(room);
                left -= body;
                let h = PayloadHeader {
                    frame: self.index,
                    packet: i,
                    count: n,
                    keyframe: self.keyframe,
                    capture_unix_ns,
                };
                let mut p = Vec::with_capacity(HEADER_LEN + body);
                h.write(&mut p);
                // Filler that does not compress to nothing (SRTP encrypts it anyway).
                p.extend((0..body).map(|j| (j as u8).wrapping_mul(31) ^ (self.index as u8)));
                p
            })
            .collect()
    }
}

/// Deterministic frame-size generator.
#[derive(Debug, Clone)]
pub struct FrameSource {
    cfg: SourceConfig,
    next: u32,
    rng: u64,
}

impl FrameSource {
    /// A source seeded with `seed` (same seed, same sizes).
    pub fn new(cfg: &SourceConfig, seed: u64) -> Self {
        Self {
            cfg: *cfg,
            next: 0,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64*: enough for frame sizes, no dependency.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next frame.
    pub fn next_frame(&mut self) -> Frame {
        let index = self.next;
        self.next = self.next.wrapping_add(1);
        let keyframe = index.is_multiple_of(self.cfg.keyframe_interval.max(1));
        let mean = self.cfg.delta_mean();
        let spread = self.cfg.delta_spread.clamp(0.0, 0.95);
        let u = self.uniform();
        let size = if keyframe {
            mean * self.cfg.keyframe_factor.max(1.0) * (1.0 + spread * (u - 0.5) * 0.5)
        } else {
            mean * (1.0 + spread * (2.0 * u - 1.0))
        };
        Frame {
            index,
            size: size.round().max(1.0) as usize,
            keyframe,
        }
    }
}

/// The header at the start of every RTP payload (big-endian): `"SW" | flags u8 | reserved u8 |
/// frame u32 | packet u16 | count u16 | capture time u64 (ns since the Unix epoch)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader {
    /// Frame index.
    pub frame: u32,
    /// Packet index within the frame.
    pub packet: u16,
    /// Packets in the frame.
    pub count: u16,
    /// Keyframe flag.
    pub keyframe: bool,
    /// Capture time of the frame (sender `CLOCK_REALTIME`).
    pub capture_unix_ns: u64,
}

/// Why a payload header did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Fewer than [`HEADER_LEN`] bytes.
    #[error("payload of {0} bytes is shorter than the header")]
    Short(usize),
    /// Not our magic.
    #[error("payload does not start with the source magic")]
    Magic,
    /// `packet >= count` or `count == 0`.
    #[error("packet {packet} of {count}")]
    Index {
        /// Packet index.
        packet: u16,
        /// Packet count.
        count: u16,
    },
}

impl PayloadHeader {
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.push(u8::from(self.keyframe));
        out.push(0);
        out.extend_from_slice(&self.frame.to_be_bytes());
        out.extend_from_slice(&self.packet.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.capture_unix_ns.to_be_bytes());
    }

    /// Parses the header at the start of `payload` (from the network: never panics).
    pub fn parse(payload: &[u8]) -> Result<Self, HeaderError> {
        let h = payload
            .get(..HEADER_LEN)
            .ok_or(HeaderError::Short(payload.len()))?;
        if h[..2] != MAGIC {
            return Err(HeaderError::Magic);
        }
        let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        let frame = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        let packet = be16(8);
        let count = be16(10);
        let mut t = [0u8; 8];
        t.copy_from_slice(&h[12..20]);
        if count == 0 || packet >= count {
            return Err(HeaderError::Index { packet, count });
        }
        Ok(Self {
            frame,
            packet,
            count,
            keyframe: h[2] & 1 == 1,
            capture_unix_ns: u64::from_be_bytes(t),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mean_rate_matches_the_configured_bit_rate() {
        let cfg = SourceConfig::default();
        let mut src = FrameSource::new(&cfg, 7);
        let frames: Vec<Frame> = (0..600).map(|_| src.next_frame()).collect();
        let bytes: usize = frames.iter().map(|f| f.size).sum();
        let kbps = bytes as f64 * 8.0 / 1000.0 / 20.0;
        assert!((kbps - 1500.0).abs() < 40.0, "{kbps}");
        assert_eq!(frames.iter().filter(|f| f.keyframe).count(), 10);
        let delta: Vec<usize> = frames
            .iter()
            .filter(|f| !f.keyframe)
            .map(|f| f.size)
            .collect();
        let (lo, hi) = (
            delta.iter().min().copied().unwrap_or(0),
            delta.iter().max().copied().unwrap_or(0),
        );
        // ± 20 % around about 5950 bytes: sizes vary, several packets each.
        assert!(
            lo < 5400 && hi > 6500 && lo > 4700 && hi < 7200,
            "{lo}..{hi}"
        );
        for f in &frames {
            let n = f.packets(&cfg);
            assert!(if f.keyframe { n >= 18 } else { n >= 5 }, "{f:?} {n}");
        }
    }

    #[test]
    fn payloads_carry_the_frame_and_add_up() {
        let cfg = SourceConfig::default();
        let f = Frame {
            index: 9,
            size: 3000,
            keyframe: false,
        };
        let p = f.payloads(&cfg, 123);
        assert_eq!(p.len(), 3);
        let body: usize = p.iter().map(|x| x.len() - HEADER_LEN).sum();
        assert_eq!(body, 3000);
        for (i, x) in p.iter().enumerate() {
            assert!(x.len() <= cfg.max_payload);
            let h = PayloadHeader::parse(x).unwrap();
            assert_eq!((h.frame, h.packet, h.count), (9, i as u16, 3));
            assert_eq!(h.capture_unix_ns, 123);
        }
    }

    #[test]
    fn bad_headers_are_refused() {
        assert_eq!(PayloadHeader::parse(&[0; 5]), Err(HeaderError::Short(5)));
        assert_eq!(PayloadHeader::parse(&[0; 20]), Err(HeaderError::Magic));
        let mut v = Vec::new();
        PayloadHeader {
            frame: 1,
            packet: 3,
            count: 3,
            keyframe: false,
            capture_unix_ns: 0,
        }
        .write(&mut v);
        assert!(matches!(
            PayloadHeader::parse(&v),
            Err(HeaderError::Index { .. })
        ));
    }

    proptest! {
        #[test]
        fn header_round_trips(frame: u32, count in 1u16.., packet_frac in 0.0f64..1.0,
                              keyframe: bool, t: u64) {
            let packet = ((f64::from(count) * packet_frac) as u16).min(count - 1);
            let h = PayloadHeader { frame, packet, count, keyframe, capture_unix_ns: t };
            let mut v = Vec::new();
            h.write(&mut v);
            prop_assert_eq!(v.len(), HEADER_LEN);
            prop_assert_eq!(PayloadHeader::parse(&v), Ok(h));
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = PayloadHeader::parse(&data);
        }
    }
}
