//! Receiver-side NACK bookkeeping shared by both media applications (sans-IO, explicit `now`).
//!
//! A sequence number (a packet for `sidekick-media`, a frame for `sidekick-media-fec`) is missing
//! when a later one has been received. The tracker NACKs a missing number at once and then again
//! at most once per RTT until it arrives (Sidekick (NSDI '24) §5.1; Packrat (CoNEXT '26) §6.2). The set of missing numbers
//! is capped; beyond the cap the oldest is given up and counted in [`NackTracker::dropped`].
//!
//! A *first delay* ([`NackTracker::set_first_delay`]) holds the first NACK of a new gap: a player
//! whose on-path Packrat proxy repairs losses holds its own NACK while the repair is under way
//! (Packrat (CoNEXT '26) §6.2), and NACKs end to end only what is still missing after it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::stats::RttEstimator;

/// One missing number: when it was last NACKed, or when its held first NACK is due.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Nacked(Duration),
    HeldUntil(Duration),
}

/// Missing-number tracker.
#[derive(Debug, Clone)]
pub struct NackTracker {
    /// Missing number → when it is next due: a NACK (`nacked`), or its held first NACK.
    missing: BTreeMap<u32, Pending>,
    first_delay: Duration,
    highest: Option<u32>,
    cap: usize,
    dropped: u64,
    nacked: u64,
    rtt: RttEstimator,
}

impl NackTracker {
    /// Tracker holding at most `cap` missing numbers, re-NACKing according to an RTT estimate that
    /// starts at `initial_rtt`.
    pub fn new(cap: usize, initial_rtt: Duration) -> Self {
        Self {
            missing: BTreeMap::new(),
            first_delay: Duration::ZERO,
            highest: None,
            cap: cap.max(1),
            dropped: 0,
            nacked: 0,
            rtt: RttEstimator::new(initial_rtt),
        }
    }

    /// Holds the first NACK of every gap opened from now on for `delay` (zero: NACK at once).
    /// A number still missing when its hold ends is NACKed by [`NackTracker::due`].
    pub fn set_first_delay(&mut self, delay: Duration) {
        self.first_delay = delay;
    }

    /// The current first delay.
    pub fn first_delay(&self) -> Duration {
        self.first_delay
    }

    /// When `seq`, still missing, was last NACKed (`None`: not missing, or its first NACK is
    /// still held).
    pub fn last_nacked(&self, seq: u32) -> Option<Duration> {
        match self.missing.get(&seq)? {
            Pending::Nacked(t) => Some(*t),
            Pending::HeldUntil(_) => None,
        }
    }

    /// Record that `seq` was received at `now`; returns the numbers to NACK now (the new gap
    /// before `seq`, if any, unless a first delay holds it).
    pub fn on_received(&mut self, seq: u32, now: Duration) -> Vec<u32> {
        self.missing.remove(&seq);
        let from = match self.highest {
            None => 0,
            Some(h) if seq > h => h + 1,
            Some(_) => return Vec::new(),
        };
        self.highest = Some(seq);
        self.add_missing(from, seq, now)
    }

    /// The sender announced it sent `0..total`; returns the numbers to NACK now (the tail gap).
    pub fn on_end(&mut self, total: u32, now: Duration) -> Vec<u32> {
        let from = self.highest.map_or(0, |h| h + 1);
        if total <= from {
            return Vec::new();
        }
        self.highest = Some(total - 1);
        self.add_missing(from, total, now)
    }

    fn add_missing(&mut self, from: u32, to: u32, now: Duration) -> Vec<u32> {
        // A huge jump (e.g. a garbled sender) must not allocate unboundedly: only the newest `cap`
        // numbers of the gap are tracked, the rest are counted as dropped.
        let span = u64::from(to.saturating_sub(from));
        let start = if span > self.cap as u64 {
            self.dropped += span - self.cap as u64;
            to - self.cap as u32
        } else {
            from
        };
        let new: Vec<u32> = (start..to).collect();
        let pending = if self.first_delay.is_zero() {
            Pending::Nacked(now)
        } else {
            Pending::HeldUntil(now + self.first_delay)
        };
        for &s in &new {
            self.missing.insert(s, pending);
        }
        while self.missing.len() > self.cap {
            self.missing.pop_first();
            self.dropped += 1;
        }
        if matches!(pending, Pending::HeldUntil(_)) {
            return Vec::new();
        }
        let new: Vec<u32> = new
            .into_iter()
            .filter(|s| self.missing.contains_key(s))
            .collect();
        self.nacked += new.len() as u64;
        new
    }

