//! The search for the fewest instances of one candidate, and the single-instance capacity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::evidence::{classify, Binding, Point, SeedResult};
use super::Infeasible;
use super::{Candidate, PlanSection};
use crate::engine;
use crate::metrics::{SloSection, StopReason};
use crate::scenario::Scenario;

/// How the search runs.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchConfig {
    /// Seeds of the decisive points; the first drives the exploratory search.
    pub seeds: Vec<u64>,
    pub(crate) max_instances: u32,
    pub(crate) headroom: f64,
    pub(crate) spare_instances: u32,
    /// Instances down for the whole run while the SLO must hold (`[plan] spare`).
    pub(crate) spare: u32,
    pub(crate) capacity_precision: f64,
    /// Whether each candidate's single-instance capacity is searched (it only picks where the
    /// instance search starts, and is reported); `tune` leaves it out.
    pub(crate) capacity: bool,
    /// The error band every feasible candidate is re-sized over (`--error-band`): `None`, its
    /// cost source's measured error; 0, none ([`super::band`]).
    pub(crate) error_band: Option<f64>,
}

impl SearchConfig {
    /// From `[plan]`, with the scenario's seed first and `seeds` (or `[plan] seeds`) seeds in all.
    pub fn new(plan: &PlanSection, seed: u64, seeds: Option<u32>) -> SearchConfig {
        let k = seeds.unwrap_or(plan.seeds).max(1) as u64;
        SearchConfig {
            seeds: (0..k).map(|i| seed.wrapping_add(i)).collect(),
            max_instances: plan.max_instances,
            headroom: plan.headroom,
            spare_instances: plan.spare_instances,
            spare: plan.spare,
            capacity_precision: plan.capacity_precision,
            capacity: true,
            error_band: None,
        }
    }

    /// With every candidate re-sized over this error band (0: none) instead of its cost
    /// source's measured error.
    pub fn with_error_band(self, e: Option<f64>) -> SearchConfig {
        SearchConfig { error_band: e, ..self }
    }

    /// Without the single-instance capacity search: the instance search starts from one
    /// instance, or from a count given to [`plan_candidate`].
    pub fn without_capacity(self) -> SearchConfig {
        SearchConfig { capacity: false, ..self }
    }

    /// The count recommended for a minimum of `n`: ⌈n × (1 + headroom)⌉ + spare instances.
    pub fn provisioned(&self, n: u32) -> u32 {
        let with_headroom = (n as f64 * (1.0 + self.headroom) - 1e-9).ceil().max(n as f64) as u32;
        with_headroom.saturating_add(self.spare_instances)
    }

    /// The fewest instances the search can answer: one more than those down (`[plan] spare`).
    pub fn min_instances(&self) -> u32 {
        self.spare + 1
    }

    /// The most instances the search tries (`[plan] max_instances`).
    pub fn max_instances(&self) -> u32 {
        self.max_instances
    }
}

/// Everything about a plan that does not depend on running candidates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanHeader {
    pub scenario: String,
    pub model: String,
    pub seed: u64,
    pub seeds: u32,
    /// Mean offered load of the workload, requests/s (open-loop workloads).
    pub load_rps_mean: Option<f64>,
    /// Highest rate of its schedule (the burst), requests/s.
    pub load_rps_peak: Option<f64>,
    pub slo: SloSection,
    pub headroom: f64,
    pub spare_instances: u32,
    /// Instances down for the whole run in every count searched (N + k by simulation).
    #[serde(default)]
    pub spare: u32,
    pub max_instances: u32,
    /// Candidate names in order (so that merged shards can be checked for completeness).
    pub candidate_names: Vec<String>,
    /// What the workload offers under the first seed: requests, span, mean and peak rates,
    /// a trace's steps (`None` for a closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<crate::workload::offered::Offered>,
}

/// The header of a plan over `candidates`.
pub fn header(s: &Scenario, candidates: &[Candidate], cfg: &SearchConfig) -> PlanHeader {
    let w = &s.workload;
    PlanHeader {
        scenario: s.name.clone(),
        model: s.model.name.clone(),
        seed: cfg.seeds[0],
        seeds: cfg.seeds.len() as u32,
        load_rps_mean: w.mean_rate(),
        load_rps_peak: w.peak_rate(),
        slo: s.slo.clone(),
        headroom: cfg.headroom,
        spare_instances: cfg.spare_instances,
        spare: cfg.spare,
        max_instances: cfg.max_instances,
        candidate_names: candidates.iter().map(|c| c.name.clone()).collect(),
        offered: crate::workload::offered::offered(w, cfg.seeds[0]),
    }
}

/// A count that passed on some seeds and failed on others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Borderline {
    pub instances: u32,
    pub passed: u32,
    pub seeds: u32,
    pub attainment_min: f64,
    pub attainment_max: f64,
}

