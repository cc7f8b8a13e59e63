//! Flowlets of the dominant direction and reply assignment (PEMI §4.2.1–4.2.2, §4.3.2).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::Time;

/// Most flowlets kept per flow; the oldest is dropped unevaluated beyond it (a cap on state).
pub const MAX_FLOWLETS: usize = 256;

/// One protected packet recorded in a flowlet.
#[derive(Debug, Clone)]
pub struct SentPkt {
    /// The engine's number for the packet (increasing; shared with the gap signal, [`super::gap`]).
    pub seq: u64,
    /// Arrival time at the proxy.
    pub at: Time,
    /// UDP payload length.
    pub len: usize,
    /// The captured frame, while the flowlet is unfinished (§4.3.2); `None` when not buffered.
    /// Shared with the gap signal's record of the same packet (one copy per captured frame).
    pub frame: Option<Arc<[u8]>>,
    /// This entry is PEMI's own retransmission: never retransmitted again (§4.3.2).
    pub is_retx: bool,
    /// PEMI has retransmitted this packet already (by the gap signal): not again (§4.3.2).
    pub repaired: bool,
}

/// A burst of protected packets and the replies assigned to it.
#[derive(Debug, Clone)]
pub struct Flowlet {
    /// Sent packets in arrival order.
    pub sent: Vec<SentPkt>,
    /// Arrival times of the replies assigned to it.
    pub replies: Vec<Time>,
    /// More than N packets: protection abandoned (§4.6), buffers released.
    pub too_long: bool,
}

impl Flowlet {
    fn begin(&self) -> Option<Time> {
        self.sent.first().map(|p| p.at)
    }

    fn end(&self) -> Option<Time> {
        self.sent.last().map(|p| p.at)
    }

    fn buffered(&self) -> usize {
        self.sent
            .iter()
            .map(|p| p.frame.as_ref().map_or(0, |f| f.len()))
            .sum()
    }

    /// Distance from `t` to this flowlet's time span (zero inside it).
    fn distance(&self, t: Time) -> Duration {
        match (self.begin(), self.end()) {
            (Some(b), Some(_)) if t < b => b - t,
            (Some(_), Some(e)) if t > e => t - e,
            _ => Duration::ZERO,
        }
    }
}

/// What happened to a reply packet.
#[derive(Debug)]
pub enum ReplyOutcome {
    /// Outside the exclusion window `[t_start, t_end]` (eq. 1) or no flowlet: discarded.
    Excluded,
    /// Assigned; flowlets before the chosen one are finished and handed back (§4.3.2).
    Assigned(Vec<Flowlet>),
}

/// Result of recording a sent packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentOutcome {
    /// Recorded (buffered when a frame was given and the buffer had room).
    Recorded {
        /// The frame was buffered.
        buffered: bool,
    },
    /// This packet made its flowlet exceed N packets: protection of that flowlet abandoned.
    TooLong,
    /// The flowlet had already been abandoned.
    Abandoned,
}

/// The flowlets of one flow.
#[derive(Debug)]
pub struct Flowlets {
    list: VecDeque<Flowlet>,
    sinv: Option<Duration>,
    last_sent: Option<Time>,
    buffered: usize,
    alpha: f64,
    beta: f64,
    max_packets: usize,
    buffer_cap: usize,
}

impl Flowlets {
    /// Empty flowlets with α, β, N and the buffer cap (bytes).
    pub fn new(alpha: f64, beta: f64, max_packets: usize, buffer_cap: usize) -> Self {
        Self {
            list: VecDeque::new(),
            sinv: None,
            last_sent: None,
            buffered: 0,
            alpha,
            beta,
            max_packets,
            buffer_cap,
        }
    }

    /// Flowlet timeout `F_timeout = α · sINV` (§4.2.1).
    pub fn timeout(&self) -> Duration {
        self.sinv.map_or(Duration::ZERO, |s| s.mul_f64(self.alpha))
    }

    /// Jitter margin `Δ_margin = β · F_timeout` (eq. 1).
    pub fn margin(&self) -> Duration {
        self.timeout().mul_f64(self.beta)
    }

    /// The smoothed packet interval sINV.
    pub fn sinv(&self) -> Option<Duration> {
        self.sinv
    }

