//! The sans-IO core of the userspace link element: one direction of an emulated link.
//!
//! A frame offered at `now` first meets the loss model (netem applies loss at enqueue), then the
//! queue limit, then waits for the bottleneck: it starts serialising when the previous frame has
//! left (`tx_start = max(now, tx_free)`), takes `len · 8 / rate`, and is delivered after the
//! propagation `delay`. The queue limit counts frames that have not finished serialising, like a
//! tbf/htb queue in front of the link. Time is a [`Duration`] since the element started.

use crate::droprule::DropCounter;
use crate::spec::{LinkSpec, LossModel};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// Loss decision state for one direction (holds the Gilbert–Elliott state).
#[derive(Debug, Clone)]
pub struct LossState {
    model: LossModel,
    bad: bool,
}

impl LossState {
    /// A fresh state (Gilbert–Elliott starts in the good state).
    pub fn new(model: LossModel) -> Self {
        LossState { model, bad: false }
    }

    /// Whether the next packet is lost.
    pub fn lose<R: Rng>(&mut self, rng: &mut R) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Random { p } => p > 0.0 && rng.random::<f64>() < p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad { r } else { p };
                if rng.random::<f64>() < flip {
                    self.bad = !self.bad;
                }
                let l = if self.bad { loss_bad } else { loss_good };
                l > 0.0 && rng.random::<f64>() < l
            }
        }
    }

    /// Whether the Gilbert–Elliott chain is in its bad state.
    pub fn is_bad(&self) -> bool {
        self.bad
    }
}

/// What happened to an offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Queued for delivery.
    Queued,
    /// Dropped by the loss model.
    Lost,
    /// Dropped because the queue was full.
    QueueFull,
    /// Dropped by a datagram-index rule.
    Rule,
}

/// Counters of one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirCounters {
    /// Frames offered to the link.
    pub offered: u64,
    /// Frames delivered (handed back by [`LinkDirection::pop_due`]).
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Frames dropped by the loss model.
    pub dropped_loss: u64,
    /// Frames dropped because the queue was full.
    pub dropped_queue: u64,
    /// Frames dropped by a datagram-index rule ([`crate::droprule`]).
    #[serde(default)]
    pub dropped_rule: u64,
}

impl DirCounters {
    /// Writes these counters as the trial metrics `{link}_{dir}_offered`, `_delivered`,
    /// `_dropped_loss`, `_dropped_queue`, `_dropped_rule` and `bytes_per_link_{link}_{dir}`
    /// (the lab's elements and the simulator's links report the same keys).
    pub fn add_metrics(
        &self,
        m: &mut std::collections::BTreeMap<String, f64>,
        link: &str,
        dir: &str,
    ) {
        m.insert(
            format!("{link}_{dir}_dropped_loss"),
            self.dropped_loss as f64,
        );
        m.insert(
            format!("{link}_{dir}_dropped_queue"),
            self.dropped_queue as f64,
        );
        m.insert(
            format!("{link}_{dir}_dropped_rule"),
            self.dropped_rule as f64,
        );
        m.insert(format!("{link}_{dir}_offered"), self.offered as f64);
        m.insert(format!("{link}_{dir}_delivered"), self.delivered as f64);
        m.insert(
            format!("bytes_per_link_{link}_{dir}"),
            self.delivered_bytes as f64,
        );
    }
}

#[derive(Debug)]
struct Pending {
    due: Duration,
    frame: Vec<u8>,
}

/// One direction of an emulated link.
///
/// ```
/// use sidekick_lab::link::{LinkDirection, Verdict};
/// use sidekick_lab::spec::LinkSpec;
/// use std::time::Duration;
/// let spec = LinkSpec { delay: Duration::from_millis(10), rate_bps: 8_000_000, ..LinkSpec::default() };
/// let mut d = LinkDirection::new(spec, 1);
/// assert_eq!(d.offer(Duration::ZERO, vec![0; 1000]), Verdict::Queued);
/// // 1000 bytes at 8 Mbit/s take 1 ms, then 10 ms of propagation.
/// assert_eq!(d.next_due(), Some(Duration::from_millis(11)));
/// assert!(d.pop_due(Duration::from_millis(10)).is_none());
/// assert_eq!(d.pop_due(Duration::from_millis(11)).unwrap().len(), 1000);
/// ```
#[derive(Debug)]
pub struct LinkDirection {
    spec: LinkSpec,
    loss: LossState,
    rng: SmallRng,
    /// Frames in flight, in due order (FIFO: due times are non-decreasing).
    line: VecDeque<Pending>,
    /// Serialisation end times and sizes of frames still in the bottleneck queue.
    backlog: VecDeque<(Duration, usize)>,
    backlog_bytes: usize,
    tx_free: Duration,
    counters: DirCounters,
    drops: DropCounter,
}

