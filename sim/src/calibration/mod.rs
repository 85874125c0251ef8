//! Calibrating a scenario's cost model on the deployment's own measured runs
//! (`servesim calibrate fit`).
//!
//! ```text
//!   measured file ─► Measured (requests, or a benchmark's summary) ─► Target
//!        Target: the scenario with the run's workload (its requests replayed at their times,
//!                or the benchmark re-created), and the run's measured statistics
//!   fit (fit.rs): factors ─► every Target simulated ─► log errors of its statistics
//!                 ─► robust least squares over the factors the runs can identify
//!                 ─► Calibration (cost::Calibration) with each factor's range, the fit's
//!                    error per run and the held-out error
//! ```
//! The library reads no files: the binary reads the measured files, hashes them and hands
//! them over as [`Measured`] values; it also runs the simulations (in parallel) through an
//! [`Evaluator`].

pub mod fit;
mod linalg;

use std::sync::Arc;

use crate::cost::{Calibration, Factors};
use crate::metrics::bench::{BenchRun, STAT_KINDS};
use crate::metrics::compare::{in_flight_by_little, outcomes_of, run_metrics};
use crate::metrics::measured::MeasuredRun;
use crate::metrics::{Dist, Summary};
use crate::scenario::Scenario;
use crate::workload::arrival::{ClosedLoop, GammaArrival, Poisson, ThinkKind};
use crate::workload::length::Fixed;
use crate::workload::trace::{self, Columns, TimeUnit, TraceFormat, TraceSource, TraceSpec};
use crate::workload::{ArrivalSpec, LengthDist, WorkloadSpec};

pub use fit::{fit, FactorOutcome, FitOptions, Fitted, HeldOut, RunFit, Sequential};

/// A measured run as read from a file.
#[derive(Clone, Debug)]
pub enum Measured {
    /// Every request with its times (replayed at its arrival time).
    Requests(MeasuredRun),
    /// A benchmark's statistics (the benchmark re-created).
    Bench(BenchRun),
}

/// Where a measured run comes from: the file as the user named it, and its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub file: String,
    pub sha256: String,
}

/// One compared statistic of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Stat {
    /// `ttft_ms.mean`, `tpot_ms.p99`, `throughput.output_tokens_per_s`, ...
    pub key: String,
    pub measured: f64,
    /// Its weight in the loss: means and medians 1, tail percentiles less (they scatter more
    /// between repeated runs), request throughput ½ (output throughput says the same).
    pub weight: f64,
}

/// The weight of a statistic.
fn weight(key: &str) -> f64 {
    match key.rsplit('.').next().unwrap_or("") {
        "mean" | "p50" => 1.0,
        "p90" => 0.7,
        "p95" => 0.6,
        "p99" => 0.5,
        "requests_per_s" => 0.5,
        _ => 1.0,
    }
}

/// A measured run ready to be predicted: the scenario running its workload, and its statistics.
#[derive(Clone, Debug)]
pub struct Target {
    /// The file (and the row of a sweep).
    pub label: String,
    pub origin: Origin,
    /// `requests` or `summary`.
    pub kind: &'static str,
    /// The reader's format name.
    pub format: String,
    /// Requests measured.
    pub requests: u64,
    pub stats: Vec<Stat>,
    /// How the run was read and re-created, in words.
    pub notes: Vec<String>,
    /// Whether its latencies are the client's (the frontend factor applies) or the engine's.
    pub client_clock: bool,
    /// A replayed file's requests in flight before and after their first token, on average
    /// ([`crate::metrics::compare::RunMetrics`]); None for a summary.
    measured_in_flight: Option<(f64, f64)>,
    /// The deployment it ran on: the model, and the TP degree of its (first) group.
    pub model: String,
    pub tp: u64,
    scenario: Scenario,
    /// Requests replayed: whether each enters the statistics (the file's own verdict).
    counted: Option<Vec<bool>>,
    /// Requests replayed: the mean TTFT of each fifth of the requests by prompt length, and
    /// the mean TPOT of each fifth by the requests in flight while they decoded (from the
    /// file's own times). The fit compares these besides the run's statistics: how latency
    /// moved with the prompt and with the batch is what tells prefill from decode from the
    /// per-iteration and per-request terms; single requests scatter too much to compare one
    /// by one.
    groups: Vec<Group>,
}

