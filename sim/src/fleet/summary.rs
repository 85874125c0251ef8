//! The fleet's part of the run summary, and its columns of the time series.

use serde::Serialize;

use super::Fleet;
use crate::metrics::{meets_slo, Recorder};
use crate::scenario::SloSection;
use crate::time::SimTime;

/// `summary.json` → `fleet`: how many instances the run paid for, what they cost, and what
/// failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FleetSummary {
    /// Instances provisioned at time zero (down ones included).
    pub instances_initial: u32,
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
    pub priced_gpus: Vec<String>,
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

/// Fills the fleet's columns of the time series (instances provisioned and ready, failures and
/// restarts per window) and each window's SLO attainment (of the requests that arrived in it).
pub fn fill_series(rec: &mut Recorder, fleet: &Fleet, slo: &SloSection) {
    let width = rec.window();
    let n = rec.series.len();
    if n == 0 {
        return;
    }
    let log = fleet.log();
    let mut k = 0; // the log entry in force at the window's start
    for row in rec.series.iter_mut() {
        let (start, end) = (row.start, row.start + width);
        while k + 1 < log.len() && log[k + 1].at <= start {
            k += 1;
        }
        let (mut provisioned, mut ready, mut kv) = (0u128, 0u128, 0u128);
        for j in k..log.len() {
            let from = log[j].at.max(start);
            let to = log.get(j + 1).map_or(end, |l| l.at.min(end));
            if from >= end {
                break;
            }
            let dt = to.saturating_sub(from).0 as u128;
            provisioned += dt * log[j].provisioned as u128;
            ready += dt * log[j].ready as u128;
            kv += dt * log[j].kv_blocks as u128;
        }
        let w = width.0.max(1) as f64;
        row.instances_mean = provisioned as f64 / w;
        row.instances_ready_mean = ready as f64 / w;
        row.kv_blocks_mean = kv as f64 / w;
    }
    let index = |t: SimTime| ((t.0 / width.0.max(1)) as usize).min(n - 1);
    for &t in fleet.failures_at() {
        rec.series[index(t)].failures += 1;
    }
    for &t in fleet.restarts_at() {
        rec.series[index(t)].restarts += 1;
    }
    let mut met = vec![(0u64, 0u64); n];
    for r in &rec.records {
        let w = &mut met[index(r.arrival)];
        w.0 += meets_slo(r, slo) as u64;
        w.1 += 1;
    }
    for (row, (m, total)) in rec.series.iter_mut().zip(met) {
        row.slo_attainment = (total > 0).then(|| m as f64 / total as f64);
    }
}