/// One step of the exploratory search (first seed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub(crate) instances: u32,
    pub(crate) met: bool,
    pub(crate) attainment: f64,
}

fn one() -> u64 {
    1
}

fn is_one(x: &u64) -> bool {
    *x == 1
}

/// The plan's answer for one candidate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CandidateResult {
    pub name: String,
    pub gpu: String,
    pub tp: u64,
    /// Pipeline stages of `tp` GPUs each (1: none).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub pp: u64,
    pub feasible: bool,
    /// Why no count up to `max_instances` meets the SLO, when none does.
    pub infeasible_reason: Option<String>,
    /// The fewest instances meeting the SLO on every seed.
    pub instances_min: Option<u32>,
    /// With headroom: ⌈N × (1 + headroom)⌉ + spare instances.
    pub instances: Option<u32>,
    pub gpus: Option<u64>,
    pub price_per_gpu_hour: Option<f64>,
    pub cost_per_hour: Option<f64>,
    /// At `instances_min`, the worst over the seeds (highest p99s, lowest attainment and
    /// goodput, highest KV peak); for an infeasible candidate, at the largest count run.
    pub ttft_ms_p99: Option<f64>,
    pub tpot_ms_p99: Option<f64>,
    pub attainment: Option<f64>,
    pub goodput_rps: Option<f64>,
    pub kv_peak: Option<f64>,
    pub binding: Option<Binding>,
    /// The run the binding constraint was read from, in words.
    pub binding_evidence: Option<String>,
    /// Counts that passed on some seeds only.
    pub borderline: Vec<Borderline>,
    /// Highest rate of this traffic shape one instance serves within the SLO (open loop only).
    pub single_instance_capacity_rps: Option<f64>,
    pub kv_blocks_per_instance: Option<u64>,
    pub gpu_memory_gib: Option<f64>,
    /// N − 1 and N on every seed.
    pub points: Vec<Point>,
    /// The exploratory search on the first seed, in order.
    pub(crate) trail: Vec<Step>,
    /// Simulation runs and simulated requests this candidate took.
    pub runs: u64,
    pub(crate) simulated_requests: u64,
    /// With `[plan] spare = k`: the count without failures, and what k failures do to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spare_check: Option<SpareCheck>,
    /// With `[fleet.autoscale]`: the autoscaled fleet against the fixed one on this workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaled: Option<AutoscaleComparison>,
    /// A disaggregated candidate: both pools' counts (the fields above then sum the pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<super::PoolsResult>,
    /// The count recommended (`instances`: the minimum with headroom and spares) as simulated
    /// itself, on every seed: its own latencies and attainment, beside the minimum's above.
    /// Run only when it differs from `instances_min`; equal to the minimum's point otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<AtCount>,
    /// Whether a calibration corrects this candidate's cost model (`calibrated by PATH`, or why
    /// not); absent when the scenario names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// Whether its runs drew no random number, so that every seed gave the same result and
    /// each count ran once for all of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
    /// What priced its iterations, in words (the kernel database, a profile, the roofline; with
    /// its calibration); absent when it has no scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priced_by: Option<String>,
    /// What to deploy at the recommended count (`instances`, per pool when disaggregated):
    /// launch commands, replicas, router; absent when no count meets the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<crate::scenario::Deployment>,
    /// A buyer's figures at the minimum and recommended counts; absent when none is feasible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub economics: Option<super::Economics>,
    /// The recommended count with iterations priced over the cost source's error band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<super::Band>,
}

impl CandidateResult {
    /// A result named `name` with nothing sized yet (TP and PP 1, no GPU).
    pub(crate) fn named(name: &str) -> CandidateResult {
        CandidateResult { name: name.to_string(), tp: 1, pp: 1, ..CandidateResult::default() }
    }
}

/// One count's figures, the worst over the seeds (highest p99s, lowest attainment and goodput,
/// highest KV peak), and each seed's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AtCount {
    pub instances: u32,
    pub ttft_ms_p99: f64,
    pub tpot_ms_p99: f64,
    pub attainment: f64,
    pub goodput_rps: f64,
    pub kv_peak: f64,
    pub point: Point,
}

impl AtCount {
    pub fn of(point: Point) -> AtCount {
        let worst = |f: fn(&SeedResult) -> f64, max: bool| {
            point.seeds.iter().map(f).reduce(|a, b| if (b > a) == max { b } else { a }).unwrap_or(f64::NAN)
        };
        AtCount {
            instances: point.instances,
            ttft_ms_p99: worst(|r| r.ttft_ms_p99, true),
            tpot_ms_p99: worst(|r| r.tpot_ms_p99, true),
            attainment: worst(|r| r.attainment, false),
            goodput_rps: worst(|r| r.goodput_rps, false),
            kv_peak: worst(|r| r.kv_peak, true),
            point,
        }
    }

