//! Virtual time and the event queue.
//!
//! The engines and quinn-proto take [`Instant`]s, so virtual time is a [`Duration`] since one base
//! instant taken when the simulation starts: every `Instant` handed to a stack is `base + offset`.
//! Only differences of instants ever matter to the stacks, so the absolute base does not make a
//! run differ from another.
//!
//! The queue holds one deadline per component (a link direction's next delivery, a connection's
//! timer, the proxy's timer...). Components re-announce their deadline after every step; a popped
//! entry that no longer matches the component's current deadline is stale and skipped (lazy
//! deletion). Entries due at the same time pop in the order they were scheduled, so a run is a
//! pure function of its inputs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use sidekick_proxy::Time;

/// Converts between virtual offsets and the [`Instant`]s the stacks take.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
}

impl Clock {
    /// A clock whose virtual zero is `base`.
    pub fn new(base: Instant) -> Self {
        Self { base }
    }

    /// The instant at virtual offset `t`.
    pub fn at(&self, t: Duration) -> Instant {
        self.base + t
    }

    /// The virtual offset of `i` (zero for instants before the base).
    pub fn offset(&self, i: Instant) -> Duration {
        i.saturating_duration_since(self.base)
    }

    /// `i` on the proxy core's clock, whose zero is the virtual zero.
    pub fn core_time(&self, i: Instant) -> Time {
        Time::since(self.base, i)
    }

    /// The instant of the core's time `t`.
    pub fn core_instant(&self, t: Time) -> Instant {
        self.base + t.since_origin()
    }
}

/// A priority queue of per-component deadlines with lazy deletion.
///
/// ```
/// use sidekick_sim::sched::Scheduler;
/// use std::time::Duration;
/// let mut s = Scheduler::new(3);
/// s.set(0, Some(Duration::from_millis(5)));
/// s.set(1, Some(Duration::from_millis(2)));
/// s.set(1, Some(Duration::from_millis(7))); // moved: the 2 ms entry is stale
/// assert_eq!(s.pop(), Some((Duration::from_millis(5), 0)));
/// assert_eq!(s.pop(), Some((Duration::from_millis(7), 1)));
/// assert_eq!(s.pop(), None);
/// ```
#[derive(Debug)]
pub struct Scheduler {
    heap: BinaryHeap<Reverse<(Duration, u64, usize)>>,
    current: Vec<Option<Duration>>,
    seq: u64,
}

impl Scheduler {
    /// A queue for components `0..n`.
    pub fn new(n: usize) -> Self {
        Self {
            heap: BinaryHeap::new(),
            current: vec![None; n],
            seq: 0,
        }
    }

    /// Sets component `k`'s deadline (`None`: nothing pending).
    pub fn set(&mut self, k: usize, at: Option<Duration>) {
        if self.current[k] == at {
            return;
        }
        self.current[k] = at;
        if let Some(t) = at {
            self.seq += 1;
            self.heap.push(Reverse((t, self.seq, k)));
        }
    }

    /// The earliest live deadline and its component, removed from the queue.
    pub fn pop(&mut self) -> Option<(Duration, usize)> {
        while let Some(Reverse((t, _, k))) = self.heap.pop() {
            if self.current[k] == Some(t) {
                self.current[k] = None;
                return Some((t, k));
            }
        }
        None
    }

    /// The next event of a trial whose virtual time is bounded by `timeout` and whose events, counted
    /// in `events`, by `max_events` (a runaway guard); `Err` is the trial's error when the loop
    /// must stop instead.
    ///
    /// ```
    /// use sidekick_sim::sched::Scheduler;
    /// use std::time::Duration;
    /// let mut s = Scheduler::new(1);
    /// let mut events = 0;
    /// s.set(0, Some(Duration::from_secs(2)));
    /// assert_eq!(s.next_event(Duration::from_secs(1), &mut events, 10), Err("client timed out"));
    /// assert_eq!(s.next_event(Duration::from_secs(1), &mut events, 10), Err("simulation stalled: nothing pending"));
    /// ```
    ///
    /// # Errors
    /// Nothing pending, past `timeout`, or more than `max_events` events.
    pub fn next_event(
        &mut self,
        timeout: Duration,
        events: &mut u64,
        max_events: u64,
    ) -> Result<(Duration, usize), &'static str> {
        let (t, k) = self.pop().ok_or("simulation stalled: nothing pending")?;
        if t > timeout {
            return Err("client timed out");
        }
        *events += 1;
        if *events > max_events {
            return Err("event limit reached");
        }
        Ok((t, k))
    }

    /// Entries in the heap, stale ones included (bounded: stale entries are dropped on pop).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether the heap is empty.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_pop_in_scheduling_order() {
        let mut s = Scheduler::new(3);
        let t = Duration::from_millis(1);
        s.set(2, Some(t));
        s.set(0, Some(t));
        s.set(1, Some(t));
        let order: Vec<usize> = std::iter::from_fn(|| s.pop().map(|x| x.1)).collect();
        assert_eq!(order, vec![2, 0, 1]);
    }

    #[test]
    fn cleared_deadline_never_pops() {
        let mut s = Scheduler::new(1);
        s.set(0, Some(Duration::from_millis(1)));
        s.set(0, None);
        assert_eq!(s.pop(), None);
        // Re-arming after a pop works.
        s.set(0, Some(Duration::from_millis(3)));
        assert_eq!(s.pop(), Some((Duration::from_millis(3), 0)));
        s.set(0, Some(Duration::from_millis(3)));
        assert_eq!(s.pop(), Some((Duration::from_millis(3), 0)));
    }

    #[test]
    fn clock_round_trip() {
        let c = Clock::new(Instant::now());
        let d = Duration::from_micros(1234);
        assert_eq!(c.offset(c.at(d)), d);
    }
}
