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
    /// KV data type of this group, overriding `model.kv_dtype`: `bf16` or `fp8`.
    pub(crate) dtype: Option<Dtype>,
}

impl KvCacheSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(r) = self.reserve_output_tokens {
            check(r >= 1, path, "reserve_output_tokens", "must be ≥ 1", r)?;
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

    /// Tokens reserved at admission for a prompt of `prompt` tokens (0 = paged: nothing up
    /// front).
    pub fn reservation(&self, prompt: u64, max_model_len: u64) -> u64 {
        match self.allocation {
            Allocation::Paged => 0,
            Allocation::ReserveMax => {
                let out = self.reserve_output_tokens.unwrap_or(max_model_len);
                (prompt + out).min(max_model_len)
            }
        }
    }
}
