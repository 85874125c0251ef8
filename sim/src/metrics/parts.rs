//! The parts of `summary.json` that fleet dynamics and disaggregation fill in: their types live
//! here, with the summary, so that the metrics depend on no runtime component.

use serde::{Deserialize, Serialize};

use super::Dist;

/// `summary.json` → `fleet`: how many instances the run paid for, what they cost, and what
/// failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetSummary {
    /// Instances provisioned at time zero (down ones included).
    pub(crate) instances_initial: u32,
    /// Time-weighted mean of instances provisioned (starting, serving, draining, failed and
    /// restarting ones all cost money) over the simulated time.
    pub instances_mean: f64,
    /// Time-weighted mean of instances serving.
    pub instances_ready_mean: f64,
    pub instances_min: u32,
    pub instances_max: u32,
    /// Instance-hours provisioned over the simulated time.
    pub instance_hours: f64,
    pub gpu_hours: f64,
    /// GPU-hours × `[plan] price_per_gpu_hour` of each group's GPU, when every one is priced.
    pub cost: Option<f64>,
    /// `cost` at this run's mean rate, for 24 hours.
    pub cost_per_day: Option<f64>,
    /// The GPUs priced (empty without prices).
    pub(crate) priced_gpus: Vec<String>,
    pub failures: u64,
    pub crashes: u64,
    pub hangs: u64,
    /// Instances back in service after a failure.
    pub restarts: u64,
    /// Requests re-routed after their instance failed (a request retried twice counts twice).
    pub retries: u64,
    /// Requests lost to failures (also in `requests.lost`).
    pub lost: u64,
    /// Instances the autoscaler added and removed.
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Start-up delay of an instance of each group, s (weights ÷ load bandwidth + init).
    pub startup_s: Vec<f64>,
}

/// One pool's share of the work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolSummary {
    pub instances: u32,
    pub gpus: u64,
    pub iterations: u64,
    /// Mean and largest sequences per iteration.
    pub batch_mean: f64,
    pub batch_max: u64,
    /// Time in iterations / (instances × simulated time).
    pub busy_fraction: f64,
}

/// The `disaggregation` key of the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DisaggSummary {
    pub prefill: PoolSummary,
    pub decode: PoolSummary,
    /// KV transfers started (requests with more than one output token that got decode blocks).
    pub transfers: u64,
    /// Bytes moved over all GPU links together.
    pub transfer_bytes: u64,
    /// Link time per transfer (latency + bytes / bandwidth), measured requests.
    pub transfer_ms: Dist,
    /// From the first token to the transfer's start: the wait for the decode instance's KV
    /// blocks (and a batch slot), measured requests.
    pub transfer_wait_ms: Dist,
    /// Per finished measured request: (finish − KV arrival on the decode instance) / (output −
    /// 1): the TPOT the decode pool delivers, without the transfer and the wait.
    pub decode_tpot_ms: Dist,
}
