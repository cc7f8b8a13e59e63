//! What the sidekick reads from a WebRTC datagram without any key: SRTP leaves the RTP header in
//! the clear (RFC 3711 §3.1), so the media stream's sequence number serves Packrat as the packet
//! number a QUIC stack would give through its key log (Packrat (CoNEXT '26) §4.2: a gap in it is
//! where the player would NACK). Datagrams are told apart by their first byte (RFC 7983 §7:
//! STUN 0–3, DTLS 20–63, RTP/RTCP 128–191) and RTCP from RTP by the payload type
//! (RFC 5761 §4: 192–223 with the marker bit).
//!
//! ```
//! use sidekick_examples::webrtc::rtp_lens::{Kind, RtpLens, classify};
//! let rtp = |seq: u16| {
//!     let mut d = vec![0x80, 96, 0, 0, 0, 0, 0, 1, 0, 0, 0, 42];
//!     d[2..4].copy_from_slice(&seq.to_be_bytes());
//!     d.extend_from_slice(&[0; 20]);
//!     d
//! };
//! assert!(matches!(classify(&rtp(7)), Kind::Rtp { pt: 96, seq: 7, ssrc: 42, .. }));
//! let mut lens = RtpLens::new(96);
//! assert_eq!(lens.packet_number(&rtp(65535)), Some(65535));
//! assert_eq!(lens.packet_number(&rtp(0)), Some(65536)); // wrapped
//! assert_eq!(lens.packet_number(&[0x00, 0x01, 0, 0]), None); // STUN
//! ```

/// What a datagram on a WebRTC 5-tuple is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// STUN (ICE connectivity checks and consent).
    Stun,
    /// DTLS (handshake, alerts).
    Dtls,
    /// SRTP: the header fields are in the clear.
    Rtp {
        /// Payload type.
        pt: u8,
        /// Marker bit.
        marker: bool,
        /// Sequence number.
        seq: u16,
        /// Synchronisation source.
        ssrc: u32,
    },
    /// SRTCP.
    Rtcp {
        /// Packet type of the first RTCP packet (200 SR, 201 RR, 205 RTPFB, 206 PSFB…).
        packet_type: u8,
    },
    /// Anything else (a sidekick discovery marker, garbage).
    Other,
}

/// Classifies a datagram (network input: never panics).
pub fn classify(d: &[u8]) -> Kind {
    let Some(&b0) = d.first() else {
        return Kind::Other;
    };
    match b0 {
        0..=3 if d.len() >= 20 => Kind::Stun,
        20..=63 if d.len() >= 13 => Kind::Dtls,
        128..=191 => {
            let Some(&b1) = d.get(1) else {
                return Kind::Other;
            };
            if (192..=223).contains(&b1) {
                return if d.len() >= 8 {
                    Kind::Rtcp { packet_type: b1 }
                } else {
                    Kind::Other
                };
            }
            if d.len() < 12 {
                return Kind::Other;
            }
            Kind::Rtp {
                pt: b1 & 0x7f,
                marker: b1 & 0x80 != 0,
                seq: u16::from_be_bytes([d[2], d[3]]),
                ssrc: u32::from_be_bytes([d[8], d[9], d[10], d[11]]),
            }
        }
        _ => Kind::Other,
    }
}

/// Extends 16-bit RTP sequence numbers to 64 bits (RFC 3550 Appendix A.1's idea: the value
/// closest to the highest seen so far).
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqExtender {
    highest: Option<u64>,
}

impl SeqExtender {
    /// The highest extended value so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// The extended value of `seq`.
    pub fn extend(&mut self, seq: u16) -> u64 {
        let Some(h) = self.highest else {
            self.highest = Some(u64::from(seq));
            return u64::from(seq);
        };
        let base = h & !0xffff;
        let candidates = [
            base.checked_sub(0x1_0000).map(|b| b | u64::from(seq)),
            Some(base | u64::from(seq)),
            Some((base + 0x1_0000) | u64::from(seq)),
        ];
        let ext = candidates
            .into_iter()
            .flatten()
            .min_by_key(|c| c.abs_diff(h))
            .unwrap_or(u64::from(seq));
        self.highest = Some(h.max(ext));
        ext
    }
}

/// One stream's numbering: its SSRC, its sequence numbers extended, and what is added to make
/// them packet numbers.
#[derive(Debug, Clone, Copy)]
struct Stream {
    ssrc: u32,
    seq: SeqExtender,
    offset: i64,
}

impl Stream {
    fn number(&mut self, seq: u16) -> Option<u64> {
        i64::try_from(self.seq.extend(seq))
            .ok()
            .and_then(|e| e.checked_add(self.offset))
            .and_then(|p| u64::try_from(p).ok())
    }
}

/// Packet numbers of one media stream: the first SSRC seen with payload type `pt` (RTX and other
/// streams have none; the SDK delivers those at once) — and, across a restart, the stream that
/// replaces it.
#[derive(Debug, Clone)]
pub struct RtpLens {
    pt: u8,
    /// The stream followed.
    cur: Option<Stream>,
    /// The stream a restart replaced: its late packets (and their repairs) keep their numbers.
    prev: Option<Stream>,
    /// The highest packet number given so far.
    highest: Option<u64>,
    /// [`RtpLens::restart`] was called: the next media packet of another SSRC is the stream.
    restarting: bool,
}