impl LinkDirection {
    /// A direction with the given spec; `seed` makes loss decisions reproducible.
    pub fn new(spec: LinkSpec, seed: u64) -> Self {
        LinkDirection {
            spec,
            loss: LossState::new(spec.loss),
            rng: SmallRng::seed_from_u64(seed),
            line: VecDeque::new(),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            tx_free: Duration::ZERO,
            counters: DirCounters::default(),
            drops: DropCounter::new(0),
        }
    }

    /// Applies a datagram-index drop mask to this direction (`spec.drop.down` for a→b, `up` for
    /// b→a; [`crate::droprule`]). Rules come before the loss model.
    pub fn with_drops(mut self, mask: u64) -> Self {
        self.drops = DropCounter::new(mask);
        self
    }

    /// The spec this direction emulates.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    fn trim_backlog(&mut self, now: Duration) {
        while let Some(&(end, len)) = self.backlog.front() {
            if end > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= len;
        }
    }

    /// Frames currently queued at the bottleneck (including the one serialising).
    pub fn backlog_packets(&self) -> usize {
        self.backlog.len()
    }

    /// Offers a frame that arrived at `now`.
    pub fn offer(&mut self, now: Duration, frame: Vec<u8>) -> Verdict {
        self.counters.offered += 1;
        if self.drops.drop_frame(&frame) {
            self.counters.dropped_rule += 1;
            return Verdict::Rule;
        }
        if self.loss.lose(&mut self.rng) {
            self.counters.dropped_loss += 1;
            return Verdict::Lost;
        }
        self.trim_backlog(now);
        let len = frame.len();
        if self.backlog.len() >= self.spec.queue_packets
            || (self.spec.queue_bytes > 0 && self.backlog_bytes + len > self.spec.queue_bytes)
        {
            self.counters.dropped_queue += 1;
            return Verdict::QueueFull;
        }
        let start = self.tx_free.max(now);
        let end = start + self.spec.serialization(len);
        self.tx_free = end;
        if end > now {
            self.backlog.push_back((end, len));
            self.backlog_bytes += len;
        }
        self.line.push_back(Pending {
            due: end + self.spec.delay,
            frame,
        });
        Verdict::Queued
    }

    /// When the next frame is due, if any.
    pub fn next_due(&self) -> Option<Duration> {
        self.line.front().map(|p| p.due)
    }

    /// Takes the next frame if it is due at `now`.
    pub fn pop_due(&mut self, now: Duration) -> Option<Vec<u8>> {
        if self.line.front()?.due > now {
            return None;
        }
        let p = self.line.pop_front()?;
        self.counters.delivered += 1;
        self.counters.delivered_bytes += p.frame.len() as u64;
        Some(p.frame)
    }

    /// Like [`pop_due`](Self::pop_due) but also returns the frame's due time (for lateness
    /// accounting).
    pub fn pop_due_with_time(&mut self, now: Duration) -> Option<(Duration, Vec<u8>)> {
        let due = self.next_due()?;
        self.pop_due(now).map(|f| (due, f))
    }

    /// The counters so far.
    pub fn counters(&self) -> DirCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_loss_rate() {
        let mut st = LossState::new(LossModel::Random { p: 0.04 });
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 200_000;
        let lost = (0..n).filter(|_| st.lose(&mut rng)).count();
        let rate = lost as f64 / f64::from(n);
        // 4 sigma of a binomial(200k, 0.04) is 0.00175.
        assert!((rate - 0.04).abs() < 0.00175, "{rate}");
    }

    #[test]
    fn gilbert_elliott_mean_and_bursts() {
        let model = LossModel::GilbertElliott {
            p: 0.01,
            r: 0.1,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut st = LossState::new(model);
        let mut rng = SmallRng::seed_from_u64(11);
        let n = 400_000;
        let mut lost = 0u32;
        let mut bursts = 0u32;
        let mut prev = false;
        for _ in 0..n {
            let l = st.lose(&mut rng);
            if l {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = l;
        }
        let rate = f64::from(lost) / f64::from(n);
        assert!(
            (rate - model.mean_loss()).abs() < 0.01,
            "{rate} vs {}",
            model.mean_loss()
        );
        // Mean burst length of the bad state is 1/r = 10 packets.
        let mean_burst = f64::from(lost) / f64::from(bursts);
        assert!((mean_burst - 10.0).abs() < 1.0, "{mean_burst}");
    }

    #[test]
    fn no_loss_never_drops() {
        let mut st = LossState::new(LossModel::None);
        let mut rng = SmallRng::seed_from_u64(1);
        assert!((0..10_000).all(|_| !st.lose(&mut rng)));
        assert!(!st.is_bad());
    }

    #[test]
    fn serialisation_paces_back_to_back_frames() {
        // 1500 B at 12 Mbit/s = 1 ms per frame.
        let spec = LinkSpec {
            delay: Duration::from_millis(5),
            rate_bps: 12_000_000,
            ..LinkSpec::default()
        };
        let mut d = LinkDirection::new(spec, 0);
        for _ in 0..3 {
            assert_eq!(d.offer(Duration::ZERO, vec![0; 1500]), Verdict::Queued);
        }
        assert_eq!(d.backlog_packets(), 3);
        let mut dues = Vec::new();
        while let Some((due, _)) = d.pop_due_with_time(Duration::from_secs(1)) {
            dues.push(due);
        }
        assert_eq!(
            dues,
            vec![
                Duration::from_millis(6),
                Duration::from_millis(7),
                Duration::from_millis(8)
            ]
        );
        // An idle link starts serialising at arrival.
        d.offer(Duration::from_millis(100), vec![0; 1500]);
        assert_eq!(d.next_due(), Some(Duration::from_millis(106)));
    }

    #[test]
    fn queue_limit_drops_and_counts() {
        let spec = LinkSpec {
            rate_bps: 1_000_000,
            queue_packets: 4,
            ..LinkSpec::default()
        };
        let mut d = LinkDirection::new(spec, 0);
        let verdicts: Vec<_> = (0..6)
            .map(|_| d.offer(Duration::ZERO, vec![0; 1000]))
            .collect();
        assert_eq!(
            verdicts
                .iter()
                .filter(|v| **v == Verdict::QueueFull)
                .count(),
            2
        );
        let c = d.counters();
        assert_eq!((c.offered, c.dropped_queue), (6, 2));
        // After the first frame has serialised (8 ms), one slot frees up.
        assert_eq!(
            d.offer(Duration::from_millis(8), vec![0; 1000]),
            Verdict::Queued
        );
        assert_eq!(
            d.offer(Duration::from_millis(8), vec![0; 1000]),
            Verdict::QueueFull
        );
    }

    #[test]
    fn byte_limit() {
        let spec = LinkSpec {
            rate_bps: 1_000_000,
            queue_bytes: 2500,
            ..LinkSpec::default()
        };
        let mut d = LinkDirection::new(spec, 0);
        assert_eq!(d.offer(Duration::ZERO, vec![0; 1000]), Verdict::Queued);
        assert_eq!(d.offer(Duration::ZERO, vec![0; 1000]), Verdict::Queued);
        assert_eq!(d.offer(Duration::ZERO, vec![0; 1000]), Verdict::QueueFull);
        assert_eq!(d.offer(Duration::ZERO, vec![0; 400]), Verdict::Queued);
    }

    #[test]
    fn delivered_counters() {
        let mut d = LinkDirection::new(LinkSpec::default(), 0);
        d.offer(Duration::ZERO, vec![1, 2, 3]);
        assert_eq!(d.pop_due(Duration::ZERO), Some(vec![1, 2, 3]));
        assert_eq!(d.counters().delivered_bytes, 3);
        assert!(d.pop_due(Duration::ZERO).is_none());
    }
}
