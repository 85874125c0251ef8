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

use crate::config::ConfigError;
use crate::policy_family;

policy_family!(
    /// `[scheduler.preemption]` (`kind = "..."`). A new kind is a file in this folder (its
    /// settings, implementing [`PreemptionPolicy`]) and a line here.
    pub enum PreemptionSpec: dyn PreemptionPolicy {
        "recompute" => Recompute(recompute::Recompute),
        "swap" => Swap(swap::Swap),
    }
);

/// What the scheduler asks of a preemption kind: where a preempted request's KV goes.
pub trait PreemptionPolicy {
    /// Checks the settings; `path` names the section in errors.
    fn validate(&self, _path: &str) -> Result<(), ConfigError> {
        Ok(())
    }
    /// Whether a preempted request's KV is copied to CPU swap space (when it has room) rather
    /// than freed and recomputed.
    fn swaps(&self) -> bool {
        false
    }
    /// CPU swap space per GPU, bytes (0: none).
    fn swap_bytes(&self) -> u64 {
        0
    }
}

impl Default for PreemptionSpec {
    fn default() -> Self {
        PreemptionSpec::Recompute(Recompute {})
    }
}

impl PreemptionSpec {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.spec().validate(path)
    }

    /// CPU swap space in bytes per GPU (0 for recompute).
    pub(crate) fn swap_bytes(&self) -> u64 {
        self.spec().swap_bytes()
    }

    /// Whether preempted requests are swapped out when the swap space has room.
    pub(crate) fn swaps(&self) -> bool {
        self.spec().swaps()
    }
}
