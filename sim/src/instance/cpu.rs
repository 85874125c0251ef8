//! CPU-side work per iteration (scheduling, input preparation, sampling, output processing),
//! per instance group.
//!
//! The cost model charges `cpu_overhead_base_us + cpu_overhead_per_seq_us × sequences` per
//! iteration (`[cost]`, from the engine named by `cost.overhead`); this section overrides them
//! per group and says whether the engine overlaps that work with the GPU. Without overlap the
//! GPU idles while the CPU works, every iteration; with overlap (vLLM V1's asynchronous
//! scheduling) an iteration takes max(GPU, CPU), and at high concurrency, where the CPU part
//! grows past the GPU part, the GPU still waits for the CPU.

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::cost::RooflineParams;

/// `[scheduler.cpu]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuSection {
    /// CPU time per iteration, µs. Default: `cost.cpu_overhead_base_us`.
    pub(crate) base_us: Option<f64>,
    /// Extra CPU time per sequence in the batch, µs. Default: `cost.cpu_overhead_per_seq_us`.
    pub(crate) per_seq_us: Option<f64>,
    /// Overlap CPU work with the GPU: an iteration takes max(GPU, CPU). Default: the engine
    /// overhead's (`cost.overhead`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<bool>,
}

impl CpuSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        for (key, v) in [("base_us", self.base_us), ("per_seq_us", self.per_seq_us)] {
            if let Some(v) = v {
                check(v.is_finite() && v >= 0.0, path, key, "must be ≥ 0", v)?;
            }
        }
        Ok(())
    }

    /// The cost model's constants with this group's CPU overheads.
    pub fn apply(&self, p: &RooflineParams) -> RooflineParams {
        let mut p = p.clone();
        if let Some(b) = self.base_us {
            p.cpu_overhead_base_us = b;
        }
        if let Some(s) = self.per_seq_us {
            p.cpu_overhead_per_seq_us = s;
        }
        p
    }
}
