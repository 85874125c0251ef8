//! TensorRT-LLM's attention-DP context balancing (`cluster.attention_dp_config`).
//!
//! With `enable_attention_dp` and `attention_dp_config.enable_balance`, TensorRT-LLM's executor
//! holds back every rank's new context requests until all ranks have one, so that prefills run
//! on all ranks in the same lock-step iteration (`PyExecutor._balance_adp_requests`,
//! `tensorrt_llm/_torch/pyexecutor/py_executor.py`, NVIDIA/TensorRT-LLM; the rule is the same in
//! the 1.x releases; `AttentionDpConfig` in `tensorrt_llm/llmapi/llm_args.py`, fcd3f316: off by
//! default, `timeout_iters` 50, `batching_wait_iters` 10). Each iteration, after every rank has
//! scheduled, the ranks exchange their counts of context and generation requests; then
//!
//! - when every rank has a free slot (fewer generation requests than `max_batch_size`) and a
//!   context request, the wait counter is reset and the contexts run — unless every rank also
//!   has generation requests, in which case they wait `batching_wait_iters` iterations first;
//! - otherwise the wait counter grows by one and the contexts wait, unless it reached
//!   `timeout_iters` (then it is reset and they run) or some rank has no generation request
//!   (they run at once). The counter grows in iterations without any context request too, so
//!   it runs through 0 … `timeout_iters` in a steady decode and a lone context request waits
//!   for it to come round.
//!
//! A rank with no request at all runs a dummy generation request (`_pad_attention_dp_dummy_request`),
//! so it counts as having one.

use serde::{Deserialize, Serialize};

/// `[cluster] attention_dp_config`: TensorRT-LLM's `attention_dp_config`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AttentionDpConfig {
    /// Hold context requests until every rank has one. Default false (TensorRT-LLM's).
    pub(crate) enable_balance: bool,
    /// Iterations after which waiting context requests run anyway. Default 50.
    pub(crate) timeout_iters: u32,
    /// Iterations context requests wait for more to batch with when every rank has some and
    /// every rank also decodes. Default 10.
    pub(crate) batching_wait_iters: u32,
}

impl Default for AttentionDpConfig {
    fn default() -> Self {
        AttentionDpConfig { enable_balance: false, timeout_iters: 50, batching_wait_iters: 10 }
    }
}

/// What the balancing reads of one rank at the start of an iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RankWork {
    /// A context request (a waiting prompt with a free slot, or one in the middle of its
    /// prefill) would run.
    pub(crate) context: bool,
    /// Requests decoding (a rank with none at all counts one: its dummy request).
    pub(crate) generation: u32,
}

/// The balancing's state across an instance's iterations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContextBalance {
    timeout_iters: u32,
    batching_wait_iters: u32,
    waiting_iters: u32,
    batching_iters: u32,
}

impl ContextBalance {
    /// `None` unless `enable_balance`.
    pub(crate) fn new(c: &AttentionDpConfig) -> Option<ContextBalance> {
        c.enable_balance.then_some(ContextBalance {
            timeout_iters: c.timeout_iters,
            batching_wait_iters: c.batching_wait_iters,
            waiting_iters: 0,
            batching_iters: 0,
        })
    }

    /// Whether this iteration's context requests wait on every rank, given the ranks' work and
    /// the limit on generation requests per rank (`max_num_seqs`, TensorRT-LLM's
    /// `max_batch_size`); advances the counters.
    pub(crate) fn hold(&mut self, ranks: &[RankWork], max_batch: u32) -> bool {
        let free_slots = ranks.iter().all(|r| r.generation < max_batch);
        let context = ranks.iter().all(|r| r.context);
        let generation = ranks.iter().all(|r| r.generation > 0);
        if free_slots && context {
            self.waiting_iters = 0;
            if generation {
                if self.batching_iters < self.batching_wait_iters {
                    self.batching_iters += 1;
                    return true;
                }
                self.batching_iters = 0;
            }
            false
        } else {
            self.waiting_iters += 1;
            if self.waiting_iters >= self.timeout_iters || !generation {
                self.waiting_iters = 0;
                false
            } else {
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(context: bool, generation: u32) -> RankWork {
        RankWork { context, generation }
    }

    fn balance(timeout: u32, wait: u32) -> ContextBalance {
        let c = AttentionDpConfig { enable_balance: true, timeout_iters: timeout, batching_wait_iters: wait };
        ContextBalance::new(&c).expect("enabled")
    }

    /// TensorRT-LLM's defaults: balancing off.
    #[test]
    fn off_by_default() {
        assert_eq!(ContextBalance::new(&AttentionDpConfig::default()), None);
    }

    /// By hand from `_balance_adp_requests`: with timeout 3 and every rank decoding, a context
    /// on one rank of two waits while the counter runs 1, 2 and goes at 3; the counter ran
    /// through iterations without any context too, so a context arriving after two idle
    /// iterations goes on the next.
    #[test]
    fn a_lone_context_waits_for_the_timeout() {
        let mut b = balance(3, 0);
        let lone = [r(true, 4), r(false, 4)];
        assert!(b.hold(&lone, 8));
        assert!(b.hold(&lone, 8));
        assert!(!b.hold(&lone, 8), "the third iteration reaches timeout_iters = 3");
        // Steady decode: the counter keeps running and wraps.
        let idle = [r(false, 4), r(false, 4)];
        assert!(b.hold(&idle, 8)); // 1 (nothing to hold: the answer is moot)
        assert!(b.hold(&idle, 8)); // 2
        assert!(!b.hold(&lone, 8), "the counter reaches 3 on the context's first iteration");
    }

    /// Every rank with a context and a free slot: at once without batching_wait_iters, after
    /// that many iterations with it (when every rank also decodes), at once when some rank
    /// has no decode.
    #[test]
    fn all_ranks_with_contexts_run_together() {
        let all = [r(true, 4), r(true, 4)];
        assert!(!balance(60, 0).hold(&all, 8));
        let mut b = balance(60, 2);
        assert!(b.hold(&all, 8));
        assert!(b.hold(&all, 8));
        assert!(!b.hold(&all, 8));
        let fresh = [r(true, 0), r(true, 4)];
        assert!(!balance(60, 2).hold(&fresh, 8));
    }

    /// A rank without a decode (a fresh start) lets contexts run; a rank whose generation
    /// requests fill max_batch_size counts as not all free: the contexts wait for the timeout.
    #[test]
    fn no_decode_anywhere_or_full_ranks() {
        assert!(!balance(60, 0).hold(&[r(true, 0), r(false, 0)], 8));
        let mut b = balance(2, 0);
        let full = [r(true, 8), r(true, 3)];
        assert!(b.hold(&full, 8));
        assert!(!b.hold(&full, 8));
    }
}
