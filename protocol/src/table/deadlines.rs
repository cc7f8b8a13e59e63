//! The session table's timer index: sessions ordered by their next deadline (idle expiry, or the
//! retry of a pending Reset), as s2n-quic keeps connections ordered by their next timeout.
//!
//! Entries are never moved in place. A deadline only moves later when a datagram arrives (the
//! idle clock restarts) or a Reset is acknowledged, so the entry left behind wakes the table
//! early once, and the table then files the session's current deadline. A deadline that moves
//! earlier (a Reset sent now) is filed at once. So the next deadline is O(1) and a tick costs
//! O(due · log n), not O(sessions).

use crate::Time;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::keys::SessionId;

#[derive(Debug, Default)]
pub(super) struct SessionDeadlines {
    heap: BinaryHeap<Reverse<(Time, SessionId)>>,
    /// The earliest entry of each session in `heap`; other entries of it are stale.
    earliest: HashMap<SessionId, Time>,
}

impl SessionDeadlines {
    /// Files `at` for `id`, unless an entry at or before `at` is filed already.
    pub(super) fn file(&mut self, id: SessionId, at: Time) {
        if self.earliest.get(&id).is_some_and(|&t| t <= at) {
            return;
        }
        self.earliest.insert(id, at);
        self.heap.push(Reverse((at, id)));
    }

    /// The earliest entry (possibly stale: an early wake-up, never a late one).
    pub(super) fn next(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Takes every session whose filed deadline is due at `now`, each once; stale entries on
    /// the way are dropped. The caller files the sessions' next deadlines.
    pub(super) fn pop_due(&mut self, now: Time) -> Vec<SessionId> {
        let mut due = Vec::new();
        while let Some(&Reverse((t, id))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            if self.earliest.get(&id) == Some(&t) {
                self.earliest.remove(&id);
                due.push(id);
            }
        }
        due
    }

    /// Forgets `id` (its entries turn stale and drop out when they come due).
    pub(super) fn forget(&mut self, id: &SessionId) {
        self.earliest.remove(id);
    }

    /// Forgets every session (before all are filed again, e.g. after the idle timeout changed).
    pub(super) fn clear(&mut self) {
        self.heap.clear();
        self.earliest.clear();
    }

    /// Entries, stale ones included.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn earliest_wins_and_stale_entries_drop_out() {
        let t0 = Time::ZERO;
        let ms = |m| t0 + Duration::from_millis(m);
        let (a, b) = (SessionId([1; 16]), SessionId([2; 16]));
        let mut d = SessionDeadlines::default();
        d.file(a, ms(100));
        d.file(a, ms(200)); // later: not filed
        d.file(b, ms(50));
        d.file(b, ms(20)); // earlier: filed, the 50 ms entry turns stale
        assert_eq!(d.next(), Some(ms(20)));
        assert_eq!(d.pop_due(ms(60)), vec![b]);
        assert_eq!(d.next(), Some(ms(100)));
        d.forget(&a);
        assert!(d.pop_due(ms(1000)).is_empty());
        assert_eq!(d.len(), 0);
    }
}
