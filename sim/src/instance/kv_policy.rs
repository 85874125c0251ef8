//! KV allocation policy: paged blocks on demand (vLLM), or each request's maximum length
//! reserved up front (older frameworks), and the KV data type of an instance group.
//!
//! Reserving the maximum length wastes the blocks a request never fills: fewer requests fit at
//! once, so batches are smaller and throughput lower at equal memory. fp8 KV halves the bytes
//! per token and so doubles the blocks.

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::spec::{Dtype, ModelSpec};

/// How KV blocks are given to requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Allocation {
    /// Blocks as the context grows (vLLM's paged attention).
    #[default]
    Paged,
    /// At admission, blocks for the prompt plus `reserve_output_tokens` (capped at
    /// `max_model_len`).
    ReserveMax,
}

/// `[scheduler.kv_cache]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KvCacheSection {
    /// `paged` (default) or `reserve-max`.
    pub(crate) allocation: Allocation,
    /// Output tokens reserved per request with `reserve-max`. Default: up to `max_model_len`.
    pub(crate) reserve_output_tokens: Option<u64>,
    /// With `reserve-max`: reserve each request's own output length (the `max_tokens` its
    /// client sent), as TensorRT-LLM's default `GUARANTEED_NO_EVICT` capacity scheduler does.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) reserve_request_output: bool,
    /// KV data type of this group, overriding `model.kv_dtype`: `bf16` or `fp8`.
    pub(crate) dtype: Option<Dtype>,
}

impl KvCacheSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(r) = self.reserve_output_tokens {
            check(r >= 1, path, "reserve_output_tokens", "must be ≥ 1", r)?;
            check(
                !self.reserve_request_output,
                path,
                "reserve_request_output",
                "give either reserve_output_tokens or reserve_request_output",
                "both",
            )?;
        }
        if self.reserve_request_output {
            check(
                self.allocation == Allocation::ReserveMax,
                path,
                "reserve_request_output",
                "needs allocation = \"reserve-max\" (paged blocks reserve nothing up front)",
                "allocation = \"paged\"",
            )?;
        }
        Ok(())
    }

    /// The model as this group stores its KV.
    pub fn model(&self, m: &ModelSpec) -> ModelSpec {
        let mut m = m.clone();
        if let Some(d) = self.dtype {
            m.kv_dtype = d;
        }
        m
    }

    /// Tokens reserved at admission for a prompt of `prompt` tokens that asks for up to
    /// `output` (0 = paged: nothing up front).
    pub fn reservation(&self, prompt: u64, output: u64, max_model_len: u64) -> u64 {
        match self.allocation {
            Allocation::Paged => 0,
            Allocation::ReserveMax => {
                let out = match self.reserve_output_tokens {
                    Some(r) => r,
                    None if self.reserve_request_output => output,
                    None => max_model_len,
                };
                (prompt + out).min(max_model_len)
            }
        }
    }

    /// TensorRT-LLM's default: each request's prompt and its own output reserved at admission.
    pub(crate) fn trtllm() -> KvCacheSection {
        KvCacheSection { allocation: Allocation::ReserveMax, reserve_request_output: true, ..KvCacheSection::default() }
    }
}
