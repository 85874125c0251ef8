//! One serving instance: a batch scheduler over a paged KV cache, with pluggable policies.
//!
//! ```text
//!   arrival ─► admission (max prompt, fits?, queue cap, circuit breaker) ─► queue (policy order)
//!                 │   swapped (resume first) · preempted (recompute, next) · queue
//!                 │   admitted while max_num_seqs, the token budget and free KV blocks allow
//!                 ▼   (a prefix-cache hit shares cached blocks and skips their prefill)
//!              running ── one iteration: the batching policy gives each request its tokens —
//!                 │        a decode, a prefill chunk, a whole prompt, a speculative step
//!                 ▼
//!              finished (blocks released; cached ones stay, evictable)
//! ```
//! The defaults are vLLM's: continuous batching with whole-prompt prefill, FCFS, paged blocks,
//! and preemption of the most recently admitted request by recomputation (its blocks are freed
//! and its prompt and generated tokens prefilled again later) when a running request needs a
//! block and none is free. Each policy is one file under `batching/`, `queue/`, `admission/`,
//! `preemption/`, plus `kv_policy.rs`, `prefix.rs`, `speculative.rs` and `cpu.rs`.

pub(crate) mod admission;
pub(crate) mod adp;
mod batch;
pub(crate) mod batch_wait;
pub mod batching;
mod core;
pub(crate) mod cpu;
mod fleet;
mod group;
pub(crate) mod handoff;
pub(crate) mod kv;
mod kv_manager;
pub(crate) mod kv_policy;
pub(crate) mod policy;
pub mod preemption;
pub(crate) mod prefix;
pub mod queue;
pub(crate) mod recv;
mod seq;
pub(crate) mod speculative;
mod waiting;

use std::sync::Arc;

use crate::rng::SimRng;

use crate::cost::{BatchShape, CostAccount, CostModel, Roofline, SeqWork};
use crate::metrics::{Observer, RejectReason};
use crate::rng::{substream, Stream};
use crate::time::SimTime;
use crate::workload::Request;
use admission::Breaker;
use batch::Batch;
use batching::{Batcher, Sched};
use core::Core;
pub use group::{InstanceGroup, Role, SchedulerSection, MAX_INSTANCES};
pub(crate) use group::{SeqsFromPool, VLLM_NO_START};
pub use handoff::Handoff;
use kv::BlockAllocator;
use kv_manager::KvManager;
pub use policy::PolicyConfig;
use queue::Queue;
use seq::{Cold, Seq};
use speculative::DraftCost;
use waiting::Waiting;

/// The scheduler limits of one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceConfig {
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u64,
    pub block_tokens: u64,
    /// Blocks kept free when admitting while other requests run.
    pub watermark_blocks: u32,
    pub max_model_len: u64,
    /// KV blocks of one DP attention rank (of the instance when it has one rank).
    pub kv_blocks: u32,
    /// DP attention ranks (`cluster.dp_attention`): each its own scheduler with these limits
    /// and `kv_blocks`, all stepping together. 1 without DP attention.
    pub dp_ranks: u32,
    /// Relative serving capacity, for routers that weigh instances: the engine computes it
    /// from the scenario's own cost model ([`crate::router::capacity_weight`]), so a model
    /// injected for the run (emulation, which executes batches) is never asked for it.
    pub capacity: f64,
    /// Serving policies: batching, queue order, admission, preemption, KV allocation, prefix
    /// cache, speculative decoding, CPU overhead.
    pub policy: PolicyConfig,
}

/// A request that left the instance during an iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure {
    pub(crate) id: u64,
    pub(crate) client: u32,
}

pub use crate::metrics::Gauges;

/// The cost of draft passes (speculative decoding).
enum Draft {
    Fraction(f64),
    Model(Box<Roofline>),
}

pub struct Instance {
    pub id: u32,
    /// Limits, KV memory, waiting lists, the running batch (what batching policies work on);
    /// the first DP attention rank's under DP attention.
    core: Core,
    /// The batching policy, with its state.
    batcher: Box<dyn Batcher>,
    /// The other DP attention ranks, and each rank's batch of the iteration being formed.
    others: Vec<Rank>,
    shapes: Vec<BatchShape>,
    /// TensorRT-LLM's attention-DP context balancing across the ranks (`None`: off, or one rank).
    balance: Option<adp::ContextBalance>,
    ranks_work: Vec<adp::RankWork>,
    /// TensorRT-LLM's batch waiting (`None`: off, or DP ranks, where TensorRT-LLM skips it).
    batch_wait: Option<batch_wait::BatchWait>,
    /// SGLang's receive interval (`None`: every iteration receives).
    recv: Option<recv::RecvSkipper>,
    /// How an iteration is priced.
    exec: Execution,
    /// Admission state (the circuit breaker, when there is one).
    admission: Option<Breaker>,
    /// The iteration in flight and whether routers may send here.
    life: Life,
    /// The work done so far.
    pub(crate) work: WorkDone,
}

