//! Priority classes with aging: a request's effective priority is its class minus
//! `aging_per_s` × the seconds it has waited (lower goes first). Between two requests the
//! difference of effective priorities does not change while both wait, so the order is fixed
//! at arrival by the key class + aging_per_s × arrival time: a class-c request waits at most
//! about c / aging_per_s seconds longer than a class-0 request that arrived with it.

use serde::{Deserialize, Serialize};

use super::{float_key, QueueOrder, QueuePolicy, Seq};
use crate::config::{check, ConfigError};

/// `kind = "priority"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Priority {
    /// Classes gained per second of waiting. Default 0 (strict priority, FCFS within a class).
    pub(crate) aging_per_s: f64,
}

impl QueuePolicy for Priority {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(
            self.aging_per_s.is_finite() && self.aging_per_s >= 0.0,
            path,
            "aging_per_s",
            "must be ≥ 0",
            self.aging_per_s,
        )
    }

    fn build(&self, _seed: u64, _instance: u32) -> Box<dyn QueueOrder> {
        Box::new(self.clone())
    }

    fn priority(&self) -> Option<Rank> {
        Some(Rank { aging_per_s: self.aging_per_s })
    }
}

/// A request's rank under [`Priority`]: lower goes first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rank {
    aging_per_s: f64,
}

impl Rank {
    /// The class less the aging, fixed at arrival (the module's note).
    pub fn key(self, s: &Seq) -> u64 {
        float_key(s.class as f64 + self.aging_per_s * s.cold.arrival.as_secs_f64())
    }
}

impl QueueOrder for Priority {
    fn place(&mut self, s: &Seq) -> (usize, u64) {
        (0, Rank { aging_per_s: self.aging_per_s }.key(s))
    }
}
