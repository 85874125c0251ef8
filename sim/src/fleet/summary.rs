//! The fleet's part of the run summary, and its columns of the time series.

use super::Fleet;
pub(crate) use crate::metrics::FleetSummary;
use crate::metrics::SloSection;
use crate::metrics::{meets_slo, Recorder};
use crate::time::SimTime;

/// Fills the fleet's columns of the time series (instances provisioned and ready, failures and
/// restarts per window) and each window's SLO attainment (of the requests that arrived in it).
pub(crate) fn fill_series(rec: &mut Recorder, fleet: &Fleet, slo: &SloSection) {
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