    /// How far under the SLO the worst seed's p99s are: the smallest of threshold ÷ p99 over
    /// the TTFT and TPOT thresholds given (2 = twice as fast as required); `None` without them.
    pub fn slo_margin(&self, slo: &SloSection) -> Option<f64> {
        [(slo.ttft_ms, self.ttft_ms_p99), (slo.tpot_ms, self.tpot_ms_p99)]
            .into_iter()
            .filter_map(|(limit, p99)| Some(limit? / p99.max(1e-9)))
            .reduce(f64::min)
    }
}

/// What `[plan] spare = k` showed: the fewest instances meeting the SLO with none down, and
/// that same count with k down (for the whole run) on every seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpareCheck {
    pub spare: u32,
    /// The fewest instances meeting the SLO on every seed with none down.
    pub instances_min_no_failures: u32,
    /// That count with none down, on every seed.
    pub no_failures: Point,
    /// That count with `spare` instances down (`None` when that leaves none up).
    pub with_spare_down: Option<Point>,
}

/// The autoscaled fleet (`[fleet.autoscale]`, starting at its `min`) against the fixed fleet
/// the plan chose, on the same workload and seeds: instance-hours and cost per day versus SLO
/// attainment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutoscaleComparison {
    pub fixed_instances: u32,
    /// Worst seed's attainment of the fixed fleet.
    pub fixed_attainment: f64,
    pub fixed_instance_hours_per_day: f64,
    pub fixed_cost_per_day: Option<f64>,
    pub min: u32,
    pub max: u32,
    /// Mean over the seeds of the autoscaled fleet's time-weighted instance count.
    pub instances_mean: f64,
    pub instances_max: u32,
    pub instance_hours_per_day: f64,
    pub cost_per_day: Option<f64>,
    /// Worst seed's attainment.
    pub attainment: f64,
    /// Whether it meets the SLO on every seed.
    pub met: bool,
    pub(crate) seeds: Vec<AutoscaleSeed>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutoscaleSeed {
    pub(crate) seed: u64,
    pub(crate) attainment: f64,
    pub(crate) met: bool,
    pub(crate) instances_mean: f64,
    pub(crate) instances_max: u32,
    pub(crate) instance_hours: f64,
    pub(crate) simulated_s: f64,
    pub(crate) scale_ups: u64,
    pub(crate) scale_downs: u64,
}

/// The whole plan: what `--format json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    #[serde(flatten)]
    pub header: PlanHeader,
    pub candidates: Vec<CandidateResult>,
    /// The cheapest feasible candidate ($/h when priced, else fewest GPUs); between equally
    /// cheap ones, the one with the largest SLO margin at its recommended count, then the first.
    pub recommended: Option<String>,
    /// How a tie on price was broken, in words (`None` without a tie).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie_break: Option<String>,
    /// Whether the recommended candidate stays the cheapest at both ends of the error band, in
    /// words (`None` when it has no band).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band_note: Option<String>,
}

/// Joins a header and its candidates' results (in header order) into the report.
pub fn assemble(header: PlanHeader, candidates: Vec<CandidateResult>) -> PlanReport {
    let feasible = || candidates.iter().filter(|c| c.feasible);
    let priced = feasible().all(|c| c.cost_per_hour.is_some());
    // The price: $/h when every candidate has one, else GPUs.
    let price = |x: &CandidateResult| {
        if priced {
            x.cost_per_hour.unwrap_or(f64::INFINITY)
        } else {
            x.gpus.unwrap_or(u64::MAX) as f64
        }
    };
    let margin = |x: &CandidateResult| {
        x.provisioned.as_ref().and_then(|p| p.slo_margin(&header.slo)).unwrap_or(f64::NEG_INFINITY)
    };
    // Cheapest; on a tie the larger SLO margin, then fewer GPUs, then the first listed.
    let key = |x: &CandidateResult| (price(x), -margin(x), x.gpus.unwrap_or(u64::MAX));
    let mut best: Option<&CandidateResult> = None;
    for c in feasible() {
        if best.is_none_or(|b| key(c) < key(b)) {
            best = Some(c);
        }
    }
    let tie_break = best.and_then(|b| {
        let tied: Vec<&CandidateResult> = feasible().filter(|c| price(c) == price(b) && c.name != b.name).collect();
        if tied.is_empty() {
            return None;
        }
        let shown = |x: &CandidateResult| {
            x.provisioned
                .as_ref()
                .and_then(|p| p.slo_margin(&header.slo))
                .map(|m| format!("{} {m:.2}×", x.name))
                .unwrap_or_else(|| format!("{} (no TTFT/TPOT threshold)", x.name))
        };
        let what = if priced { "cost the same per hour" } else { "use as many GPUs" };
        Some(format!(
            "{} and {} {what}: {} is recommended for its SLO margin (the smallest of threshold ÷ worst-seed p99 at the recommended count: {})",
            b.name,
            tied.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
            b.name,
            std::iter::once(b).chain(tied.iter().copied()).map(shown).collect::<Vec<_>>().join(", ")
        ))
    });
    let recommended = best.map(|c| c.name.clone());
    let band_note = best.and_then(|b| super::band::cheapest_across(&candidates, b, priced));
    PlanReport { header, candidates, recommended, tie_break, band_note }
}

