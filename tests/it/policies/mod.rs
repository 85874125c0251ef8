//! Tests of the serving policies: one module per policy family, each
//! showing the policy's characteristic effect (and its cost) on a small scenario, plus every
//! policy run through the invariants after every event and checked for determinism.

mod admission;
mod batching;
mod cpu;
mod invariants;
mod kv;
mod preemption;
mod prefix;
mod queue;
mod scenarios;
mod speculative;

use servesim_sim::engine::{RunOutput, Simulation};
use servesim_sim::metrics::{RequestRecord, Status};

pub use crate::common::*;

/// The finished requests' records.
pub fn finished(out: &RunOutput) -> impl Iterator<Item = &RequestRecord> {
    out.recorder.records.iter().filter(|r| r.status == Status::Finished)
}

pub fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        s / n as f64
    }
}

pub fn max(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::NEG_INFINITY, f64::max)
}

/// A llama-3-8b on one H100 with `scheduler` (TOML lines under `[scheduler]`, may open
/// sub-tables) serving `workload` (lines under `[workload]`).
pub fn h100(scheduler: &str, workload: &str) -> String {
    llama8b(workload, &format!("[scheduler]\n{scheduler}\n"))
}

/// The tiny model on a small GPU with `kv_gib` of memory: KV runs out quickly, so preemption,
/// rejection and queueing all happen in a short run.
pub fn tiny(kv_gib: f64, scheduler: &str, workload: &str) -> String {
    format!(
        "[model]\nname = \"tiny\"\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n\
         intermediate = 1024\nvocab = 1000\nmax_context = 4096\n\
         [gpu]\nname = \"small\"\nbf16_tflops = 50\nhbm_gb_per_s = 200\nmemory_gib = {kv_gib}\n\
         interconnect_gb_per_s = 50\npcie_gb_per_s = 16\n\
         [memory]\nreserve_gib = 0\ngpu_memory_utilization = 1.0\n[scheduler]\n{scheduler}\n[workload]\n{workload}\n"
    )
}