/// A group of a replayed run's requests whose mean TTFT or TPOT the fit compares.
#[derive(Clone, Debug)]
struct Group {
    /// Request indexes (in arrival order).
    members: Vec<usize>,
    tpot: bool,
    measured: f64,
}

/// Splits `order` (request indexes sorted by some key) into `k` groups of nearly equal size.
fn fifths(order: &[usize], k: usize) -> Vec<Vec<usize>> {
    let n = order.len();
    (0..k).map(|g| order[g * n / k..(g + 1) * n / k].to_vec()).filter(|g| !g.is_empty()).collect()
}

/// For each request, the mean number of requests in flight (arrived, not finished) while it
/// decoded, from first token to finish; NaN for a request without both.
fn in_flight_while_decoding(o: &[crate::metrics::compare::Outcome]) -> Vec<f64> {
    // The step function N(t) and its running integral at each change.
    let mut ev: Vec<(u64, i64)> = Vec::with_capacity(2 * o.len());
    for r in o {
        if let Some(f) = r.finish {
            ev.push((r.arrival.0, 1));
            ev.push((f.0, -1));
        }
    }
    ev.sort_unstable();
    let (mut times, mut integral, mut level) = (Vec::with_capacity(ev.len()), Vec::with_capacity(ev.len()), Vec::new());
    let (mut n, mut area, mut last) = (0i64, 0.0f64, ev.first().map_or(0, |e| e.0));
    for (t, d) in ev {
        area += n as f64 * (t - last) as f64;
        last = t;
        n += d;
        times.push(t);
        integral.push(area);
        level.push(n);
    }
    // ∫ N over [0, t]: the last change at or before t, plus its level since.
    let at = |t: u64| -> f64 {
        match times.partition_point(|&x| x <= t) {
            0 => 0.0,
            i => integral[i - 1] + level[i - 1] as f64 * (t - times[i - 1]) as f64,
        }
    };
    o.iter()
        .map(|r| match (r.first_token, r.finish) {
            (Some(a), Some(b)) if b > a => (at(b.0) - at(a.0)) / (b.0 - a.0) as f64,
            _ => f64::NAN,
        })
        .collect()
}

