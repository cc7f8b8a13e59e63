//! RTP sequence gaps: a loss on the near segment seen the moment the next packet of the stream
//! passes. A media flow of WebRTC carries SRTP, whose RTP header stays in the clear (RFC 3711
//! §3.1: only the payload is encrypted), so the proxy reads each stream's sequence number
//! (RFC 3550 §5.1) without decrypting anything. A timing heuristic (the silence detector of
//! `quack_on_gap_percent`) cannot see a loss among packets that come faster than the stream's
//! average — a video keyframe's packets come 3–4× closer than a delta frame's — while a jump in
//! the sequence number says it exactly.
//!
//! Only datagrams that are RTP by RFC 7983's demultiplexing (first byte 128–191) and not RTCP
//! (RFC 5761 §4: payload types 64–95 with the marker bit are RTCP's 192–223) count; STUN, DTLS
//! and QUIC datagrams of the same flow are passed over. A late packet (below the next expected
//! number: a reordering, or the sender's own identical resend) never counts; a jump of more than
//! [`MAX_GAP`] is a restarted stream, not a loss.

/// Largest jump taken as lost packets rather than a stream that restarted.
pub const MAX_GAP: u16 = 64;

/// Streams (SSRCs) followed per flow: a WebRTC flow carries audio, video and their
/// retransmission streams; a new one takes the slot followed longest.
const STREAMS: usize = 4;

#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    ssrc: u32,
    /// The sequence number expected next.
    next: u16,
    /// Order of its last packet among the flow's (the stream heard from longest ago is replaced).
    heard: u32,
}

/// Sequence numbers of the RTP streams of one flow.
#[derive(Debug, Clone, Default)]
pub struct RtpGaps {
    streams: [Option<Stream>; STREAMS],
    packets: u32,
}

