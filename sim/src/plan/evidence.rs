//! What one run says about a configuration: whether it met the SLO, by how much, and why
//! requests missed — the evidence the plan reports and classifies.

use serde::{Deserialize, Serialize};

use crate::engine::RunOutput;
use crate::metrics::SloSection;
use crate::metrics::{meets_slo, Status};

/// Requests of the measured window that missed the SLO, by threshold (one request can miss
/// several), and by cause: slow decoding versus a slow start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Misses {
    pub(crate) ttft: u64,
    pub(crate) tpot: u64,
    pub(crate) e2e: u64,
    pub(crate) rejected: u64,
    /// In flight at the end, timed out, or lost to a failure.
    pub(crate) unfinished: u64,
    /// Missed because tokens came too slowly: TPOT over its limit, or only E2E over its limit
    /// with more time spent decoding than before the first token.
    pub(crate) slow_decode: u64,
    /// Every other miss: the first token came too late (waiting for admission, or behind other
    /// prefills), or the request never finished or was rejected.
    pub(crate) slow_start: u64,
}

/// One run of a configuration with one seed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeedResult {
    pub(crate) seed: u64,
    pub met: bool,
    pub attainment: f64,
    pub ttft_ms_p99: f64,
    pub tpot_ms_p99: f64,
    pub(crate) goodput_rps: f64,
    /// Peak fraction of the cluster's KV blocks in use.
    pub(crate) kv_peak: f64,
    pub(crate) preemptions: u64,
    pub(crate) measured: u64,
    /// Requests simulated (all, not only measured).
    pub(crate) requests: u64,
    pub(crate) misses: Misses,
    /// Output tokens of the measured requests finished, per second of the measured window.
    #[serde(default)]
    pub(crate) output_tokens_per_s: f64,
}

impl SeedResult {
    pub fn from_run(seed: u64, out: &RunOutput, slo: &SloSection) -> SeedResult {
        let rec = &out.recorder;
        let mut m = Misses::default();
        for r in rec.records.iter().filter(|r| rec.counts(r.arrival)) {
            match r.status {
                Status::Rejected(_) => {
                    m.rejected += 1;
                    m.slow_start += 1;
                }
                Status::InFlight | Status::TimedOut | Status::Lost => {
                    m.unfinished += 1;
                    m.slow_start += 1;
                }
                Status::Finished if !meets_slo(r, slo) => {
                    let ttft = r.ttft().expect("finished").as_millis_f64();
                    let e2e = r.e2e().expect("finished").as_millis_f64();
                    let over = |limit: Option<f64>, v: Option<f64>| matches!((limit, v), (Some(l), Some(v)) if v > l);
                    let (t, p, e) =
                        (over(slo.ttft_ms, Some(ttft)), over(slo.tpot_ms, r.tpot_ms()), over(slo.e2e_ms, Some(e2e)));
                    m.ttft += t as u64;
                    m.tpot += p as u64;
                    m.e2e += e as u64;
                    if p || (!t && e && e2e - ttft > ttft) {
                        m.slow_decode += 1;
                    } else {
                        m.slow_start += 1;
                    }
                }
                Status::Finished => {}
            }
        }
        let s = &out.summary;
        SeedResult {
            seed,
            met: s.slo.met,
            attainment: s.slo.attainment,
            ttft_ms_p99: s.ttft_ms.p99,
            tpot_ms_p99: s.tpot_ms.p99,
            goodput_rps: s.slo.goodput_rps,
            kv_peak: s.kv.utilization_max,
            preemptions: s.preemptions,
            measured: s.requests.measured,
            requests: s.requests.arrived,
            misses: m,
            output_tokens_per_s: s.throughput.output_tokens_per_s,
        }
    }
}

/// A count of instances run with several seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub instances: u32,
    pub seeds: Vec<SeedResult>,
}

impl Point {
    pub fn passed(&self) -> usize {
        self.seeds.iter().filter(|r| r.met).count()
    }

