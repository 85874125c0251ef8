//! Speculative decoding: a draft model proposes `k` tokens per decoding request, the target
//! model verifies them in one forward pass of k + 1 tokens per request, and each proposed token
//! is accepted with probability `acceptance` (α) until the first rejection; the verification
//! always yields one more token (the correction, or a bonus token when all k are accepted).
//!
//! ```text
//!   step cost   = k draft passes over the decoding requests + one target pass in which each
//!                 request verifies k + 1 tokens (attending to its whole context)
//!   tokens/step = 1 + accepted, accepted ~ leading successes of k Bernoulli(α)
//!               = (1 − α^(k+1)) / (1 − α) on average
//! ```
//! At batch 1 decoding is memory-bound, so verifying k + 1 tokens costs about one decode and
//! the gain is the tokens per step; at large batches the verification becomes compute-bound
//! and the gain shrinks; at low α the draft passes are wasted and speculation loses.

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::cost::RooflineParams;
use crate::memory::{MemoryBudget, MemoryError};
use crate::spec::ModelSection;
use crate::spec::{GpuSpec, ModelSpec};

/// `[scheduler.speculative]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpeculativeSection {
    /// Tokens proposed per step.
    pub(crate) k: u32,
    /// Probability each proposed token is accepted (α).
    pub(crate) acceptance: f64,
    /// Cost of one draft pass as a fraction of a target decode iteration over the same
    /// requests. Give this or `draft`.
    pub(crate) draft_cost_fraction: Option<f64>,
    /// The draft model (a `[model]`-like table: a preset or dimensions); it runs on the same
    /// GPUs with the same TP, and its weights and KV take memory from the KV cache.
    pub(crate) draft: Option<ModelSection>,
}

impl SpeculativeSection {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check((1..=16).contains(&self.k), path, "k", "must be in [1, 16]", self.k)?;
        check(
            self.acceptance.is_finite() && (0.0..1.0).contains(&self.acceptance),
            path,
            "acceptance",
            "must be in [0, 1)",
            self.acceptance,
        )?;
        match (&self.draft_cost_fraction, &self.draft) {
            (Some(f), None) => {
                check(f.is_finite() && *f > 0.0 && *f <= 10.0, path, "draft_cost_fraction", "must be in (0, 10]", f)
            }
            (None, Some(d)) => d.resolve(&format!("{path}.draft")).map(|_| ()),
            _ => Err(ConfigError::at(path, "give exactly one of draft_cost_fraction and draft".into())),
        }
    }

    /// Expected tokens per step: (1 − α^(k+1)) / (1 − α).
    #[cfg(test)]
    pub(crate) fn expected_tokens(&self) -> f64 {
        let a = self.acceptance;
        (1.0 - a.powi(self.k as i32 + 1)) / (1.0 - a)
    }
}

/// How a draft pass is costed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DraftCost {
    /// A fraction of the target's decode iteration over the same requests.
    Fraction(f64),
    /// A roofline of the draft model on the same GPUs (without the per-iteration CPU overhead,
    /// which the target's iteration already pays).
    Model(Box<DraftModel>),
}

/// A draft model on the target's GPUs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DraftModel {
    pub(crate) model: ModelSpec,
    pub(crate) gpu: GpuSpec,
    pub(crate) tp: u64,
    pub(crate) params: RooflineParams,
}

/// Takes a draft model's weights (per GPU) and KV bytes per token out of the KV budget: the
/// draft keeps a KV cache for the same tokens as the target, so each block holds both.
pub(crate) fn plan_draft_memory(m: &mut MemoryBudget, draft: &ModelSpec, tp: u64) -> Result<(), MemoryError> {
    let weights = draft.weight_bytes_per_gpu(tp);
    if weights >= m.kv_bytes {
        return Err(MemoryError::DraftWeights {
            weights: weights as f64 / crate::memory::GIB,
            kv: m.kv_bytes as f64 / crate::memory::GIB,
        });
    }
    m.weight_bytes += weights;
    m.kv_bytes -= weights;
    m.kv_bytes_per_token += draft.kv_bytes_per_token_per_gpu(tp);
    m.block_bytes = m.kv_bytes_per_token * m.block_tokens;
    m.kv_blocks = m.kv_bytes / m.block_bytes;
    if m.kv_blocks == 0 {
        return Err(MemoryError::DraftNoKvBlock);
    }
    Ok(())
}

/// Proposed tokens accepted in one step: leading successes among `k` trials of probability α.
pub(crate) fn accepted(rng: &mut SimRng, k: u32, alpha: f64) -> u32 {
    let mut n = 0;
    while n < k && rng.random::<f64>() < alpha {
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Stream};

    #[test]
    fn mean_tokens_per_step_match_the_formula() {
        for (k, a) in [(4u32, 0.8), (4, 0.2), (2, 0.5), (8, 0.9)] {
            let s = SpeculativeSection { k, acceptance: a, draft_cost_fraction: Some(0.1), draft: None };
            let mut rng = substream(5, Stream::Speculation, 0);
            let n = 200_000;
            let mean = (0..n).map(|_| 1 + accepted(&mut rng, k, a)).sum::<u32>() as f64 / n as f64;
            assert!((mean / s.expected_tokens() - 1.0).abs() < 0.01, "k {k} α {a}: {mean} vs {}", s.expected_tokens());
        }
    }
}