impl RtpGaps {
    /// Records one datagram of the flow; whether it is RTP and follows a gap in its stream (the
    /// packets just before it were lost upstream of the proxy).
    pub fn on_datagram(&mut self, d: &[u8]) -> bool {
        let (Some(&first), Some(&second)) = (d.first(), d.get(1)) else {
            return false;
        };
        if !(128..=191).contains(&first) || (64..=95).contains(&(second & 0x7f)) {
            return false;
        }
        let (Some(seq), Some(ssrc)) = (d.get(2..4), d.get(8..12)) else {
            return false;
        };
        let seq = u16::from_be_bytes([seq[0], seq[1]]);
        let ssrc = u32::from_be_bytes([ssrc[0], ssrc[1], ssrc[2], ssrc[3]]);
        self.packets = self.packets.wrapping_add(1);
        let heard = self.packets;
        if let Some(s) = self.streams.iter_mut().flatten().find(|s| s.ssrc == ssrc) {
            let ahead = seq.wrapping_sub(s.next);
            s.heard = heard;
            // Late (a reordering or a resend: `ahead` wraps past half the space) moves nothing.
            if ahead > u16::MAX / 2 {
                return false;
            }
            s.next = seq.wrapping_add(1);
            // In order (0), lost packets before it, or a restarted stream (beyond MAX_GAP).
            return ahead != 0 && ahead <= MAX_GAP;
        }
        let new = Stream {
            ssrc,
            next: seq.wrapping_add(1),
            heard,
        };
        match self.streams.iter_mut().find(|s| s.is_none()) {
            Some(free) => *free = Some(new),
            None => {
                if let Some(oldest) = self.streams.iter_mut().flatten().min_by_key(|s| s.heard) {
                    *oldest = new;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An RTP packet (version 2, payload type 96) of `ssrc` with sequence number `seq`.
    fn rtp(ssrc: u32, seq: u16) -> Vec<u8> {
        let mut p = vec![0x80, 96];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&[0; 4]);
        p.extend_from_slice(&ssrc.to_be_bytes());
        p.extend_from_slice(&[0xab; 40]);
        p
    }

    #[test]
    fn a_jump_in_the_sequence_is_a_gap_once() {
        let mut g = RtpGaps::default();
        assert!(!g.on_datagram(&rtp(7, 100)));
        assert!(!g.on_datagram(&rtp(7, 101)));
        // 102 lost upstream.
        assert!(g.on_datagram(&rtp(7, 103)));
        assert!(!g.on_datagram(&rtp(7, 104)));
        // The sender's resend of 102 (late) is no gap and moves nothing.
        assert!(!g.on_datagram(&rtp(7, 102)));
        assert!(!g.on_datagram(&rtp(7, 105)));
        // Across the wrap.
        let mut g = RtpGaps::default();
        g.on_datagram(&rtp(7, 65_534));
        assert!(!g.on_datagram(&rtp(7, 65_535)));
        assert!(g.on_datagram(&rtp(7, 1)));
    }

    #[test]
    fn streams_are_followed_apart_and_restarts_are_no_gap() {
        let mut g = RtpGaps::default();
        g.on_datagram(&rtp(1, 10));
        g.on_datagram(&rtp(2, 5000));
        assert!(!g.on_datagram(&rtp(1, 11)));
        assert!(!g.on_datagram(&rtp(2, 5001)));
        assert!(g.on_datagram(&rtp(2, 5003)));
        // A jump beyond MAX_GAP: a restarted stream.
        assert!(!g.on_datagram(&rtp(1, 11 + MAX_GAP + 2)));
        assert!(!g.on_datagram(&rtp(1, 12 + MAX_GAP + 2)));
    }

    #[test]
    fn only_rtp_counts() {
        let mut g = RtpGaps::default();
        g.on_datagram(&rtp(7, 1));
        // RTCP (a receiver report, payload type 201), STUN (first byte 0), DTLS (20..63), QUIC
        // (a long header, 0xc0): never a gap, whatever their bytes.
        let mut rtcp = rtp(7, 50);
        rtcp[1] = 201;
        for d in [
            rtcp,
            vec![0, 1, 0, 0],
            vec![22, 254, 253, 0],
            vec![0xc0; 40],
        ] {
            assert!(!g.on_datagram(&d));
        }
        assert!(!g.on_datagram(&rtp(7, 2)));
        // Too short for an RTP header.
        assert!(!g.on_datagram(&[0x80, 96, 0, 9]));
    }

    #[test]
    fn a_fifth_stream_replaces_the_one_heard_from_longest_ago() {
        let mut g = RtpGaps::default();
        for ssrc in 1..=4 {
            g.on_datagram(&rtp(ssrc, 0));
        }
        for ssrc in 2..=4 {
            g.on_datagram(&rtp(ssrc, 1));
        }
        g.on_datagram(&rtp(5, 0));
        // Stream 1 was forgotten: its next packet starts it again (no gap), the others are kept.
        assert!(!g.on_datagram(&rtp(1, 9)));
        assert!(g.on_datagram(&rtp(5, 2)));
    }

    proptest! {
        /// Any datagrams: no panic; a stream sent in order with chosen losses reports exactly
        /// one gap per run of losses.
        #[test]
        fn gaps_are_the_runs_of_losses(
            noise in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
            lost in proptest::collection::vec(any::<bool>(), 1..300),
            start in any::<u16>(),
        ) {
            let mut g = RtpGaps::default();
            for d in &noise {
                g.on_datagram(d);
            }
            let mut g = RtpGaps::default();
            g.on_datagram(&rtp(9, start));
            let (mut gaps, mut runs, mut in_run) = (0, 0, 0u16);
            for (i, &l) in lost.iter().enumerate() {
                let seq = start.wrapping_add(1 + i as u16);
                if l && in_run < MAX_GAP - 1 {
                    in_run += 1;
                    continue;
                }
                if in_run > 0 {
                    runs += 1;
                }
                in_run = 0;
                if g.on_datagram(&rtp(9, seq)) {
                    gaps += 1;
                }
            }
            prop_assert_eq!(gaps, runs);
        }
    }
}
