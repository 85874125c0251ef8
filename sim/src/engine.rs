//! The discrete-event engine: an event queue and the loop that drives instances.
//!
//! ```text
//!   pop (time, seq) ─► Arrival ─► router ─► instance.enqueue (or reject)
//!                   ├► IterationEnd(i) ─► instance.finish_iteration ─► closed-loop clients
//!                   │                      (disaggregated: hand-offs, transfers that can start)
//!                   └► KvTransferDone ─► prefill frees the KV, the request decodes (`disagg`)
//!   when the clock is about to move on: every idle instance with work starts an iteration,
//!   which pushes exactly one IterationEnd event.
//! ```
//! Starting iterations only when no other event is due at the same instant lets every request
//! that arrives at that instant join the batch. There is one event per iteration per instance
//! and one pending arrival at a time, never one event per token.
//!
//! Two components have their own events and handlers, and the loop calls them at fixed points
//! without asking whether they are configured:
//! - the fleet (`engine/fleet.rs`, state in `fleet::Fleet`): `Event::Fleet` (failures,
//!   detections, restarts, autoscaler ticks); at an arrival, whether any instance is routable
//!   and whether the chosen one has crashed unnoticed; a copy of each accepted request (kept
//!   only when failures can happen); a stale iteration end (its instance failed); a draining
//!   instance that has emptied. Without a `[fleet]` section every instance serves the whole
//!   run, no fleet event exists, and each of these answers "nothing to do". A run ends when
//!   nothing but fleet events is left and no request is in flight.
//! - disaggregation (`engine/pools.rs`, present only with `[disaggregation]`): arrivals go to
//!   the prefill pool, hand-offs after each iteration, `Event::KvTransferDone`.

mod fleet;
mod pools;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::cost::{CostAccount, CostModel, Profiled, Roofline};
use crate::fleet::{Fleet, FleetEvent};
use crate::instance::{Departure, Instance, InstanceConfig, PolicyConfig};
use crate::metrics::{summarize, Recorder, Summary};
use crate::router::{self, Router};
use crate::scenario::{CostSpec, Scenario};
use crate::time::SimTime;
use crate::workload::{Request, TraceError, Workload, NO_CLIENT};

/// Events, ordered by time, then by the order they were scheduled.
#[derive(Debug)]
pub enum Event {
    /// Boxed, as is `Frontend`'s: events are moved on every push and pop of the queue, and
    /// nearly all of them are iteration ends.
    Arrival(Box<Request>),
    /// The frontend has processed a request (`[frontend]`): the router gets it now.
    Frontend(Box<Request>),
    IterationEnd(u32),
    /// A failure, detection, restart, stranded requests due, or an autoscaler tick.
    Fleet(FleetEvent),
    /// The KV of request `id` moved from prefill instance `from` to decode instance `to`.
    KvTransferDone {
        id: u64,
        from: u32,
        to: u32,
    },
}

struct Entry {
    /// The time (high 64 bits) and the insertion sequence (low 64 bits): one comparison orders
    /// by time, then by insertion.
    key: u128,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

/// A min-queue of events keyed by (time, insertion sequence): equal times pop in FIFO order.
#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: SimTime, event: Event) {
        self.heap.push(Reverse(Entry { key: (time.0 as u128) << 64 | self.seq as u128, event }));
        self.seq += 1;
    }

    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        self.heap.pop().map(|Reverse(e)| (SimTime((e.key >> 64) as u64), e.event))
    }

    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|Reverse(e)| SimTime((e.key >> 64) as u64))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// Set to make every run in this process stop at its next check (every
/// [`CANCEL_CHECK_EVENTS`] events), with `summary.stopped` saying so: the CLI's wall-clock
/// guard sets it from a timer thread. Nothing in the simulator reads a clock.
pub static CANCEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`CANCEL`] is set: for loops outside a run (plan candidates) to stop early too.
pub fn cancelled() -> bool {
    CANCEL.load(std::sync::atomic::Ordering::Relaxed)
}