/// A DP attention rank after the first: its own scheduler, KV cache and limits, as vLLM runs
/// one engine core per DP rank and SGLang one scheduler per DP attention rank.
struct Rank {
    core: Core,
    batcher: Box<dyn Batcher>,
}

/// What a DP balancer sees of one rank of an instance (the engine's own load balancer between
/// its DP ranks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RankLoad {
    pub waiting: u64,
    pub running: u64,
    pub outstanding: u64,
    pub pending_prefill_tokens: u64,
    pub pending_decode_tokens: u64,
    pub kv_blocks_used: u32,
    pub kv_blocks_total: u32,
    pub block_tokens: u64,
    /// The prompt tokens of its requests, waiting and running (TensorRT-LLM's
    /// `num_active_tokens`).
    pub prompt_tokens: u64,
}

/// How an iteration is priced: the cost model, and what it is given.
struct Execution {
    cost: Arc<dyn CostModel>,
    /// Whether the cost model wants each iteration's sequences, and the reused list of them.
    wants_seqs: bool,
    seqs: Vec<SeqWork>,
    /// What the cost model priced without measurements (models that keep an account).
    account: Option<Box<CostAccount>>,
    /// The cost of draft passes (speculative decoding).
    draft: Option<Draft>,
}

/// An instance's iteration in flight and its standing with the routers.
struct Life {
    /// When the in-flight iteration started, if one is in flight.
    iteration_start: Option<SimTime>,
    /// When the in-flight iteration ends; `None` while a failed instance holds it forever.
    iteration_end: Option<SimTime>,
    /// Whether routers may send here (the router believes it healthy; see `fleet`).
    routable: bool,
}

/// What an instance has done so far (pool statistics of a disaggregated cluster; kept across
/// a crash).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WorkDone {
    pub(crate) iterations: u64,
    /// Decode token-steps (one per decoding request per iteration).
    pub(crate) decode_token_steps: u64,
    /// Sequences over all iterations, and the most in one.
    pub(crate) batch_seqs: u64,
    pub(crate) batch_seqs_max: u64,
    /// Time spent in iterations.
    pub(crate) busy_ns: u128,
}

impl Instance {
    pub fn new(id: u32, cfg: InstanceConfig, cost: Arc<dyn CostModel>) -> Instance {
        let wants_seqs = cost.wants_seqs();
        let p = &cfg.policy;
        let draft = p.draft.as_ref().map(|d| match d {
            DraftCost::Fraction(f) => Draft::Fraction(*f),
            DraftCost::Model(d) => {
                Draft::Model(Box::new(Roofline::new(d.model.clone(), d.gpu.clone(), d.tp, d.params.clone())))
            }
        });
        let admission = p.admission.circuit_breaker.as_ref().map(Breaker::new);
        let account = cost.accounts().then(Box::default);
        let others =
            (1..cfg.dp_ranks).map(|r| Rank { core: core_of(&cfg, id, r), batcher: p.batching.build() }).collect();
        Instance {
            id,
            core: core_of(&cfg, id, 0),
            batcher: p.batching.build(),
            balance: (cfg.dp_ranks > 1).then(|| adp::ContextBalance::new(&p.attention_dp)).flatten(),
            ranks_work: Vec::new(),
            batch_wait: (cfg.dp_ranks == 1)
                .then(|| batch_wait::BatchWait::new(&p.batch_wait, cfg.max_num_batched_tokens))
                .flatten(),
            recv: recv::RecvSkipper::new(p.recv_interval),
            others,
            shapes: Vec::new(),
            exec: Execution { wants_seqs, seqs: Vec::new(), account, cost, draft },
            admission,
            life: Life { iteration_start: None, iteration_end: None, routable: true },
            work: WorkDone::default(),
        }
    }

    /// Every DP attention rank's scheduler core (one without DP attention).
    fn cores(&self) -> impl Iterator<Item = &Core> {
        std::iter::once(&self.core).chain(self.others.iter().map(|r| &r.core))
    }

    /// DP attention ranks (1 without DP attention).
    pub fn ranks(&self) -> usize {
        1 + self.others.len()
    }

    /// What the engine's DP balancer sees of rank `r`.
    pub fn rank_load(&self, r: usize) -> RankLoad {
        let c = if r == 0 { &self.core } else { &self.others[r - 1].core };
        RankLoad {
            waiting: (c.waiting_len() + c.xfer.held()) as u64,
            running: c.running.len() as u64,
            outstanding: c.outstanding(),
            pending_prefill_tokens: c.waiting.pending_prefill,
            pending_decode_tokens: c.pending_decode,
            kv_blocks_used: c.kv.blocks.used(),
            kv_blocks_total: c.kv.blocks.total(),
            block_tokens: c.cfg.block_tokens,
            prompt_tokens: c.waiting.iter().chain(c.running.iter().map(|s| &**s)).map(|s| s.prompt as u64).sum(),
        }
    }