fn groups_of(o: &[crate::metrics::compare::Outcome]) -> Vec<Group> {
    let done: Vec<usize> = (0..o.len()).filter(|&i| o[i].counted && o[i].finish.is_some()).collect();
    let mean = |members: &[usize], f: &dyn Fn(usize) -> Option<f64>| {
        let v: Vec<f64> = members.iter().filter_map(|&i| f(i)).filter(|x| x.is_finite() && *x > 0.0).collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let mut out = Vec::new();
    let mut by_prompt = done.clone();
    by_prompt.sort_by_key(|&i| (o[i].prompt_tokens, i));
    for members in fifths(&by_prompt, 5) {
        let measured = mean(&members, &|i| o[i].ttft_ms());
        out.push(Group { members, tpot: false, measured });
    }
    let load = in_flight_while_decoding(o);
    let mut by_load: Vec<usize> =
        done.iter().copied().filter(|&i| load[i].is_finite() && o[i].tpot_ms().is_some()).collect();
    by_load.sort_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
    for members in fifths(&by_load, 5) {
        let measured = mean(&members, &|i| o[i].tpot_ms());
        out.push(Group { members, tpot: true, measured });
    }
    out.retain(|g| g.measured.is_finite() && g.measured > 0.0);
    out
}

/// The base scenario without any calibration: fits and the uncalibrated figures start there.
pub fn uncalibrated(s: &Scenario) -> Scenario {
    let mut s = s.clone();
    for g in &mut s.groups {
        g.calibration = None;
        if let crate::cost::CostSpec::Roofline(c) = &mut g.cost {
            c.calibration = None;
        }
    }
    // Scenarios derived from it (another TP) must not read it again.
    if let crate::cost::CostSpec::Roofline(c) = &mut s.resolved.cost {
        c.calibration = None;
    }
    for g in &mut s.resolved.cluster.groups {
        if let Some(c) = g.cost.as_mut() {
            c.remove("calibration");
        }
    }
    s
}

/// `s` with every group's iterations corrected by `f` (a calibration made for the group itself).
pub fn with_factors(s: &Scenario, f: &Factors) -> Scenario {
    let mut s = s.clone();
    let engine = s.serving_engine_of_groups();
    for (g, e) in s.groups.iter_mut().zip(engine) {
        g.calibration = Some(Ok(Arc::new(Calibration::of(&g.gpu.name, &e, g.cost_source(), f))));
    }
    s
}

/// `s` replaying `run`'s requests (arrivals in ns after the first) from memory.
pub fn replay(s: &Scenario, run: &MeasuredRun, label: &str) -> Result<Scenario, String> {
    let mut spec = TraceSpec::plain(TraceFormat::Csv, label);
    spec.columns = Some(Columns {
        arrival: Some("arrival_ns".into()),
        prompt_tokens: Some("prompt_tokens".into()),
        output_tokens: Some("output_tokens".into()),
        ..Columns::default()
    });
    spec.arrival_unit = Some(TimeUnit::Ns);
    spec.source = Some(TraceSource::from_bytes(label, run.replay_csv().into_bytes()));
    let scan = trace::scan(&spec).map_err(|e| e.to_string())?;
    if let Some(src) = spec.source.as_mut() {
        src.scan = Some(scan);
    }
    let mut s = s.clone();
    s.workload = WorkloadSpec::of_trace(spec);
    s.resolved.workload = s.workload.clone();
    Ok(s)
}

/// `s` running the benchmark `b` as its load generator ran it: its rate (Poisson, or gamma
/// with its burstiness) or its concurrency (closed-loop clients without think time), its
/// request count, its mean lengths as fixed lengths; every request measured.
pub fn recreate(s: &Scenario, b: &BenchRun) -> Scenario {
    let arrival = match (b.load.rate, b.load.concurrency) {
        (Some(rate), _) if b.load.burstiness == 1.0 => ArrivalSpec::Poisson(Poisson { rate }),
        (Some(rate), _) => ArrivalSpec::Gamma(GammaArrival { rate, cv: 1.0 / b.load.burstiness.sqrt() }),
        (None, c) => ArrivalSpec::ClosedLoop(ClosedLoop {
            clients: c.unwrap_or(b.requests.min(u32::MAX as u64) as u32).max(1),
            think_time_s: 0.0,
            think: ThinkKind::Fixed,
            ramp_s: 0.0,
        }),
    };
    let fixed = |x: f64| LengthDist::Fixed(Fixed { value: x.round().max(1.0) as u64 });
    let mut s = s.clone();
    s.workload = WorkloadSpec {
        duration_s: None,
        requests: Some(b.requests),
        arrival: Some(arrival),
        prompt_tokens: Some(fixed(b.prompt_tokens)),
        output_tokens: Some(fixed(b.output_tokens)),
        trace: None,
        prefix: None,
        class_weights: None,
    };
    s.resolved.workload = s.workload.clone();
    s.metrics.warmup_s = 0.0;
    s.metrics.cooldown_s = 0.0;
    s.resolved.metrics = s.metrics.clone();
    s
}

/// The deployment `s` describes at tensor-parallel degree `tp` (`cluster.tp`).
pub fn at_tp(s: &Scenario, tp: u32) -> Result<Scenario, String> {
    use crate::config::ConfigError;
    use crate::scenario::edit::{from_table, set_path, to_table};
    let mut doc = to_table(&s.resolved);
    if !s.resolved.cluster.groups.is_empty() {
        return Err("a run's tp applies to a scenario of one group ([cluster] tp), not to cluster.groups".into());
    }
    let edit = |d: &mut toml::Table| {
        set_path(d, "cluster.tp", toml::Value::Integer(tp as i64))
            .map_err(|e| ConfigError::at("cluster.tp", e.to_string()))
    };
    edit(&mut doc).map_err(|e| e.to_string())?;
    let file = from_table(doc, "").map_err(|e| e.to_string())?;
    // The engine's defaults that follow the TP (SGLang's running requests from the pool) do.
    let file = s.engine_defaults_after(file, edit).map_err(|e| e.to_string())?;
    s.derive(file).map_err(|e| e.to_string())
}

/// The fit's search bounds for the deployment `s` describes: scales within [0.2, 5]; the host
/// terms from minus the group's own CPU time (per iteration and per sequence: the engine's CPU
/// work cannot go below none) up to 50 ms and 1 ms; the frontend within [0, 2,000] ms.
pub fn bounds_for(s: &Scenario) -> [(f64, f64); 6] {
    let m = crate::engine::cost_model(&uncalibrated(s), 0);
    let decodes = |n: u64| {
        let mut b = crate::cost::BatchShape::default();
        for _ in 0..n {
            b.add_decode(100);
        }
        b
    };
    let us = |n: u64| m.cpu_time(&decodes(n)).0 as f64 / 1e3;
    let per_seq = (us(2) - us(1)).max(0.0);
    let base = (us(1) - per_seq).max(0.0);
    [(0.2, 5.0), (0.2, 5.0), (0.2, 5.0), (-base, 50_000.0), (-per_seq, 1_000.0), (0.0, 2_000.0)]
}

impl Target {
    /// The target of a measured run on the deployment `base` describes (with its calibration,
    /// if any: the fit passes [`uncalibrated`] scenarios, `validate` the scenario as written).
    pub fn new(base: &Scenario, m: &Measured, origin: &Origin) -> Result<Target, String> {
        let base = base.clone();
        match m {
            Measured::Requests(run) => {
                let scenario = replay(&base, run, &origin.file)?;
                let measured = run_metrics(&run.outcomes(), &base.slo);
                let stats = requests_stats(&measured);
                if stats.is_empty() {
                    return Err(format!("{}: no finished request to compare", origin.file));
                }
                Ok(Target {
                    model: scenario.model.name.clone(),
                    tp: scenario.groups[0].tp,
                    groups: groups_of(&run.outcomes()),
                    label: origin.file.clone(),
                    origin: origin.clone(),
                    kind: "requests",
                    format: run.format.name().to_string(),
                    requests: run.requests.iter().filter(|r| r.counted).count() as u64,
                    stats,
                    notes: run.notes.clone(),
                    client_clock: !run.engine_clock,
                    measured_in_flight: Some((measured.in_flight_to_first_token, measured.in_flight_after_first_token)),
                    counted: Some(run.requests.iter().map(|r| r.counted).collect()),
                    scenario,
                })
            }
            Measured::Bench(b) => {
                let base = match b.tp {
                    Some(tp) if tp as u64 != base.groups[0].tp => {
                        at_tp(&base, tp).map_err(|e| format!("{}: tp {tp}: {e}", b.label))?
                    }
                    _ => base,
                };
                let scenario = recreate(&base, b);
                let stats = b.stats.iter().map(|(k, &v)| Stat { key: k.clone(), measured: v, weight: weight(k) });
                let stats: Vec<Stat> = stats.filter(|s| s.measured > 0.0).collect();
                if stats.is_empty() {
                    return Err(format!("{}: every statistic is 0: nothing to compare", b.label));
                }
                Ok(Target {
                    model: scenario.model.name.clone(),
                    tp: scenario.groups[0].tp,
                    label: b.label.clone(),
                    origin: origin.clone(),
                    kind: "summary",
                    format: b.format.to_string(),
                    requests: b.requests,
                    stats,
                    notes: b.notes.clone(),
                    client_clock: true,
                    measured_in_flight: None,
                    counted: None,
                    groups: Vec::new(),
                    scenario,
                })
            }
        }
    }

    /// The scenario that predicts this run, with `f` applied.
    pub fn scenario(&self, f: &Factors) -> Scenario {
        let mut f = *f;
        if !self.client_clock {
            f.frontend_ms = 0.0;
        }
        with_factors(&self.scenario, &f)
    }

    /// The requests in flight before and after their first token, measured and as the
    /// scenario predicts them (its own calibration, if any): a replayed file's from its
    /// requests' times, a summary's by Little's law from its request throughput and mean TTFT
    /// and E2E (None where it lacks one). One simulation.
    pub fn in_flight(&self) -> Result<Option<[(f64, f64); 2]>, String> {
        // The statistics `keys` of the scenario's run, whatever this run's own are.
        let predict = |keys: &[&str]| {
            let stats = keys.iter().map(|&k| Stat { key: k.into(), measured: 0.0, weight: 0.0 }).collect();
            Target { stats, groups: Vec::new(), ..self.clone() }.run(&self.scenario)
        };
        if let Some(measured) = self.measured_in_flight {
            let p = predict(&["in_flight.to_first_token", "in_flight.after_first_token"])?;
            return Ok(Some([measured, (p[0], p[1])]));
        }
        let keys = ["throughput.requests_per_s", "ttft_ms.mean", "e2e_ms.mean"];
        let measured = keys.map(|k| self.stats.iter().find(|s| s.key == k).map(|s| s.measured));
        let [Some(x), Some(ttft), Some(e2e)] = measured else { return Ok(None) };
        let p = predict(&keys)?;
        Ok(Some([in_flight_by_little(x, ttft, e2e), in_flight_by_little(p[0], p[1], p[2])]))
    }

    /// The run's statistics as the scenario predicts them, with its own calibration (if any).
    pub fn predict_as_is(&self) -> Result<Vec<f64>, String> {
        self.run(&self.scenario).map(|mut v| {
            v.truncate(self.stats.len());
            v
        })
    }

    /// The run as predicted with `f`: its statistics in the order of [`Target::stats`], then
    /// (a replayed run) each request's TTFT and TPOT in ms (NaN where it has none).
    pub fn predict(&self, f: &Factors) -> Result<Vec<f64>, String> {
        self.run(&self.scenario(f))
    }

    fn run(&self, s: &Scenario) -> Result<Vec<f64>, String> {
        let out = crate::engine::try_run(s).map_err(|e| format!("{}: {e}", self.label))?;
        if let Some(st) = &out.summary.stopped {
            if st.reason == crate::metrics::StopReason::Cancelled {
                return Err(format!("{}: cancelled", self.label));
            }
            return Err(format!(
                "{}: the simulation stopped before its requests ended ({}); at these factors the deployment cannot \
                 keep up with the run",
                self.label, st.reason
            ));
        }
        match &self.counted {
            Some(counted) => {
                let mut o = outcomes_of(&out.recorder);
                if o.len() != counted.len() {
                    return Err(format!(
                        "{}: the replay issued {} requests for the file's {}",
                        self.label,
                        o.len(),
                        counted.len()
                    ));
                }
                for (p, &c) in o.iter_mut().zip(counted) {
                    p.counted = c;
                }
                let m = run_metrics(&o, &s.slo);
                let mut v: Vec<f64> = self.stats.iter().map(|st| requests_stat(&m, &st.key)).collect();
                for g in &self.groups {
                    let x: Vec<f64> = g
                        .members
                        .iter()
                        .filter_map(|&i| if g.tpot { o[i].tpot_ms() } else { o[i].ttft_ms() })
                        .filter(|x| x.is_finite() && *x > 0.0)
                        .collect();
                    v.push(if x.is_empty() { f64::NAN } else { x.iter().sum::<f64>() / x.len() as f64 });
                }
                Ok(v)
            }
            None => Ok(self.stats.iter().map(|st| summary_stat(&out.summary, &st.key)).collect()),
        }
    }

    /// What the fit compares of this run, with each comparison's weight (summing to 1: every
    /// run weighs the same): each request's TTFT and TPOT for a replay, its statistics for a
    /// benchmark summary.
    pub(crate) fn fit_weights(&self) -> Vec<f64> {
        let sum: f64 = self.stats.iter().map(|s| s.weight * s.weight).sum();
        let share = if self.groups.is_empty() { 1.0 } else { 0.5 };
        let mut w: Vec<f64> = self.stats.iter().map(|s| share * s.weight * s.weight / sum).collect();
        w.extend(self.groups.iter().map(|_| 0.5 / self.groups.len() as f64));
        w
    }

    /// The log errors of a prediction ([`Target::predict`]), in the order of
    /// [`Target::fit_weights`] (0 where nothing is compared).
    pub(crate) fn fit_errors(&self, pred: &[f64]) -> Vec<f64> {
        let log = |p: f64, m: f64| {
            if !(m.is_finite() && m > 0.0) {
                0.0
            } else if p.is_finite() && p > 0.0 {
                (p / m).ln()
            } else {
                0.0 // not finished in the prediction: nothing to compare
            }
        };
        let measured = self.stats.iter().map(|s| s.measured).chain(self.groups.iter().map(|g| g.measured));
        measured.zip(pred).map(|(m, p)| log(*p, m)).collect()
    }

    /// The statistics of a prediction, in the order of [`Target::stats`].
    pub(crate) fn stats_of<'p>(&self, pred: &'p [f64]) -> &'p [f64] {
        &pred[..self.stats.len().min(pred.len())]
    }
}

