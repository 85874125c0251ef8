//! The engine's side of disaggregation: routing prefilled requests to decode instances,
//! starting their KV transfers when the decode instance has blocks, and finishing them.
//!
//! The engine calls [`Pools::after_iteration`] after every iteration (a prefill instance may
//! have handed requests off; a decode instance may have freed blocks) and
//! [`Pools::transfer_done`] on each `KvTransferDone` event: one event per transfer.

use std::collections::BTreeMap;

use super::{tracked, Event, EventQueue};
use crate::disagg::{transfer_time, Disaggregation, Role};
use crate::instance::{Handoff, Instance};
use crate::metrics::{DisaggSummary, Dist, PoolSummary, Recorder, RejectReason, Status};
use crate::router::{self, Router};
use crate::scenario::Scenario;
use crate::time::SimTime;
use crate::workload::{Request, NO_SESSION};

/// The two pools of a disaggregated run.
pub(super) struct Pools {
    /// Instances `[0, prefill)` form the prefill pool, `[prefill, n)` the decode pool.
    pub(crate) prefill: usize,
    router: Box<dyn Router>,
    link: Disaggregation,
    /// Group of each instance.
    group: Vec<usize>,
    /// TP degree of each group, and each group's KV bytes per token per GPU at every TP degree
    /// it may meet (computed on demand from the model with the group's KV dtype).
    tp: Vec<u64>,
    kv_models: Vec<crate::spec::ModelSpec>,
    /// One instance of each decode group, for the fit check at arrival.
    decode_reps: Vec<usize>,
    /// Handed-off requests waiting for decode blocks, by id.
    waiting: BTreeMap<u64, Handoff>,
    handoffs: Vec<Handoff>,
    started: Vec<u64>,
    stats: Stats,
}

#[derive(Default)]
struct Stats {
    transfers: u64,
    /// Bytes over all links.
    bytes: u128,
    /// Of measured requests: link time, wait for decode blocks (first token → transfer
    /// start), and when their KV arrived (for the decode-pool TPOT).
    transfer_ns: Vec<u64>,
    wait_ns: Vec<u64>,
    decode_start: Vec<(u64, SimTime)>,
}

