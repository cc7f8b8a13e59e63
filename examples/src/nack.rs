//! Receiver-side NACK bookkeeping shared by both media applications (sans-IO, explicit `now`).
//!
//! A sequence number (a packet for `sidekick-media`, a frame for `sidekick-media-fec`) is missing
//! when a later one has been received. The tracker NACKs a missing number at once and then again
//! at most once per RTT until it arrives (Sidekick (NSDI '24) §5.1; Packrat (CoNEXT '26) §6.2). The set of missing numbers
//! is capped; beyond the cap the oldest is given up and counted in [`NackTracker::dropped`].

use std::collections::BTreeMap;
use std::time::Duration;

use crate::stats::RttEstimator;

/// Missing-number tracker.
#[derive(Debug, Clone)]
pub struct NackTracker {
    /// Missing number → time it was last NACKed.
    missing: BTreeMap<u32, Duration>,
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
            highest: None,
            cap: cap.max(1),
            dropped: 0,
            nacked: 0,
            rtt: RttEstimator::new(initial_rtt),
        }
    }

    /// Record that `seq` was received at `now`; returns the numbers to NACK now (the new gap
    /// before `seq`, if any).
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
        for &s in &new {
            self.missing.insert(s, now);
        }
        while self.missing.len() > self.cap {
            self.missing.pop_first();
            self.dropped += 1;
        }
        let new: Vec<u32> = new
            .into_iter()
            .filter(|s| self.missing.contains_key(s))
            .collect();
        self.nacked += new.len() as u64;
        new
    }

    /// Numbers whose last NACK is at least one re-NACK interval old; marks them NACKed at `now`.
    pub fn due(&mut self, now: Duration) -> Vec<u32> {
        let iv = self.rtt.renack_interval();
        let mut out = Vec::new();
        for (s, last) in &mut self.missing {
            if now.saturating_sub(*last) >= iv {
                *last = now;
                out.push(*s);
            }
        }
        self.nacked += out.len() as u64;
        out
    }

    /// When [`NackTracker::due`] will next return something.
    pub fn next_deadline(&self) -> Option<Duration> {
        let iv = self.rtt.renack_interval();
        self.missing.values().min().map(|l| *l + iv)
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