    /// What this instance's cost model priced without measurements so far.
    pub fn cost_account(&self) -> &CostAccount {
        static EMPTY: std::sync::OnceLock<CostAccount> = std::sync::OnceLock::new();
        self.exec.account.as_deref().unwrap_or_else(|| EMPTY.get_or_init(CostAccount::default))
    }

    /// Requests waiting or running here (what a router counts as outstanding).
    pub fn outstanding(&self) -> u64 {
        self.core.outstanding() + self.others.iter().map(|r| r.core.outstanding()).sum::<u64>()
    }

    pub fn kv_blocks_used(&self) -> u32 {
        self.cores().map(|c| c.kv.blocks.used()).sum()
    }

    /// Fraction of KV blocks in use.
    pub fn kv_usage(&self) -> f64 {
        self.kv_blocks_used() as f64 / self.kv_blocks_total().max(1) as f64
    }

    /// Tokens the queued and preempted requests still have to prefill.
    pub fn pending_prefill_tokens(&self) -> u64 {
        self.cores().map(|c| c.waiting.pending_prefill).sum()
    }

    /// Output tokens the requests here have yet to produce. A real router cannot know this
    /// (it does not know output lengths in advance); the simulator can.
    pub fn pending_decode_tokens(&self) -> u64 {
        self.cores().map(|c| c.pending_decode).sum()
    }

    /// Relative serving capacity (decode tokens per second at a reference batch); equal for
    /// instances of one group.
    pub fn capacity(&self) -> f64 {
        self.core.cfg.capacity
    }

    pub fn config(&self) -> &InstanceConfig {
        &self.core.cfg
    }

    pub fn is_busy(&self) -> bool {
        self.life.iteration_start.is_some()
    }

    pub fn has_work(&self) -> bool {
        let busy = |c: &Core| c.waiting_len() > 0 || !c.running.is_empty();
        busy(&self.core) || self.others.iter().any(|r| busy(&r.core))
    }

    /// Requests waiting: queued, preempted and swapped out.
    pub fn waiting_len(&self) -> usize {
        self.core.waiting_len() + self.others.iter().map(|r| r.core.waiting_len()).sum::<usize>()
    }

    /// Read around every call that changes the instance (`engine::tracked`): one rank's without
    /// going through the others.
    pub fn gauges(&self) -> Gauges {
        let of = |c: &Core| Gauges {
            waiting: (c.waiting_len() + c.xfer.held()) as u64,
            running: c.running.len() as u64,
            kv_used: c.kv.blocks.used() as u64,
        };
        self.others.iter().fold(of(&self.core), |g, r| {
            let h = of(&r.core);
            Gauges { waiting: g.waiting + h.waiting, running: g.running + h.running, kv_used: g.kv_used + h.kv_used }
        })
    }

    /// KV blocks over every DP attention rank.
    pub fn kv_blocks_total(&self) -> u32 {
        self.cores().map(|c| c.kv.blocks.total()).sum()
    }

    /// Whether this instance could ever serve `req`; the reason if not.
    pub fn check_fits(&self, req: &Request) -> Result<(), RejectReason> {
        let p = req.prompt_tokens as u64;
        let o = req.output_tokens as u64;
        if p + o > self.core.cfg.max_model_len {
            return Err(RejectReason::ContextTooLong);
        }
        // A decode instance prefills only to recompute, which may exceed the token budget.
        let role = self.core.cfg.policy.role;
        if p > self.core.cfg.max_num_batched_tokens
            && !self.core.cfg.policy.batching.is_chunked()
            && role != Role::Decode
        {
            return Err(RejectReason::PromptExceedsBatchTokens);
        }
        // The last output token is sampled, never written to the cache; a prefill instance
        // holds only the prompt's KV.
        let kept = if role == Role::Prefill { 1 } else { o };
        let tokens = (p + kept - 1).max(self.core.cfg.policy.kv.reservation(p, o, self.core.cfg.max_model_len));
        if self.core.blocks_for(tokens) > self.core.kv.blocks.total() as u64 {
            return Err(RejectReason::ExceedsKvCapacity);
        }
        Ok(())
    }

