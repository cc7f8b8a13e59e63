//! What the gap signal learns of a receiver: its ACK waits at flight ends and starts
//! ([`FlightLags`]) and the lengths of its recent replies ([`ReplyLengths`]).

use std::time::Duration;

use super::PROMPT_TOLERANCE;

/// Flight ends kept, and needed before their lag is used.
pub const FLIGHT_SAMPLES: usize = 16;

/// See [`FLIGHT_SAMPLES`].
pub const FLIGHT_SAMPLES_NEEDED: usize = 8;

/// The share of the last [`TIMED_ENDS_KEPT`] flight ends with a reply after their last packet
/// that must have given a wait (that reply within [`super::MAX_LEARNED_ACK_WAIT`] beyond the
/// floor, not sooner than the floor) for the receiver to count as a timer receiver, as
/// `(numerator, denominator)`: 3 of 4.
pub const TIMED_ENDS: (u32, u32) = (3, 4);

/// The share of [`TIMED_ENDS`] a receiver taken for a timer receiver keeps it at (a timer
/// receiver's share dips now and then): 5 of 8.
pub const TIMED_ENDS_KEPT_SHARE: (u32, u32) = (5, 8);

/// Flight ends whose timing is kept (one bit each).
pub const TIMED_ENDS_KEPT: u32 = 32;

/// The receiver's waits beyond the floor at flight ends and flight starts, and from them the
/// floor replies are paired with.
///
/// - **End**: the last reply after a flight answers its last packet. Its lag is at most the
///   receiver's lag behind the packet that started its ACK (a last reply that also covers the
///   packet before comes that much earlier after the last one), so the wait is read from the
///   upper quartile.
/// - **Start**: the first reply after a flight starts. A receiver that acknowledges every
///   second packet answers the second one (a packet spacing later; a flight of one packet
///   waits for its delayed-ACK timer, so the wait is read from the lower quartile); a timer
///   receiver answers after its timer, as at the end.
///
/// Only when the two agree (within `2 ×` [`PROMPT_TOLERANCE`]; once in use, within twice
/// that) does the wait shift the pairing: a receiver that waits at flight ends for a
/// delayed-ACK timer (ngtcp2: about an eighth of the RTT) still answers a gap at once (RFC 9000
/// §13.2.1), and a start tells it apart. The floor then moves by the shorter of the two waits
/// less `2 ×` [`PROMPT_TOLERANCE`]: a reply covers the packets that arrived before its timer
/// fired, and a wait that grows for a while (a receiver slowed down) must not make the tracker
/// think a reply covers fewer of them than it does.
///
/// Nor does it unless at least [`TIMED_ENDS`] of the last [`TIMED_ENDS_KEPT`] flight ends that
/// had a reply after their last packet gave a wait, rather than a reply sooner than the floor
/// (which answered an earlier packet): a timer receiver answers every flight's last packet
/// after its timer, while one that acknowledges every second packet and not at once on a gap
/// (kwik) leaves the last packet of a flight of an odd count to its delayed-ACK timer — and
/// when flights start with two packets back to back, that receiver's start and end waits are
/// both its processing (a JVM's: slow and jittery) and agree. Recorded downloads (1 % and 3 %
/// loss, 2 ms to the receiver), flight ends whose last reply came sooner than the floor: kwik
/// 30–41 %, quinn 43 %, aioquic 1–8 %.
#[derive(Debug, Clone, Default)]
pub struct FlightLags {
    ends: Waits,
    starts: Waits,
    /// One bit per flight end with a reply after its last packet, the newest lowest: whether it
    /// gave a wait ([`TIMED_ENDS`]).
    timed_ends: u32,
    /// Flight ends seen, up to [`TIMED_ENDS_KEPT`].
    ends_seen: u8,
    /// The wait replies are paired with, derived when a wait is recorded (at flight
    /// boundaries) rather than at every reply, which would sort both sets each time.
    wait: Option<Duration>,
    /// A timer receiver's median wait after the packet that armed its timer (the first of a
    /// flight), while `wait` is in use.
    armed: Option<Duration>,
}

/// The last [`FLIGHT_SAMPLES`] waits, the oldest overwritten first, in microseconds (at most
/// [`super::MAX_LEARNED_ACK_WAIT`], so 16 bits hold them: 34 bytes a set, kept small since
/// every PEMI flow has two).
#[derive(Debug, Clone, Default)]
struct Waits {
    micros: [u16; FLIGHT_SAMPLES],
    len: u8,
    next: u8,
}

impl Waits {
    fn record(&mut self, wait: Duration) {
        let micros = u16::try_from(wait.as_micros()).unwrap_or(u16::MAX);
        self.micros[usize::from(self.next)] = micros;
        self.next = (self.next + 1) % FLIGHT_SAMPLES as u8;
        self.len = (self.len + 1).min(FLIGHT_SAMPLES as u8);
    }

