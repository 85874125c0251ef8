//! The run-time state of the fleet: each instance's phase, the requests waiting for their
//! failure to be noticed, copies of requests in flight (to retry them), and the accounting of
//! instance-hours, failures and restarts.

use std::collections::{HashMap, VecDeque};

use crate::rng::SimRng;

use super::autoscale::{Measurements, SignalSpec};
use super::{FailureKind, FleetSection, FleetSummary};
use crate::instance::Instance;
use crate::instance::InstanceGroup;
use crate::metrics::Recorder;
use crate::rng::{substream, Stream};
use crate::time::SimTime;
use crate::workload::Request;

/// Marks a scheduled failure: it applies to whatever the instance is doing then.
pub(crate) const ANY_EPOCH: u32 = u32::MAX;

/// Where an instance is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not provisioned (an autoscaled group's spare slot): costs nothing.
    Off,
    /// Loading weights and initialising.
    Starting,
    Ready,
    /// Removed by the autoscaler: finishes its requests, takes no new ones.
    Draining,
    /// Failed, not yet detected: the router still sends to it.
    Failed(FailureKind),
    /// Detected: being repaired, then starting again.
    Restarting,
    /// Down for the whole run (`failures.down`).
    Down,
}

impl Phase {
    /// Whether routers may send to an instance in this phase (believed healthy).
    pub(crate) fn routable(self) -> bool {
        matches!(self, Phase::Ready | Phase::Failed(_))
    }

    pub(crate) fn provisioned(self) -> bool {
        self != Phase::Off
    }
}

/// What a fleet event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FleetEventKind {
    /// The instance fails (`None`: a random failure, its kind drawn then).
    Fail(Option<FailureKind>, Option<SimTime>),
    /// The failure is noticed: the router stops sending, a hung instance's requests fail, the
    /// restart begins.
    Detect,
    /// Start-up is over: the instance serves.
    Ready,
    /// Requests stranded on crashed instances are due to fail.
    RetryDue,
    /// The autoscaler looks at its signals.
    Tick,
}

/// A fleet event; `epoch` must still be the instance's for the event to apply (phase changes
/// invalidate the events scheduled before them), except [`ANY_EPOCH`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetEvent {
    pub(crate) kind: FleetEventKind,
    pub(crate) instance: u32,
    pub(crate) epoch: u32,
}

#[derive(Clone, Debug)]
struct Slot {
    phase: Phase,
    epoch: u32,
    group: usize,
    /// Repair time of a scheduled failure, until its detection.
    repair: Option<SimTime>,
}

/// The fleet's size from `at` on (until the next change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Count {
    pub(crate) at: SimTime,
    /// Instances provisioned (paid for), serving, and the KV blocks of those provisioned.
    pub(crate) provisioned: u32,
    pub(crate) ready: u32,
    pub(crate) kv_blocks: u64,
}

/// A request whose instance crashed, waiting for its failure to be noticed.
#[derive(Clone, Debug)]
pub(crate) struct Limbo {
    pub(crate) due: SimTime,
    pub(crate) req: Request,
    pub(crate) retries: u32,
}

/// The fleet: phases, stranded and tracked requests, accounting.
pub(crate) struct Fleet {
    pub(crate) cfg: FleetSection,
    slots: Vec<Slot>,
    /// Start-up delay, TP degree and KV blocks per instance of each group.
    startup: Vec<SimTime>,
    tp: Vec<u64>,
    blocks: Vec<u64>,
    rngs: Vec<SimRng>,
    /// Whether the scenario has a `[fleet]` section (otherwise no phase ever changes: every
    /// instance serves the whole run, and this is only its accounting).
    active: bool,
    /// Whether copies of requests in flight are kept (failures can happen).
    tracks: bool,
    routable: u32,
    /// Fleet events in the engine's queue.
    pub(crate) pending: usize,
    limbo: VecDeque<Limbo>,
    /// Requests in flight on instances, with their retry counts.
    tracked: HashMap<u64, (Request, u32)>,
    autoscaled: Option<usize>,
    last_up: Option<SimTime>,
    last_change: Option<SimTime>,
    // Accounting.
    last: SimTime,
    provisioned: Vec<u32>,
    ready: u32,
    instance_ns: u128,
    gpu_ns: Vec<u128>,
    ready_ns: u128,
    kv_ns: u128,
    kv_max: u64,
    instances_max: u32,
    instances_min: u32,
    /// The fleet's size after every change, from time zero.
    log: Vec<Count>,
    failures_at: Vec<SimTime>,
    restarts_at: Vec<SimTime>,
    crashes: u64,
    hangs: u64,
    retries: u64,
    lost: u64,
    scale_ups: u64,
    scale_downs: u64,
    /// $ per GPU-hour of each group, when every group has a price.
    prices: Option<Vec<f64>>,
    gpu_names: Vec<String>,
}