/// After a restart, a new stream whose first sequence number is at most this far ahead of the
/// old one's highest continues its numbering (a sender that kept counting); anything else is
/// numbered from just above the old highest.
const CONTINUE_WINDOW: u16 = 1024;

impl RtpLens {
    /// A lens for the stream with payload type `pt`.
    pub fn new(pt: u8) -> Self {
        Self {
            pt,
            cur: None,
            prev: None,
            highest: None,
            restarting: false,
        }
    }

    /// The media session is restarting (new SRTP keys, e.g. a DTLS restart): the next packet with
    /// this payload type from another SSRC becomes the stream, and its packet numbers go on above
    /// the old stream's, so that the SDK sees one stream, neither a jump back nor a hole of
    /// thousands. The old stream's packets still in flight keep their numbers.
    ///
    /// ```
    /// use sidekick_examples::webrtc::rtp_lens::RtpLens;
    /// let rtp = |seq: u16, ssrc: u8| {
    ///     let mut d = vec![0x80, 96, 0, 0, 0, 0, 0, 0, 0, 0, 0, ssrc];
    ///     d[2..4].copy_from_slice(&seq.to_be_bytes());
    ///     d.extend_from_slice(&[0; 20]);
    ///     d
    /// };
    /// let mut lens = RtpLens::new(96);
    /// assert_eq!(lens.packet_number(&rtp(500, 1)), Some(500));
    /// lens.restart();
    /// assert_eq!(lens.packet_number(&rtp(501, 1)), Some(501)); // the old stream goes on
    /// assert_eq!(lens.packet_number(&rtp(40_000, 2)), Some(502)); // the new one, renumbered
    /// assert_eq!(lens.packet_number(&rtp(499, 1)), Some(499)); // a late packet of the old one
    /// assert_eq!(lens.packet_number(&rtp(40_001, 2)), Some(503));
    /// assert_eq!(lens.packet_number(&rtp(7, 3)), None); // neither
    /// ```
    pub fn restart(&mut self) {
        if self.cur.is_some() {
            self.restarting = true;
        }
    }

    /// The payload type followed.
    pub fn pt(&self) -> u8 {
        self.pt
    }

    /// The media stream's SSRC once seen.
    pub fn ssrc(&self) -> Option<u32> {
        self.cur.map(|c| c.ssrc)
    }

    /// The packet number if `d` is a packet of the media stream (or of the one a restart
    /// replaced).
    pub fn packet_number(&mut self, d: &[u8]) -> Option<u64> {
        let Kind::Rtp { pt, seq, ssrc, .. } = classify(d) else {
            return None;
        };
        if pt != self.pt {
            return None;
        }
        let pn = match (&mut self.cur, &mut self.prev) {
            (Some(c), _) if c.ssrc == ssrc => c.number(seq),
            (_, Some(p)) if p.ssrc == ssrc => p.number(seq),
            (Some(_), _) if self.restarting => self.adopt(ssrc, seq),
            (Some(_), _) => return None,
            (None, _) => {
                let mut s = Stream {
                    ssrc,
                    seq: SeqExtender::default(),
                    offset: 0,
                };
                let pn = s.number(seq);
                self.cur = Some(s);
                pn
            }
        }?;
        self.highest = Some(self.highest.map_or(pn, |h| h.max(pn)));
        Some(pn)
    }

    /// The first packet of the stream after a restart: `seq` continues the old numbering when
    /// it is a little ahead of the old stream's highest, else the new stream is numbered from
    /// just above the highest packet number.
    fn adopt(&mut self, ssrc: u32, seq: u16) -> Option<u64> {
        self.restarting = false;
        let old = self.cur.take();
        let h = self.highest.unwrap_or(0);
        let first = match old.and_then(|o| o.seq.highest()) {
            Some(raw) => {
                let ahead = seq.wrapping_sub(raw as u16);
                if (1..=CONTINUE_WINDOW).contains(&ahead) {
                    h.saturating_add(u64::from(ahead))
                } else {
                    h.saturating_add(1)
                }
            }
            None => h.saturating_add(1),
        };
        // The new extender starts at `seq`: shift it to `first`.
        let offset = i64::try_from(first)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::from(seq));
        self.prev = old;
        let mut s = Stream {
            ssrc,
            seq: SeqExtender::default(),
            offset,
        };
        let pn = s.number(seq);
        self.cur = Some(s);
        pn
    }
}

