//! The run summary: what `simulate` prints and writes to `summary.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SloSection;
use super::{Dist, Recorder, RejectReason, Status};
use crate::time::SimTime;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub requests: RequestCounts,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub itl_ms: Dist,
    pub e2e_ms: Dist,
    pub queue_ms: Dist,
    pub throughput: Throughput,
    pub slo: SloSummary,
    pub kv: KvSummary,
    pub batch: BatchSummary,
    pub preemptions: u64,
    /// Seconds from the first measured arrival to the last measured completion.
    pub duration_s: f64,
    /// Simulated seconds from time zero to the last event.
    pub simulated_s: f64,
    /// Time-weighted mean of requests waiting or running (for Little's law).
    pub requests_in_system_mean: f64,
    pub iterations: u64,
    pub decode_token_steps: u64,
    /// Prompt (and recomputed) tokens run through prefill.
    pub prefill_tokens: u64,
    /// Prefix-cache hits, savings and evictions over the whole run.
    pub prefix_cache: super::policy::PrefixCacheSummary,
    /// Swap preemption traffic.
    pub swap: super::policy::SwapSummary,
    /// Speculative decoding steps and acceptance.
    pub speculative: super::policy::SpeculativeSummary,
    /// CPU overhead and GPU waiting, as shares of busy time.
    pub cpu: super::policy::CpuSummary,
    /// Overload control.
    pub admission: super::policy::AdmissionSummary,
    /// Instances over time (provisioned, serving, instance-hours, cost), failures, retries,
    /// autoscaling.
    pub fleet: crate::metrics::FleetSummary,
    /// Prefill and decode pools and their KV transfers (disaggregated clusters only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disaggregation: Option<crate::metrics::DisaggSummary>,
    /// What the cost model priced without measurements (ops the roofline stood in for, tables
    /// read beyond their measured range), with each one's share of the iteration time.
    pub cost: CostSummary,
    /// The API server's time per request (`[frontend]` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<FrontendSummary>,
    /// Each priority class's requests on their own (`workload.class_weights`), when requests of
    /// more than one class arrived: the question "does class 2 starve?" answered per class.
    /// The counts and the goodput of the classes sum to the totals above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassSummary>,
    /// Set when the run stopped before its workload ended: the event budget
    /// (`run.max_events`) ran out, or the caller cancelled it (a wall-clock limit). Requests
    /// still in the system then count as in flight (SLO misses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StoppedEarly>,
}

/// One priority class's measured requests (`summary.classes`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    pub class: u8,
    /// Measured requests of the class, and those that finished, were rejected, timed out.
    pub measured: u64,
    pub finished: u64,
    pub rejected: u64,
    pub timed_out: u64,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub(crate) e2e_ms: Dist,
    pub queue_ms: Dist,
    /// Fraction of the class's measured requests meeting the SLO.
    pub attainment: f64,
    /// The class's requests per second meeting the SLO, over the run's offered window (the
    /// same window as the total's, so the classes' goodputs sum to it).
    pub goodput_rps: f64,
}

/// The window in which the measured requests arrived, in seconds: the span from the first
/// measured arrival to the last, times n / (n − 1) for n arrivals — one mean gap added, so
/// that n evenly spaced arrivals at rate λ span n / λ, and a workload ended by its duration
/// spans that duration. Zero for fewer than two arrivals.
pub fn offered_window_s(arrivals: impl Iterator<Item = SimTime>) -> f64 {
    let (mut n, mut first, mut last) = (0u64, SimTime::MAX, SimTime::ZERO);
    for t in arrivals {
        n += 1;
        first = first.min(t);
        last = last.max(t);
    }
    if n < 2 {
        return 0.0;
    }
    last.saturating_sub(first).as_secs_f64() * n as f64 / (n - 1) as f64
}

/// The `cost` section of a summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostSummary {
    /// What priced each group's iterations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<GroupCostSource>,
    pub fallbacks: Vec<crate::cost::FallbackShare>,
    /// Groups with pipeline stages: how busy the stages were (none without stages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipelines: Vec<crate::cost::PipelineShare>,
}

/// What priced one group's iterations (`cost.sources` of a summary).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupCostSource {
    pub group: String,
    /// `database`, `profile`, `roofline`, `linear`, or `emulated` (kernels executed as it ran).
    pub source: String,
    /// In words, with the calibration that corrects it.
    pub words: String,
}

/// The `frontend` section of a summary: requests it processed (all, warm-up included), the
/// time each spent there (queued and processed) before reaching the router, and the delay
/// added to every token's delivery.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FrontendSummary {
    pub requests: u64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub token_delay_ms: f64,
}