    /// Decides whether an arrival at `now` is accepted: [`Instance::check_fits`] and the
    /// admission policy (max prompt, queue cap, circuit breaker).
    pub fn accept(&mut self, req: &Request, _now: SimTime, rec: &mut dyn Observer) -> Result<(), RejectReason> {
        let adm = &self.core.cfg.policy.admission;
        if adm.max_prompt_tokens.is_some_and(|m| req.prompt_tokens > m) {
            return Err(RejectReason::PromptTooLong);
        }
        self.check_fits(req)?;
        let waiting = self.waiting_len();
        if adm.max_queue.is_some_and(|m| waiting >= m as usize) {
            return Err(RejectReason::QueueFull);
        }
        if let Some(b) = &mut self.admission {
            let trips = b.trips;
            let ok = b.allows(waiting);
            rec.policy().breaker_trips += b.trips - trips;
            if !ok {
                return Err(RejectReason::CircuitOpen);
            }
        }
        Ok(())
    }

    /// Queues a request that passed [`Instance::check_fits`] (or [`Instance::accept`]).
    pub fn enqueue(&mut self, req: &Request, counted: bool) {
        self.enqueue_on(0, req, counted);
    }

    /// [`Instance::enqueue`] on DP attention rank `rank` (the engine's balancer chose it).
    pub fn enqueue_on(&mut self, rank: usize, req: &Request, counted: bool) {
        let core = if rank == 0 { &mut self.core } else { &mut self.others[rank - 1].core };
        core.pending_decode += req.output_tokens as u64;
        let mut s = Box::new(Seq {
            id: req.id,
            computed: 0,
            step: 0,
            blocks: Vec::new(),
            last_token: req.arrival,
            prompt: req.prompt_tokens,
            output: req.output_tokens,
            generated: 0,
            client: req.client,
            draft: 0,
            counted,
            admitted: false,
            class: req.class,
            cold: Cold { arrival: req.arrival, ..Cold::default() },
        });
        if core.cfg.policy.prefix.enabled {
            prefix::block_hashes(
                &req.content,
                req.id,
                req.prompt_tokens,
                req.output_tokens,
                core.cfg.block_tokens,
                &mut s.cold.hashes,
            );
        }
        let deadline = core.cfg.policy.admission.queue_timeout_s.map(|t| req.arrival + SimTime::from_secs_f64(t));
        // Sent to a scheduler in its loop (an iteration running, or work to run next) that
        // receives only every few: unseen until it does ([`recv`]); an idle one receives at once.
        let looping = self.recv.is_some() && (self.life.iteration_start.is_some() || self.has_work());
        let core = if rank == 0 { &mut self.core } else { &mut self.others[rank - 1].core };
        if looping {
            core.waiting.push_unreceived(s, deadline);
            return;
        }
        if let Some(r) = &mut self.recv {
            r.received_idle();
        }
        core.waiting.push(s, deadline);
    }

    /// Forms the next batch and starts it at `now`; returns when it ends, or `None` when there
    /// is nothing to run.
    pub fn start_iteration(&mut self, now: SimTime, rec: &mut dyn Observer) -> Option<SimTime> {
        debug_assert!(!self.is_busy());
        let (shape, drafts, (total, cpu)) = if self.others.is_empty() {
            let Batch { shape, drafts } = self.form_one(now, rec);
            if shape.is_empty() {
                // Work may wait for blocks a KV transfer holds (disaggregation): its end restarts us.
                debug_assert!(!self.has_work() || self.core.xfer.pins_blocks(), "instance {} idle with work", self.id);
                self.core.batch.drafts = drafts;
                return None;
            }
            #[cfg(debug_assertions)]
            check_batch(&self.core, &shape);
            let times = if self.exec.wants_seqs {
                // Decodes first, then this iteration's prefills (and speculative verifications).
                self.exec.seqs.clear();
                self.exec.seqs.extend(self.core.running.iter().filter_map(|s| s.work()));
                self.exec.seqs.sort_by_key(|w| w.prefill); // stable: each kind keeps the batch's order
                self.exec.cost.iteration_times_of(&shape, &self.exec.seqs, self.exec.account.as_deref_mut())
            } else {
                self.exec.cost.iteration_times(&shape, self.exec.account.as_deref_mut())
            };
            (shape, drafts, times)
        } else {
            let (shape, times) = self.start_ranks(now, rec)?;
            let drafts = if self.exec.draft.is_some() { self.ranks_drafts() } else { Vec::new() };
            (shape, drafts, times)
        };
        debug_assert!(total > SimTime::ZERO, "an iteration must take time");
        let cpu = cpu.min(total);
        let mut gpu = total - cpu;
        let mut dur = total;
        if self.core.cfg.policy.cpu_overlap {
            dur = gpu.max(cpu);
        }
        if let Some(d) = &self.exec.draft {
            let t = self.draft_time(d, &drafts);
            if self.others.is_empty() {
                self.core.batch.drafts = drafts;
            }
            gpu += t;
            dur += t;
        }
        let bytes = self.cores().map(|c| c.kv.bytes_in.max(c.kv.bytes_out)).max().unwrap_or(0);
        if bytes > 0 {
            let t = SimTime((bytes as f64 / self.core.cfg.policy.pcie_bytes_per_s * 1e9).ceil() as u64);
            rec.policy().transfer_ns += t.0 as u128;
            dur += t;
        }
        self.life.iteration_start = Some(now);
        self.work.iterations += 1;
        self.work.decode_token_steps += shape.decode_seqs;
        self.work.batch_seqs += shape.seqs();
        self.work.batch_seqs_max = self.work.batch_seqs_max.max(shape.seqs());
        self.work.busy_ns += dur.0 as u128;
        rec.iteration(&shape, dur);
        let p = rec.policy();
        p.busy_ns += dur.0 as u128;
        p.cpu_ns += cpu.0 as u128;
        p.gpu_wait_ns += dur.saturating_sub(gpu).0 as u128;
        let backlogged = self.waiting_len() > 0;
        let admitted = self.cores().map(|c| c.admitted_now).sum();
        if let Some(b) = &mut self.admission {
            b.observe(admitted, backlogged, dur);
        }
        self.debug_check();
        self.life.iteration_end = Some(now + dur);
        Some(now + dur)
    }

