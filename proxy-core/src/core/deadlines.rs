//! One index of every per-flow deadline of the core — engine timers (Robin's time-driven quACKs,
//! PEMI's flowlet and enforcement timers) and idle expiry — ordered by time, so that a tick costs
//! in proportion to what is due, not to how many flows or sessions exist.
//!
//! Engine deadlines need precision and are few (flows with an armed engine timer): they live in a
//! binary heap. Idle deadlines are one per flow and need none (120 s ± 1 s is fine): they live in
//! a timer wheel of one-second slots, O(1) to set and to expire, so a table of 100 000 flows does
//! not make the engines' heap deep.
//!
//! Entries are invalidated lazily: a flow records the generation of its table entry and the one
//! engine deadline it registered; an entry that no longer matches is skipped when it comes due.
//! Idle deadlines are registered once per flow and pushed back when they come due on a flow that
//! saw packets since, so a busy flow costs one wheel operation per idle period, not per packet.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

use crate::Time;

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
    pub at: Time,
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

/// Slots of the idle wheel: deadlines further out than this many slots are parked in the last
/// one and pushed back when it comes due.
const WHEEL_SLOTS: usize = 256;
/// Width of one idle-wheel slot.
const WHEEL_SLOT: Duration = Duration::from_secs(1);

/// Idle deadlines in one-second slots.
#[derive(Debug, Default)]
struct IdleWheel {
    slots: Vec<Vec<Deadline>>,
    /// Slot 0 starts here: the first idle deadline set (the core reads no clock of its own).
    origin: Option<Time>,
    /// The first slot not yet expired.
    cursor: u64,
    len: usize,
}

impl IdleWheel {
    fn slot_of(&self, at: Time) -> u64 {
        self.origin.map_or(0, |o| {
            (at.saturating_duration_since(o).as_nanos() / WHEEL_SLOT.as_nanos()) as u64
        })
    }

    /// When slot `k` has passed entirely.
    fn end_of(&self, k: u64) -> Option<Time> {
        let o = self.origin?;
        o.checked_add(WHEEL_SLOT * u32::try_from(k + 1).unwrap_or(u32::MAX))
    }

    fn push(&mut self, d: Deadline) {
        if self.origin.is_none() {
            self.origin = Some(d.at);
            self.slots = (0..WHEEL_SLOTS).map(|_| Vec::new()).collect();
        }
        let k = self
            .slot_of(d.at)
            .clamp(self.cursor, self.cursor + WHEEL_SLOTS as u64 - 1);
        self.slots[(k % WHEEL_SLOTS as u64) as usize].push(d);
        self.len += 1;
    }

    /// Move the deadlines of every slot that has passed by `now` into `due`.
    fn expire(&mut self, now: Time, due: &mut Vec<Deadline>) {
        while self.len > 0 && self.end_of(self.cursor).is_some_and(|t| t <= now) {
            let slot = &mut self.slots[(self.cursor % WHEEL_SLOTS as u64) as usize];
            self.len -= slot.len();
            due.append(slot);
            self.cursor += 1;
        }
        if self.len == 0 {
            // Nothing parked: jump to the present instead of walking empty slots later.
            self.cursor = self.cursor.max(self.slot_of(now));
        }
    }

    fn next(&self) -> Option<Time> {
        if self.len == 0 {
            return None;
        }
        (self.cursor..self.cursor + WHEEL_SLOTS as u64)
            .find(|&k| !self.slots[(k % WHEEL_SLOTS as u64) as usize].is_empty())
            .and_then(|k| self.end_of(k))
    }

    fn memory(&self) -> usize {
        self.slots.iter().map(Vec::capacity).sum::<usize>() * ENTRY_BYTES
    }
}

/// Every per-flow deadline: engine timers in a min-heap, idle expiry in a wheel.
#[derive(Debug, Default)]
pub(super) struct DeadlineIndex {
    heap: BinaryHeap<Reverse<Deadline>>,
    wheel: IdleWheel,
    /// Idle deadlines taken from the wheel, being handed out.
    idle_due: Vec<Deadline>,
    seq: u64,
    /// Entries popped, live or stale (a measure of timer work).
    pub popped: u64,
}

