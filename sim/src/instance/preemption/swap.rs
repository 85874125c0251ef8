//! `kind = "swap"` (vLLM V0's `preemption_mode = "swap"`): a preempted request's blocks are
//! copied to CPU memory over PCIe (time added to the iteration) and copied back before any new
//! admission; when the swap space is full it is recomputed instead.

use serde::{Deserialize, Serialize};

use super::PreemptionPolicy;
use crate::config::{check, ConfigError};

/// `kind = "swap"`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Swap {
    /// CPU memory for swapped-out KV, GiB per GPU. Default 4 (vLLM's `swap_space`).
    pub(crate) cpu_swap_gib: f64,
}

impl Default for Swap {
    fn default() -> Self {
        Swap { cpu_swap_gib: 4.0 }
    }
}

impl PreemptionPolicy for Swap {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let g = self.cpu_swap_gib;
        check(g.is_finite() && g > 0.0 && g < 1e6, path, "cpu_swap_gib", "must be > 0", g)
    }

    fn swaps(&self) -> bool {
        true
    }

    fn swap_bytes(&self) -> u64 {
        (self.cpu_swap_gib * crate::memory::GIB) as u64
    }
}
