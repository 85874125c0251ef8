//! Capacity weights: how much more an instance serves than another, for weighted routing.
//!
//! The weight of an instance is the decode throughput (tokens per second) of a reference
//! iteration under its own cost model: [`REFERENCE_BATCH`] sequences (fewer when its
//! `max_num_seqs` or its KV blocks allow fewer) each attending to [`REFERENCE_CONTEXT`] tokens.
//! It grows with the GPU's bandwidth and FLOP/s, the TP degree, and shrinks when the KV cache
//! or the scheduler caps the batch. Only ratios between instances matter.

use crate::cost::{BatchShape, CostModel};
use crate::instance::InstanceConfig;

/// Sequences in the reference batch.
pub const REFERENCE_BATCH: u64 = 64;
/// Context of each sequence of the reference batch, tokens.
pub const REFERENCE_CONTEXT: u64 = 1024;

/// The capacity weight of an instance with these limits and this cost model (> 0).
pub fn capacity_weight(cfg: &InstanceConfig, cost: &dyn CostModel) -> f64 {
    // An instance's DP attention ranks each hold their own limits and blocks.
    let ranks = cfg.dp_ranks.max(1) as u64;
    let kv_seqs = (cfg.kv_blocks as u64 * ranks * cfg.block_tokens / REFERENCE_CONTEXT).max(1);
    let n = REFERENCE_BATCH.min(cfg.max_num_seqs as u64 * ranks).min(kv_seqs).max(1);
    let mut b = BatchShape::default();
    for _ in 0..n {
        b.add_decode(REFERENCE_CONTEXT);
    }
    n as f64 / cost.iteration_time(&b).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::LinearCost;
    use crate::router::testing::config;

    #[test]
    fn weight_is_reference_throughput() {
        let c = LinearCost { base_us: 5000.0, per_token_us: 50.0, per_seq_us: 0.0 };
        // 64 decodes: 5 ms + 64 × 50 µs = 8.2 ms → 64 / 0.0082 tokens/s.
        let w = capacity_weight(&config(10_000), &c);
        assert!((w - 64.0 / 0.0082).abs() < 1e-6, "{w}");
        // KV for only 3 sequences of 1,024 tokens (192 blocks of 16): a batch of 3.
        let w3 = capacity_weight(&config(192), &c);
        assert!((w3 - 3.0 / 0.00515).abs() < 1e-6, "{w3}");
    }
}
