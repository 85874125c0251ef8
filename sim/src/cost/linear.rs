//! A linear cost model whose iteration times can be computed by hand.
//!
//! ```text
//!   iteration time = base_us + per_token_us × tokens + per_seq_us × sequences
//!   tokens = prefill tokens + one per decoding sequence;  sequences = prefills + decodes
//! ```
//! It is not a model of any GPU. It exists for cases with a known answer (a capacity that can
//! be derived on paper, see `tests/it/plan.rs`) and for what-if questions about an engine whose
//! step time has been measured as a line ("8 ms + 40 µs per token"). The model, GPU and memory
//! sections still decide the KV blocks; only the iteration time comes from here.

use serde::{Deserialize, Serialize};

use super::{BatchShape, CostModel};
use crate::config::{check, ConfigError};
use crate::time::SimTime;

/// `[cost] kind = "linear"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinearCost {
    /// Fixed time of every iteration, µs. Default 5000.
    pub(crate) base_us: f64,
    /// Time per token processed (prefill tokens plus one per decode), µs. Default 50.
    pub(crate) per_token_us: f64,
    /// Time per sequence in the batch, µs. Default 0.
    pub(crate) per_seq_us: f64,
}

impl Default for LinearCost {
    fn default() -> Self {
        LinearCost { base_us: 5000.0, per_token_us: 50.0, per_seq_us: 0.0 }
    }
}

impl LinearCost {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        for (key, v) in
            [("base_us", self.base_us), ("per_token_us", self.per_token_us), ("per_seq_us", self.per_seq_us)]
        {
            check(v.is_finite() && (0.0..1e9).contains(&v), path, key, "must be in [0, 1e9)", v)?;
        }
        check(
            self.base_us + self.per_token_us + self.per_seq_us > 0.0,
            path,
            "base_us",
            "base_us, per_token_us and per_seq_us must not all be 0 (an iteration must take time)",
            self.base_us,
        )
    }
}

impl CostModel for LinearCost {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        let us = self.base_us + self.per_token_us * b.tokens() as f64 + self.per_seq_us * b.seqs() as f64;
        // Rounded to whole nanoseconds, and never zero for a non-empty batch.
        SimTime((us * 1000.0).round() as u64).max(SimTime(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_the_line() {
        let c = LinearCost { base_us: 5000.0, per_token_us: 50.0, per_seq_us: 10.0 };
        let mut b = BatchShape::default();
        b.add_prefill(100, 0, true);
        b.add_decode(500);
        b.add_decode(700);
        // 5000 + 50 × (100 + 2) + 10 × 3 = 10130 µs.
        assert_eq!(c.iteration_time(&b), SimTime(10_130_000));
        assert!(LinearCost { base_us: 0.0, per_token_us: 0.0, per_seq_us: 0.0 }.validate("cost").is_err());
    }
}