impl Pools {
    /// `order` lists the groups in instance order (prefill groups first).
    pub(super) fn new(s: &Scenario, link: &Disaggregation, order: &[usize]) -> Pools {
        let mut group = Vec::new();
        let mut prefill = 0;
        let mut decode_reps = Vec::new();
        for &gi in order {
            let g = &s.groups[gi];
            if g.role == Role::Decode {
                decode_reps.push(group.len());
            }
            for _ in 0..g.count {
                group.push(gi);
            }
            if g.role == Role::Prefill {
                prefill = group.len();
            }
        }
        Pools {
            prefill,
            router: router::build_indexed(&link.decode_router, s.seed, 1),
            link: link.clone(),
            group,
            tp: s.groups.iter().map(|g| g.tp).collect(),
            kv_models: s.groups.iter().map(|g| g.scheduler.kv_cache.model(&s.model)).collect(),
            decode_reps,
            waiting: BTreeMap::new(),
            handoffs: Vec::new(),
            started: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// Whether every decode group could ever serve `req` (prefill instances check themselves).
    pub(super) fn decode_fits(&self, req: &Request, instances: &[Instance]) -> Result<(), RejectReason> {
        self.decode_reps.iter().try_for_each(|&d| instances[d].check_fits(req))
    }

    /// Bytes one GPU link carries per token from instance `from` to instance `to`: the KV
    /// shard of one GPU at the smaller TP degree of the two (each of those GPUs has a link).
    pub(super) fn shard_bytes_per_token(&self, from: usize, to: usize) -> (u64, u64) {
        let (gp, gd) = (self.group[from], self.group[to]);
        let links = self.tp[gp].min(self.tp[gd]);
        (self.kv_models[gp].kv_bytes_per_token_per_gpu(links), links)
    }

    /// After iteration of instance `i` ended: hands its prefilled requests to decode instances
    /// (prefill pool) or starts the transfers its freed blocks allow (decode pool).
    pub(super) fn after_iteration(
        &mut self,
        i: usize,
        now: SimTime,
        instances: &mut [Instance],
        rec: &mut Recorder,
        queue: &mut EventQueue,
    ) {
        if i >= self.prefill {
            self.start(i, now, instances, rec, queue);
            return;
        }
        let mut handoffs = std::mem::take(&mut self.handoffs);
        instances[i].take_handoffs(&mut handoffs);
        for h in handoffs.drain(..) {
            let req = Request {
                id: h.id,
                arrival: h.arrival,
                prompt_tokens: h.prompt,
                output_tokens: h.output,
                client: h.client,
                session: NO_SESSION,
                class: h.class,
                content: Vec::new(),
            };
            let d = self.prefill + self.router.route(&req, &instances[self.prefill..]);
            tracked(&mut instances[d], rec, |inst, _| inst.offer(&h));
            self.waiting.insert(h.id, h);
            self.start(d, now, instances, rec, queue);
        }
        self.handoffs = handoffs;
    }

    /// Starts the transfers decode instance `d` has blocks for.
    fn start(
        &mut self,
        d: usize,
        now: SimTime,
        instances: &mut [Instance],
        rec: &mut Recorder,
        queue: &mut EventQueue,
    ) {
        let mut started = std::mem::take(&mut self.started);
        tracked(&mut instances[d], rec, |inst, rec| inst.start_transfers(rec, &mut started));
        for id in started.drain(..) {
            let h = self.waiting.remove(&id).expect("a started transfer was waiting");
            let (shard, links) = self.shard_bytes_per_token(h.from as usize, d);
            let t = transfer_time(h.tokens, shard, &self.link);
            queue.push(now + t, Event::KvTransferDone { id, from: h.from, to: d as u32 });
            self.stats.transfers += 1;
            self.stats.bytes += h.tokens as u128 * shard as u128 * links as u128;
            if h.counted {
                self.stats.transfer_ns.push(t.0);
                self.stats.wait_ns.push((now - h.first_token).0);
            }
        }
        self.started = started;
    }

    /// The KV of request `id` reached decode instance `to`: the prefill instance `from` frees
    /// its blocks and the request joins the decode batch.
    pub(super) fn transfer_done(
        &mut self,
        id: u64,
        from: u32,
        to: u32,
        now: SimTime,
        instances: &mut [Instance],
        rec: &mut Recorder,
    ) {
        tracked(&mut instances[from as usize], rec, |p, _| p.release_handoff(id, now));
        tracked(&mut instances[to as usize], rec, |d, _| d.transfer_done(id));
        if rec.is_counted(id) {
            self.stats.decode_start.push((id, now));
        }
    }

    /// Cluster-wide transfer invariants: every request a prefill instance hands off is held by
    /// exactly one decode instance (incoming or receiving), and vice versa; the requests waiting
    /// for decode blocks are those the decode instances have not started; pools keep their roles.
    pub(super) fn check(&self, instances: &[Instance]) {
        let (mut out, mut held) = (Vec::new(), Vec::new());
        for (i, inst) in instances.iter().enumerate() {
            let role = if i < self.prefill { Role::Prefill } else { Role::Decode };
            assert_eq!(inst.role(), role, "instance {i} in the wrong pool");
            let (o, h) = inst.transfer_ids();
            out.extend(o);
            held.extend(h);
        }
        out.sort_unstable();
        held.sort_unstable();
        assert_eq!(out, held, "handed-off requests not held by exactly one decode instance");
        let receiving: usize = instances.iter().map(Instance::receiving).sum();
        assert_eq!(self.waiting.len() + receiving, held.len(), "transfers waiting for blocks out of step");
    }

    fn pool(&self, instances: &[Instance], range: std::ops::Range<usize>, end: SimTime) -> PoolSummary {
        let pool = &instances[range.clone()];
        let iterations: u64 = pool.iter().map(|i| i.work.iterations).sum();
        let seqs: u64 = pool.iter().map(|i| i.work.batch_seqs).sum();
        let busy: u128 = pool.iter().map(|i| i.work.busy_ns).sum();
        let span = pool.len() as f64 * end.0.max(1) as f64;
        PoolSummary {
            instances: pool.len() as u32,
            gpus: range.map(|i| self.tp[self.group[i]]).sum(),
            iterations,
            batch_mean: if iterations > 0 { seqs as f64 / iterations as f64 } else { 0.0 },
            batch_max: pool.iter().map(|i| i.work.batch_seqs_max).max().unwrap_or(0),
            busy_fraction: busy as f64 / span,
        }
    }

    pub(super) fn summary(&self, instances: &[Instance], rec: &Recorder) -> DisaggSummary {
        let ms = |v: &[u64]| {
            let mut x: Vec<f64> = v.iter().map(|&ns| ns as f64 * 1e-6).collect();
            Dist::of(&mut x)
        };
        let mut tpot: Vec<f64> = self
            .stats
            .decode_start
            .iter()
            .filter_map(|&(id, start)| {
                let r = &rec.records[id as usize];
                (r.status == Status::Finished && r.output_tokens > 1)
                    .then(|| (r.finish - start).as_millis_f64() / (r.output_tokens - 1) as f64)
            })
            .collect();
        DisaggSummary {
            prefill: self.pool(instances, 0..self.prefill, rec.end()),
            decode: self.pool(instances, self.prefill..instances.len(), rec.end()),
            transfers: self.stats.transfers,
            transfer_bytes: self.stats.bytes.min(u64::MAX as u128) as u64,
            transfer_ms: ms(&self.stats.transfer_ns),
            transfer_wait_ms: ms(&self.stats.wait_ns),
            decode_tpot_ms: Dist::of(&mut tpot),
        }
    }
}