    pub fn all_pass(&self) -> bool {
        self.passed() == self.seeds.len()
    }

    /// Passes on some seeds and fails on others.
    pub fn mixed(&self) -> bool {
        let p = self.passed();
        p > 0 && p < self.seeds.len()
    }

    /// The seed with the lowest attainment (the first such).
    pub fn worst(&self) -> &SeedResult {
        self.seeds.iter().fold(&self.seeds[0], |w, r| if r.attainment < w.attainment { r } else { w })
    }
}

/// What limits a configuration: what goes wrong first when it has one instance too few.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Binding {
    /// Requests wait too long for their first token while KV has room: the batch limits
    /// (`max_num_seqs`, the token budget) or the prefill throughput are the bottleneck.
    Queueing,
    /// Requests wait or are recomputed because KV blocks run out (preemptions, or KV nearly full).
    KvCapacity,
    /// Tokens come too slowly: iterations of the batch the load brings are too long.
    PerTokenCompute,
}

impl Binding {
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Queueing => "queueing",
            Binding::KvCapacity => "kv-capacity",
            Binding::PerTokenCompute => "per-token-compute",
        }
    }
}

/// KV use at or above which a run counts as KV-bound even without preemptions.
pub(super) const KV_FULL: f64 = 0.95;

/// Classifies the binding constraint from the evidence run (the worst seed at N − 1, the
/// largest failing count; or at N when N = 1 and nothing fails):
///
/// 1. If misses were mostly slow decoding (`slow_decode > slow_start`) → per-token compute.
/// 2. Otherwise, if the run preempted requests or filled ≥ 95% of KV blocks → KV capacity.
/// 3. Otherwise → queueing.
///
/// When the run missed nothing (one instance is enough), the metric closest to its limit
/// decides instead: TPOT p99 / limit above TTFT p99 / limit → per-token compute; else rules 2–3.
pub fn classify(r: &SeedResult, slo: &SloSection) -> Binding {
    let m = &r.misses;
    let kv_bound = r.preemptions > 0 || r.kv_peak >= KV_FULL;
    let decode_bound = if m.slow_decode + m.slow_start > 0 {
        m.slow_decode > m.slow_start
    } else {
        let ratio = |v: f64, l: Option<f64>| l.map_or(0.0, |l| v / l);
        ratio(r.tpot_ms_p99, slo.tpot_ms) > ratio(r.ttft_ms_p99, slo.ttft_ms)
    };
    if decode_bound {
        Binding::PerTokenCompute
    } else if kv_bound {
        Binding::KvCapacity
    } else {
        Binding::Queueing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(misses: Misses, preemptions: u64, kv_peak: f64) -> SeedResult {
        SeedResult {
            seed: 0,
            met: false,
            attainment: 0.9,
            ttft_ms_p99: 100.0,
            tpot_ms_p99: 50.0,
            goodput_rps: 1.0,
            kv_peak,
            preemptions,
            measured: 100,
            requests: 100,
            misses,
            ..Default::default()
        }
    }

    #[test]
    fn the_rule() {
        let slo = SloSection { ttft_ms: Some(1000.0), tpot_ms: Some(100.0), ..SloSection::default() };
        let decode = Misses { slow_decode: 10, slow_start: 3, ..Misses::default() };
        let start = Misses { slow_decode: 3, slow_start: 10, ..Misses::default() };
        assert_eq!(classify(&result(decode, 5, 1.0), &slo), Binding::PerTokenCompute);
        assert_eq!(classify(&result(start, 5, 0.5), &slo), Binding::KvCapacity);
        assert_eq!(classify(&result(start, 0, 0.96), &slo), Binding::KvCapacity);
        assert_eq!(classify(&result(start, 0, 0.5), &slo), Binding::Queueing);
        // Nothing missed: TPOT p99 is at 50% of its limit, TTFT p99 at 10%.
        assert_eq!(classify(&result(Misses::default(), 0, 0.1), &slo), Binding::PerTokenCompute);
    }
}
