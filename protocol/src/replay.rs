//! Sliding-window replay protection over per-direction sequence numbers (as in RFC 4303 §3.4.3).

use crate::error::Error;

/// Width of the window in sequence numbers.
pub const REPLAY_WINDOW: u64 = 64;

/// Accepts each sequence number at most once; numbers more than [`REPLAY_WINDOW`] below the
/// highest accepted one are refused. Sequence number 0 is never valid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    highest: u64,
    /// Bit i set = `highest - i` was accepted.
    bits: u64,
}

impl ReplayWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Highest sequence number accepted so far (0 = none).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Checks `seq` without recording it.
    pub fn check(&self, seq: u64) -> Result<(), Error> {
        if seq == 0 {
            return Err(Error::Replayed(seq));
        }
        if seq > self.highest {
            return Ok(());
        }
        let age = self.highest - seq;
        if age >= REPLAY_WINDOW || self.bits & (1u64 << age) != 0 {
            return Err(Error::Replayed(seq));
        }
        Ok(())
    }

    /// Checks and records `seq` (call only after the frame authenticated).
    pub fn accept(&mut self, seq: u64) -> Result<(), Error> {
        self.check(seq)?;
        if seq > self.highest {
            let shift = seq - self.highest;
            self.bits = if shift >= REPLAY_WINDOW {
                0
            } else {
                self.bits << shift
            };
            self.bits |= 1;
            self.highest = seq;
        } else {
            self.bits |= 1u64 << (self.highest - seq);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn basic() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(0), Err(Error::Replayed(0)));
        w.accept(1).unwrap();
        assert_eq!(w.accept(1), Err(Error::Replayed(1)));
        w.accept(5).unwrap();
        w.accept(3).unwrap();
        assert_eq!(w.accept(3), Err(Error::Replayed(3)));
        w.accept(200).unwrap();
        assert_eq!(w.accept(136), Err(Error::Replayed(136)));
        w.accept(137).unwrap();
        assert_eq!(w.highest(), 200);
    }

    proptest! {
        /// The window accepts a number iff it is new and within the window of the running max.
        #[test]
        fn matches_a_reference_model(seqs in proptest::collection::vec(1u64..300, 0..400)) {
            let mut w = ReplayWindow::new();
            let mut seen = std::collections::HashSet::new();
            let mut hi = 0u64;
            for s in seqs {
                let expect = !seen.contains(&s) && (s > hi || hi - s < REPLAY_WINDOW);
                prop_assert_eq!(w.accept(s).is_ok(), expect);
                if expect { seen.insert(s); hi = hi.max(s); }
            }
        }
    }
}