impl Scenario {
    /// The serving engine of each group, as a calibration names it.
    pub fn serving_engine_of_groups(&self) -> Vec<String> {
        self.groups.iter().map(|g| crate::scenario::group_engine(self.resolved.engine, &g.cost)).collect()
    }
}

/// The statistics a replayed file's requests give: TTFT, TPOT and E2E (mean, p50, p90, p99)
/// and the output throughput, those above 0.
fn requests_stats(measured: &crate::metrics::compare::RunMetrics) -> Vec<Stat> {
    let mut stats = Vec::new();
    let mut push = |key: &str, v: f64| {
        if v > 0.0 && v.is_finite() {
            stats.push(Stat { key: key.into(), measured: v, weight: weight(key) });
        }
    };
    for (metric, d) in [("ttft_ms", &measured.ttft_ms), ("tpot_ms", &measured.tpot_ms), ("e2e_ms", &measured.e2e_ms)] {
        if d.count > 0 {
            for (k, v) in dist_stats(d) {
                push(&format!("{metric}.{k}"), v);
            }
        }
    }
    push("throughput.output_tokens_per_s", measured.output_tokens_per_s);
    stats
}

/// The statistics of a distribution a run compares.
fn dist_stats(d: &Dist) -> [(&'static str, f64); 4] {
    [("mean", d.mean), ("p50", d.p50), ("p90", d.p90), ("p99", d.p99)]
}

fn dist_stat(d: &Dist, stat: &str) -> f64 {
    match stat {
        "mean" => d.mean,
        "p50" => d.p50,
        "p90" => d.p90,
        "p95" => d.p95,
        "p99" => d.p99,
        _ => f64::NAN,
    }
}

fn requests_stat(m: &crate::metrics::compare::RunMetrics, key: &str) -> f64 {
    let (metric, stat) = key.split_once('.').unwrap_or((key, ""));
    match metric {
        "ttft_ms" => dist_stat(&m.ttft_ms, stat),
        "tpot_ms" => dist_stat(&m.tpot_ms, stat),
        "e2e_ms" => dist_stat(&m.e2e_ms, stat),
        "throughput" if stat == "output_tokens_per_s" => m.output_tokens_per_s,
        "throughput" if stat == "requests_per_s" => m.throughput_rps,
        "in_flight" if stat == "to_first_token" => m.in_flight_to_first_token,
        "in_flight" if stat == "after_first_token" => m.in_flight_after_first_token,
        _ => f64::NAN,
    }
}

fn summary_stat(s: &Summary, key: &str) -> f64 {
    let (metric, stat) = key.split_once('.').unwrap_or((key, ""));
    debug_assert!(metric == "throughput" || STAT_KINDS.contains(&stat), "{key}");
    match metric {
        "ttft_ms" => dist_stat(&s.ttft_ms, stat),
        "tpot_ms" => dist_stat(&s.tpot_ms, stat),
        "itl_ms" => dist_stat(&s.itl_ms, stat),
        "e2e_ms" => dist_stat(&s.e2e_ms, stat),
        "throughput" if stat == "output_tokens_per_s" => s.throughput.output_tokens_per_s,
        "throughput" if stat == "requests_per_s" => s.throughput.requests_per_s,
        _ => f64::NAN,
    }
}
