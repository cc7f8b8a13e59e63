//! Whether the timing inference (§4.3) can read a flow at all: the share of the packets it
//! evaluated that it named lost, over a recent window.
//!
//! §4.6 gives up a flowlet whose loss estimate is implausible. Some receivers defeat the
//! inference for the whole flow: one ACK-only reply every four packets or so, up to a
//! `max_ack_delay` late (seen with the s2n-quic client, docs/results.md), and the flowlet
//! matching then names most packets lost — 1 083–1 398 of ~1 600 per 2 MB download with 13–28
//! real drops, against 2–10 % with the quinn, quiche and quic-go clients. Flowlets below the
//! per-flowlet bar still let spurious copies through. A flow whose recent inference names more
//! than the implausible share of its packets is one the inference cannot read: its timing
//! retransmissions stop while that lasts, and the flow is forwarded as it is.
//!
//! ```
//! use sidekick_proxy_core::pemi::readable::TimingLoss;
//! let mut t = TimingLoss::default();
//! for _ in 0..10 {
//!     t.note(30, 25); // five in six named lost
//! }
//! assert!(t.unreadable(0.5));
//! let mut t = TimingLoss::default();
//! for _ in 0..10 {
//!     t.note(30, 2);
//! }
//! assert!(!t.unreadable(0.5));
//! ```

/// Packets evaluated before a flow can be judged unreadable.
pub const MIN_PACKETS: u64 = 200;
/// The window: past this many evaluated packets the counts are halved, so the judgement follows
/// the flow's recent behaviour (a receiver may change its ACK pattern).
pub const WINDOW_PACKETS: u64 = 1024;

/// The timing inference's recent record on one flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimingLoss {
    sent: u64,
    lost: u64,
}

impl TimingLoss {
    /// A flowlet was evaluated: `sent` original packets, `lost` of them named lost.
    pub fn note(&mut self, sent: usize, lost: usize) {
        self.sent = self.sent.saturating_add(sent as u64);
        self.lost = self.lost.saturating_add(lost.min(sent) as u64);
        while self.sent > WINDOW_PACKETS {
            self.sent /= 2;
            self.lost /= 2;
        }
    }

    /// Enough packets evaluated, and more than `implausible` of them named lost.
    pub fn unreadable(&self, implausible: f64) -> bool {
        self.sent >= MIN_PACKETS && self.lost as f64 > implausible * self.sent as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn needs_enough_packets() {
        let mut t = TimingLoss::default();
        t.note(100, 100);
        assert!(!t.unreadable(0.5));
        t.note(100, 100);
        assert!(t.unreadable(0.5));
    }

    #[test]
    fn follows_the_recent_behaviour() {
        let mut t = TimingLoss::default();
        for _ in 0..40 {
            t.note(30, 28);
        }
        assert!(t.unreadable(0.5));
        // The receiver starts acknowledging promptly: a few windows later the flow reads again.
        for _ in 0..200 {
            t.note(30, 1);
        }
        assert!(!t.unreadable(0.5));
    }

    proptest! {
        #[test]
        fn counts_stay_bounded_and_consistent(notes in proptest::collection::vec((0usize..5000, 0usize..5000), 0..100)) {
            let mut t = TimingLoss::default();
            for (s, l) in notes {
                t.note(s, l);
                prop_assert!(t.lost <= t.sent);
                prop_assert!(t.sent <= WINDOW_PACKETS);
            }
        }
    }
}
