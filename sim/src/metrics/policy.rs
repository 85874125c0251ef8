//! Counters of the serving policies, and their parts of the summary.

use serde::{Deserialize, Serialize};

/// What the policies did over a run (all instances together).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyStats {
    /// Requests admitted for the first time with prefix caching on, and their prompt tokens.
    pub(crate) prefix_lookups: u64,
    pub(crate) prefix_lookup_tokens: u64,
    /// Of those: prompt tokens found cached, and requests with any.
    pub(crate) prefix_hit_tokens: u64,
    pub(crate) prefix_hit_requests: u64,
    /// Prefill tokens skipped thanks to the cache (first admissions and recomputations).
    pub(crate) prefix_saved_tokens: u64,
    /// Of the tokens found cached, those loaded from the CPU tier.
    pub(crate) prefix_cpu_hit_tokens: u64,
    /// Cached blocks evicted from the GPU (for space or by TTL), and of them copied to the CPU tier.
    pub(crate) prefix_evictions: u64,
    pub(crate) prefix_cpu_offloads: u64,
    pub(crate) swap_out_blocks: u64,
    /// Preemptions that wanted to swap but found the swap space full, and recomputed.
    pub(crate) swap_fallbacks: u64,
    /// Time iterations spent on host-link transfers (swap, CPU tier), ns.
    pub(crate) transfer_ns: u128,
    pub(crate) spec_steps: u64,
    pub(crate) spec_proposed: u64,
    pub(crate) spec_accepted: u64,
    /// Sum of iteration durations, of their CPU parts, and of the time the GPU did not compute.
    pub busy_ns: u128,
    pub(crate) cpu_ns: u128,
    pub(crate) gpu_wait_ns: u128,
    pub(crate) breaker_trips: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrefixCacheSummary {
    /// Cached prompt tokens / prompt tokens, over first admissions.
    pub hit_rate_tokens: f64,
    /// Requests with any cached prompt token / requests, over first admissions.
    pub hit_rate_requests: f64,
    pub prefill_tokens_saved: u64,
    pub cpu_hit_tokens: u64,
    pub evictions: u64,
    pub(crate) cpu_offloads: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwapSummary {
    pub swapped_out_blocks: u64,
    pub recompute_fallbacks: u64,
    /// Seconds iterations spent waiting for host-link transfers (swap and CPU tier).
    pub transfer_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeculativeSummary {
    pub steps: u64,
    /// Accepted / proposed draft tokens.
    pub acceptance_rate: f64,
    /// Output tokens per speculative step.
    pub tokens_per_step: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdmissionSummary {
    /// Times the circuit breaker opened.
    pub circuit_breaker_trips: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// Seconds instances spent in iterations.
    pub busy_s: f64,
    /// CPU overhead / busy time.
    pub overhead_fraction: f64,
    /// Share of busy time the GPU was not computing (waiting for the CPU or the host link).
    pub gpu_wait_fraction: f64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl PolicyStats {
    pub fn prefix_summary(&self) -> PrefixCacheSummary {
        PrefixCacheSummary {
            hit_rate_tokens: ratio(self.prefix_hit_tokens as f64, self.prefix_lookup_tokens as f64),
            hit_rate_requests: ratio(self.prefix_hit_requests as f64, self.prefix_lookups as f64),
            prefill_tokens_saved: self.prefix_saved_tokens,
            cpu_hit_tokens: self.prefix_cpu_hit_tokens,
            evictions: self.prefix_evictions,
            cpu_offloads: self.prefix_cpu_offloads,
        }
    }

    pub fn swap_summary(&self) -> SwapSummary {
        SwapSummary {
            swapped_out_blocks: self.swap_out_blocks,
            recompute_fallbacks: self.swap_fallbacks,
            transfer_s: self.transfer_ns as f64 * 1e-9,
        }
    }

    pub fn speculative_summary(&self) -> SpeculativeSummary {
        SpeculativeSummary {
            steps: self.spec_steps,
            acceptance_rate: ratio(self.spec_accepted as f64, self.spec_proposed as f64),
            tokens_per_step: ratio((self.spec_steps + self.spec_accepted) as f64, self.spec_steps as f64),
        }
    }

    pub fn admission_summary(&self) -> AdmissionSummary {
        AdmissionSummary { circuit_breaker_trips: self.breaker_trips }
    }

    pub fn cpu_summary(&self) -> CpuSummary {
        CpuSummary {
            busy_s: self.busy_ns as f64 * 1e-9,
            overhead_fraction: ratio(self.cpu_ns as f64, self.busy_ns as f64),
            gpu_wait_fraction: ratio(self.gpu_wait_ns as f64, self.busy_ns as f64),
        }
    }
}
