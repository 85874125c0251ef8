//! Preemption: what happens to a running request when the KV blocks run out.
//!
//! ```text
//!   recompute: blocks freed ─► waits first in line ─► prefills prompt + generated tokens again
//!   swap:      blocks copied to CPU memory over PCIe (time added to the iteration) ─► resumes
//!              before any new admission, copied back (time again); falls back to recompute
//!              when the CPU swap space is full
//! ```
//! Recomputation costs prefill compute, which grows with the context (quadratically in
//! attention); swapping costs 2 × KV bytes over the host link, linear in the context. Short
//! contexts are cheap to recompute (their tokens ride along in a memory-bound decode
//! iteration); long ones are cheaper to swap.

use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError, Empty};
use crate::tagged_enum;

/// `[scheduler.preemption]` (`kind = "..."`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum PreemptionSpec {
    Recompute(Empty),
    Swap(Swap),
}

tagged_enum!(PreemptionSpec {
    "recompute" => Recompute(Empty),
    "swap" => Swap(Swap),
});

impl Default for PreemptionSpec {
    fn default() -> Self {
        PreemptionSpec::Recompute(Empty {})
    }
}

/// `kind = "swap"`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Swap {
    /// CPU memory for swapped-out KV, GiB per GPU. Default 4 (vLLM's `swap_space`).
    pub(crate) cpu_swap_gib: f64,
}

impl Default for Swap {
    fn default() -> Self {
        Swap { cpu_swap_gib: 4.0 }
    }
}

impl PreemptionSpec {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        match self {
            PreemptionSpec::Recompute(_) => Ok(()),
            PreemptionSpec::Swap(s) => check(
                s.cpu_swap_gib.is_finite() && s.cpu_swap_gib > 0.0 && s.cpu_swap_gib < 1e6,
                path,
                "cpu_swap_gib",
                "must be > 0",
                s.cpu_swap_gib,
            ),
        }
    }

    /// CPU swap space in bytes per GPU (0 for recompute).
    pub(crate) fn swap_bytes(&self) -> u64 {
        match self {
            PreemptionSpec::Recompute(_) => 0,
            PreemptionSpec::Swap(s) => (s.cpu_swap_gib * crate::memory::GIB) as u64,
        }
    }
}