/// Fuzz body (`fuzz/fuzz_targets/webrtc_wire.rs` and the unit tests): classification, the
/// lens, the payload header, the signalling messages and the browser's stats body never panic
/// on any input.
pub fn fuzz_parse(data: &[u8]) {
    let _ = classify(data);
    let mut lens = RtpLens::new(data.get(1).map_or(96, |b| b & 0x7f));
    for (i, chunk) in data.chunks(16).enumerate() {
        if i % 5 == 4 {
            lens.restart();
        }
        let _ = lens.packet_number(chunk);
    }
    let _ = super::source::PayloadHeader::parse(data);
    let _ = super::signal::parse_request(data, 1 << 16);
    let _ = super::signal::parse_response(data, 1 << 16);
    let _ = super::browser_stats::parse_stats_post(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn demultiplexes_like_rfc7983() {
        let mut stun = vec![0u8, 1, 0, 0];
        stun.extend_from_slice(&[0; 16]);
        assert_eq!(classify(&stun), Kind::Stun);
        assert_eq!(classify(&[22; 40]), Kind::Dtls);
        let rr = [0x81, 201, 0, 7, 0, 0, 0, 1];
        assert_eq!(classify(&rr), Kind::Rtcp { packet_type: 201 });
        assert_eq!(classify(&[0x80, 0xe0, 0, 1]), Kind::Other);
        assert_eq!(classify(&[]), Kind::Other);
        assert_eq!(classify(&[0xff; 30]), Kind::Other);
    }

    #[test]
    fn extension_follows_wraps_and_reordering() {
        let mut e = SeqExtender::default();
        assert_eq!(e.extend(65534), 65534);
        assert_eq!(e.extend(1), 65537);
        assert_eq!(e.extend(65535), 65535); // late, before the wrap
        assert_eq!(e.extend(2), 65538);
        let mut e = SeqExtender::default();
        assert_eq!(e.extend(3), 3);
        assert_eq!(e.extend(65535), 65535); // no negative numbers: closest non-negative
    }

    #[test]
    fn lens_follows_one_stream() {
        let pkt = |pt: u8, seq: u16, ssrc: u32| {
            let mut d = vec![0x80, pt, 0, 0, 0, 0, 0, 0];
            d[2..4].copy_from_slice(&seq.to_be_bytes());
            d.extend_from_slice(&ssrc.to_be_bytes());
            d.extend_from_slice(&[0; 10]);
            d
        };
        let mut l = RtpLens::new(96);
        assert_eq!(l.packet_number(&pkt(97, 5, 9)), None); // RTX
        assert_eq!(l.packet_number(&pkt(96, 10, 1)), Some(10));
        assert_eq!(l.packet_number(&pkt(96, 11, 2)), None); // another SSRC
        assert_eq!(l.packet_number(&pkt(0x60 | 0x80, 12, 1)), Some(12)); // marker set
        assert_eq!(l.ssrc(), Some(1));
    }

    #[test]
    fn restart_continues_or_renumbers_the_new_stream() {
        let pkt = |seq: u16, ssrc: u32| {
            let mut d = vec![0x80, 96, 0, 0, 0, 0, 0, 0];
            d[2..4].copy_from_slice(&seq.to_be_bytes());
            d.extend_from_slice(&ssrc.to_be_bytes());
            d.extend_from_slice(&[0; 10]);
            d
        };
        // A sender that kept counting across the restart, over a wrap.
        let mut l = RtpLens::new(96);
        assert_eq!(l.packet_number(&pkt(65_530, 1)), Some(65_530));
        assert_eq!(l.packet_number(&pkt(2, 1)), Some(65_538));
        l.restart();
        assert_eq!(l.packet_number(&pkt(3, 1)), Some(65_539)); // the old stream, still in flight
        assert_eq!(l.packet_number(&pkt(5, 2)), Some(65_541)); // continues: a hole of one
        assert_eq!(l.packet_number(&pkt(4, 1)), Some(65_540)); // the hole, late on the old one
        assert_eq!(l.ssrc(), Some(2));
        // A second restart: the first stream is forgotten, the second kept for stragglers.
        l.restart();
        assert_eq!(l.packet_number(&pkt(6, 3)), Some(65_542));
        assert_eq!(l.packet_number(&pkt(6, 2)), Some(65_542));
        assert_eq!(l.packet_number(&pkt(5, 1)), None);
        // A sender that started afresh, behind the old numbers.
        let mut l = RtpLens::new(96);
        assert_eq!(l.packet_number(&pkt(30_000, 1)), Some(30_000));
        l.restart();
        assert_eq!(l.packet_number(&pkt(7, 2)), Some(30_001));
        assert_eq!(l.packet_number(&pkt(6, 2)), Some(30_000)); // reordered, below
        assert_eq!(l.packet_number(&pkt(8, 2)), Some(30_002));
        // A restart before any stream changes nothing.
        let mut l = RtpLens::new(96);
        l.restart();
        assert_eq!(l.packet_number(&pkt(9, 3)), Some(9));
    }

    proptest! {
        #[test]
        fn extension_is_monotone_for_in_order_input(start: u16, steps in proptest::collection::vec(1u16..1000, 1..200)) {
            let mut e = SeqExtender::default();
            let mut seq = start;
            let mut last = e.extend(seq);
            for s in steps {
                seq = seq.wrapping_add(s);
                let x = e.extend(seq);
                prop_assert_eq!(x, last + u64::from(s));
                last = x;
            }
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_parse(&data);
        }
    }
}
