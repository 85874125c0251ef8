//! Batch forming: which requests run in the next iteration and how many tokens each processes.
//!
//! A policy assigns each running request its tokens for the iteration (`Seq::step`: one decode
//! token, a prefill chunk, a whole prompt, or a speculative step), grows its KV blocks (which
//! may preempt the most recently admitted requests), and admits waiting ones, using the
//! instance's helpers. The instance then turns the running set into a [`crate::cost::BatchShape`]
//! of aggregates, so an iteration costs O(1) in the cost model.

pub(crate) mod chunked;
pub(crate) mod continuous;
pub(crate) mod sglang;
pub(crate) mod static_batch;
pub(crate) mod vllm_v1;

use serde::Serialize;

use super::Instance;
use crate::config::{ConfigError, Empty};
use crate::metrics::Observer;
use crate::tagged_enum;
use crate::time::SimTime;

/// `[scheduler.batching]` (`kind = "..."`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum BatchingSpec {
    Continuous(continuous::Continuous),
    Static(Empty),
    Chunked(chunked::Chunked),
    VllmV1(vllm_v1::VllmV1),
    Sglang(sglang::Sglang),
}

tagged_enum!(BatchingSpec {
    "continuous" => Continuous(continuous::Continuous),
    "static" => Static(Empty),
    "chunked" => Chunked(chunked::Chunked),
    "vllm-v1" => VllmV1(vllm_v1::VllmV1),
    "sglang" => Sglang(sglang::Sglang),
});

impl Default for BatchingSpec {
    fn default() -> Self {
        BatchingSpec::Continuous(continuous::Continuous::default())
    }
}

impl BatchingSpec {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        match self {
            BatchingSpec::VllmV1(v) => v.validate(path),
            BatchingSpec::Sglang(s) => s.validate(path),
            _ => Ok(()),
        }
    }

    /// Whether prompts are split into chunks (so a prompt may exceed the token budget).
    pub(crate) fn is_chunked(&self) -> bool {
        matches!(self, BatchingSpec::Chunked(_) | BatchingSpec::VllmV1(_) | BatchingSpec::Sglang(_))
    }

    /// The most tokens one request computes in one iteration.
    pub(crate) fn chunk_cap(&self) -> u64 {
        match self {
            BatchingSpec::VllmV1(v) => v.chunk_cap(),
            _ => u64::MAX,
        }
    }

    /// Whether admissions keep `scheduler.watermark` free (vLLM V1 and SGLang keep none).
    pub(crate) fn keeps_watermark(&self) -> bool {
        !matches!(self, BatchingSpec::VllmV1(_) | BatchingSpec::Sglang(_))
    }
}

/// Forms the next iteration's batch on `inst`.
pub(super) fn form(inst: &mut Instance, now: SimTime, rec: &mut dyn Observer) {
    match inst.cfg.policy.batching.clone() {
        BatchingSpec::Continuous(c) => continuous::form(inst, now, &c, rec),
        BatchingSpec::Static(_) => static_batch::form(inst, now, rec),
        BatchingSpec::Chunked(c) => chunked::form(inst, now, &c, rec),
        BatchingSpec::VllmV1(_) => vllm_v1::form(inst, now, rec),
        BatchingSpec::Sglang(s) => sglang::form(inst, now, &s, rec),
    }
}
