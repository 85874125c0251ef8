//! TensorRT-LLM's batch waiting (`[scheduler] batch_wait`).
//!
//! With `batch_wait_timeout_iters` or `batch_wait_max_tokens_ratio` set (both 0, off, by
//! default: `TorchLlmArgs`, `tensorrt_llm/llmapi/llm_args.py`, NVIDIA/TensorRT-LLM fcd3f316),
//! TensorRT-LLM's executor holds back an iteration's context requests while generation requests
//! run, so that prompts gather into fuller batches (`PyExecutor._waiting_requests`,
//! `tensorrt_llm/_torch/pyexecutor/py_executor.py`): when the scheduler picked both context and
//! generation requests, the contexts run only if the iterations waited so far reached
//! `timeout_iters`, or the picked tokens — every picked prompt's whole length plus one per
//! generation request — reach `max_tokens_ratio × max_num_tokens`; then the count restarts, else
//! it grows by one and only the generation requests run. Without generation requests, or without
//! contexts, nothing waits and the count stays. Both tests are `>=`, so either limit left at 0
//! stops every wait: only both together hold prompts back. TensorRT-LLM skips it under attention
//! DP, which has its own balancing (`instance::adp`).

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};

/// `[scheduler] batch_wait`: TensorRT-LLM's `batch_wait_timeout_iters` and
/// `batch_wait_max_tokens_ratio`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct BatchWaitSection {
    /// Iterations context requests wait at most. Default 0 (TensorRT-LLM's: they never wait).
    pub(crate) timeout_iters: u32,
    /// Context requests stop waiting once the iteration's picked tokens reach this fraction of
    /// `max_num_batched_tokens`. Default 0.
    pub(crate) max_tokens_ratio: f64,
}

impl Default for BatchWaitSection {
    fn default() -> Self {
        BatchWaitSection { timeout_iters: 0, max_tokens_ratio: 0.0 }
    }
}

impl BatchWaitSection {
    /// Left as by default (not written into a resolved scenario).
    pub(crate) fn is_default(&self) -> bool {
        *self == BatchWaitSection::default()
    }

    /// Whether either limit is set (TensorRT-LLM's `enable_batch_waiting`).
    pub(crate) fn is_on(&self) -> bool {
        self.timeout_iters > 0 || self.max_tokens_ratio > 0.0
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(
            (0.0..=1.0).contains(&self.max_tokens_ratio),
            path,
            "max_tokens_ratio",
            "must be in [0, 1] (TensorRT-LLM's batch_wait_max_tokens_ratio)",
            self.max_tokens_ratio,
        )
    }
}

/// The batch waiting's count across an instance's iterations.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BatchWait {
    timeout_iters: u32,
    threshold: f64,
    waited: u32,
}

impl BatchWait {
    /// `None` when neither limit is set ([`BatchWaitSection::is_on`]).
    pub(crate) fn new(s: &BatchWaitSection, max_num_tokens: u64) -> Option<BatchWait> {
        s.is_on().then_some(BatchWait {
            timeout_iters: s.timeout_iters,
            threshold: s.max_tokens_ratio * max_num_tokens as f64,
            waited: 0,
        })
    }

    /// Whether this iteration's contexts wait, given the tokens of the contexts the scheduler
    /// would pick and its generation requests; advances the count.
    pub(crate) fn hold(&mut self, context_tokens: u64, generation: u64) -> bool {
        if context_tokens == 0 || generation == 0 {
            return false;
        }
        if self.waited >= self.timeout_iters || (context_tokens + generation) as f64 >= self.threshold {
            self.waited = 0;
            false
        } else {
            self.waited += 1;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(timeout: u32, ratio: f64) -> BatchWait {
        BatchWait::new(&BatchWaitSection { timeout_iters: timeout, max_tokens_ratio: ratio }, 16384).expect("on")
    }

    #[test]
    fn off_by_default() {
        assert_eq!(BatchWait::new(&BatchWaitSection::default(), 16384), None);
    }

    /// InferenceX's Llama-3.1-70B 1k/1k recipe (timeout 20, ratio 0.9, max_num_tokens 16384): a
    /// 1,024-token prompt beside 3 decodes is 1,027 tokens, far under 14,745.6: it waits 20
    /// iterations and runs on the 21st, and the count restarts.
    #[test]
    fn a_prompt_waits_timeout_iterations_unless_enough_tokens_gather() {
        let mut w = wait(20, 0.9);
        for _ in 0..20 {
            assert!(w.hold(1024, 3));
        }
        assert!(!w.hold(1024, 3));
        assert!(w.hold(1024, 3), "the count restarted");
        // 14 such prompts and 3 decodes pick 14,339 tokens (< 14,745.6): they wait; 15 (15,363) go.
        let mut w = wait(20, 0.9);
        assert!(w.hold(14 * 1024, 3));
        assert!(!w.hold(15 * 1024, 3));
    }

    /// Without generation requests or without contexts nothing waits, and the count stays.
    /// Either limit alone never holds: with ratio 0 any count of tokens reaches 0 × max, and
    /// with timeout 0 the count has always reached it (`>=` in both of TensorRT-LLM's tests).
    #[test]
    fn nothing_waits_without_both_kinds_or_without_both_limits() {
        let mut w = wait(5, 0.5);
        assert!(w.hold(100, 1));
        assert!(!w.hold(100, 0));
        assert!(!w.hold(0, 4));
        for _ in 0..3 {
            assert!(w.hold(100, 1));
        }
        assert!(w.hold(100, 1) && !w.hold(100, 1), "1 + 3 + 1 = 5 iterations waited, then it runs");
        assert!(!wait(5, 0.0).hold(100, 1));
        assert!(!wait(0, 0.9).hold(100, 1));
    }
}