    /// The one scheduler takes in the requests sent meanwhile if SGLang's receive interval says
    /// so ([`recv`]; at once should it have nothing else to run, as its idle loop does) and forms
    /// its batch at `now` ([`Instance::form_held`]).
    fn form_one(&mut self, now: SimTime, rec: &mut dyn Observer) -> Batch {
        if self.recv.as_mut().is_some_and(recv::RecvSkipper::handle) {
            self.core.waiting.receive();
        }
        let mut batch = self.form_held(now, rec);
        if self.recv.is_none() {
            return batch;
        }
        if batch.shape.is_empty() && self.core.waiting.has_unreceived() {
            // Nothing to run but requests sent: the idle loop receives them at once.
            self.recv.as_mut().expect("checked").received_idle();
            self.core.waiting.receive();
            batch = self.form_held(now, rec);
        }
        let ran = (!batch.shape.is_empty()).then_some(batch.shape.prefill_seqs > 0);
        self.recv.as_mut().expect("checked").ran(ran);
        batch
    }

    /// The batch of the requests received, its prompts held back while TensorRT-LLM's batch
    /// waiting says so ([`batch_wait::BatchWait::hold`]; formed again without it should the
    /// decodes it counted on have been preempted while forming).
    fn form_held(&mut self, now: SimTime, rec: &mut dyn Observer) -> Batch {
        let c = &self.core;
        let hold = self.batch_wait.as_mut().is_some_and(|w| {
            let (context, generation) = c.picked_tokens();
            w.hold(context, generation)
        });
        self.core.hold_context = hold;
        let batch = form(&mut self.core, self.batcher.as_mut(), now, rec);
        self.core.hold_context = false;
        if hold && batch.shape.is_empty() {
            return form(&mut self.core, self.batcher.as_mut(), now, rec);
        }
        batch
    }

    /// Every DP attention rank forms its own batch at `now`; their lock-step iteration is
    /// priced together. Returns the ranks' batches as one and the iteration's times, or `None`
    /// when no rank has anything to run.
    fn start_ranks(&mut self, now: SimTime, rec: &mut dyn Observer) -> Option<(BatchShape, (SimTime, SimTime))> {
        let hold = self.balance.is_some() && self.hold_contexts();
        self.form_ranks(now, hold, rec);
        if hold && self.shapes.iter().all(BatchShape::is_empty) {
            // The decodes the hold counted on were preempted while forming: rather than idle
            // with work, the prompts run.
            self.form_ranks(now, false, rec);
        }
        if self.shapes.iter().all(BatchShape::is_empty) {
            debug_assert!(!self.has_work(), "instance {} idle with work", self.id);
            return None;
        }
        let times = self.exec.cost.dp_iteration_times(&self.shapes, self.exec.account.as_deref_mut());
        Some((BatchShape::union(&self.shapes), times))
    }

    /// Every rank forms its batch into `shapes`, running no context if `hold`.
    fn form_ranks(&mut self, now: SimTime, hold: bool, rec: &mut dyn Observer) {
        self.shapes.clear();
        for (core, batcher) in std::iter::once((&mut self.core, &mut self.batcher))
            .chain(self.others.iter_mut().map(|r| (&mut r.core, &mut r.batcher)))
        {
            core.hold_context = hold;
            let Batch { shape, drafts } = form(core, batcher.as_mut(), now, rec);
            core.hold_context = false;
            core.batch.drafts = drafts;
            #[cfg(debug_assertions)]
            if !shape.is_empty() {
                check_batch(core, &shape);
            }
            self.shapes.push(shape);
        }
    }

