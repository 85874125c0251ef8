//! Speculative decoding: a draft model proposes `k` tokens per decoding request, the target
//! model verifies them in one forward pass of k + 1 tokens per request, and the proposed tokens
//! are accepted up to the first rejection; the verification always yields one more token (the
//! correction, or a bonus token when all k are accepted). How many are accepted is given one of
//! three ways:
//!
//! ```text
//!   acceptance = α            each token accepted with probability α until the first rejection:
//!                             tokens/step = (1 − α^(k+1)) / (1 − α) on average
//!   acceptance_rates = [r_i]  r_i = P(the first i + 1 tokens all accepted), non-increasing, as
//!                             vLLM logs them ("Per-position acceptance rate"): tokens/step = 1 + Σ r_i
//!   acceptance_length = L     the mean tokens per step engines log ("Mean acceptance length"),
//!                             as vLLM's synthetic rejection sampler resolves it: ⌊L − 1⌋ tokens
//!                             always accepted, one more with probability L − 1 − ⌊L − 1⌋
//!                             (`_acceptance_length_to_rates`, vllm/config/speculative.py at 0.34.0)
//!   step cost = k draft passes over the decoding requests + one target pass in which each
//!               request verifies k + 1 tokens (attending to its whole context)
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
    /// Probability each proposed token is accepted (α). Give this, `acceptance_rates` or
    /// `acceptance_length`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) acceptance: Option<f64>,
    /// Per position, the probability that the first i + 1 proposed tokens are all accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) acceptance_rates: Option<Vec<f64>>,
    /// Mean tokens per step (accepted + 1), in [1, k + 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) acceptance_length: Option<f64>,
    /// Cost of one draft pass as a fraction of a target decode iteration over the same
    /// requests (0: proposals cost no GPU time, as an n-gram lookup). Give this or `draft`.
    pub(crate) draft_cost_fraction: Option<f64>,
    /// The draft model (a `[model]`-like table: a preset or dimensions); it runs on the same
    /// GPUs with the same TP, and its weights and KV take memory from the KV cache.
    pub(crate) draft: Option<ModelSection>,
}

impl SpeculativeSection {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check((1..=16).contains(&self.k), path, "k", "must be in [1, 16]", self.k)?;
        self.validate_acceptance(path)?;
        match (&self.draft_cost_fraction, &self.draft) {
            (Some(f), None) => {
                check(f.is_finite() && *f >= 0.0 && *f <= 10.0, path, "draft_cost_fraction", "must be in [0, 10]", f)
            }
            (None, Some(d)) => d.resolve(&format!("{path}.draft")).map(|_| ()),
            _ => Err(ConfigError::at(path, "give exactly one of draft_cost_fraction and draft".into())),
        }
    }

    fn validate_acceptance(&self, path: &str) -> Result<(), ConfigError> {
        let k = self.k as usize;
        match (self.acceptance, &self.acceptance_rates, self.acceptance_length) {
            (Some(a), None, None) => {
                check(a.is_finite() && (0.0..1.0).contains(&a), path, "acceptance", "must be in [0, 1)", a)
            }
            (None, Some(r), None) => {
                let key = "acceptance_rates";
                check(r.len() == k, path, key, &format!("must have k = {k} entries, one per proposed token"), r.len())?;
                if let Some(x) = r.iter().find(|x| !(x.is_finite() && (0.0..=1.0).contains(*x))) {
                    return check(false, path, key, "each must be in [0, 1]", x);
                }
                match r.windows(2).position(|w| w[1] > w[0]) {
                    Some(i) => check(
                        false,
                        path,
                        key,
                        &format!(
                            "must not increase (each is the chance that every token up to it is accepted), got {} \
                             then {}",
                            r[i],
                            r[i + 1]
                        ),
                        format!("{r:?}"),
                    ),
                    None => Ok(()),
                }
            }
            (None, None, Some(l)) => check(
                l.is_finite() && (1.0..=k as f64 + 1.0).contains(&l),
                path,
                "acceptance_length",
                &format!("must be in [1, k + 1 = {}] (mean tokens per step, the bonus token included)", k + 1),
                l,
            ),
            _ => Err(ConfigError::at(
                path,
                "give exactly one of acceptance (α), acceptance_rates and acceptance_length".into(),
            )),
        }
    }

    /// How many proposed tokens a step accepts, as the simulator draws it.
    pub(crate) fn acceptance(&self) -> Acceptance {
        if let Some(a) = self.acceptance {
            return Acceptance::Geometric(a);
        }
        let mut rates = [0.0; 16];
        match (&self.acceptance_rates, self.acceptance_length) {
            (Some(r), _) => rates[..r.len()].copy_from_slice(r),
            (None, Some(l)) => {
                // vLLM's minimum-variance schedule: ⌊L − 1⌋ positions always, the next with
                // the fraction left.
                let drafts = l - 1.0;
                let full = (drafts.floor() as usize).min(self.k as usize);
                rates[..full].fill(1.0);
                if full < self.k as usize {
                    rates[full] = drafts - full as f64;
                }
            }
            (None, None) => {}
        }
        Acceptance::Rates(rates)
    }

    /// Expected tokens per step.
    #[cfg(test)]
    pub(crate) fn expected_tokens(&self) -> f64 {
        match self.acceptance() {
            Acceptance::Geometric(a) => (1.0 - a.powi(self.k as i32 + 1)) / (1.0 - a),
            Acceptance::Rates(r) => 1.0 + r[..self.k as usize].iter().sum::<f64>(),
        }
    }
}