impl Fleet {
    /// The fleet of `groups` under `section` (the scenario's `[fleet]`) over `instances` (built
    /// group by group, [`super::instances_built`] of each). Instances beyond a group's count
    /// start off; `failures.down` instances are down. `prices` is each group's $ per GPU-hour,
    /// when every group has one; `seed` is the scenario's. Returns the fleet and the events to
    /// schedule at the start.
    pub(crate) fn new(
        section: Option<&FleetSection>,
        groups: &[InstanceGroup],
        prices: Option<Vec<f64>>,
        seed: u64,
        instances: &mut [Instance],
    ) -> (Fleet, Vec<(SimTime, FleetEvent)>) {
        let cfg = section.cloned().unwrap_or_default();
        let active = section.is_some();
        let mut slots = Vec::with_capacity(instances.len());
        for (g, group) in groups.iter().enumerate() {
            let built = super::instances_built(section, groups, g);
            for k in 0..built {
                let phase = if k < group.count { Phase::Ready } else { Phase::Off };
                slots.push(Slot { phase, epoch: 0, group: g, repair: None });
            }
        }
        assert_eq!(slots.len(), instances.len(), "instances built per group");
        let mut f = Fleet {
            startup: groups.iter().map(|g| cfg.startup(g)).collect(),
            tp: groups.iter().map(|g| g.gpus()).collect(),
            blocks: groups.iter().map(|g| g.memory.kv_blocks.min(u32::MAX as u64)).collect(),
            rngs: (0..instances.len()).map(|i| substream(seed, Stream::Failures, i as u64)).collect(),
            active,
            tracks: active && cfg.can_fail(),
            routable: 0,
            pending: 0,
            limbo: VecDeque::new(),
            tracked: HashMap::new(),
            autoscaled: cfg.autoscaled_group(groups),
            last_up: None,
            last_change: None,
            last: SimTime::ZERO,
            provisioned: vec![0; groups.len()],
            ready: 0,
            instance_ns: 0,
            gpu_ns: vec![0; groups.len()],
            ready_ns: 0,
            kv_ns: 0,
            kv_max: 0,
            instances_max: 0,
            instances_min: u32::MAX,
            log: Vec::new(),
            failures_at: Vec::new(),
            restarts_at: Vec::new(),
            crashes: 0,
            hangs: 0,
            retries: 0,
            lost: 0,
            scale_ups: 0,
            scale_downs: 0,
            prices,
            gpu_names: groups.iter().map(|g| g.gpu.name.clone()).collect(),
            slots,
            cfg,
        };
        // Instances down for the whole run: the highest capacity ones, the last on a tie.
        let down = f.cfg.failures.as_ref().map_or(0, |x| x.down) as usize;
        let mut order: Vec<usize> = (0..instances.len()).filter(|&i| f.slots[i].phase == Phase::Ready).collect();
        order.sort_by(|&a, &b| instances[b].capacity().total_cmp(&instances[a].capacity()).then(b.cmp(&a)));
        for &i in order.iter().take(down) {
            f.slots[i].phase = Phase::Down;
        }
        for (i, inst) in instances.iter_mut().enumerate() {
            let p = f.slots[i].phase;
            inst.set_routable(p.routable());
            f.routable += p.routable() as u32;
            if p.provisioned() {
                f.provisioned[f.slots[i].group] += 1;
            }
            f.ready += (p == Phase::Ready) as u32;
        }
        f.record(SimTime::ZERO);
        let mut events = Vec::new();
        if active {
            for i in 0..instances.len() {
                if f.slots[i].phase == Phase::Ready {
                    events.extend(f.next_failure(i, SimTime::ZERO));
                }
            }
            if let Some(fs) = &f.cfg.failures {
                for e in &fs.events {
                    let repair = e.repair_s.map(SimTime::from_secs_f64);
                    let ev = FleetEvent {
                        kind: FleetEventKind::Fail(Some(e.kind), repair),
                        instance: e.instance,
                        epoch: ANY_EPOCH,
                    };
                    events.push((SimTime::from_secs_f64(e.at_s), ev));
                }
            }
            if let Some(a) = &f.cfg.autoscale {
                let ev = FleetEvent { kind: FleetEventKind::Tick, instance: 0, epoch: 0 };
                events.push((SimTime::from_secs_f64(a.interval_s), ev));
            }
        }
        (f, events)
    }