    /// The `num / den` quantile, once [`FLIGHT_SAMPLES_NEEDED`] waits are known.
    fn quantile(&self, num: usize, den: usize) -> Option<Duration> {
        let len = usize::from(self.len);
        if len < FLIGHT_SAMPLES_NEEDED {
            return None;
        }
        let mut w = self.micros;
        let w = &mut w[..len];
        w.sort_unstable();
        Some(Duration::from_micros(u64::from(w[(len - 1) * num / den])))
    }
}

impl FlightLags {
    /// Record the wait (lag beyond the floor) of a flight's last reply.
    pub fn record_end(&mut self, wait: Duration) {
        self.ends.record(wait);
        self.note_end(true);
        self.update();
    }

    /// Record the wait (lag beyond the floor) of the first reply after a flight started.
    pub fn record_start(&mut self, wait: Duration) {
        self.starts.record(wait);
        self.update();
    }

    /// A flight ended with its last reply sooner than the floor after its last packet (it
    /// answered an earlier one).
    pub fn record_early_end(&mut self) {
        self.note_end(false);
        self.update();
    }

    fn note_end(&mut self, timed: bool) {
        self.timed_ends = (self.timed_ends << 1) | u32::from(timed);
        self.ends_seen = (self.ends_seen + 1).min(TIMED_ENDS_KEPT as u8);
    }

    /// At least `share` of the flight ends seen (the last [`TIMED_ENDS_KEPT`]) gave a wait.
    fn ends_timed(&self, (num, den): (u32, u32)) -> bool {
        let seen = u32::from(self.ends_seen).clamp(1, TIMED_ENDS_KEPT);
        let timed = (self.timed_ends & (u32::MAX >> (TIMED_ENDS_KEPT - seen))).count_ones();
        timed * den >= seen * num
    }

    /// The floor to pair replies with: `floor`, or `floor` plus the receiver's wait less
    /// `2 ×` [`PROMPT_TOLERANCE`] once [`FLIGHT_SAMPLES_NEEDED`] flights have ended and started
    /// and the waits at both ends (upper quartile of ends, lower quartile of starts) agree; the
    /// wait is the shorter of the two.
    pub fn pairing_floor(&self, floor: Duration) -> Duration {
        floor + self.wait.unwrap_or_default()
    }

    /// A timer receiver's wait beyond the floor after the packet that armed its timer: the
    /// median of the flight starts' waits, once the wait is in use ([`Self::pairing_floor`]).
    pub fn armed_wait(&self) -> Option<Duration> {
        self.armed
    }

    fn update(&mut self) {
        // Once in use, the wait is kept while the two ends agree within twice the margin that
        // admitted it: a timer receiver's quartiles cross the margin now and then, and each
        // switch back to the floor misnames its gaps until they agree again.
        let (margin, timed) = if self.wait.is_some() {
            (4, TIMED_ENDS_KEPT_SHARE)
        } else {
            (2, TIMED_ENDS)
        };
        self.wait = match (self.ends.quantile(3, 4), self.starts.quantile(1, 4)) {
            (Some(end), Some(start))
                if end.abs_diff(start) <= PROMPT_TOLERANCE * margin && self.ends_timed(timed) =>
            {
                Some(end.min(start).saturating_sub(PROMPT_TOLERANCE * 2))
            }
            _ => None,
        };
        self.armed = self.wait.and(self.starts.quantile(1, 2));
    }
}

/// Replies whose lengths the baseline is the shortest of.
pub const BASE_REPLIES: usize = 4;

/// The last [`BASE_REPLIES`] lengths of the replies the signal measured.
///
/// A reply is its ACK ranges (2 bytes each while the varints are small) plus fields whose
/// varints may take a byte more from one reply to the next: the ACK Delay (aioquic's is 1
/// byte under 512 µs and 2 above, so its replies alternate between two lengths at random), a
/// range length crossing 63. Ranges are therefore counted in whole `min_growth` steps above the
/// shortest recent reply: a byte more or less never makes or hides a range, where comparing
/// with the previous reply alone misses a gap whose reply follows a byte-longer one.
#[derive(Debug, Clone, Default)]
pub(super) struct ReplyLengths {
    lens: [u16; BASE_REPLIES],
    len: u8,
    next: u8,
}

impl ReplyLengths {
    pub(super) fn push(&mut self, len: usize) {
        self.lens[usize::from(self.next)] = u16::try_from(len).unwrap_or(u16::MAX);
        self.next = (self.next + 1) % BASE_REPLIES as u8;
        self.len = (self.len + 1).min(BASE_REPLIES as u8);
    }

    pub(super) fn last(&self) -> Option<usize> {
        (self.len > 0).then(|| {
            let i = (usize::from(self.next) + BASE_REPLIES - 1) % BASE_REPLIES;
            usize::from(self.lens[i])
        })
    }

    pub(super) fn shortest(&self) -> Option<usize> {
        self.lens[..usize::from(self.len)]
            .iter()
            .min()
            .map(|&l| usize::from(l))
    }
}
