//! A circuit breaker on the estimated queueing delay, with hysteresis.
//!
//! The estimate of how long a new arrival would wait is (requests waiting) / (admission rate),
//! Little's law on the queue, where the admission rate is measured while the queue is
//! backlogged (so it is the rate the instance can serve, not the rate requests happen to come):
//! an exponentially weighted mean over iterations with time constant `rate_window_s`. The
//! breaker opens when the estimate exceeds `open_delay_s` and closes again only when it falls
//! below `close_delay_s`, so it does not flap at the threshold.

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::time::SimTime;

/// `[scheduler.admission.circuit_breaker]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CircuitBreaker {
    /// Open (reject arrivals) when the estimated queueing delay exceeds this, seconds.
    pub(crate) open_delay_s: f64,
    /// Close again when it falls below this, seconds. Default: half of `open_delay_s`.
    pub(crate) close_delay_s: Option<f64>,
    /// Time constant of the admission-rate estimate, seconds. Default 1.
    #[serde(default = "one")]
    pub(crate) rate_window_s: f64,
}

fn one() -> f64 {
    1.0
}

impl CircuitBreaker {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(
            self.open_delay_s.is_finite() && self.open_delay_s > 0.0,
            path,
            "open_delay_s",
            "must be > 0",
            self.open_delay_s,
        )?;
        if let Some(c) = self.close_delay_s {
            check(
                c.is_finite() && c >= 0.0 && c <= self.open_delay_s,
                path,
                "close_delay_s",
                &format!("must be in [0, open_delay_s ({})]", self.open_delay_s),
                c,
            )?;
        }
        check(
            self.rate_window_s.is_finite() && self.rate_window_s > 0.0,
            path,
            "rate_window_s",
            "must be > 0",
            self.rate_window_s,
        )
    }
}

/// The breaker's state on one instance.
#[derive(Clone, Debug)]
pub(crate) struct Breaker {
    open_s: f64,
    close_s: f64,
    window_s: f64,
    open: bool,
    /// Admissions per second while backlogged; `None` before the first backlog.
    rate: Option<f64>,
    pub(crate) trips: u64,
}

impl Breaker {
    pub(crate) fn new(c: &CircuitBreaker) -> Breaker {
        Breaker {
            open_s: c.open_delay_s,
            close_s: c.close_delay_s.unwrap_or(c.open_delay_s / 2.0),
            window_s: c.rate_window_s,
            open: false,
            rate: None,
            trips: 0,
        }
    }

    /// Estimated wait of an arrival behind `waiting` requests, seconds.
    pub(crate) fn estimate_s(&self, waiting: usize) -> f64 {
        if waiting == 0 {
            return 0.0;
        }
        match self.rate {
            Some(r) if r > 0.0 => waiting as f64 / r,
            Some(_) => f64::INFINITY,
            None => 0.0,
        }
    }

    /// Whether an arrival finding `waiting` requests queued is accepted (updating the state).
    pub(crate) fn allows(&mut self, waiting: usize) -> bool {
        let est = self.estimate_s(waiting);
        if self.open {
            if est < self.close_s {
                self.open = false;
            }
        } else if est > self.open_s {
            self.open = true;
            self.trips += 1;
        }
        !self.open
    }

    /// An iteration of length `dur` admitted `admitted` requests and left the queue
    /// `backlogged` (non-empty) or not.
    pub(crate) fn observe(&mut self, admitted: u32, backlogged: bool, dur: SimTime) {
        if !backlogged || dur == SimTime::ZERO {
            return;
        }
        let secs = dur.as_secs_f64();
        let sample = admitted as f64 / secs;
        self.rate = Some(match self.rate {
            None => sample,
            Some(r) => r + (1.0 - (-secs / self.window_s).exp()) * (sample - r),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_above_the_bound_and_closes_below_the_lower_one() {
        let mut b = Breaker::new(&CircuitBreaker { open_delay_s: 2.0, close_delay_s: Some(1.0), rate_window_s: 1.0 });
        assert!(b.allows(100), "no rate measured yet: no estimate");
        // Backlogged iterations of 50 ms admitting 1 request each: 20 req/s.
        for _ in 0..100 {
            b.observe(1, true, SimTime::from_millis_f64(50.0));
        }
        assert!((b.estimate_s(30) - 1.5).abs() < 1e-9);
        assert!(b.allows(30), "1.5 s < 2 s");
        assert!(!b.allows(41), "2.05 s > 2 s: opens");
        assert!(!b.allows(30), "1.5 s: still open (hysteresis)");
        assert!(!b.allows(21), "1.05 s: still open");
        assert!(b.allows(19), "0.95 s < 1 s: closes");
        assert_eq!(b.trips, 1);
        // Iterations without a backlog say nothing about the service rate.
        b.observe(0, false, SimTime::from_millis_f64(50.0));
        assert!((b.estimate_s(20) - 1.0).abs() < 1e-9);
    }
}