    /// Whether TensorRT-LLM's attention-DP balancing holds this iteration's contexts on every
    /// rank ([`adp::ContextBalance::hold`]), from what each rank would run: a context where a
    /// prompt waits with a slot free or one is mid-prefill, and its decoding requests (a dummy
    /// one where the rank has nothing at all).
    fn hold_contexts(&mut self) -> bool {
        self.ranks_work.clear();
        for c in std::iter::once(&self.core).chain(self.others.iter().map(|r| &r.core)) {
            let decoding = c.running.iter().filter(|s| s.is_decode()).count() as u32;
            let slot = c.running.len() < c.cfg.max_num_seqs as usize;
            let context = c.running.iter().any(|s| !s.is_decode()) || (slot && c.waiting_len() > 0);
            let idle = c.running.is_empty() && c.waiting_len() == 0;
            self.ranks_work.push(adp::RankWork { context, generation: if idle { 1 } else { decoding } });
        }
        let max_batch = self.core.cfg.max_num_seqs;
        self.balance.as_mut().is_some_and(|b| b.hold(&self.ranks_work, max_batch))
    }

    /// The draft passes of DP attention ranks, which draft in step as they verify: each pass
    /// over every rank's drafts of that depth.
    fn ranks_drafts(&self) -> Vec<(u64, u64)> {
        let mut drafts: Vec<(u64, u64)> = Vec::new();
        for c in self.cores() {
            if drafts.len() < c.batch.drafts.len() {
                drafts.resize(c.batch.drafts.len(), (0, 0));
            }
            for (all, d) in drafts.iter_mut().zip(&c.batch.drafts) {
                *all = (all.0 + d.0, all.1 + d.1);
            }
        }
        drafts
    }

    fn draft_time(&self, d: &Draft, drafts: &[(u64, u64)]) -> SimTime {
        let mut t = SimTime::ZERO;
        for &(n, ctx) in drafts {
            let b = BatchShape { decode_seqs: n, decode_context_tokens: ctx, sampled_seqs: n, ..BatchShape::default() };
            t += match d {
                Draft::Fraction(f) => SimTime((self.exec.cost.iteration_time(&b).0 as f64 * f).ceil() as u64),
                Draft::Model(r) => r.iteration_time(&b),
            };
        }
        t
    }

    /// Ends the in-flight iteration at `now`: every request in the batch gains its tokens;
    /// finished ones leave (pushed to `departed`), and so do queued requests whose queue
    /// timeout has passed.
    pub fn finish_iteration(&mut self, now: SimTime, rec: &mut dyn Observer, departed: &mut Vec<Departure>) {
        let start = self.life.iteration_start.take().expect("an iteration is in flight");
        self.life.iteration_end = None;
        finish_core(&mut self.core, self.id, start, now, rec, departed);
        for r in &mut self.others {
            finish_core(&mut r.core, self.id, start, now, rec, departed);
        }
        self.debug_check();
    }

    /// KV conservation: blocks in use are exactly those in running block tables (counted once
    /// each, shared or not), and waiting requests hold none. O(running) per call, debug builds
    /// only.
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        {
            for core in self.cores() {
                if !core.cfg.policy.prefix.enabled {
                    let owned: usize = core.running.iter().map(|s| s.blocks.len() + s.cold.window.len()).sum::<usize>()
                        + core.xfer.tables().map(<[u32]>::len).sum::<usize>();
                    assert_eq!(
                        owned,
                        core.kv.blocks.used() as usize,
                        "KV blocks not conserved on instance {}",
                        self.id
                    );
                }
                core.waiting.debug_check();
                core.kv.debug_check();
                assert!(core.running.len() <= core.cfg.max_num_seqs as usize);
            }
            self.check_load_signals();
        }
    }

    /// The load signals routers read agree with the queues (O(requests here)).
    pub fn check_load_signals(&self) {
        for core in self.cores() {
            core.waiting.check_pending();
            let decode: u64 = core
                .waiting
                .iter()
                .chain(core.running.iter().map(|b| &**b))
                .map(|s| (s.output - s.generated) as u64)
                .sum::<u64>()
                + core.xfer.pending_decode();
            assert_eq!(decode, core.pending_decode, "pending decode tokens out of step on instance {}", self.id);
        }
    }

    /// Full check of every block's ownership (O(blocks)) and of the policies' state: the
    /// prefix cache's shared and evictable blocks, swap space, the CPU tier, the queue; used
    /// by tests.
    pub fn check_kv_ownership(&self) {
        for core in self.cores() {
            let tables: Vec<&[u32]> = core
                .running
                .iter()
                .flat_map(|s| [s.blocks.as_slice(), s.cold.window.as_slice()])
                .chain(core.xfer.tables())
                .collect();
            let swapped: u64 = core.waiting.swapped.iter().map(|s| s.cold.swapped_blocks).sum();
            core.kv.check(&tables, swapped);
            core.waiting.check(|s| core.blocks_for(s.computed));
            for s in &core.running {
                assert!(s.computed <= s.context(), "request {} computed past its context", s.id);
                assert!(s.blocks.len() as u64 >= core.blocks_for(s.computed), "request {} lacks blocks", s.id);
            }
            assert!(core.running.len() <= core.cfg.max_num_seqs as usize);
        }
        self.check_transfers();
    }
}