struct Search<'a> {
    scenario: &'a Scenario,
    /// Instances down for the whole run in every count tried.
    down: u32,
    cfg: &'a SearchConfig,
    progress: &'a (dyn Fn(u64) + Sync),
    cache: BTreeMap<(u32, usize), SeedResult>,
    trail: Vec<Step>,
    runs: u64,
    requests: u64,
    /// The first run that stopped before its workload ended (event or request budget,
    /// time-series bound): its verdict cannot be trusted, so neither can the candidate's.
    stopped: Option<String>,
    /// First-seed runs that drew no random number, by (instances, rate scale's bits): every
    /// seed gives their result, so the other seeds are not run.
    seedless: BTreeMap<(u32, u64), SeedResult>,
    /// Whether any run drew random numbers (its seed mattered).
    drew: bool,
}

impl<'a> Search<'a> {
    /// A search of `scenario` with `down` instances down for the whole run, nothing run yet.
    fn new(scenario: &'a Scenario, down: u32, cfg: &'a SearchConfig, progress: &'a (dyn Fn(u64) + Sync)) -> Self {
        Search {
            scenario,
            down,
            cfg,
            progress,
            cache: BTreeMap::new(),
            trail: Vec::new(),
            runs: 0,
            requests: 0,
            stopped: None,
            seedless: BTreeMap::new(),
            drew: false,
        }
    }

    /// One run: `instances` instances, seed number `ix`, arrival rates times `scale` — or, when
    /// the first seed's run of the same drew no random number, that run's result under this seed.
    fn run(&mut self, instances: u32, ix: usize, scale: f64) -> SeedResult {
        let seed = self.cfg.seeds[ix];
        if let Some(r) = self.seedless.get(&(instances, scale.to_bits())) {
            return SeedResult { seed, ..r.clone() };
        }
        let mut s = self.scenario.clone();
        s.groups[0].count = instances;
        s.fleet = fixed_fleet(&s, self.down);
        s.set_seed(seed);
        if scale != 1.0 {
            s.workload.scale_rate(scale);
        }
        let out = engine::run(&s);
        // Verdict runs only: the capacity probe's scaled-up runs are estimates.
        if let (Some(st), None, true) = (&out.summary.stopped, &self.stopped, scale == 1.0) {
            let key = match st.reason {
                StopReason::EventBudget => format!("run.max_events = {}", s.run.max_events),
                StopReason::RequestBudget => format!("run.max_requests = {}", s.run.max_requests),
                StopReason::SeriesBudget => "the time-series bound (raise metrics.window_s)".to_string(),
                StopReason::Cancelled | StopReason::TimeLimit | StopReason::Sigint | StopReason::Sigterm => {
                    "a stop request".to_string()
                }
            };
            self.stopped = Some(format!(
                "the run of {instances} instance(s), seed {seed}, stopped early at simulated time {:.3} s ({key}), \
                 so its SLO verdict is unknown; raise the bound",
                st.at_s
            ));
        }
        let r = SeedResult::from_run(seed, &out, &s.slo);
        if out.random_draws == 0 && ix == 0 {
            self.seedless.insert((instances, scale.to_bits()), r.clone());
        }
        self.drew |= out.random_draws > 0;
        self.runs += 1;
        self.requests += r.requests;
        (self.progress)(r.requests);
        r
    }

    /// Writes into `out` the runs and requests of this search and the `extra` ones made beside
    /// it, and whether the runs were deterministic.
    fn account(&self, out: &mut CandidateResult, extra_runs: u64, extra_requests: u64) {
        out.runs = self.runs + extra_runs;
        out.simulated_requests = self.requests + extra_requests;
        out.deterministic = self.runs > 0 && !self.drew;
    }

    fn at(&mut self, n: u32, ix: usize) -> SeedResult {
        if let Some(r) = self.cache.get(&(n, ix)) {
            return r.clone();
        }
        let r = self.run(n, ix, 1.0);
        self.cache.insert((n, ix), r.clone());
        r
    }