/// Why a run stopped before its workload ended (`summary.stopped.reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// `run.max_events` events were processed.
    #[serde(rename = "event_budget")]
    EventBudget,
    /// The caller asked the run to stop (the library's word; the CLI says which of the next
    /// three it was).
    #[serde(rename = "cancelled")]
    Cancelled,
    /// The command's `--time-limit` passed.
    #[serde(rename = "time_limit")]
    TimeLimit,
    #[serde(rename = "SIGINT")]
    Sigint,
    #[serde(rename = "SIGTERM")]
    Sigterm,
    /// The time series reached [`crate::metrics::MAX_WINDOWS`] windows.
    #[serde(rename = "timeseries_windows")]
    SeriesBudget,
    /// A request beyond `run.max_requests` arrived.
    #[serde(rename = "request_budget")]
    RequestBudget,
}

impl StopReason {
    /// The name `summary.json` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EventBudget => "event_budget",
            StopReason::Cancelled => "cancelled",
            StopReason::TimeLimit => "time_limit",
            StopReason::Sigint => "SIGINT",
            StopReason::Sigterm => "SIGTERM",
            StopReason::SeriesBudget => "timeseries_windows",
            StopReason::RequestBudget => "request_budget",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why and when a run stopped early.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoppedEarly {
    pub reason: StopReason,
    /// Events processed, and the simulated time reached, s.
    pub events: u64,
    pub at_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestCounts {
    pub arrived: u64,
    pub finished: u64,
    pub rejected: u64,
    pub in_flight: u64,
    /// Dropped after waiting longer than the queue timeout.
    pub timed_out: u64,
    /// Lost to instance failures (never retried, or out of retries).
    pub lost: u64,
    /// Requests inside the measurement window (after warm-up, before cool-down).
    pub measured: u64,
    pub rejected_by_reason: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloSummary {
    /// Fraction of measured requests that finished within every threshold.
    pub attainment: f64,
    /// Goodput: measured requests meeting every threshold, per second of the window in which
    /// they arrived ([`offered_window_s`]) — the offered load times the attainment, so a run
    /// that meets the SLO shows its load, drain excluded.
    pub goodput_rps: f64,
    /// vLLM's benchmark figure (`request_goodput` of `vllm bench serve`, vllm/benchmarks/serve.py
    /// `calculate_metrics`): the same requests per second of the whole benchmark, from the
    /// first measured arrival to the last finish, drain included.
    #[serde(default)]
    pub goodput_vllm_bench_rps: f64,
    /// The required attainment from `[slo]`.
    pub target: f64,
    /// Whether attainment ≥ target.
    pub met: bool,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvSummary {
    pub blocks_total: u64,
    pub utilization_mean: f64,
    pub utilization_max: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchSummary {
    /// Mean sequences per iteration.
    pub mean: f64,
    pub max: u64,
}

/// Whether a record meets every threshold in `slo`.
pub fn meets_slo(r: &super::RequestRecord, slo: &SloSection) -> bool {
    r.status == Status::Finished
        && slo.met_by(r.ttft().map(SimTime::as_millis_f64), r.tpot_ms(), r.e2e().map(SimTime::as_millis_f64))
}

pub fn summarize(rec: &Recorder, slo: &SloSection, scenario: &str, seed: u64) -> Summary {
    let mut by_reason: BTreeMap<&'static str, u64> = RejectReason::ALL.iter().map(|r| (r.as_str(), 0)).collect();
    let (mut finished, mut rejected, mut in_flight, mut timed_out, mut lost) = (0, 0, 0, 0, 0);
    for r in &rec.records {
        match r.status {
            Status::Finished => finished += 1,
            Status::Rejected(why) => {
                rejected += 1;
                *by_reason.get_mut(why.as_str()).expect("every reason listed") += 1;
            }
            Status::InFlight => in_flight += 1,
            Status::TimedOut => timed_out += 1,
            Status::Lost => lost += 1,
        }
    }

    // Iterate the records rather than collecting references: summaries of long runs should
    // not need memory proportional to the run beyond one metric's values at a time.
    let measured = || rec.records.iter().filter(|r| rec.counts(r.arrival));
    let done = || measured().filter(|r| r.status == Status::Finished);
    let ms = |f: &dyn Fn(&super::RequestRecord) -> Option<f64>| -> Dist {
        let mut v: Vec<f64> = done().filter_map(f).collect();
        Dist::of(&mut v)
    };
    let ttft = ms(&|r| r.ttft().map(SimTime::as_millis_f64));
    let tpot = ms(&|r| r.tpot_ms());
    let e2e = ms(&|r| r.e2e().map(SimTime::as_millis_f64));
    let queue = ms(&|r| r.queue().map(SimTime::as_millis_f64));
    let itl = rec.itl.dist_ms();

    let n_measured = measured().count();
    let n_done = done().count();
    let start = measured().map(|r| r.arrival).min().unwrap_or(SimTime::ZERO);
    let end = done().map(|r| r.finish).max().unwrap_or(start);
    let duration_s = (end.saturating_sub(start)).as_secs_f64();
    let per_s = |x: f64| if duration_s > 0.0 { x / duration_s } else { 0.0 };
    let met = measured().filter(|r| meets_slo(r, slo)).count() as f64;
    let attainment = if n_measured == 0 { 0.0 } else { met / n_measured as f64 };
    let window_s = offered_window_s(measured().map(|r| r.arrival));
    let per_window = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };

    let classes = class_summaries(rec, slo, &per_window);
    let (waiting, running, kv_used) = rec.occupancy_means();
    let kv_total = rec.kv_total().max(1) as f64;
    Summary {
        scenario: scenario.to_string(),
        seed,
        requests: RequestCounts {
            arrived: rec.records.len() as u64,
            finished,
            rejected,
            in_flight,
            timed_out,
            lost,
            measured: n_measured as u64,
            rejected_by_reason: by_reason.into_iter().map(|(k, n)| (k.to_string(), n)).collect(),
        },
        ttft_ms: ttft,
        tpot_ms: tpot,
        itl_ms: itl,
        e2e_ms: e2e,
        queue_ms: queue,
        throughput: Throughput {
            requests_per_s: per_s(n_done as f64),
            input_tokens_per_s: per_s(done().map(|r| r.prompt_tokens as f64).sum()),
            output_tokens_per_s: per_s(done().map(|r| r.output_tokens as f64).sum()),
        },
        slo: SloSummary {
            attainment,
            goodput_rps: per_window(met),
            goodput_vllm_bench_rps: per_s(met),
            target: slo.attainment,
            met: attainment >= slo.attainment,
            ttft_ms: slo.ttft_ms,
            tpot_ms: slo.tpot_ms,
            e2e_ms: slo.e2e_ms,
        },
        kv: KvSummary {
            blocks_total: rec.kv_total(),
            utilization_mean: kv_used / kv_total,
            utilization_max: rec.kv_used_max as f64 / kv_total,
        },
        batch: BatchSummary {
            mean: if rec.iterations > 0 { rec.batch_seqs_sum as f64 / rec.iterations as f64 } else { 0.0 },
            max: rec.batch_seqs_max,
        },
        preemptions: rec.preemptions,
        duration_s,
        simulated_s: rec.end().as_secs_f64(),
        requests_in_system_mean: waiting + running,
        iterations: rec.iterations,
        decode_token_steps: rec.decode_token_steps,
        prefill_tokens: rec.prefill_tokens,
        prefix_cache: rec.policy.prefix_summary(),
        swap: rec.policy.swap_summary(),
        speculative: rec.policy.speculative_summary(),
        cpu: rec.policy.cpu_summary(),
        admission: rec.policy.admission_summary(),
        fleet: crate::metrics::FleetSummary::default(),
        disaggregation: None,
        cost: CostSummary::default(),
        frontend: None,
        classes,
        stopped: None,
    }
}

/// The per-class summaries, when measured requests of more than one class arrived;
/// `per_window` divides by the run's offered window (so the classes' goodputs sum to the total).
fn class_summaries(rec: &Recorder, slo: &SloSection, per_window: &dyn Fn(f64) -> f64) -> Vec<ClassSummary> {
    // The measured records of each class, gathered in one pass.
    let mut by_class: BTreeMap<u8, Vec<&super::RequestRecord>> = BTreeMap::new();
    for r in rec.records.iter().filter(|r| rec.counts(r.arrival)) {
        by_class.entry(r.class).or_default().push(r);
    }
    if by_class.len() < 2 {
        return Vec::new();
    }
    by_class
        .into_iter()
        .map(|(class, records)| {
            let of = || records.iter().copied();
            let done = || of().filter(|r| r.status == Status::Finished);
            let ms = |f: &dyn Fn(&super::RequestRecord) -> Option<f64>| -> Dist {
                let mut v: Vec<f64> = done().filter_map(f).collect();
                Dist::of(&mut v)
            };
            let measured = of().count() as u64;
            let met = of().filter(|r| meets_slo(r, slo)).count() as f64;
            ClassSummary {
                class,
                measured,
                finished: done().count() as u64,
                rejected: of().filter(|r| matches!(r.status, Status::Rejected(_))).count() as u64,
                timed_out: of().filter(|r| r.status == Status::TimedOut).count() as u64,
                ttft_ms: ms(&|r| r.ttft().map(SimTime::as_millis_f64)),
                tpot_ms: ms(&|r| r.tpot_ms()),
                e2e_ms: ms(&|r| r.e2e().map(SimTime::as_millis_f64)),
                queue_ms: ms(&|r| r.queue().map(SimTime::as_millis_f64)),
                attainment: if measured == 0 { 0.0 } else { met / measured as f64 },
                goodput_rps: per_window(met),
            }
        })
        .collect()
}