    /// The random failure of a newly ready instance, if random failures are on.
    fn next_failure(&mut self, i: usize, now: SimTime) -> Option<(SimTime, FleetEvent)> {
        let fs = self.cfg.failures.as_ref()?;
        let ttf = fs.time_to_failure(&mut self.rngs[i])?;
        let ev = FleetEvent { kind: FleetEventKind::Fail(None, None), instance: i as u32, epoch: self.slots[i].epoch };
        Some((now + ttf, ev))
    }

    /// Whether `ev` still applies.
    pub(crate) fn current(&self, ev: &FleetEvent) -> bool {
        ev.epoch == ANY_EPOCH || self.slots[ev.instance as usize].epoch == ev.epoch
    }

    pub(crate) fn phase(&self, i: usize) -> Phase {
        self.slots[i].phase
    }

    /// Instances routers may send to.
    pub(crate) fn routable(&self) -> u32 {
        self.routable
    }

    /// Whether instance `i` has crashed and nobody knows yet (requests sent to it are stranded).
    pub(crate) fn is_crashed(&self, i: usize) -> bool {
        self.slots[i].phase == Phase::Failed(FailureKind::Crash)
    }

    pub(crate) fn is_draining(&self, i: usize) -> bool {
        self.slots[i].phase == Phase::Draining
    }

    /// Moves instance `i` to `phase` at `now`, keeping the routers' view, the counts and the
    /// accounting in step; invalidates the events scheduled for its previous phase.
    pub(crate) fn set_phase(&mut self, i: usize, phase: Phase, now: SimTime, inst: &mut Instance) {
        self.integrate(now);
        let slot = &mut self.slots[i];
        let old = slot.phase;
        slot.phase = phase;
        slot.epoch = slot.epoch.wrapping_add(1) % ANY_EPOCH;
        let g = slot.group;
        self.routable = self.routable + phase.routable() as u32 - old.routable() as u32;
        inst.set_routable(phase.routable());
        self.provisioned[g] = self.provisioned[g] + phase.provisioned() as u32 - old.provisioned() as u32;
        self.ready = self.ready + (phase == Phase::Ready) as u32 - (old == Phase::Ready) as u32;
        self.record(now);
    }

    pub(crate) fn epoch(&self, i: usize) -> u32 {
        self.slots[i].epoch
    }

    fn integrate(&mut self, now: SimTime) {
        let dt = now.saturating_sub(self.last).0 as u128;
        for (g, &n) in self.provisioned.iter().enumerate() {
            self.instance_ns += dt * n as u128;
            self.gpu_ns[g] += dt * n as u128 * self.tp[g] as u128;
        }
        self.ready_ns += dt * self.ready as u128;
        self.kv_ns += dt * self.kv_blocks() as u128;
        self.last = self.last.max(now);
    }

    /// KV blocks of the instances provisioned now.
    fn kv_blocks(&self) -> u64 {
        self.provisioned.iter().zip(&self.blocks).map(|(&n, &b)| n as u64 * b).sum()
    }

    fn record(&mut self, now: SimTime) {
        let n: u32 = self.provisioned.iter().sum();
        self.instances_max = self.instances_max.max(n);
        self.instances_min = self.instances_min.min(n);
        let kv_blocks = self.kv_blocks();
        self.kv_max = self.kv_max.max(kv_blocks);
        let c = Count { at: now, provisioned: n, ready: self.ready, kv_blocks };
        match self.log.last_mut() {
            Some(last) if last.at == now => *last = c,
            Some(last) if (last.provisioned, last.ready, last.kv_blocks) == (n, c.ready, kv_blocks) => {}
            _ => self.log.push(c),
        }
    }

    // Failures.