/// The resolved acceptance of `[scheduler.speculative]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Acceptance {
    /// Each proposed token accepted with probability α until the first rejection.
    Geometric(f64),
    /// P(the first i + 1 proposed tokens all accepted), non-increasing, 0 past k.
    Rates([f64; 16]),
}

impl Acceptance {
    /// No speculation.
    pub(crate) const NONE: Acceptance = Acceptance::Geometric(0.0);
}

impl Default for Acceptance {
    fn default() -> Acceptance {
        Acceptance::NONE
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
/// draft keeps a KV cache for the same tokens as the target, so each block holds both. Under
/// DP attention (`dp` ranks of `tp / dp` GPUs) the draft is laid out as the target is: its
/// attention on each rank, its FFN over all `tp` GPUs, each rank's blocks its own.
pub(crate) fn plan_draft_memory(m: &mut MemoryBudget, draft: &ModelSpec, tp: u64, dp: u64) -> Result<(), MemoryError> {
    let dp = dp.max(1);
    let weights = draft.weight_bytes_per_gpu_dp(tp, dp);
    if weights >= m.kv_bytes {
        return Err(MemoryError::DraftWeights {
            weights: weights as f64 / crate::memory::GIB,
            kv: m.kv_bytes as f64 / crate::memory::GIB,
        });
    }
    m.weight_bytes += weights;
    m.kv_bytes -= weights;
    m.kv_bytes_per_token += draft.kv_bytes_per_token_per_gpu(tp / dp);
    m.block_bytes = m.kv_bytes_per_token * m.block_tokens;
    m.kv_blocks = m.kv_bytes / m.block_bytes * dp;
    if m.kv_blocks == 0 {
        return Err(MemoryError::DraftNoKvBlock);
    }
    Ok(())
}

/// Proposed tokens accepted in one step of `k` proposals: leading successes among `k` trials
/// of probability α, or with per-position rates, the positions one uniform draw falls under
/// (P(at least i + 1 accepted) = r_i, as the rates do not increase).
pub(crate) fn accepted(rng: &mut SimRng, k: u32, acceptance: &Acceptance) -> u32 {
    match acceptance {
        Acceptance::Geometric(alpha) => {
            let mut n = 0;
            while n < k && rng.random::<f64>() < *alpha {
                n += 1;
            }
            n
        }
        Acceptance::Rates(r) => {
            let u = rng.random::<f64>();
            r[..k as usize].iter().take_while(|&&x| u < x).count() as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Stream};

    fn section(k: u32, a: Option<f64>, rates: Option<Vec<f64>>, length: Option<f64>) -> SpeculativeSection {
        SpeculativeSection {
            k,
            acceptance: a,
            acceptance_rates: rates,
            acceptance_length: length,
            draft_cost_fraction: Some(0.1),
            draft: None,
        }
    }

    /// Accepted counts of `n` steps, by count.
    fn histogram(s: &SpeculativeSection, n: usize) -> Vec<usize> {
        let mut rng = substream(7, Stream::Speculation, 0);
        let mut h = vec![0; s.k as usize + 1];
        for _ in 0..n {
            h[accepted(&mut rng, s.k, &s.acceptance()) as usize] += 1;
        }
        h
    }

    /// vLLM's synthetic rejection sampler turns a mean acceptance length L into the
    /// minimum-variance schedule (`_acceptance_length_to_rates`, vllm/config/speculative.py at
    /// 0.34.0): L = 2.5 at k = 3 is rates [1, 0.5, 0], so every step accepts 1 or 2 tokens, half
    /// of them 2, and yields 2.5 tokens on average.
    #[test]
    fn an_acceptance_length_is_vllms_minimum_variance_schedule() {
        let s = section(3, None, None, Some(2.5));
        assert_eq!(
            s.acceptance(),
            Acceptance::Rates([1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        );
        assert_eq!(s.expected_tokens(), 2.5);
        let h = histogram(&s, 100_000);
        assert_eq!((h[0], h[3]), (0, 0), "{h:?}");
        assert!((h[2] as f64 / 100_000.0 - 0.5).abs() < 0.01, "{h:?}");
        // L = k + 1 accepts every token; L = 1 none.
        assert_eq!(histogram(&section(3, None, None, Some(4.0)), 1000), vec![0, 0, 0, 1000]);
        assert_eq!(histogram(&section(3, None, None, Some(1.0)), 1000), vec![1000, 0, 0, 0]);
    }

    /// Per-position rates as vLLM logs them ("Per-position acceptance rate: 0.739, 0.478,
    /// 0.261", unconditional): P(at least i + 1 accepted) = r_i, so P(exactly 1) = 0.739 − 0.478
    /// and the mean is 1 + 0.739 + 0.478 + 0.261 = 2.478 tokens a step.
    #[test]
    fn per_position_rates_give_each_count_its_share() {
        let s = section(3, None, Some(vec![0.739, 0.478, 0.261]), None);
        assert!((s.expected_tokens() - 2.478).abs() < 1e-12);
        let n = 200_000;
        let h = histogram(&s, n);
        for (i, want) in [(0, 0.261), (1, 0.261), (2, 0.217), (3, 0.261)] {
            assert!((h[i] as f64 / n as f64 - want).abs() < 0.005, "{i}: {h:?}");
        }
    }

    #[test]
    fn acceptance_is_refused_unless_one_form_holds_a_possible_value() {
        let e = |s: SpeculativeSection| s.validate("scheduler.speculative").unwrap_err().to_string();
        assert!(e(section(3, Some(0.7), None, Some(2.0))).contains("give exactly one of acceptance"));
        assert!(e(section(3, None, None, None)).contains("give exactly one of acceptance"));
        assert!(
            e(section(3, None, None, Some(4.5))).contains("must be in [1, k + 1 = 4]"),
            "{}",
            e(section(3, None, None, Some(4.5)))
        );
        assert!(e(section(3, None, Some(vec![0.8, 0.5]), None)).contains("must have k = 3 entries"));
        let up = e(section(3, None, Some(vec![0.8, 0.5, 0.6]), None));
        assert!(up.contains("must not increase") && up.contains("0.5 then 0.6"), "{up}");
        assert!(e(section(2, None, Some(vec![1.2, 0.5]), None)).contains("each must be in [0, 1]"));
        assert!(section(3, None, Some(vec![0.8, 0.5, 0.5]), None).validate("s").is_ok());
    }

    #[test]
    fn mean_tokens_per_step_match_the_formula() {
        for (k, a) in [(4u32, 0.8), (4, 0.2), (2, 0.5), (8, 0.9)] {
            let s = section(k, Some(a), None, None);
            let mut rng = substream(5, Stream::Speculation, 0);
            let n = 200_000;
            let mean = (0..n).map(|_| 1 + accepted(&mut rng, k, &s.acceptance())).sum::<u32>() as f64 / n as f64;
            assert!((mean / s.expected_tokens() - 1.0).abs() < 0.01, "k {k} α {a}: {mean} vs {}", s.expected_tokens());
        }
    }
}