    /// Active flowlets.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// No active flowlet.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Bytes of buffered frames.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.buffered
            + self
                .list
                .iter()
                .map(|f| {
                    f.sent.capacity() * std::mem::size_of::<SentPkt>()
                        + f.replies.capacity() * std::mem::size_of::<Time>()
                })
                .sum::<usize>()
    }

    /// Record a protected packet (§4.2.1): appended to the last flowlet when within `F_timeout`
    /// of its last packet, else the start of a new flowlet. PEMI's own retransmissions are
    /// recorded too (the receiver may reply to them) but do not move sINV.
    pub fn on_sent(
        &mut self,
        now: Time,
        seq: u64,
        len: usize,
        frame: Option<Arc<[u8]>>,
        is_retx: bool,
    ) -> SentOutcome {
        // Before the first interval is known, the second packet joins the first.
        let timeout = self.sinv.map_or(Duration::MAX, |s| s.mul_f64(self.alpha));
        if !is_retx {
            if let Some(prev) = self.last_sent {
                let gap = now.saturating_duration_since(prev);
                // sINV smoothed like srtt (1/8 gain).
                self.sinv = Some(self.sinv.map_or(gap, |s| (s * 7 + gap) / 8));
            }
            self.last_sent = Some(now);
        }
        let join = self
            .list
            .back()
            .and_then(Flowlet::end)
            .is_some_and(|e| now.saturating_duration_since(e) <= timeout);
        if !join {
            if self.list.len() >= MAX_FLOWLETS
                && let Some(old) = self.list.pop_front()
            {
                self.buffered -= old.buffered();
            }
            self.list.push_back(Flowlet {
                sent: Vec::new(),
                replies: Vec::new(),
                too_long: false,
            });
        }
        let Some(f) = self.list.back_mut() else {
            return SentOutcome::Abandoned;
        };
        if f.too_long {
            f.sent.push(SentPkt {
                seq,
                at: now,
                len,
                frame: None,
                is_retx,
                repaired: false,
            });
            return SentOutcome::Abandoned;
        }
        let frame = frame.filter(|fr| self.buffered + fr.len() <= self.buffer_cap);
        let buffered = frame.is_some();
        if let Some(fr) = &frame {
            self.buffered += fr.len();
        }
        f.sent.push(SentPkt {
            seq,
            at: now,
            len,
            frame,
            is_retx,
            repaired: false,
        });
        if f.sent.len() > self.max_packets {
            // §4.6: flowlets over N packets are not protected; release their buffers.
            f.too_long = true;
            let freed = f.buffered();
            for p in &mut f.sent {
                p.frame = None;
            }
            self.buffered -= freed;
            return SentOutcome::TooLong;
        }
        SentOutcome::Recorded { buffered }
    }

    /// Assign a reply arriving at `now` given the RTT to the protected receiver (§4.2.2): project
    /// it to `t̂ = t_reply − RTT`, drop it outside `[t_start, t_end]` (eq. 1), else assign it to the
    /// flowlet whose span is closest to `t̂`; every earlier flowlet is finished (§4.3.2).
    pub fn on_reply(&mut self, now: Time, rtt: Duration) -> ReplyOutcome {
        let margin = self.margin();
        let (Some(begin), Some(end)) = (
            self.list.front().and_then(Flowlet::begin),
            self.list.back().and_then(Flowlet::end),
        ) else {
            return ReplyOutcome::Excluded;
        };
        let t_start = (begin + rtt).checked_sub(margin).unwrap_or(begin);
        let t_end = end + rtt + margin;
        if now < t_start || now > t_end {
            return ReplyOutcome::Excluded;
        }
        let t_hat = now.checked_sub(rtt).unwrap_or(begin);
        let mut best = 0;
        let mut best_d = Duration::MAX;
        for (k, f) in self.list.iter().enumerate() {
            let d = f.distance(t_hat);
            if d < best_d {
                best = k;
                best_d = d;
            }
        }
        let finished: Vec<Flowlet> = self.list.drain(..best).collect();
        for f in &finished {
            self.buffered -= f.buffered();
        }
        if let Some(f) = self.list.front_mut() {
            f.replies.push(now);
        }
        ReplyOutcome::Assigned(finished)
    }

    /// Finish flowlets whose replies are overdue: the flowlet is closed (no packet for
    /// `F_timeout`) and `now` is past its last packet + RTT + Δ_margin + `slack` (the receiver's
    /// ACK delay). Covers tail flowlets that no later reply would finish.
    pub fn finish_overdue(&mut self, now: Time, rtt: Duration, slack: Duration) -> Vec<Flowlet> {
        let margin = self.margin();
        let timeout = self.timeout();
        let mut out = Vec::new();
        while let Some(f) = self.list.front() {
            let Some(end) = f.end() else {
                self.list.pop_front();
                continue;
            };
            // At the deadline `next_deadline` announces, not only after it: a timer that fires
            // at its deadline must make progress (virtual time would otherwise stand still).
            let closed = self.list.len() > 1 || now.saturating_duration_since(end) >= timeout;
            if closed && now >= end + rtt + margin + slack {
                if let Some(f) = self.list.pop_front() {
                    self.buffered -= f.buffered();
                    out.push(f);
                }
            } else {
                break;
            }
        }
        out
    }

    /// When [`Flowlets::finish_overdue`] would next finish a flowlet.
    pub fn next_deadline(&self, rtt: Duration, slack: Duration) -> Option<Time> {
        let f = self.list.front()?;
        Some(f.end()? + (rtt + self.margin() + slack).max(self.timeout()))
    }

    /// Packet `seq` was retransmitted outside the flowlet inference: mark it so that it is not
    /// retransmitted again, and release its buffer. Recent packets are searched from the back.
    pub fn mark_repaired(&mut self, seq: u64) {
        for f in self.list.iter_mut().rev() {
            if f.sent.first().is_some_and(|p| p.seq > seq) {
                continue;
            }
            if let Some(p) = f.sent.iter_mut().rev().find(|p| p.seq == seq) {
                p.repaired = true;
                if let Some(fr) = p.frame.take() {
                    self.buffered -= fr.len();
                }
            }
            return;
        }
    }

    /// Drop every flowlet (dominant-direction change).
    pub fn clear(&mut self) {
        self.list.clear();
        self.buffered = 0;
    }

    /// Drop the flowlets that already have replies (App. A: after an RTT reset their matching
    /// would contaminate new samples).
    pub fn clear_replied(&mut self) {
        self.list.retain(|f| f.replies.is_empty());
        self.buffered = self.list.iter().map(Flowlet::buffered).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Bursts of `k` packets 0.2 ms apart every 30 ms (an RTC-like pattern).
    fn bursts(f: &mut Flowlets, t0: Time, n: u64, k: u64) {
        for b in 0..n {
            for i in 0..k {
                f.on_sent(
                    t0 + ms(30 * b) + Duration::from_micros(200 * i),
                    b * k + i,
                    1200,
                    Some(vec![0u8; 100].into()),
                    false,
                );
            }
        }
    }

    #[test]
    fn bursts_become_flowlets() {
        let t0 = Time::ZERO;
        let mut f = Flowlets::new(2.0, 0.5, 100, 1 << 20);
        bursts(&mut f, t0, 4, 10);
        // sINV ≈ mean interval (≈ 3 ms): timeout ≈ 6 ms separates the 30 ms gaps.
        assert_eq!(f.len(), 4);
        assert!(f.timeout() > Duration::from_micros(400) && f.timeout() < ms(30));
        assert_eq!(f.buffered_bytes(), 4000);
        // A packet repaired elsewhere is marked and its buffer released.
        f.mark_repaired(21);
        assert_eq!(f.buffered_bytes(), 3900);
        assert!(f.list[2].sent[1].repaired && !f.list[2].sent[0].repaired);
    }

    #[test]
    fn replies_go_to_the_nearest_flowlet_and_finish_earlier_ones() {
        let t0 = Time::ZERO;
        let mut f = Flowlets::new(2.0, 0.5, 100, 1 << 20);
        bursts(&mut f, t0, 3, 10);
        let rtt = ms(10);
        // A reply for burst 0.
        assert!(matches!(f.on_reply(t0 + ms(11), rtt), ReplyOutcome::Assigned(v) if v.is_empty()));
        // Far too early (before t_start) or too late (after t_end): excluded.
        assert!(matches!(
            f.on_reply(t0 + ms(2), rtt),
            ReplyOutcome::Excluded
        ));
        assert!(matches!(
            f.on_reply(t0 + ms(200), rtt),
            ReplyOutcome::Excluded
        ));
        // A reply for burst 1 finishes burst 0 with its one reply.
        match f.on_reply(t0 + ms(41), rtt) {
            ReplyOutcome::Assigned(done) => {
                assert_eq!(done.len(), 1);
                assert_eq!(done[0].sent.len(), 10);
                assert_eq!(done[0].replies.len(), 1);
            }
            ReplyOutcome::Excluded => panic!("excluded"),
        }
        assert_eq!(f.len(), 2);
        assert_eq!(f.buffered_bytes(), 2000);
    }

    #[test]
    fn overdue_tail_and_long_flowlets() {
        let t0 = Time::ZERO;
        let mut f = Flowlets::new(2.0, 0.5, 5, 1 << 20);
        for i in 0..7 {
            let o = f.on_sent(
                t0 + Duration::from_micros(100 * i),
                i,
                100,
                Some(vec![0u8; 10].into()),
                false,
            );
            assert_eq!(o == SentOutcome::TooLong, i == 5);
        }
        assert_eq!(f.buffered_bytes(), 0);
        assert!(f.finish_overdue(t0 + ms(20), ms(10), ms(25)).is_empty());
        let done = f.finish_overdue(t0 + ms(40), ms(10), ms(25));
        assert_eq!(done.len(), 1);
        assert!(done[0].too_long);
        assert!(f.is_empty());
    }

    #[test]
    fn buffer_cap_respected() {
        let t0 = Time::ZERO;
        let mut f = Flowlets::new(2.0, 0.5, 100, 250);
        let mut buffered = 0;
        for i in 0..5 {
            if let SentOutcome::Recorded { buffered: true } = f.on_sent(
                t0 + Duration::from_micros(10 * i),
                i,
                100,
                Some(vec![0u8; 100].into()),
                false,
            ) {
                buffered += 1;
            }
        }
        assert_eq!(buffered, 2);
        assert!(f.buffered_bytes() <= 250);
    }
}