    /// Instance `i` fails now; returns the kind (a random failure's is drawn here).
    pub(crate) fn begin_failure(&mut self, ev: &FleetEvent, now: SimTime, inst: &mut Instance) -> FailureKind {
        let i = ev.instance as usize;
        let FleetEventKind::Fail(kind, repair) = ev.kind else { unreachable!("a failure event") };
        let kind = kind.unwrap_or_else(|| {
            let fs = self.cfg.failures.as_ref().expect("random failures come from [fleet.failures]");
            fs.draw_kind(&mut self.rngs[i])
        });
        self.slots[i].repair = repair;
        self.set_phase(i, Phase::Failed(kind), now, inst);
        self.failures_at.push(now);
        match kind {
            FailureKind::Crash => self.crashes += 1,
            FailureKind::Hang => self.hangs += 1,
        }
        kind
    }

    /// The detection delay of a failure.
    pub(crate) fn detection(&self, kind: FailureKind) -> SimTime {
        SimTime::from_secs_f64(match kind {
            FailureKind::Crash => self.cfg.detection_s,
            FailureKind::Hang => self.cfg.hang_detection_s,
        })
    }

    /// The failure of `i` is detected now: it restarts; returns when it will be ready.
    pub(crate) fn begin_restart(&mut self, i: usize, now: SimTime, inst: &mut Instance) -> SimTime {
        let repair = match self.slots[i].repair.take() {
            Some(r) => r,
            None => match &self.cfg.failures {
                Some(fs) => fs.draw_repair(&mut self.rngs[i]),
                None => SimTime::ZERO,
            },
        };
        self.set_phase(i, Phase::Restarting, now, inst);
        now + repair + self.startup[self.slots[i].group]
    }

    /// Start-up of `i` is over; returns its next random failure, if any.
    pub(crate) fn become_ready(
        &mut self,
        i: usize,
        now: SimTime,
        inst: &mut Instance,
    ) -> Option<(SimTime, FleetEvent)> {
        if self.slots[i].phase == Phase::Restarting {
            self.restarts_at.push(now);
        }
        self.set_phase(i, Phase::Ready, now, inst);
        self.next_failure(i, now)
    }

    // Requests.

    /// Keeps a copy of a request now in flight on an instance, to retry it (when failures can
    /// happen; otherwise nothing is kept).
    pub(crate) fn track(&mut self, req: &Request, retries: u32) {
        if self.tracks {
            self.tracked.insert(req.id, (req.clone(), retries));
        }
    }

    /// Forgets a request that left its instance (finished, timed out).
    pub(crate) fn untrack(&mut self, id: u64) {
        if self.tracks {
            self.tracked.remove(&id);
        }
    }

    /// The copy of a request taken off a failed instance, and its retries so far.
    pub(crate) fn take_tracked(&mut self, id: u64) -> (Request, u32) {
        self.tracked.remove(&id).expect("requests on instances are tracked when failures can happen")
    }

    /// Strands a request on a crashed instance until `due`; returns whether an event must be
    /// scheduled for `due` (one per distinct due time).
    pub(crate) fn strand(&mut self, req: Request, retries: u32, due: SimTime) -> bool {
        let new = self.limbo.back().is_none_or(|l| l.due != due);
        debug_assert!(self.limbo.back().is_none_or(|l| l.due <= due), "stranded in due order");
        self.limbo.push_back(Limbo { due, req, retries });
        new
    }

    /// The next stranded request due by `now`.
    pub(crate) fn pop_due(&mut self, now: SimTime) -> Option<Limbo> {
        if self.limbo.front().is_some_and(|l| l.due <= now) {
            self.limbo.pop_front()
        } else {
            None
        }
    }

    /// Requests stranded on crashed instances.
    pub(crate) fn stranded(&self) -> usize {
        self.limbo.len()
    }

    pub(crate) fn count_retry(&mut self) {
        self.retries += 1;
    }

    pub(crate) fn count_lost(&mut self) {
        self.lost += 1;
    }

    // Autoscaling.