/// Ends the in-flight iteration (started at `start`) at `now` on one scheduler core of
/// instance `id`: every request in its batch gains its tokens; finished ones leave (pushed to
/// `departed`), and so do queued requests whose queue timeout has passed.
fn finish_core(
    core: &mut Core,
    id: u32,
    start: SimTime,
    now: SimTime,
    rec: &mut dyn Observer,
    departed: &mut Vec<Departure>,
) {
    let bt = core.cfg.block_tokens;
    let prefix_on = core.cfg.policy.prefix.enabled;
    let (running, kv, queue, spec_rng) =
        (&mut core.running, &mut core.kv.blocks, &mut core.waiting.queue, &mut core.spec_rng);
    let acceptance = &core.cfg.policy.acceptance;
    let mut ctx = Finish { now, start, acceptance, bt, prefix_on, steady: 0, gained: 0 };
    // What `retain_mut` does, written out so that `finish_one` is inlined into the loop;
    // the batch holds boxes, so keeping order costs pointer moves.
    let mut kept = 0;
    for i in 0..running.len() {
        let s = &mut *running[i];
        // A plain decode that decoded in the previous iteration too and does not finish now
        // (nearly every request, every iteration): what `finish_one` does on its path.
        if s.step == 1
            && !prefix_on
            && s.generated >= 1
            && s.computed + 1 == s.context()
            && s.generated + 1 < s.output
            && s.counted
            && s.last_token == start
        {
            s.step = 0;
            s.computed += 1;
            s.generated += 1;
            s.last_token = now;
            ctx.gained += 1;
            ctx.steady += 1;
            if kept != i {
                running.swap(kept, i);
            }
            kept += 1;
            continue;
        }
        if finish_one(&mut running[i], &mut ctx, kv, queue, spec_rng, rec, departed) {
            if kept != i {
                running.swap(kept, i);
            }
            kept += 1;
        }
    }
    running.truncate(kept);
    let (gained, steady) = (ctx.gained, ctx.steady);
    core.pending_decode -= gained;
    if core.cfg.policy.role == Role::Prefill {
        handoff::hand_off_prefilled(core, id, now);
    }
    if steady > 0 {
        rec.token_gap(now - start, steady);
    }
    let pending_decode = &mut core.pending_decode;
    core.waiting.expire(now, |s, deadline| {
        *pending_decode -= (s.output - s.generated) as u64;
        rec.timed_out(s.id, deadline);
        departed.push(Departure { id: s.id, client: s.client });
    });
}

/// Forms one scheduler core's next batch at `now` with its batching policy (an empty one when
/// it has nothing to run).
fn form(core: &mut Core, batcher: &mut dyn Batcher, now: SimTime, rec: &mut dyn Observer) -> Batch {
    core.kv.bytes_in = 0;
    core.kv.bytes_out = 0;
    core.admitted_now = 0;
    core.preempted_now = false;
    if let Some(ttl) = core.cfg.policy.prefix.ttl_s {
        let before = now.saturating_sub(SimTime::from_secs_f64(ttl));
        rec.policy().prefix_evictions += core.kv.blocks.expire(before);
    }
    core.batch.clear();
    batcher.form(&mut Sched::new(core), now, rec);
    if core.batch.shape.is_empty() && core.preempted_now {
        // Everyone with a step this time was preempted (their blocks are free now): try
        // again rather than leave the instance idle with work.
        core.preempted_now = false;
        core.batch.clear();
        batcher.form(&mut Sched::new(core), now, rec);
    }
    std::mem::take(&mut core.batch)
}

/// Checks the incrementally kept batch against one built from scratch (debug builds).
#[cfg(debug_assertions)]
fn check_batch(core: &Core, shape: &BatchShape) {
    let mut b = Batch::default();
    for s in &core.running {
        b.add(s);
    }
    let mut a = *shape;
    let pairs = (a.prefill_attn_pairs - b.shape.prefill_attn_pairs).abs();
    assert!(pairs <= 1e-9 * b.shape.prefill_attn_pairs.max(1.0), "attention pairs out of step");
    a.prefill_attn_pairs = b.shape.prefill_attn_pairs;
    assert_eq!(a, b.shape, "batch shape out of step with the running requests");
}

