//! A timer receiver's replies (its wait learned, [`FlightLags`](super::FlightLags)): the
//! window of packets a new range names, and the packet that armed each reply's timer.

use std::time::Duration;

use super::{GapLoss, GapReply, GapTracker, PROMPT_TOLERANCE};
use crate::Time;

/// How far from the floor plus the armed wait before a timer receiver's reply the packet that
/// armed its timer may lie (the receiver's timer and processing jitter: 90 % of recorded aioquic
/// replies came 3.52–3.87 ms after the packet that armed them, on a 2.05 ms path).
pub const ARMED_TOLERANCE: Duration = Duration::from_micros(250);

/// Most packets a timer receiver's gap names at once: the receiver's replies cover the 1–3
/// packets since its previous one (aioquic at 10 Mbit/s), and the lost one is among those
/// before the newest.
pub const TIMER_WINDOW: usize = 3;

impl GapTracker {
    /// A reply from a timer receiver (its wait learned, [`FlightLags`](super::FlightLags)).
    /// Such a receiver acknowledges everything that arrived before its timer fired, so a reply
    /// at `now` covers the packets forwarded up to one pairing floor before it, and a range new
    /// in it belongs to a packet forwarded after the previous reply's newest and before this
    /// one's: the packets between the two are named together, at most [`TIMER_WINDOW`]. Every
    /// ACK-sized reply counts, prompt or not: the pairing of one reply with one packet is what
    /// the receiver's jitter (a Python receiver's: up to a packet spacing) makes unreliable.
    pub(super) fn on_timer_reply(
        &mut self,
        now: Time,
        len: usize,
        floor: Duration,
        prev_reply: Option<Time>,
        lag: Duration,
        mut out: GapReply,
    ) -> GapReply {
        let Some(base) = self.adds_range(len) else {
            return out;
        };
        let covered = |t: Time| {
            t.checked_sub(floor)
                .map_or(0, |t| self.ring.partition_point(|r| r.at <= t))
        };
        // `newest` is this reply's newest packet (it arrived); the window ends before it.
        let Some(newest) = covered(now).checked_sub(1) else {
            out.unnamed = true;
            return out;
        };
        // The window starts after the previous reply's newest, taken with the receiver's full
        // wait rather than the pairing's (a margin earlier): a packet forwarded just in time
        // for that reply may instead have been lost, and a lost packet shows as a range only
        // once a later one has arrived.
        let after_prev = prev_reply
            .and_then(|t| t.checked_sub(PROMPT_TOLERANCE * 2))
            .map_or(0, covered);
        let from = after_prev.max(newest.saturating_sub(TIMER_WINDOW));
        for k in from..newest {
            let r = &mut self.ring[k];
            // A packet whose own reply came (it armed the receiver's timer) arrived.
            if r.is_retx || r.retransmitted || r.armed {
                continue;
            }
            let Some(frame) = r.frame.take() else {
                continue;
            };
            r.retransmitted = true;
            self.bytes -= frame.len();
            let loss = GapLoss { seq: r.seq, frame };
            // The oldest is `lost`, the rest go with it.
            match out.lost {
                None => out.lost = Some(loss),
                Some(_) => out.also.push(loss),
            }
        }
        let Some(oldest) = out.lost.as_ref().map(|l| l.seq) else {
            out.unnamed = true;
            return out;
        };
        out.timer_paired = true;
        self.open_repair(now, lag, base, len, oldest, 0, true, &mut out);
        out
    }

    /// A timer receiver's reply at `now` was armed by the first packet to reach it since its
    /// previous reply: the receiver starts its timer then, so the reply comes one armed wait
    /// ([`FlightLags::armed_wait`](super::FlightLags::armed_wait), learned at flight starts) plus the floor after that packet,
    /// and a lost packet arms nothing. The packet forwarded then (within [`ARMED_TOLERANCE`],
    /// and alone there: of two, either may have armed it) arrived. Marking it keeps a gap's
    /// window to the packets that may be missing — a range that no loss made (a sender that
    /// skips packet numbers, RFC 9000 §21.4) then often names nothing at all.
    pub(super) fn mark_armed(&mut self, now: Time, raw_floor: Duration) {
        let Some(armed) = self
            .flight_lags
            .armed_wait()
            .and_then(|w| now.checked_sub(raw_floor + w))
        else {
            return;
        };
        let lo = armed.checked_sub(ARMED_TOLERANCE).unwrap_or(Time::ZERO);
        let from = self.ring.partition_point(|r| r.at < lo);
        let to = self
            .ring
            .partition_point(|r| r.at <= armed + ARMED_TOLERANCE);
        if to == from + 1 {
            self.ring[from].armed = true;
        }
    }
}
