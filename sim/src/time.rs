//! Simulated time: integer nanoseconds since the start of the run.
//!
//! Integer time makes event ordering exact and runs reproducible across platforms; floating-point
//! seconds are used only at the edges (scenario input, reports).

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time, or a duration, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// Converts seconds to nanoseconds, rounding to the nearest nanosecond and saturating at the
    /// ends of the range (negative and NaN inputs give zero).
    pub fn from_secs_f64(secs: f64) -> SimTime {
        let ns = (secs * 1e9).round();
        if ns.is_nan() || ns <= 0.0 {
            SimTime(0)
        } else if ns >= u64::MAX as f64 {
            SimTime(u64::MAX)
        } else {
            SimTime(ns as u64)
        }
    }

    pub fn from_millis_f64(ms: f64) -> SimTime {
        SimTime::from_secs_f64(ms / 1e3)
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    pub fn saturating_sub(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_sub(other.0))
    }
}

impl Add for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for SimTime {
    fn add_assign(&mut self, rhs: SimTime) {
        *self = *self + rhs;
    }
}

impl Sub for SimTime {
    type Output = SimTime;
    /// Durations never go negative: a later time minus an earlier one. Subtracting a later time
    /// is a bug in the caller.
    fn sub(self, rhs: SimTime) -> SimTime {
        debug_assert!(self.0 >= rhs.0, "time went backwards: {} - {}", self.0, rhs.0);
        SimTime(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_and_saturate() {
        assert_eq!(SimTime::from_secs_f64(1.5), SimTime(1_500_000_000));
        assert_eq!(SimTime::from_secs_f64(1e-9 * 0.4), SimTime(0));
        assert_eq!(SimTime::from_secs_f64(-3.0), SimTime(0));
        assert_eq!(SimTime::from_secs_f64(f64::NAN), SimTime(0));
        assert_eq!(SimTime::from_secs_f64(1e30), SimTime::MAX);
        assert_eq!(SimTime::from_millis_f64(2.5), SimTime(2_500_000));
        assert_eq!(SimTime(2_500_000).as_millis_f64(), 2.5);
        assert_eq!(SimTime::MAX + SimTime(5), SimTime::MAX);
    }
}