    /// Numbers whose last NACK is at least one re-NACK interval old, or whose held first NACK
    /// is due; marks them NACKed at `now`.
    pub fn due(&mut self, now: Duration) -> Vec<u32> {
        let iv = self.rtt.renack_interval();
        let mut out = Vec::new();
        for (s, p) in &mut self.missing {
            if Self::due_at(*p, iv) <= now {
                *p = Pending::Nacked(now);
                out.push(*s);
            }
        }
        self.nacked += out.len() as u64;
        out
    }

    /// When [`NackTracker::due`] will next return something.
    pub fn next_deadline(&self) -> Option<Duration> {
        let iv = self.rtt.renack_interval();
        self.missing.values().map(|p| Self::due_at(*p, iv)).min()
    }

    fn due_at(p: Pending, renack: Duration) -> Duration {
        match p {
            Pending::Nacked(last) => last + renack,
            Pending::HeldUntil(t) => t,
        }
    }

    /// Feed an RTT sample (NACK → retransmission).
    pub fn on_rtt_sample(&mut self, rtt: Duration) {
        self.rtt.on_sample(rtt);
    }

    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// Is `seq` currently missing?
    pub fn is_missing(&self, seq: u32) -> bool {
        self.missing.contains_key(&seq)
    }

    /// Number of missing numbers.
    pub fn missing_count(&self) -> usize {
        self.missing.len()
    }

    /// Missing numbers given up because of the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Sequence numbers NACKed so far (each NACK of each number counts once).
    pub fn nacked(&self) -> u64 {
        self.nacked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn gap_nacked_once_then_once_per_rtt() {
        let mut t = NackTracker::new(100, 50 * MS);
        assert!(t.on_received(0, Duration::ZERO).is_empty());
        assert_eq!(t.on_received(3, 60 * MS), vec![1, 2]);
        // Initial estimator: srtt 50, rttvar 25 → interval 100 ms.
        assert!(t.due(100 * MS).is_empty());
        assert_eq!(t.next_deadline(), Some(160 * MS));
        assert_eq!(t.due(160 * MS), vec![1, 2]);
        assert!(t.due(161 * MS).is_empty());
        assert!(t.on_received(1, 170 * MS).is_empty());
        assert_eq!(t.due(260 * MS), vec![2]);
        // Reordered/late packet below the highest: no new NACK.
        assert!(t.on_received(2, 270 * MS).is_empty());
        assert_eq!(t.missing_count(), 0);
        assert_eq!(t.nacked(), 5);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn first_packet_lost_and_tail_loss() {
        let mut t = NackTracker::new(100, 50 * MS);
        assert_eq!(t.on_received(2, Duration::ZERO), vec![0, 1]);
        assert_eq!(t.on_end(5, 10 * MS), vec![3, 4]);
        assert!(t.on_end(5, 20 * MS).is_empty());
        assert!(t.is_missing(4));
    }

    #[test]
    fn first_delay_holds_the_first_nack_and_a_fill_cancels_it() {
        let mut t = NackTracker::new(100, 50 * MS);
        t.set_first_delay(30 * MS);
        assert!(t.on_received(0, Duration::ZERO).is_empty());
        assert!(t.on_received(3, 10 * MS).is_empty(), "held");
        assert_eq!(t.last_nacked(1), None);
        assert_eq!(t.next_deadline(), Some(40 * MS));
        // Packet 1 is repaired during the hold: only 2 is NACKed when the hold ends.
        assert!(t.on_received(1, 25 * MS).is_empty());
        assert!(t.due(39 * MS).is_empty());
        assert_eq!(t.due(40 * MS), vec![2]);
        assert_eq!(t.last_nacked(2), Some(40 * MS));
        // Then once per re-NACK interval (100 ms before an RTT sample).
        assert_eq!(t.next_deadline(), Some(140 * MS));
        assert_eq!(t.nacked(), 1);
        t.set_first_delay(Duration::ZERO);
        assert_eq!(t.on_received(5, 50 * MS), vec![4]);
    }

    #[test]
    fn cap_bounds_memory() {
        let mut t = NackTracker::new(4, 50 * MS);
        t.on_received(0, Duration::ZERO);
        let n = t.on_received(u32::MAX, MS);
        assert_eq!(n.len(), 4);
        assert_eq!(t.missing_count(), 4);
        assert_eq!(t.dropped(), u64::from(u32::MAX) - 1 - 4);
        assert_eq!(t.on_received(u32::MAX - 10, 2 * MS), Vec::<u32>::new());
    }
}