    /// The autoscaled group's instances: (index, phase).
    fn group_slots(&self) -> impl Iterator<Item = (usize, Phase)> + '_ {
        let g = self.autoscaled;
        self.slots.iter().enumerate().filter(move |(_, s)| Some(s.group) == g).map(|(i, s)| (i, s.phase))
    }

    /// What the autoscaler's signals read now.
    pub(crate) fn measure(&self, instances: &[Instance], rec: &mut Recorder, now: SimTime) -> Measurements {
        let a = self.cfg.autoscale.as_ref().expect("ticks come from [fleet.autoscale]");
        let ready: Vec<usize> = self.group_slots().filter(|(_, p)| *p == Phase::Ready).map(|(i, _)| i).collect();
        let mut m = Measurements::default();
        if !ready.is_empty() {
            let n = ready.len() as f64;
            m.queue_per_instance = Some(ready.iter().map(|&i| instances[i].waiting_len() as f64).sum::<f64>() / n);
            m.kv_utilization = Some(ready.iter().map(|&i| instances[i].kv_usage()).sum::<f64>() / n);
        }
        rec.forget_first_tokens_before(now.saturating_sub(SimTime::from_secs_f64(a.window_s())));
        for s in &a.signals {
            match s {
                SignalSpec::TtftP99(t) => {
                    let from = now.saturating_sub(SimTime::from_secs_f64(t.window_s));
                    m.ttft_p99_ms.insert(t.window_s.to_bits(), rec.recent_ttft_p99_ms(from));
                }
                SignalSpec::RequestRate(r) => {
                    // Over the part of the window the run has lasted, so the first ticks are
                    // not diluted by time before the start.
                    let w = SimTime::from_secs_f64(r.window_s).min(now).max(SimTime(1));
                    let n = rec.arrivals_since(now - w);
                    m.rate_rps.insert(r.window_s.to_bits(), n as f64 / w.as_secs_f64());
                }
                _ => {}
            }
        }
        m
    }

    /// The autoscaler's decision at `now`: the change in instance count it makes (after its
    /// cooldowns), positive to add.
    pub(crate) fn decide(&self, m: &Measurements, now: SimTime) -> i64 {
        let a = self.cfg.autoscale.as_ref().expect("ticks come from [fleet.autoscale]");
        let ready = self.group_slots().filter(|(_, p)| *p == Phase::Ready).count() as u32;
        let current = self.group_current();
        let desired = a.desired(m, ready, current);
        let since = |t: Option<SimTime>| t.map_or(f64::INFINITY, |t| (now - t).as_secs_f64());
        if desired > current && since(self.last_up) >= a.scale_up_cooldown_s {
            (desired - current) as i64
        } else if desired < current && since(self.last_change) >= a.scale_down_cooldown_s {
            -((current - desired) as i64)
        } else {
            0
        }
    }

    /// Instances of the autoscaled group paid for and not draining.
    pub(crate) fn group_current(&self) -> u32 {
        self.group_slots()
            .filter(|(_, p)| matches!(p, Phase::Starting | Phase::Ready | Phase::Failed(_) | Phase::Restarting))
            .count() as u32
    }

    /// Instances to add, in order: draining ones first (taken back at once), then off ones
    /// (lowest index first).
    pub(crate) fn scale_up_candidates(&self, n: usize) -> Vec<usize> {
        let draining = self.group_slots().filter(|(_, p)| *p == Phase::Draining).map(|(i, _)| i);
        let off = self.group_slots().filter(|(_, p)| *p == Phase::Off).map(|(i, _)| i);
        draining.chain(off).take(n).collect()
    }

    /// Instances to remove, in order: restarting ones (their restart is cancelled), starting
    /// ones (newest first), then ready ones with the fewest requests (the last on a tie).
    pub(crate) fn scale_down_candidates(&self, n: usize, instances: &[Instance]) -> Vec<usize> {
        let of = |phase: Phase| self.group_slots().filter(move |(_, p)| *p == phase).map(|(i, _)| i);
        let mut starting: Vec<usize> = of(Phase::Starting).collect();
        starting.reverse();
        let mut ready: Vec<usize> = of(Phase::Ready).collect();
        ready.sort_by(|&a, &b| instances[a].outstanding().cmp(&instances[b].outstanding()).then(b.cmp(&a)));
        of(Phase::Restarting).chain(starting).chain(ready).take(n).collect()
    }

    pub(crate) fn startup(&self, i: usize) -> SimTime {
        self.startup[self.slots[i].group]
    }

    pub(crate) fn scaled_up(&mut self, now: SimTime, n: usize) {
        self.scale_ups += n as u64;
        self.last_up = Some(now);
        self.last_change = Some(now);
    }

    pub(crate) fn scaled_down(&mut self, now: SimTime, n: usize) {
        self.scale_downs += n as u64;
        self.last_change = Some(now);
    }

    // Outputs.

    /// Closes the accounting at the end of the run.
    pub(crate) fn finish(&mut self, end: SimTime) {
        self.integrate(end);
    }

    /// The fleet's size after every change.
    pub(crate) fn log(&self) -> &[Count] {
        &self.log
    }

    /// (time-weighted mean, maximum) of the KV blocks provisioned over a run that ended at `end`;
    /// `None` without a `[fleet]` section (every instance's blocks, the whole run).
    pub(crate) fn kv_blocks_over(&self, end: SimTime) -> Option<(f64, u64)> {
        if !self.active {
            return None;
        }
        let mean = if end > SimTime::ZERO { self.kv_ns as f64 / end.0 as f64 } else { self.kv_blocks() as f64 };
        Some((mean, self.kv_max))
    }

    pub(crate) fn failures_at(&self) -> &[SimTime] {
        &self.failures_at
    }

    pub(crate) fn restarts_at(&self) -> &[SimTime] {
        &self.restarts_at
    }

    /// The fleet's summary over a run that ended at `end` (after [`Fleet::finish`]).
    pub(crate) fn summary(&self, end: SimTime) -> FleetSummary {
        let hours = |ns: u128| ns as f64 / 3.6e12;
        let span_h = end.as_secs_f64() / 3600.0;
        let gpu_hours: f64 = self.gpu_ns.iter().map(|&ns| hours(ns)).sum();
        let cost = self.prices.as_ref().map(|p| self.gpu_ns.iter().zip(p).map(|(&ns, &price)| hours(ns) * price).sum());
        let mean = |ns: u128| if span_h > 0.0 { hours(ns) / span_h } else { 0.0 };
        let first = self.log.first().map_or(0, |l| l.provisioned);
        FleetSummary {
            instances_initial: first,
            instances_mean: if span_h > 0.0 { mean(self.instance_ns) } else { first as f64 },
            instances_ready_mean: if span_h > 0.0 {
                mean(self.ready_ns)
            } else {
                self.log.first().map_or(0, |l| l.ready) as f64
            },
            instances_min: self.instances_min.min(first),
            instances_max: self.instances_max,
            instance_hours: hours(self.instance_ns),
            gpu_hours,
            cost,
            cost_per_day: cost.map(|c| if span_h > 0.0 { c / span_h * 24.0 } else { 0.0 }),
            priced_gpus: self.prices.as_ref().map(|_| self.gpu_names.clone()).unwrap_or_default(),
            failures: self.failures_at.len() as u64,
            crashes: self.crashes,
            hangs: self.hangs,
            restarts: self.restarts_at.len() as u64,
            retries: self.retries,
            lost: self.lost,
            scale_ups: self.scale_ups,
            scale_downs: self.scale_downs,
            startup_s: self.startup.iter().map(|s| s.as_secs_f64()).collect(),
        }
    }

    /// Checks the fleet's counts against the instances, and that the `held` requests on them
    /// are all tracked when failures can happen (tests).
    pub(crate) fn check(&self, instances: &[Instance], held: u64) {
        if self.tracks {
            assert_eq!(self.tracked.len() as u64, held, "requests on instances not all tracked");
        }
        let mut routable = 0;
        for (i, s) in self.slots.iter().enumerate() {
            assert_eq!(instances[i].routable(), s.phase.routable(), "instance {i} routable flag out of step");
            routable += s.phase.routable() as u32;
            if matches!(s.phase, Phase::Off | Phase::Starting | Phase::Restarting | Phase::Down) {
                assert!(!instances[i].has_work(), "instance {i} holds requests while {:?}", s.phase);
            }
            if matches!(s.phase, Phase::Failed(FailureKind::Crash)) {
                assert!(!instances[i].has_work(), "crashed instance {i} holds requests");
            }
        }
        assert_eq!(routable, self.routable, "routable count");
        let provisioned: u32 = self.provisioned.iter().sum();
        assert_eq!(provisioned, self.slots.iter().filter(|s| s.phase.provisioned()).count() as u32);
        assert!(self.limbo.iter().zip(self.limbo.iter().skip(1)).all(|(a, b)| a.due <= b.due));
    }
}