/// How often (in events) a run looks at [`CANCEL`].
pub const CANCEL_CHECK_EVENTS: u64 = 4096;

/// Why a run stopped before its workload ended (the summary's type, under the engine's name).
pub use crate::metrics::StopReason as Stopped;

/// Runs `f` on an instance and moves the recorder's occupancy gauges (waiting, running, KV in
/// use) by what it changed: the one place where the gauges follow the instances.
pub(crate) fn tracked<R>(
    inst: &mut Instance,
    rec: &mut Recorder,
    f: impl FnOnce(&mut Instance, &mut Recorder) -> R,
) -> R {
    let before = inst.gauges();
    let r = f(inst, rec);
    rec.gauge_delta(before, inst.gauges());
    r
}

/// What a run produces.
pub struct RunOutput {
    pub summary: Summary,
    pub recorder: Recorder,
    /// Events processed.
    pub events: u64,
    /// Random numbers the run drew, from building it to its end (a workload given to
    /// [`Simulation::with_workload`] drew its own before). None: every seed gives this result.
    pub random_draws: u64,
}

/// Builds the cost model of an instance group.
pub fn cost_model(s: &Scenario, group: usize) -> Arc<dyn CostModel> {
    let g = &s.groups[group];
    let stage = stage_model(s, group);
    let model: Arc<dyn CostModel> = if g.layout.pp <= 1 {
        stage
    } else {
        let links = crate::cost::stage_links(&g.gpu, g.tp, g.layout.pp);
        Arc::new(crate::cost::Pipeline::new(stage, s.model.layers, g.layout.pp, s.model.hidden, links))
    };
    let model: Arc<dyn CostModel> = match g.calibrated().map(|c| c.factors()) {
        Some(f) if !f.costs_unchanged() => Arc::new(crate::cost::Calibrated::new(model, f)),
        _ => model,
    };
    match s.cost_scale {
        1.0 => model,
        f => Arc::new(crate::cost::Scaled::new(model, f)),
    }
}

/// What prices group `g`'s iterations, for the summary (`emulated`: kernels executed as the run
/// went, whatever the scenario names).
fn cost_source(g: &crate::instance::InstanceGroup, emulated: bool) -> crate::metrics::GroupCostSource {
    let (source, words) = if emulated {
        ("emulated".to_string(), "kernels executed as the run went (emulation)".to_string())
    } else {
        (g.cost_source().to_string(), g.cost_words())
    };
    crate::metrics::GroupCostSource { group: g.name.clone(), source, words }
}