/// The scheduler core of DP attention rank `rank` of instance `id`: empty, with its own
/// queue-order and speculation streams (rank 0 has the instance's own).
fn core_of(cfg: &InstanceConfig, id: u32, rank: u32) -> Core {
    let p = &cfg.policy;
    // Rank r > 0 of instance id draws as instance id + r · 2^20 would (ids stay below 2^20).
    let stream = id as u64 + ((rank as u64) << 20);
    Core {
        kv: KvManager::new(cfg),
        waiting: Waiting::new(Queue::new(p.queue.build(p.seed, stream as u32))),
        running: Vec::new(),
        batch: Batch::default(),
        xfer: handoff::Transfers::default(),
        admitted_now: 0,
        preempted_now: false,
        returned: 0,
        victim_rank: p.batching.preempts_lowest_priority().then(|| p.queue.priority()).flatten(),
        seq_slots: p.batching.active_seqs().map_or(cfg.max_num_seqs, |a| a.min(cfg.max_num_seqs)) as usize,
        hold_context: false,
        step_cap: None,
        pending_decode: 0,
        spec_rng: substream(p.seed, Stream::Speculation, stream),
        cfg: cfg.clone(),
    }
}

/// Applies an iteration's `step` to a request other than a plain decode: a prefill chunk
/// (nothing sampled until the last), a whole prefill, or a speculative step (1 + accepted
/// drafts); registers the blocks it completed with the prefix cache. Returns the tokens it
/// gained.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn advance(
    s: &mut Seq,
    step: u64,
    kv: &mut BlockAllocator,
    rng: &mut SimRng,
    acceptance: &speculative::Acceptance,
    bt: u64,
    prefix_on: bool,
    rec: &mut dyn Observer,
) -> u32 {
    let draft = std::mem::take(&mut s.draft);
    let before = s.computed;
    let gained = if step < s.pending() {
        s.computed += step;
        0
    } else if draft > 0 {
        let a = speculative::accepted(rng, draft, acceptance);
        rec.policy().spec_steps += 1;
        rec.policy().spec_proposed += draft as u64;
        rec.policy().spec_accepted += a as u64;
        s.computed += 1 + a as u64;
        1 + a
    } else {
        s.computed += step;
        1
    };
    if prefix_on && !s.cold.hashes.is_empty() {
        let hashes = &s.cold.hashes;
        let to = (s.computed / bt).min(hashes.len() as u64).min(s.blocks.len() as u64);
        for i in before / bt..to {
            kv.register(s.blocks[i as usize], hashes[i as usize]);
        }
    }
    gained
}

/// What [`finish_one`] needs to know about the iteration that ended.
struct Finish<'a> {
    now: SimTime,
    start: SimTime,
    acceptance: &'a speculative::Acceptance,
    bt: u64,
    prefix_on: bool,
    /// Requests whose token gap was exactly the iteration (recorded once, together).
    steady: u32,
    /// Output tokens gained by the whole batch.
    gained: u64,
}

/// Ends the iteration for one running request: it gains its tokens; returns whether it stays.
#[inline(always)]
fn finish_one(
    s: &mut Seq,
    f: &mut Finish,
    kv: &mut BlockAllocator,
    queue: &mut Queue,
    rng: &mut SimRng,
    rec: &mut dyn Observer,
    departed: &mut Vec<Departure>,
) -> bool {
    let step = std::mem::take(&mut s.step);
    if step == 0 {
        return true;
    }
    // Plain decodes (one token, nothing to register) are nearly all of the work: their path
    // stays short; everything else goes through `advance`.
    let gained = if step == 1 && s.computed + 1 == s.context() && !f.prefix_on {
        s.computed += 1;
        1
    } else {
        advance(s, step, kv, rng, f.acceptance, f.bt, f.prefix_on, rec)
    };
    if gained == 0 {
        return true;
    }
    s.generated += gained;
    f.gained += gained as u64;
    if s.generated == 1 {
        rec.first_token(s.id, f.now);
    } else if s.counted {
        // A request that decoded in the previous iteration too had its last token at this
        // iteration's start: all of them share one gap, recorded once.
        if s.last_token == f.start {
            f.steady += 1;
        } else {
            rec.token_gap(f.now - s.last_token, 1);
        }
    }
    s.last_token = f.now;
    if s.generated >= s.output {
        queue.left(s);
        kv.release_at(&mut s.blocks, f.now);
        kv.release_at(&mut s.cold.window, f.now);
        rec.finished(s.id, f.now);
        departed.push(Departure { id: s.id, client: s.client });
        false
    } else {
        true
    }
}