impl DeadlineIndex {
    /// Register a deadline.
    pub fn push(&mut self, at: Time, key: FlowKey, generation: u32, kind: TimerKind) {
        self.seq += 1;
        let d = Deadline {
            at,
            seq: self.seq,
            key,
            generation,
            kind,
        };
        match kind {
            TimerKind::Engine => self.heap.push(Reverse(d)),
            TimerKind::Idle => self.wheel.push(d),
        }
    }

    /// The earliest registered deadline (possibly stale: then a wake-up finds nothing to do).
    pub fn next(&self) -> Option<Time> {
        let idle = if self.idle_due.is_empty() {
            self.wheel.next()
        } else {
            self.idle_due.iter().map(|d| d.at).min()
        };
        match (self.heap.peek().map(|Reverse(d)| d.at), idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A mark of the entries registered so far (see [`DeadlineIndex::pop_due`]).
    pub fn mark(&self) -> u64 {
        self.seq
    }

    /// The next deadline due at `now` and registered no later than `mark`, removed from the
    /// index: engine deadlines in time order, then idle deadlines (due to within a slot). The
    /// mark bounds one round of timer work: an engine that re-arms a deadline already due runs
    /// again in the next round, never in a loop within this one.
    pub fn pop_due(&mut self, now: Time, mark: u64) -> Option<Deadline> {
        if self
            .heap
            .peek()
            .is_some_and(|Reverse(d)| d.at <= now && d.seq <= mark)
        {
            self.popped += 1;
            return self.heap.pop().map(|Reverse(d)| d);
        }
        if self.idle_due.is_empty() {
            self.wheel.expire(now, &mut self.idle_due);
        }
        let d = self.idle_due.pop()?;
        self.popped += 1;
        Some(d)
    }

    /// Number of registered entries (live and stale).
    pub fn len(&self) -> usize {
        self.heap.len() + self.wheel.len + self.idle_due.len()
    }

    /// Heap bytes held.
    pub fn memory(&self) -> usize {
        (self.heap.capacity() + self.idle_due.capacity()) * ENTRY_BYTES + self.wheel.memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u16) -> FlowKey {
        FlowKey {
            client: ([10, 0, 0, 2], i).into(),
            server: ([10, 0, 1, 2], 443).into(),
        }
    }

    #[test]
    fn pops_in_time_order_and_only_what_is_due() {
        let t0 = Time::ZERO;
        let mut d = DeadlineIndex::default();
        for (i, ms) in [(1, 30u64), (2, 10), (3, 20), (4, 10)] {
            d.push(t0 + Duration::from_millis(ms), key(i), 0, TimerKind::Engine);
        }
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(10)));
        let due: Vec<u16> =
            std::iter::from_fn(|| d.pop_due(t0 + Duration::from_millis(20), u64::MAX))
                .map(|e| e.key.client.port())
                .collect();
        // Equal deadlines fire in insertion order.
        assert_eq!(due, [2, 4, 3]);
        assert_eq!(d.len(), 1);
        assert_eq!(d.popped, 3);
        assert!(
            d.pop_due(t0 + Duration::from_millis(29), u64::MAX)
                .is_none()
        );
    }

    #[test]
    fn idle_deadlines_come_due_within_a_slot_and_far_ones_are_parked() {
        let t0 = Time::ZERO;
        let at = t0 + Duration::from_millis(120_300);
        let mut d = DeadlineIndex::default();
        d.push(at, key(1), 0, TimerKind::Idle);
        d.push(t0 + Duration::from_secs(1000), key(2), 0, TimerKind::Idle);
        let next = d.next().unwrap();
        assert!(next >= at && next <= at + WHEEL_SLOT, "{:?}", next - at);
        assert!(d.pop_due(at, u64::MAX).is_none());
        let e = d.pop_due(next, u64::MAX).unwrap();
        assert_eq!(e.key, key(1));
        assert!(d.pop_due(next, u64::MAX).is_none());
        // Beyond the wheel's span: handed out early, at its last slot, for the owner to re-check.
        let e = d
            .pop_due(at + WHEEL_SLOT * WHEEL_SLOTS as u32, u64::MAX)
            .unwrap();
        assert_eq!(e.key, key(2));
        assert_eq!(d.len(), 0);
        assert_eq!(d.next(), None);
    }
}