/// Refuses a calibration that makes a group's iterations faster than its GPU can physically run
/// them: at a decode step of 1 and of 64 sequences over 1,024 tokens of context and a
/// 2,048-token prefill, the calibrated GPU time must be at least 90% of the time the dense
/// GEMMs and decode attention need at the GPU's peaks (their weights and KV read at its full
/// bandwidth, their FLOPs at its fastest tensor cores: what profiles and database slices are
/// held to). The error names the calibration, the batch, the GPU and both times. Pipelined
/// groups are not checked (a stage's share of the floor is not one op's).
pub fn check_calibrations(s: &Scenario) -> Result<(), crate::config::ConfigError> {
    for (i, g) in s.groups.iter().enumerate() {
        let (Some(cal), CostSpec::Roofline(c)) = (g.calibrated(), &g.cost) else { continue };
        if cal.factors().costs_unchanged() || g.layout.pp > 1 {
            continue;
        }
        let measured = c
            .database
            .as_ref()
            .and_then(|d| d.weights.as_deref())
            .and_then(crate::cost::DatabaseRequest::measured_dtype);
        let model = g.scheduler.kv_cache.model(&s.model);
        let floor = Roofline::new(model, g.gpu.clone(), g.tp, c.params()).physical(measured);
        let calibrated = cost_model(s, i);
        for (b, what) in Roofline::floor_probes() {
            let min = floor.certain_floor(&b);
            let (total, cpu) = calibrated.iteration_times(&b, None);
            let gpu = total.0.saturating_sub(cpu.0) as f64 * 1e-9;
            if gpu > 0.0 && gpu < 0.9 * min {
                let key = if s.resolved.cluster.groups.is_empty() {
                    "cost.calibration".to_string()
                } else {
                    format!("cluster.groups[{i}].cost.calibration")
                };
                return Err(crate::config::ConfigError::at(
                    &key,
                    format!(
                        "{}: calibrated, {what} takes {:.2} µs of GPU time, below the {} for its GEMMs and decode \
                         attention alone: fitted on another machine, or a factor at the bound of its range?",
                        c.calibration.as_deref().unwrap_or("the calibration"),
                        gpu * 1e6,
                        floor.floor_words(min)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The delay a calibration adds between the engine and the client (its frontend factor), from
/// the first calibrated group: every request passes one frontend before the router.
pub fn client_delay(s: &Scenario) -> SimTime {
    s.groups.iter().find_map(|g| g.calibrated()).map_or(SimTime::ZERO, |c| c.factors().client_delay())
}

/// The cost model of one pipeline stage's `tp` GPUs running the whole model (all of an
/// instance's GPUs without pipeline parallelism).
fn stage_model(s: &Scenario, group: usize) -> Arc<dyn CostModel> {
    let g = &s.groups[group];
    // The group's KV dtype and CPU overheads may differ from the scenario-wide ones.
    let model = g.scheduler.kv_cache.model(&s.model);
    match &g.cost {
        CostSpec::Roofline(c) => {
            let params = g.scheduler.cpu.apply(&c.params());
            match (&g.profile, &g.rank_profile) {
                (Some(p), Some(rank)) => Arc::new(
                    crate::cost::DpProfiled::new(model, g.gpu.clone(), g.tp, g.layout, params, rank, p)
                        .expect("the slices were checked when the scenario was validated"),
                ),
                (Some(p), None) => Arc::new(
                    Profiled::new(model, g.gpu.clone(), g.tp, params, p)
                        .expect("the profile was checked when the scenario was validated"),
                ),
                (None, _) => Arc::new(Roofline::new(model, g.gpu.clone(), g.tp, params).with_layout(g.layout)),
            }
        }
        CostSpec::Linear(l) => Arc::new(l.clone()),
    }
}

/// A generous estimate of how many requests a workload issues, for reserving the records up
/// front: growing a vector by doubling briefly holds both copies, which would dominate peak
/// memory. Untouched reserved pages cost no physical memory, so over-estimating is cheap.
fn expected_requests(w: &crate::workload::WorkloadSpec) -> usize {
    let by_rate = match (w.arrival.as_ref().and_then(|a| a.mean_rate()), w.end_s()) {
        (Some(rate), Some(end)) => rate * end * 1.05 + 1000.0,
        _ => f64::INFINITY,
    };
    // A trace's scan counts its requests (before sampling, which only removes some).
    let by_rate = match w.trace.as_ref().and_then(|t| t.source.as_ref()?.scan.as_ref()) {
        Some(scan) => scan.requests as f64,
        None => by_rate,
    };
    let n = (w.requests.map(|n| n as f64).unwrap_or(f64::INFINITY)).min(by_rate);
    if n.is_finite() {
        (n as usize).min(1 << 24)
    } else {
        1 << 16
    }
}

/// One simulation run.
pub struct Simulation {
    now: SimTime,
    queue: EventQueue,
    instances: Vec<Instance>,
    router: Box<dyn Router>,
    workload: Workload,
    rec: Recorder,
    /// Instances whose state changed since they last had the chance to start an iteration.
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
    max_time: SimTime,
    events: u64,
    /// `run.max_events`: the event budget.
    max_events: u64,
    /// `run.max_requests`: the most requests recorded.
    max_requests: u64,
    /// Why the run stopped before its end, if it did.
    stopped: Option<Stopped>,
    departed: Vec<Departure>,
    scenario_name: String,
    seed: u64,
    /// This thread's random draws when the run was built ([`crate::rng::draws`]).
    draws_before: u64,
    slo: crate::metrics::SloSection,
    /// Instance phases, failures, autoscaling (inactive without a `[fleet]` section).
    fleet: Box<Fleet>,
    /// Prefill and decode pools (a disaggregated cluster).
    disagg: Option<Box<pools::Pools>>,
    /// Each group's name, cost model and instances, for the summary's `cost` section.
    group_costs: Vec<(String, Arc<dyn CostModel>, Vec<u32>)>,
    /// What prices each group, for the same section.
    cost_sources: Vec<crate::metrics::GroupCostSource>,
    /// The API server between clients and the router (`[frontend]`).
    frontend: Option<Box<crate::frontend::Frontend>>,
    /// Each instance's balancer between its DP attention ranks (`None`: one rank), and the
    /// ranks' loads it reads, reused.
    dp_balancers: Vec<Option<Box<dyn Router<crate::instance::RankLoad>>>>,
    rank_loads: Vec<crate::instance::RankLoad>,
}

/// The configuration of group `gi`'s instances, weighed for routers by its own cost model `own`.
fn instance_config(s: &Scenario, gi: usize, own: &dyn CostModel) -> InstanceConfig {
    let g = &s.groups[gi];
    // Each DP attention rank has its share of the instance's blocks (its own sequences' KV).
    let dp_ranks = g.layout.dp_attention.max(1);
    let kv_blocks = (g.memory.kv_blocks / dp_ranks).min(u32::MAX as u64) as u32;
    let mut cfg = InstanceConfig {
        max_num_seqs: g.scheduler.max_num_seqs,
        max_num_batched_tokens: g.scheduler.max_num_batched_tokens as u64,
        block_tokens: g.scheduler.block_tokens as u64,
        watermark_blocks: (g.scheduler.batching.watermark(g.scheduler.watermark) * kv_blocks as f64).floor() as u32,
        max_model_len: g.max_model_len,
        kv_blocks,
        dp_ranks: dp_ranks as u32,
        capacity: 1.0,
        policy: PolicyConfig { attention_dp: s.attention_dp, ..PolicyConfig::from_group(g, s.seed) },
    };
    cfg.capacity = crate::router::capacity_weight(&cfg, own);
    cfg
}

impl Simulation {
    pub fn new(s: &Scenario) -> Simulation {
        Simulation::started(Simulation::build(s, None))
    }

    /// A run whose instances of group `g` price iterations with `cost(g)` instead of the
    /// scenario's cost model (emulation by really executing batches, tests).
    pub fn new_with_cost(s: &Scenario, cost: &dyn Fn(usize) -> Arc<dyn CostModel>) -> Simulation {
        Simulation::started(Simulation::build(s, Some(cost)))
    }

    /// `sim` with its workload's first arrivals queued.
    fn started(mut sim: Simulation) -> Simulation {
        for r in sim.workload.initial() {
            sim.queue.push(r.arrival, Event::Arrival(Box::new(r)));
        }
        sim
    }

    /// A run whose open-loop arrivals are exactly `requests` (sorted by arrival) instead of
    /// the scenario's generated stream; the scenario's `[workload]` still sets the measurement
    /// window. For tests and for callers that build request streams themselves.
    pub fn with_requests(s: &Scenario, requests: Vec<Request>) -> Simulation {
        Simulation::with_workload(s, Workload::from_requests(s.workload.clone(), s.seed, requests))
    }

    /// A run of `s` whose requests come from `workload` (for example a list of requests parsed
    /// from a trace) instead of the scenario's generator.
    pub fn with_workload(s: &Scenario, workload: Workload) -> Simulation {
        let mut sim = Simulation::build(s, None);
        sim.workload = workload;
        Simulation::started(sim)
    }

    /// The run's instances, each group priced by `cost_of(group)` or, without it, by the
    /// scenario's own cost model — which also weighs the instances for routers either way.
    fn build(s: &Scenario, cost_of: Option<&dyn Fn(usize) -> Arc<dyn CostModel>>) -> Simulation {
        let draws_before = crate::rng::draws();
        let (mut instances, mut group_costs) = (Vec::new(), Vec::new());
        // A disaggregated cluster numbers its prefill pool first, then its decode pool.
        let mut order: Vec<usize> = (0..s.groups.len()).collect();
        order.sort_by_key(|&gi| s.groups[gi].role == crate::instance::Role::Decode);
        for &gi in &order {
            let g = &s.groups[gi];
            // Built once per group (a measured profile's tables are read into curves).
            let own = cost_model(s, gi);
            let cost = cost_of.map_or_else(|| own.clone(), |f| f(gi));
            let cfg = instance_config(s, gi, own.as_ref());
            let mut ids = Vec::new();
            for _ in 0..crate::fleet::instances_built(s.fleet.as_ref(), &s.groups, gi) {
                let id = instances.len() as u32;
                ids.push(id);
                instances.push(Instance::new(id, cfg.clone(), cost.clone()));
            }
            group_costs.push((g.name.clone(), cost, ids));
        }
        let kv_total = instances.iter().map(|i| i.kv_blocks_total() as u64).sum();
        let workload = Workload::new(s.workload.clone(), s.seed);
        let end_s = s.workload.end_s();
        let from = SimTime::from_secs_f64(s.metrics.warmup_s);
        let to = match end_s {
            Some(e) => SimTime::from_secs_f64(e - s.metrics.cooldown_s),
            None => SimTime::MAX,
        };
        let mut rec = Recorder::new((from, to), kv_total, SimTime::from_secs_f64(s.metrics.window_s));
        rec.reserve(expected_requests(&s.workload));
        let frontend = s.frontend.map(|f| Box::new(crate::frontend::Frontend::new(f)));
        if let Some(f) = &frontend {
            rec.token_delay = f.token_delay();
        }
        rec.token_delay += client_delay(s);
        let n = instances.len();
        let prices = s.resolved.plan.as_ref().and_then(|p| {
            s.groups.iter().map(|g| p.price_per_gpu_hour.get(&g.gpu.name).copied()).collect::<Option<Vec<f64>>>()
        });
        let (fleet, fleet_events) = Fleet::new(s.fleet.as_ref(), &s.groups, prices, s.seed, &mut instances);
        let mut sim = Simulation {
            draws_before,
            now: SimTime::ZERO,
            queue: EventQueue::default(),
            router: router::build(&s.router, s.seed),
            dp_balancers: instances.iter().map(|i| (i.ranks() > 1).then(|| s.dp_balance.build())).collect(),
            instances,
            workload,
            rec,
            dirty: Vec::new(),
            is_dirty: vec![false; n],
            max_time: s.run.max_time_s.map(SimTime::from_secs_f64).unwrap_or(SimTime::MAX),
            events: 0,
            max_events: s.run.max_events,
            max_requests: s.run.max_requests,
            stopped: None,
            departed: Vec::new(),
            scenario_name: s.name.clone(),
            seed: s.seed,
            slo: s.slo.clone(),
            fleet: Box::new(fleet),
            disagg: s.disaggregation.as_ref().map(|d| Box::new(pools::Pools::new(s, d, &order))),
            group_costs,
            cost_sources: order.iter().map(|&gi| cost_source(&s.groups[gi], cost_of.is_some())).collect(),
            frontend,
            rank_loads: Vec::new(),
        };
        sim.start_fleet(fleet_events);
        sim
    }

    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// Queues an accepted request on instance `i` (its gauges follow; it gets scheduled).
    fn enqueue(&mut self, i: usize, req: &Request) {
        let counted = self.rec.counts(req.arrival);
        let rank = match self.dp_balancers[i].as_mut() {
            Some(b) => {
                let inst = &self.instances[i];
                self.rank_loads.clear();
                self.rank_loads.extend((0..inst.ranks()).map(|r| inst.rank_load(r)));
                b.route(req, &self.rank_loads)
            }
            None => 0,
        };
        tracked(&mut self.instances[i], &mut self.rec, |inst, _| inst.enqueue_on(rank, req, counted));
        self.mark(i as u32);
    }

    fn mark(&mut self, i: u32) {
        if !self.is_dirty[i as usize] {
            self.is_dirty[i as usize] = true;
            self.dirty.push(i);
        }
    }

    /// Runs to the end (every request finished, or `run.max_time_s`).
    pub fn run(mut self) -> RunOutput {
        while self.step() {}
        self.finish()
    }

    /// Processes the next event (and starts the iterations it makes possible). Returns false
    /// when the run is over.
    pub fn step(&mut self) -> bool {
        if self.workload.error().is_some() {
            return false;
        }
        let Some(t) = self.queue.peek_time() else { return false };
        if self.fleet_idle() {
            return false;
        }
        if t > self.max_time {
            self.now = self.max_time;
            return false;
        }
        if self.events >= self.max_events {
            self.stopped = Some(Stopped::EventBudget);
            return false;
        }
        if self.rec.series_full {
            self.stopped = Some(Stopped::SeriesBudget);
            return false;
        }
        if self.events.is_multiple_of(CANCEL_CHECK_EVENTS) && CANCEL.load(std::sync::atomic::Ordering::Relaxed) {
            self.stopped = Some(Stopped::Cancelled);
            return false;
        }
        let (t, ev) = self.queue.pop().expect("peeked");
        debug_assert!(t >= self.now, "time went backwards");
        self.now = t;
        self.rec.advance(t);
        self.events += 1;
        match ev {
            Event::Arrival(_) if self.rec.records.len() as u64 >= self.max_requests => {
                self.stopped = Some(Stopped::RequestBudget);
                return false;
            }
            Event::Arrival(req) => self.on_arrival(*req),
            Event::Frontend(req) => {
                self.frontend.as_mut().expect("frontend events need a frontend").release();
                self.route(*req)
            }
            Event::IterationEnd(i) => self.on_iteration_end(i),
            Event::Fleet(f) => self.on_fleet(f),
            Event::KvTransferDone { id, from, to } => self.on_transfer_done(id, from, to),
        }
        if self.queue.peek_time() != Some(self.now) {
            self.start_iterations();
        }
        true
    }

    /// Ends the run at the current time and summarises it.
    pub fn finish(mut self) -> RunOutput {
        self.rec.finish(self.now);
        self.fleet.finish(self.now);
        crate::fleet::fill_series(&mut self.rec, &self.fleet, &self.slo);
        let mut summary = summarize(&self.rec, &self.slo, &self.scenario_name, self.seed);
        summary.fleet = self.fleet.summary(self.now);
        summary.disaggregation = self.disagg.as_ref().map(|p| p.summary(&self.instances, &self.rec));
        summary.cost = self.cost_summary();
        summary.frontend = self.frontend.as_ref().map(|f| f.summary());
        if let Some((mean, max)) = self.fleet.kv_blocks_over(self.now) {
            // KV use as a share of the blocks provisioned (not of idle autoscaler slots).
            let used_mean = summary.kv.utilization_mean * self.rec.kv_total().max(1) as f64;
            summary.kv.blocks_total = max;
            summary.kv.utilization_mean = if mean > 0.0 { used_mean / mean } else { 0.0 };
            summary.kv.utilization_max = self.rec.kv_used_max as f64 / max.max(1) as f64;
        }
        let stopped = self.stopped.or(self.rec.series_full.then_some(Stopped::SeriesBudget));
        summary.stopped = stopped.map(|why| crate::metrics::StoppedEarly {
            reason: why,
            events: self.events,
            at_s: self.now.as_secs_f64(),
        });
        let random_draws = crate::rng::draws() - self.draws_before;
        RunOutput { summary, recorder: self.rec, events: self.events, random_draws }
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    /// What each group's cost model priced without measurements over the run.
    fn cost_summary(&self) -> crate::metrics::CostSummary {
        let (mut fallbacks, mut pipelines) = (Vec::new(), Vec::new());
        for (group, cost, ids) in &self.group_costs {
            if !cost.accounts() {
                continue;
            }
            let mut acc = CostAccount::default();
            for &i in ids {
                acc.merge(self.instances[i as usize].cost_account());
            }
            for mut f in cost.shares(&acc) {
                f.group = group.clone();
                fallbacks.push(f);
            }
            if let Some(mut p) = cost.pipeline(&acc) {
                p.group = group.clone();
                pipelines.push(p);
            }
        }
        crate::metrics::CostSummary { sources: self.cost_sources.clone(), fallbacks, pipelines }
    }

    pub fn recorder(&self) -> &Recorder {
        &self.rec
    }

    /// Why the workload's trace stopped the run early (a malformed record), if it did.
    pub fn workload_error(&self) -> Option<&TraceError> {
        self.workload.error()
    }

    /// Checks every invariant (O(requests + blocks)); for tests. Conservation: each arrived
    /// request is finished, rejected, timed out, or in exactly one instance's queue or batch;
    /// KV: every block is free, cached-evictable, or owned by as many running requests as its
    /// owner count says; swap space and the CPU tier hold what their users say.
    pub fn check_invariants(&self) {
        use crate::metrics::Status;
        let in_flight = self.rec.records.iter().filter(|r| r.status == Status::InFlight).count() as u64;
        let held: u64 = self.instances.iter().map(|i| i.gauges().waiting + i.gauges().running).sum();
        let stranded = self.fleet.stranded() as u64;
        let in_frontend = self.frontend.as_ref().map_or(0, |f| f.holding);
        assert_eq!(
            in_flight,
            held + stranded + in_frontend,
            "in-flight requests not all held by an instance, stranded or in the frontend"
        );
        self.check_fleet(held);
        let g = self.rec.gauges();
        assert_eq!(g.waiting + g.running, held, "recorder gauges out of step with the instances");
        for inst in &self.instances {
            inst.check_kv_ownership();
            inst.check_load_signals();
        }
        if let Some(p) = &self.disagg {
            p.check(&self.instances);
        }
    }

    fn on_arrival(&mut self, mut req: Request) {
        // Schedule the next open-loop arrival first, so that simultaneous arrivals are all
        // queued before any iteration starts.
        if self.workload.is_open(&req) {
            if let Some(next) = self.workload.next_open() {
                self.queue.push(next.arrival, Event::Arrival(Box::new(next)));
            }
        }
        // Closed-loop clients generate requests out of arrival order; ids are given here so
        // they follow arrival order.
        req.id = self.rec.arrived(self.now, req.prompt_tokens, req.output_tokens);
        if req.class != 0 {
            self.rec.set_class(req.id, req.class);
        }
        if let Some(f) = self.frontend.as_mut() {
            let at = f.admit(self.now, req.prompt_tokens);
            self.queue.push(at, Event::Frontend(Box::new(req)));
            return;
        }
        self.route(req);
    }

    /// Sends a request that arrived (and passed the frontend, if any) to an instance.
    fn route(&mut self, req: Request) {
        if self.fleet.routable() == 0 {
            self.rec.rejected(req.id, self.now, crate::metrics::RejectReason::NoInstance);
            self.client_done(req.client);
            return;
        }
        // Arrivals go to the prefill pool of a disaggregated cluster, which comes first.
        let (front, fits) = match &self.disagg {
            Some(p) => (p.prefill, p.decode_fits(&req, &self.instances)),
            None => (self.instances.len(), Ok(())),
        };
        let i = self.router.route(&req, &self.instances[..front]);
        self.rec.routed(req.id, i as u32);
        if self.fleet.is_crashed(i) {
            self.strand_sent(req, 0);
            return;
        }
        let inst = &mut self.instances[i];
        match fits.and_then(|()| inst.accept(&req, self.now, &mut self.rec)) {
            Ok(()) => {
                self.enqueue(i, &req);
                self.fleet.track(&req, 0);
            }
            Err(why) => {
                self.rec.rejected(req.id, self.now, why);
                self.client_done(req.client);
            }
        }
    }

    fn on_iteration_end(&mut self, i: u32) {
        if self.instances[i as usize].iteration_end() != Some(self.now) {
            // The iteration of an instance that failed meanwhile: it never ends.
            return;
        }
        let mut departed = std::mem::take(&mut self.departed);
        let now = self.now;
        tracked(&mut self.instances[i as usize], &mut self.rec, |inst, rec| {
            inst.finish_iteration(now, rec, &mut departed)
        });
        for d in departed.drain(..) {
            self.fleet.untrack(d.id);
            self.client_done(d.client);
        }
        self.departed = departed;
        self.mark(i);
        self.drained(i as usize);
        if let Some(p) = self.disagg.as_mut() {
            p.after_iteration(i as usize, self.now, &mut self.instances, &mut self.rec, &mut self.queue);
        }
    }

    /// A KV transfer finished: the prefill instance may admit into the freed blocks and the
    /// decode instance has a new request to decode.
    fn on_transfer_done(&mut self, id: u64, from: u32, to: u32) {
        let p = self.disagg.as_mut().expect("transfers happen only in disaggregated runs");
        p.transfer_done(id, from, to, self.now, &mut self.instances, &mut self.rec);
        self.mark(from);
        self.mark(to);
    }

    /// A closed-loop client's request ended: it thinks, then sends the next.
    fn client_done(&mut self, client: u32) {
        if client == NO_CLIENT {
            return;
        }
        // The client has its last token once the frontend has streamed it.
        if let Some(next) = self.workload.next_for_client(client, self.now + self.rec.token_delay) {
            self.queue.push(next.arrival, Event::Arrival(Box::new(next)));
        }
    }

    fn start_iterations(&mut self) {
        while let Some(i) = self.dirty.pop() {
            self.is_dirty[i as usize] = false;
            let inst = &mut self.instances[i as usize];
            if inst.is_busy() || !inst.has_work() {
                continue;
            }
            let now = self.now;
            let end = tracked(inst, &mut self.rec, |inst, rec| inst.start_iteration(now, rec));
            if let Some(end) = end {
                self.queue.push(end, Event::IterationEnd(i));
            }
        }
    }
}

/// Runs a scenario once with its seed. A trace that turns out malformed during the run is a
/// panic here: programs that replay traces check them first, or call [`try_run`].
pub fn run(s: &Scenario) -> RunOutput {
    try_run(s).unwrap_or_else(|e| panic!("the workload's trace failed during the run: {e}"))
}

/// Runs a scenario once with its seed; a malformed trace record stops the run and is returned.
pub fn try_run(s: &Scenario) -> Result<RunOutput, TraceError> {
    run_to_end(Simulation::new(s))
}

/// [`try_run`] with the cost model of each instance group given by `cost(group)`.
pub fn try_run_with_cost(s: &Scenario, cost: &dyn Fn(usize) -> Arc<dyn CostModel>) -> Result<RunOutput, TraceError> {
    run_to_end(Simulation::new_with_cost(s, cost))
}

fn run_to_end(mut sim: Simulation) -> Result<RunOutput, TraceError> {
    while sim.step() {}
    match sim.workload_error() {
        Some(e) => Err(e.clone()),
        None => Ok(sim.finish()),
    }
}

#[cfg(test)]
mod dp_tests;
#[cfg(test)]
mod recv_tests;
#[cfg(test)]
mod wait_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_times_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(SimTime(5), Event::IterationEnd(1));
        q.push(SimTime(3), Event::IterationEnd(2));
        q.push(SimTime(5), Event::IterationEnd(3));
        q.push(SimTime(3), Event::IterationEnd(4));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop())
            .map(|(_, e)| match e {
                Event::IterationEnd(i) => i,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }
}
