//! Shortest predicted job first: orders by prompt tokens plus the predicted output tokens, where
//! the predictor sees the true output length times lognormal noise (`output_error` is its σ;
//! 0 is an oracle). Output length dominates a request's time on the GPU, so this approximates
//! SRPT as far as the predictor is good.

use crate::rng::SimRng;
use serde::{Deserialize, Serialize};

use super::{QueueOrder, QueuePolicy, Seq};
use crate::config::{check, ConfigError};
use crate::rng::{substream, Stream};

/// `kind = "shortest-job"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShortestJob {
    /// σ of the lognormal error of the output-length prediction. Default 0 (exact).
    pub(crate) output_error: f64,
}

impl QueuePolicy for ShortestJob {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(
            self.output_error.is_finite() && (0.0..=5.0).contains(&self.output_error),
            path,
            "output_error",
            "must be in [0, 5]",
            self.output_error,
        )
    }

    fn caveat(&self) -> Option<&'static str> {
        (self.output_error == 0.0).then_some(
            "shortest-job with output_error = 0 is an oracle: it knows every request's output length exactly, \
             which no engine does; give output_error (the σ of a lognormal predictor) for a real one",
        )
    }

    fn build(&self, seed: u64, instance: u32) -> Box<dyn QueueOrder> {
        Box::new(Predicted {
            noise: (self.output_error > 0.0).then_some(self.output_error),
            rng: substream(seed, Stream::Predictor, instance as u64),
        })
    }
}

pub(super) struct Predicted {
    /// σ of the lognormal noise (median 1).
    noise: Option<f64>,
    rng: SimRng,
}

impl QueueOrder for Predicted {
    fn place(&mut self, s: &Seq) -> (usize, u64) {
        let factor = match self.noise {
            Some(sigma) => crate::rng::lognormal(&mut self.rng, 0.0, sigma),
            None => 1.0,
        };
        let predicted = (s.output as f64 * factor).round() as u64;
        (0, s.prompt as u64 + predicted)
    }
}