    /// Keeps a run made outside the cache (the capacity search's first run is the one-instance
    /// run at the workload's own load).
    fn remember(&mut self, n: u32, ix: usize, r: &SeedResult) {
        self.cache.entry((n, ix)).or_insert_with(|| r.clone());
    }

    /// The first-seed minimum N₀ and the decisive N: from N₀ up, the first count passing on
    /// every seed.
    fn minimum(&mut self, start: u32) -> Result<(u32, u32), Infeasible> {
        let n0 = self.first_seed_minimum(start)?;
        let mut n = n0;
        loop {
            if self.point(n).all_pass() {
                return Ok((n0, n));
            }
            if n >= self.cfg.max_instances {
                return Err(Infeasible::NotEverySeed { max: self.cfg.max_instances });
            }
            n += 1;
        }
    }

    /// Whether `n` instances pass on the first seed (exploratory search).
    fn pass(&mut self, n: u32) -> bool {
        let r = self.at(n, 0);
        if !self.trail.iter().any(|s| s.instances == n) {
            self.trail.push(Step { instances: n, met: r.met, attainment: r.attainment });
        }
        r.met
    }

    fn point(&mut self, n: u32) -> Point {
        Point { instances: n, seeds: (0..self.cfg.seeds.len()).map(|ix| self.at(n, ix)).collect() }
    }

    /// Misses no count of instances can fix: rejected requests (too long for the context, the
    /// token budget or the KV cache of an instance) beyond what the attainment target allows.
    fn hopeless(&self, r: &SeedResult) -> Option<Infeasible> {
        let allowed = (1.0 - self.scenario.slo.attainment) * r.measured as f64;
        (r.misses.rejected as f64 > allowed).then_some(Infeasible::Rejected {
            rejected: r.misses.rejected,
            measured: r.measured,
            pools: false,
        })
    }

