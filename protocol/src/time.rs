//! The time of the sans-IO state machines: the protocol's sessions and the proxy core.
//!
//! Every call into them takes a [`Time`] the caller read from its own clock. Why not
//! `std::time::Instant`: std makes an `Instant` only by reading the system clock, so a simulator,
//! a fuzz body or a trace replay would have to read it too, and a run could not start from a
//! chosen zero; an `Instant` is also 16 bytes where a count of nanoseconds is 8 (the proxy keeps
//! several per flow). Adapters that live on `Instant` (the daemon, the SDK beside quinn) convert
//! at their edge with [`Time::since`] and [`Time::to_instant`], which read no clock either.

use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, Instant};

/// A point in time: nanoseconds since an origin the caller chose (the daemon: its start; the
/// simulator: virtual zero). `u64` nanoseconds reach 584 years.
///
/// Arithmetic saturates instead of panicking: `t - d` stops at [`Time::ZERO`] and `t + d` at
/// [`Time::MAX`] (a configured duration may be huge; a window may reach back before the origin),
/// and `a - b` is zero when `b` is later, as `Instant`'s is.
///
/// ```
/// use std::time::Duration;
/// use sidekick_protocol::Time;
///
/// let t0 = Time::from_millis(5);
/// let t1 = t0 + Duration::from_millis(20);
/// assert_eq!(t1 - t0, Duration::from_millis(20));
/// assert_eq!(t0 - t1, Duration::ZERO);
/// assert_eq!(t0 - Duration::from_secs(1), Time::ZERO);
/// assert_eq!(t1.checked_duration_since(t0), Some(Duration::from_millis(20)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);
    /// The latest representable time (a deadline that never comes).
    pub const MAX: Time = Time(u64::MAX);

    /// `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Time {
        Time(nanos)
    }

    /// `micros` microseconds after the origin (saturating).
    pub const fn from_micros(micros: u64) -> Time {
        Time(micros.saturating_mul(1_000))
    }

    /// `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Time {
        Time(millis.saturating_mul(1_000_000))
    }

    /// `secs` seconds after the origin (saturating).
    pub const fn from_secs(secs: u64) -> Time {
        Time(secs.saturating_mul(1_000_000_000))
    }

    /// `d` after the origin (saturating at [`Time::MAX`]).
    pub fn from_duration(d: Duration) -> Time {
        Time(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// `now` on a clock whose origin is the instant `origin` (zero when `now` is earlier).
    pub fn since(origin: Instant, now: Instant) -> Time {
        Time::from_duration(now.saturating_duration_since(origin))
    }

    /// This time as an `Instant` on a clock whose origin is the instant `origin` (`None` when
    /// the platform's `Instant` cannot represent it, e.g. for [`Time::MAX`]).
    pub fn to_instant(self, origin: Instant) -> Option<Instant> {
        origin.checked_add(self.since_origin())
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The duration since the origin.
    pub const fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, zero when `earlier` is later (as `Instant::duration_since`).
    pub const fn duration_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self - earlier`, zero when `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Time) -> Duration {
        self.duration_since(earlier)
    }

    /// `self - earlier`, `None` when `earlier` is later.
    pub const fn checked_duration_since(self, earlier: Time) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(n) => Some(Duration::from_nanos(n)),
            None => None,
        }
    }

    /// `self + d`, `None` past [`Time::MAX`].
    pub fn checked_add(self, d: Duration) -> Option<Time> {
        u64::try_from(d.as_nanos())
            .ok()
            .and_then(|n| self.0.checked_add(n))
            .map(Time)
    }

    /// `self - d`, `None` before the origin.
    pub fn checked_sub(self, d: Duration) -> Option<Time> {
        u64::try_from(d.as_nanos())
            .ok()
            .and_then(|n| self.0.checked_sub(n))
            .map(Time)
    }

    /// `self + d`, at most [`Time::MAX`].
    pub fn saturating_add(self, d: Duration) -> Time {
        self.checked_add(d).unwrap_or(Time::MAX)
    }

    /// `self - d`, at least [`Time::ZERO`].
    pub fn saturating_sub(self, d: Duration) -> Time {
        self.checked_sub(d).unwrap_or(Time::ZERO)
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        self.saturating_sub(d)
    }
}

impl SubAssign<Duration> for Time {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn arithmetic_saturates_at_both_ends() {
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::ZERO - Duration::from_secs(1), Time::ZERO);
        assert_eq!(Time::from_secs(1) + Duration::MAX, Time::MAX);
        assert_eq!(Time::from_secs(1).checked_add(Duration::MAX), None);
        assert_eq!(Time::ZERO.checked_sub(Duration::from_nanos(1)), None);
        assert_eq!(Time::ZERO.checked_duration_since(Time::from_nanos(1)), None);
    }

    #[test]
    fn instants_convert_both_ways_on_one_origin() {
        // The one clock read is the test's own: std makes an Instant no other way.
        let origin = Instant::now();
        let later = origin + Duration::from_millis(1500);
        let t = Time::since(origin, later);
        assert_eq!(t, Time::from_millis(1500));
        assert_eq!(t.to_instant(origin), Some(later));
        assert_eq!(Time::since(later, origin), Time::ZERO);
    }

    proptest! {
        #[test]
        fn adding_then_measuring_gives_the_duration_back(
            t in 0u64..u64::MAX / 2, d in 0u64..u64::MAX / 2,
        ) {
            let a = Time::from_nanos(t);
            let b = a + Duration::from_nanos(d);
            prop_assert_eq!(b - a, Duration::from_nanos(d));
            prop_assert_eq!(b - Duration::from_nanos(d), a);
            prop_assert!(a <= b);
        }
    }
}
