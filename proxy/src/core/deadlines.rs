//! One index of every per-flow deadline of the core — engine timers (Robin's time-driven quACKs,
//! PEMI's flowlet and enforcement timers) and idle expiry — ordered by time, so that a tick costs
//! in proportion to what is due, not to how many flows or sessions exist.
//!
//! Entries are invalidated lazily: a flow records the generation of its table entry and the one
//! engine deadline it registered; an entry that no longer matches is skipped when it comes due.
//! Idle deadlines are registered once per flow and pushed back when they come due on a flow that
//! saw packets since, so a busy flow costs one heap operation per idle period, not per packet.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::flow::FlowKey;

/// Which timer of a flow an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimerKind {
    /// The flow's engines have work (`Assistance::poll_timeout`).
    Engine,
    /// The flow may have been idle for the idle timeout.
    Idle,
}

/// One deadline.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    pub at: Instant,
    /// Insertion order: equal times fire in the order they were set (reproducible runs).
    seq: u64,
    pub key: FlowKey,
    pub generation: u32,
    pub kind: TimerKind,
}

/// Heap bytes of one entry (for the per-flow memory figure).
pub(super) const ENTRY_BYTES: usize = std::mem::size_of::<Deadline>();

impl PartialEq for Deadline {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Deadline {}
impl PartialOrd for Deadline {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Deadline {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// A min-heap of deadlines.
#[derive(Debug, Default)]
pub(super) struct DeadlineIndex {
    heap: BinaryHeap<Reverse<Deadline>>,
    seq: u64,
    /// Entries popped, live or stale (a measure of timer work).
    pub popped: u64,
}

impl DeadlineIndex {
    /// Register a deadline.
    pub fn push(&mut self, at: Instant, key: FlowKey, generation: u32, kind: TimerKind) {
        self.seq += 1;
        self.heap.push(Reverse(Deadline {
            at,
            seq: self.seq,
            key,
            generation,
            kind,
        }));
    }

    /// The earliest registered deadline (possibly stale: then a wake-up finds nothing to do).
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(d)| d.at)
    }

    /// The next deadline due at `now`, removed from the index.
    pub fn pop_due(&mut self, now: Instant) -> Option<Deadline> {
        if self.heap.peek().is_some_and(|Reverse(d)| d.at <= now) {
            self.popped += 1;
            self.heap.pop().map(|Reverse(d)| d)
        } else {
            None
        }
    }

    /// Number of registered entries (live and stale).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Heap bytes held.
    pub fn memory(&self) -> usize {
        self.heap.capacity() * ENTRY_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(i: u16) -> FlowKey {
        FlowKey {
            client: ([10, 0, 0, 2], i).into(),
            server: ([10, 0, 1, 2], 443).into(),
        }
    }

    #[test]
    fn pops_in_time_order_and_only_what_is_due() {
        let t0 = Instant::now();
        let mut d = DeadlineIndex::default();
        for (i, ms) in [(1, 30u64), (2, 10), (3, 20), (4, 10)] {
            d.push(t0 + Duration::from_millis(ms), key(i), 0, TimerKind::Engine);
        }
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(10)));
        let due: Vec<u16> = std::iter::from_fn(|| d.pop_due(t0 + Duration::from_millis(20)))
            .map(|e| e.key.client.port())
            .collect();
        // Equal deadlines fire in insertion order.
        assert_eq!(due, [2, 4, 3]);
        assert_eq!(d.len(), 1);
        assert_eq!(d.popped, 3);
        assert!(d.pop_due(t0 + Duration::from_millis(29)).is_none());
    }
}