    /// The single-instance capacity: the highest rate (this traffic shape, scaled) at which
    /// one instance meets the SLO on every seed; doubled or halved from the workload's own
    /// rate to a bracket, then bisected to `capacity_precision`.
    ///
    /// `None` for closed-loop workloads, and when requests are rejected whatever the load (no
    /// rate is sustainable then; the first run, at the workload's own rate, shows it).
    fn capacity(&mut self) -> Option<f64> {
        let base = self.scenario.workload.mean_rate().filter(|r| *r > 0.0)?;
        let seeds = self.cfg.seeds.len();
        let first = self.run(1, 0, 1.0);
        self.remember(1, 0, &first);
        if self.hopeless(&first).is_some() {
            return None;
        }
        let pass = |s: &mut Self, rate: f64| (0..seeds).all(|ix| s.run(1, ix, rate / base).met);
        let (mut lo, mut hi);
        if first.met && (1..seeds).all(|ix| self.run(1, ix, 1.0).met) {
            lo = base;
            loop {
                if lo >= base * 1024.0 {
                    return Some(lo);
                }
                if pass(self, lo * 2.0) {
                    lo *= 2.0;
                } else {
                    hi = lo * 2.0;
                    break;
                }
            }
        } else {
            hi = base;
            loop {
                if hi <= base / 4096.0 {
                    return Some(0.0);
                }
                if pass(self, hi / 2.0) {
                    lo = hi / 2.0;
                    break;
                }
                hi /= 2.0;
            }
        }
        while hi > lo * (1.0 + self.cfg.capacity_precision) {
            let mid = (lo + hi) / 2.0;
            if pass(self, mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// The fewest instances passing on the first seed, assuming more never hurts: exponential
    /// steps from `start` to a bracket, then bisection. `Err` when none up to the maximum does.
    fn first_seed_minimum(&mut self, start: u32) -> Result<u32, Infeasible> {
        let max = self.cfg.max_instances;
        let floor = self.down;
        let start = start.clamp(floor + 1, max);
        // lo fails (`down` instances, all of them down, trivially), hi passes.
        let (mut lo, mut hi);
        if self.pass(start) {
            hi = start;
            lo = floor;
            let mut step = 1;
            while hi > floor + 1 {
                let m = hi.saturating_sub(step).max(floor + 1);
                if self.pass(m) {
                    hi = m;
                    step *= 2;
                } else {
                    lo = m;
                    break;
                }
            }
        } else {
            let r = self.at(start, 0);
            if let Some(why) = self.hopeless(&r) {
                return Err(why);
            }
            lo = start;
            let mut step = 1u32;
            loop {
                if lo >= max {
                    return Err(Infeasible::MaxInstances { max });
                }
                let m = lo.saturating_add(step).min(max);
                if self.pass(m) {
                    hi = m;
                    break;
                }
                lo = m;
                step = step.saturating_mul(2);
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.pass(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(hi)
    }
}

/// One run of `instances` instances of a colocated candidate on the first seed, with `[plan]
/// spare` instances down: the run the plan's search makes there first. Whether it meets the
/// SLO; `None` when the candidate is disaggregated or infeasible as written, or the run stopped
/// before its workload ended (no verdict). Since the search assumes that adding instances never
/// makes the first seed fail, a probe that fails says the candidate's minimum is above `instances`.
pub fn probe(c: &Candidate, cfg: &SearchConfig, instances: u32, progress: &(dyn Fn(u64) + Sync)) -> Option<bool> {
    if c.pools.is_some() {
        return None;
    }
    let scenario = c.scenario.as_ref()?;
    let mut s = Search::new(scenario, cfg.spare, cfg, progress);
    let r = s.run(instances.clamp(cfg.min_instances(), cfg.max_instances), 0, 1.0);
    s.stopped.is_none().then_some(r.met)
}

/// Sizes one candidate. `progress` is called after every simulation run with the number of
/// requests it simulated. `start`: where the instance search starts (a count [`probe`] found
/// passing), in place of the count the single-instance capacity suggests; the answer is the
/// same from any start, since the search assumes more instances never make the first seed fail.
/// A feasible result carries its [`crate::scenario::Deployment`] at the recommended count.
pub fn plan_candidate(
    c: &Candidate,
    cfg: &SearchConfig,
    start: Option<u32>,
    progress: &(dyn Fn(u64) + Sync),
) -> CandidateResult {
    let mut out = size_candidate(c, cfg, start, progress);
    out.priced_by = c.priced_by.clone();
    let counts = match (&c.pools, &out.pools) {
        (Some(pc), Some(p)) => p.prefill_instances.zip(p.decode_instances).map(|(np, nd)| {
            let mut v = vec![0; pc.prefill_group.max(pc.decode_group) + 1];
            (v[pc.prefill_group], v[pc.decode_group]) = (np, nd);
            v
        }),
        (None, _) => out.instances.map(|n| vec![n]),
        _ => None,
    };
    if let (true, Some(s), Some(counts)) = (out.feasible, &c.scenario, counts) {
        out.deploy = Some(crate::scenario::Deployment::of(s, &counts));
    }
    out.economics = super::economics::economics(&out);
    if let Some((b, runs, requests)) = super::band::band(c, &out, cfg, progress) {
        (out.band, out.runs, out.simulated_requests) = (Some(b), out.runs + runs, out.simulated_requests + requests);
    }
    out
}

/// The fewest instances meeting the SLO on the first seed from `start` (the exploratory search
/// alone, `[plan] spare` instances down), `None` when none does; the runs and requests it took.
pub(super) fn first_seed_count(
    scenario: &Scenario,
    cfg: &SearchConfig,
    start: u32,
    progress: &(dyn Fn(u64) + Sync),
) -> (Option<u32>, u64, u64) {
    let mut s = Search::new(scenario, cfg.spare, cfg, progress);
    let n = s.first_seed_minimum(start).ok();
    (n, s.runs, s.requests)
}

/// [`plan_candidate`] without the deployment and the buyer's figures.
fn size_candidate(
    c: &Candidate,
    cfg: &SearchConfig,
    start: Option<u32>,
    progress: &(dyn Fn(u64) + Sync),
) -> CandidateResult {
    let mut out = CandidateResult {
        gpu: c.gpu.clone(),
        tp: c.tp,
        pp: c.pp,
        infeasible_reason: c.infeasible.clone(),
        price_per_gpu_hour: c.price_per_gpu_hour,
        calibration: c.calibration.clone(),
        ..CandidateResult::named(&c.name)
    };
    if let Some(p) = &c.pools {
        super::pools::plan_pools(c, p, cfg, progress, &mut out);
        return out;
    }
    let Some(scenario) = &c.scenario else { return out };
    let g = &scenario.groups[0];
    (out.kv_blocks_per_instance, out.gpu_memory_gib) =
        (Some(g.memory.kv_blocks), Some(g.gpu.memory_bytes as f64 / crate::memory::GIB));
    let search = |down| Search::new(scenario, down, cfg, progress);
    let mut s = search(0);
    let mut plain_stopped = None;
    let capacity = if cfg.capacity { s.capacity() } else { None };
    out.single_instance_capacity_rps = capacity;
    let mut start = match (start, capacity, scenario.workload.mean_rate()) {
        (Some(n), _, _) => n,
        (None, Some(cap), Some(rate)) if cap > 0.0 => (rate / cap).ceil().min(u32::MAX as f64) as u32,
        _ => 1,
    };
    let (mut extra_runs, mut extra_requests) = (0, 0);
    if cfg.spare > 0 {
        // N + k: first the count with none down, then the search again with k down for the
        // whole run, from N + k.
        let mut plain = s;
        let plain_min = plain.minimum(start);
        out.spare_check = plain_min.as_ref().ok().map(|&(_, n)| SpareCheck {
            spare: cfg.spare,
            instances_min_no_failures: n,
            no_failures: plain.point(n),
            with_spare_down: (n > cfg.spare).then(|| {
                let mut down = search(cfg.spare);
                let p = down.point(n);
                (extra_runs, extra_requests) = (extra_runs + down.runs, extra_requests + down.requests);
                p
            }),
        });
        start = plain_min.map(|(_, n)| n).unwrap_or(start).saturating_add(cfg.spare);
        extra_runs += plain.runs;
        extra_requests += plain.requests;
        plain_stopped = plain.stopped.take();
        s = search(cfg.spare);
    }

    let result = s.minimum(start);
    match result {
        Ok((n0, n)) => {
            let top = s.point(n);
            let below = (n > s.down + 1).then(|| s.point(n - 1));
            let worst = |f: fn(&SeedResult) -> f64, max: bool| {
                top.seeds.iter().map(f).reduce(|a, b| if (b > a) == max { b } else { a })
            };
            out.feasible = true;
            out.instances_min = Some(n);
            let provisioned = cfg.provisioned(n);
            out.instances = Some(provisioned);
            let gpus = provisioned as u64 * c.tp * c.pp;
            out.gpus = Some(gpus);
            out.cost_per_hour = c.price_per_gpu_hour.map(|p| p * gpus as f64);
            out.ttft_ms_p99 = worst(|r| r.ttft_ms_p99, true);
            out.tpot_ms_p99 = worst(|r| r.tpot_ms_p99, true);
            out.attainment = worst(|r| r.attainment, false);
            out.goodput_rps = worst(|r| r.goodput_rps, false);
            out.kv_peak = worst(|r| r.kv_peak, true);
            // The recommended count's own figures: run it when headroom or spares change it.
            out.provisioned = Some(AtCount::of(if provisioned == n { top.clone() } else { s.point(provisioned) }));
            // Every count between N₀ − 1 and N − 1 that passed on some seeds is borderline.
            for m in n0.saturating_sub(1).max(s.down + 1)..n {
                let p = s.point(m);
                if p.mixed() {
                    let att = p.seeds.iter().map(|r| r.attainment);
                    out.borderline.push(Borderline {
                        instances: m,
                        passed: p.passed() as u32,
                        seeds: p.seeds.len() as u32,
                        attainment_min: att.clone().fold(f64::INFINITY, f64::min),
                        attainment_max: att.fold(f64::NEG_INFINITY, f64::max),
                    });
                }
            }
            let evidence = below.as_ref().unwrap_or(&top);
            let w = evidence.worst();
            out.binding = Some(classify(w, &scenario.slo));
            out.binding_evidence = Some(describe(evidence.instances, s.down, w, below.is_none()));
            out.points = below.into_iter().chain(std::iter::once(top)).collect();
        }
        Err(why) => {
            out.infeasible_reason = Some(why.to_string());
            let hopeless =
                s.cache.get(&(start.clamp(s.down + 1, cfg.max_instances), 0)).and_then(|r| s.hopeless(r)).is_some();
            // Report the largest count run, as evidence.
            if let Some((&(n, _), _)) = s.cache.iter().filter(|((_, ix), _)| *ix == 0).max_by_key(|((n, _), _)| *n) {
                let p = s.point(n);
                let w = p.worst().clone();
                out.ttft_ms_p99 = Some(w.ttft_ms_p99);
                out.tpot_ms_p99 = Some(w.tpot_ms_p99);
                out.attainment = Some(w.attainment);
                out.goodput_rps = Some(w.goodput_rps);
                out.kv_peak = Some(w.kv_peak);
                // Rejections are no capacity constraint: no binding constraint is named then.
                if !hopeless {
                    out.binding = Some(classify(&w, &scenario.slo));
                }
                out.binding_evidence = Some(describe(n, s.down, &w, false));
                out.points = vec![p];
            }
        }
    }
    out.trail = std::mem::take(&mut s.trail);
    if let Some(why) = plain_stopped.or(s.stopped.take()) {
        // No count is recommended on a verdict a cut-short run gave.
        out.feasible = false;
        out.instances_min = None;
        out.instances = None;
        out.gpus = None;
        out.cost_per_hour = None;
        out.infeasible_reason = Some(why);
        s.account(&mut out, extra_runs, extra_requests);
        return out;
    }
    if let (Some(n), Some(a)) = (out.instances_min, scenario.fleet.as_ref().and_then(|f| f.autoscale.as_ref())) {
        let fixed = (n, out.attainment.unwrap_or(0.0));
        let (cmp, requests) = compare_autoscaled(scenario, cfg, fixed, c.price_per_gpu_hour, a, progress);
        extra_runs += cmp.seeds.len() as u64;
        extra_requests += requests;
        out.autoscaled = Some(cmp);
    }
    s.account(&mut out, extra_runs, extra_requests);
    out
}

/// The fleet of a fixed-count plan run: failures and autoscaling left out (they belong to
/// `simulate`), `down` instances down for the whole run.
fn fixed_fleet(s: &Scenario, down: u32) -> Option<crate::fleet::FleetSection> {
    (down > 0).then(|| crate::fleet::FleetSection {
        failures: Some(crate::fleet::FailuresSection { down, ..Default::default() }),
        autoscale: None,
        ..s.fleet.clone().unwrap_or_default()
    })
}

/// Runs the autoscaled fleet (from its `min`, no failures) on every seed and sets it against
/// the fixed fleet of `fixed` instances.
fn compare_autoscaled(
    scenario: &Scenario,
    cfg: &SearchConfig,
    (fixed, fixed_attainment): (u32, f64),
    price_per_gpu_hour: Option<f64>,
    a: &crate::fleet::AutoscaleSection,
    progress: &(dyn Fn(u64) + Sync),
) -> (AutoscaleComparison, u64) {
    let tp = scenario.groups[0].gpus() as f64;
    let mut requests = 0;
    let seeds: Vec<AutoscaleSeed> = cfg
        .seeds
        .iter()
        .map(|&seed| {
            let mut s = scenario.clone();
            s.groups[0].count = a.min;
            s.fleet = Some(crate::fleet::FleetSection {
                failures: None,
                autoscale: Some(crate::fleet::AutoscaleSection { group: None, ..a.clone() }),
                ..scenario.fleet.clone().unwrap_or_default()
            });
            s.set_seed(seed);
            let out = engine::run(&s);
            requests += out.summary.requests.arrived;
            progress(out.summary.requests.arrived);
            let f = &out.summary.fleet;
            AutoscaleSeed {
                seed,
                attainment: out.summary.slo.attainment,
                met: out.summary.slo.met,
                instances_mean: f.instances_mean,
                instances_max: f.instances_max,
                instance_hours: f.instance_hours,
                simulated_s: out.summary.simulated_s,
                scale_ups: f.scale_ups,
                scale_downs: f.scale_downs,
            }
        })
        .collect();
    let k = seeds.len().max(1) as f64;
    let instances_mean = seeds.iter().map(|r| r.instances_mean).sum::<f64>() / k;
    let per_day = |instances: f64| instances * 24.0;
    let cost = |instances: f64| price_per_gpu_hour.map(|p| per_day(instances) * tp * p);
    let cmp = AutoscaleComparison {
        fixed_instances: fixed,
        fixed_attainment,
        fixed_instance_hours_per_day: per_day(fixed as f64),
        fixed_cost_per_day: cost(fixed as f64),
        min: a.min,
        max: a.max,
        instances_mean,
        instances_max: seeds.iter().map(|r| r.instances_max).max().unwrap_or(0),
        instance_hours_per_day: per_day(instances_mean),
        cost_per_day: cost(instances_mean),
        attainment: seeds.iter().map(|r| r.attainment).fold(f64::INFINITY, f64::min),
        met: seeds.iter().all(|r| r.met),
        seeds,
    };
    (cmp, requests)
}

/// "1 instance", "3 instances".
pub fn instances(n: u32) -> String {
    format!("{n} instance{}", if n == 1 { "" } else { "s" })
}

fn describe(n: u32, down: u32, r: &SeedResult, passing: bool) -> String {
    let m = &r.misses;
    let down = if down > 0 { format!(", {down} down") } else { String::new() };
    let head = if passing {
        format!("at {} (seed {}{down}, nothing fails)", instances(n), r.seed)
    } else {
        format!("at {} (seed {}{down})", instances(n), r.seed)
    };
    format!(
        "{head}: {} of {} requests missed — {} on decode speed, {} on start (TTFT {}, TPOT {}, E2E {}, rejected {}, unfinished {}); TTFT p99 {:.0} ms, TPOT p99 {:.1} ms; KV peak {:.0}%, {} preemptions",
        m.slow_decode + m.slow_start,
        r.measured,
        m.slow_decode,
        m.slow_start,
        m.ttft,
        m.tpot,
        m.e2e,
        m.rejected,
        m.unfinished,
        r.ttft_ms_p99,
        r.tpot_ms_p99,
        r.kv_peak * 100.0,
        r.preemptions
    )
}
