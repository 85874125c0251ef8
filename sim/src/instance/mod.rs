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
mod batch;
pub(crate) mod batching;
pub(crate) mod cpu;
mod fleet;
mod group;
pub(crate) mod handoff;
pub(crate) mod kv;
mod kv_manager;
pub(crate) mod kv_policy;
pub(crate) mod policy;
pub(crate) mod preemption;
pub(crate) mod prefix;
pub mod queue;
mod seq;
pub(crate) mod speculative;
mod waiting;

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::cost::{BatchShape, CostAccount, CostModel, Roofline, SeqWork};
use crate::metrics::{Observer, RejectReason};
use crate::rng::{substream, Stream};
use crate::time::SimTime;
use crate::workload::Request;
use admission::Breaker;
use batch::Batch;
pub use group::{InstanceGroup, Role, SchedulerSection};
pub use handoff::Handoff;
use kv::BlockAllocator;
use kv_manager::KvManager;
pub use policy::PolicyConfig;
use preemption::PreemptionSpec;
use prefix::Hit;
use queue::{Queue, QueueCtx};
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
    pub kv_blocks: u32,
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
    cfg: InstanceConfig,
    cost: Arc<dyn CostModel>,
    /// KV memory: GPU blocks, CPU tier, swap space, host-link bytes.
    kv: KvManager,
    /// Swapped-out, preempted and queued requests, and the queue timeouts.
    waiting: Waiting,
    /// Running requests in admission order. Boxed on purpose: the batch is compacted every
    /// iteration a request finishes, and moving pointers is cheaper than moving requests.
    #[allow(clippy::vec_box)]
    running: Vec<Box<Seq>>,
    /// The iteration being formed.
    batch: Batch,
    /// Requests handed off to, or taken in from, the other pool (disaggregation).
    xfer: handoff::Transfers,
    breaker: Option<Breaker>,
    draft: Option<Draft>,
    spec_rng: ChaCha8Rng,
    /// Per-iteration scratch: admissions, whether anyone was preempted.
    admitted_now: u32,
    preempted_now: bool,
    /// When the in-flight iteration started, if one is in flight.
    iteration_start: Option<SimTime>,
    /// When the in-flight iteration ends; `None` while a failed instance holds it forever.
    iteration_end: Option<SimTime>,
    /// Output tokens every request here has yet to produce.
    pending_decode: u64,
    /// Whether routers may send here (the router believes it healthy; see `fleet`).
    routable: bool,
    /// The work done so far.
    pub(crate) work: WorkDone,
    /// Whether the cost model wants each iteration's sequences, and the reused list of them.
    wants_seqs: bool,
    seqs: Vec<SeqWork>,
    /// What the cost model priced without measurements (models that keep an account).
    account: Option<Box<CostAccount>>,
    /// SGLang's scheduler state (`kind = "sglang"`).
    sglang: batching::sglang::State,
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
        Instance {
            id,
            kv: KvManager::new(&cfg),
            waiting: Waiting::new(Queue::new(p.queue.build(p.seed, id))),
            running: Vec::new(),
            batch: Batch::default(),
            xfer: handoff::Transfers::default(),
            breaker: p.admission.circuit_breaker.as_ref().map(Breaker::new),
            draft,
            spec_rng: substream(p.seed, Stream::Speculation, id as u64),
            admitted_now: 0,
            preempted_now: false,
            iteration_start: None,
            iteration_end: None,
            pending_decode: 0,
            routable: true,
            work: WorkDone::default(),
            cfg,
            wants_seqs,
            seqs: Vec::new(),
            account: cost.accounts().then(Box::default),
            cost,
            sglang: batching::sglang::State::default(),
        }
    }

    /// What this instance's cost model priced without measurements so far.
    pub fn cost_account(&self) -> &CostAccount {
        static EMPTY: std::sync::OnceLock<CostAccount> = std::sync::OnceLock::new();
        self.account.as_deref().unwrap_or_else(|| EMPTY.get_or_init(CostAccount::default))
    }

    /// Requests waiting or running here (what a router counts as outstanding).
    pub fn outstanding(&self) -> u64 {
        (self.waiting_len() + self.running.len() + self.xfer.held()) as u64
    }

    pub fn kv_blocks_used(&self) -> u32 {
        self.kv.blocks.used()
    }

    /// Fraction of KV blocks in use.
    pub fn kv_usage(&self) -> f64 {
        self.kv.blocks.used() as f64 / self.kv.blocks.total().max(1) as f64
    }

    /// Tokens the queued and preempted requests still have to prefill.
    pub fn pending_prefill_tokens(&self) -> u64 {
        self.waiting.pending_prefill
    }

    /// Output tokens the requests here have yet to produce. A real router cannot know this
    /// (it does not know output lengths in advance); the simulator can.
    pub fn pending_decode_tokens(&self) -> u64 {
        self.pending_decode
    }

    /// Relative serving capacity (decode tokens per second at a reference batch); equal for
    /// instances of one group.
    pub fn capacity(&self) -> f64 {
        self.cfg.capacity
    }

    pub fn config(&self) -> &InstanceConfig {
        &self.cfg
    }

    pub fn is_busy(&self) -> bool {
        self.iteration_start.is_some()
    }

    pub fn has_work(&self) -> bool {
        self.waiting_len() > 0 || !self.running.is_empty()
    }

    /// Requests waiting: queued, preempted and swapped out.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    pub fn gauges(&self) -> Gauges {
        Gauges {
            waiting: (self.waiting_len() + self.xfer.held()) as u64,
            running: self.running.len() as u64,
            kv_used: self.kv.blocks.used() as u64,
        }
    }

    pub fn kv_blocks_total(&self) -> u32 {
        self.kv.blocks.total()
    }

    /// [`KvManager::fits`], the one admission-capacity rule, for this instance: the watermark
    /// applies while requests hold blocks that may grow (running ones, and ones receiving their
    /// KV).
    fn fits(&self, need: u64, unusable: u64) -> bool {
        let growing = !self.running.is_empty() || self.xfer.slots() > 0;
        self.kv.fits(need, unusable, growing && self.cfg.policy.batching.keeps_watermark())
    }

    fn blocks_for(&self, tokens: u64) -> u64 {
        self.kv.blocks_for(tokens)
    }

    /// Blocks reserved up front for a request (`reserve-max`), 0 when paged.
    fn reserved_blocks(&self, s: &Seq) -> u64 {
        self.blocks_for(self.cfg.policy.kv.reservation(s.prompt as u64, s.output as u64, self.cfg.max_model_len))
    }

    /// Whether this instance could ever serve `req`; the reason if not.
    pub fn check_fits(&self, req: &Request) -> Result<(), RejectReason> {
        let p = req.prompt_tokens as u64;
        let o = req.output_tokens as u64;
        if p + o > self.cfg.max_model_len {
            return Err(RejectReason::ContextTooLong);
        }
        // A decode instance prefills only to recompute, which may exceed the token budget.
        let role = self.cfg.policy.role;
        if p > self.cfg.max_num_batched_tokens && !self.cfg.policy.batching.is_chunked() && role != Role::Decode {
            return Err(RejectReason::PromptExceedsBatchTokens);
        }
        // The last output token is sampled, never written to the cache; a prefill instance
        // holds only the prompt's KV.
        let kept = if role == Role::Prefill { 1 } else { o };
        let tokens = (p + kept - 1).max(self.cfg.policy.kv.reservation(p, o, self.cfg.max_model_len));
        if self.blocks_for(tokens) > self.kv.blocks.total() as u64 {
            return Err(RejectReason::ExceedsKvCapacity);
        }
        Ok(())
    }

    /// Decides whether an arrival at `now` is accepted: [`Instance::check_fits`] and the
    /// admission policy (max prompt, queue cap, circuit breaker).
    pub fn accept(&mut self, req: &Request, _now: SimTime, rec: &mut dyn Observer) -> Result<(), RejectReason> {
        let adm = &self.cfg.policy.admission;
        if adm.max_prompt_tokens.is_some_and(|m| req.prompt_tokens > m) {
            return Err(RejectReason::PromptTooLong);
        }
        self.check_fits(req)?;
        let waiting = self.waiting_len();
        if adm.max_queue.is_some_and(|m| waiting >= m as usize) {
            return Err(RejectReason::QueueFull);
        }
        if let Some(b) = &mut self.breaker {
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
        self.pending_decode += req.output_tokens as u64;
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
        if self.cfg.policy.prefix.enabled {
            prefix::block_hashes(
                &req.content,
                req.prompt_tokens,
                req.output_tokens,
                self.cfg.block_tokens,
                &mut s.cold.hashes,
            );
        }
        let deadline = self.cfg.policy.admission.queue_timeout_s.map(|t| req.arrival + SimTime::from_secs_f64(t));
        self.waiting.push(s, deadline);
    }

    /// Forms the next batch and starts it at `now`; returns when it ends, or `None` when there
    /// is nothing to run.
    pub fn start_iteration(&mut self, now: SimTime, rec: &mut dyn Observer) -> Option<SimTime> {
        debug_assert!(!self.is_busy());
        self.kv.bytes_in = 0;
        self.kv.bytes_out = 0;
        self.admitted_now = 0;
        self.preempted_now = false;
        if let Some(ttl) = self.cfg.policy.prefix.ttl_s {
            let before = now.saturating_sub(SimTime::from_secs_f64(ttl));
            rec.policy().prefix_evictions += self.kv.blocks.expire(before);
        }
        self.batch.clear();
        batching::form(self, now, rec);
        if self.batch.shape.is_empty() && self.preempted_now {
            // Everyone with a step this time was preempted (their blocks are free now): try
            // again rather than leave the instance idle with work.
            self.preempted_now = false;
            self.batch.clear();
            batching::form(self, now, rec);
        }
        let Batch { shape, drafts } = std::mem::take(&mut self.batch);
        if shape.is_empty() {
            // Work may wait for blocks a KV transfer holds (disaggregation): its end restarts us.
            debug_assert!(!self.has_work() || self.xfer.pins_blocks(), "instance {} idle with work", self.id);
            self.batch.drafts = drafts;
            return None;
        }
        #[cfg(debug_assertions)]
        self.check_batch(&shape);
        let (total, cpu) = if self.wants_seqs {
            // Decodes first, then this iteration's prefills (and speculative verifications).
            self.seqs.clear();
            self.seqs.extend(self.running.iter().filter_map(|s| s.work()));
            self.seqs.sort_by_key(|w| w.prefill); // stable: each kind keeps the batch's order
            self.cost.iteration_times_of(&shape, &self.seqs, self.account.as_deref_mut())
        } else {
            self.cost.iteration_times(&shape, self.account.as_deref_mut())
        };
        debug_assert!(total > SimTime::ZERO, "an iteration must take time");
        let cpu = cpu.min(total);
        let mut gpu = total - cpu;
        let mut dur = total;
        if self.cfg.policy.cpu_overlap {
            dur = gpu.max(cpu);
        }
        if let Some(d) = &self.draft {
            let t = self.draft_time(d, &drafts);
            self.batch.drafts = drafts;
            gpu += t;
            dur += t;
        }
        let bytes = self.kv.bytes_in.max(self.kv.bytes_out);
        if bytes > 0 {
            let t = SimTime((bytes as f64 / self.cfg.policy.pcie_bytes_per_s * 1e9).ceil() as u64);
            rec.policy().transfer_ns += t.0 as u128;
            dur += t;
        }
        self.iteration_start = Some(now);
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
        if let Some(b) = &mut self.breaker {
            b.observe(self.admitted_now, backlogged, dur);
        }
        self.debug_check();
        self.iteration_end = Some(now + dur);
        Some(now + dur)
    }

    /// Checks the incrementally kept batch against one built from scratch (debug builds).
    #[cfg(debug_assertions)]
    fn check_batch(&self, shape: &BatchShape) {
        let mut b = Batch::default();
        for s in &self.running {
            b.add(s);
        }
        let mut a = *shape;
        let pairs = (a.prefill_attn_pairs - b.shape.prefill_attn_pairs).abs();
        assert!(pairs <= 1e-9 * b.shape.prefill_attn_pairs.max(1.0), "attention pairs out of step");
        a.prefill_attn_pairs = b.shape.prefill_attn_pairs;
        assert_eq!(a, b.shape, "batch shape out of step with the running requests");
    }

    fn draft_time(&self, d: &Draft, drafts: &[(u64, u64)]) -> SimTime {
        let mut t = SimTime::ZERO;
        for &(n, ctx) in drafts {
            let b = BatchShape { decode_seqs: n, decode_context_tokens: ctx, sampled_seqs: n, ..BatchShape::default() };
            t += match d {
                Draft::Fraction(f) => SimTime((self.cost.iteration_time(&b).0 as f64 * f).ceil() as u64),
                Draft::Model(r) => r.iteration_time(&b),
            };
        }
        t
    }

    /// Tokens the running requests process in this iteration so far.
    fn budget_used(&self) -> u64 {
        self.batch.shape.tokens()
    }

    /// The decode step of a running request: 1 token, or 1 + k with speculation (fewer near
    /// the end of its output), and the drafts it verifies.
    fn decode_step(&self, s: &Seq) -> (u64, u32) {
        match &self.cfg.policy.speculative {
            Some(sp) => {
                let k = sp.k.min(s.output - s.generated - 1);
                (1 + k as u64, k)
            }
            None => (1, 0),
        }
    }

    /// Gives each running decode without a step yet its decode step while `budget` lasts, and
    /// the blocks for it (preempting the most recently admitted requests when none are free).
    /// Returns whether it passed a running request in the middle of its prefill (without a
    /// step): if not, [`Instance::step_running_prefills`] has nothing to do.
    fn step_running_decodes(&mut self, budget: u64, rec: &mut dyn Observer) -> bool {
        let bt = self.cfg.block_tokens;
        let k = self.cfg.policy.speculative.as_ref().map_or(0, |sp| sp.k);
        let mut used = 0;
        let mut i = 0;
        let mut prefills = false;
        // Fast pass, for as long as free blocks suffice (no eviction, no preemption): this runs
        // for every request, every iteration.
        if k == 0 {
            // Without speculation every decode step is one token: the same pass, with the
            // batch's sums kept in registers.
            let (running, kv) = (&mut self.running, &mut self.kv.blocks);
            let (mut seqs, mut context) = (0, 0);
            for s in running.iter_mut() {
                if s.step != 0 {
                    i += 1;
                    continue;
                }
                let ctx = s.prompt as u64 + s.generated as u64;
                if s.generated == 0 || ctx - s.computed != 1 {
                    prefills = true;
                    i += 1;
                    continue;
                }
                if used < budget {
                    if (s.blocks.len() as u64) * bt < ctx && !kv.fill_free(&mut s.blocks, ctx.div_ceil(bt) as usize) {
                        break;
                    }
                    s.step = 1;
                    used += 1;
                    seqs += 1;
                    context += ctx;
                }
                i += 1;
            }
            let b = &mut self.batch.shape;
            b.decode_seqs += seqs;
            b.decode_context_tokens += context;
            b.sampled_seqs += seqs;
        } else {
            let (running, kv, batch) = (&mut self.running, &mut self.kv.blocks, &mut self.batch);
            for s in running.iter_mut() {
                if s.step == 0 && s.is_decode() {
                    let draft = k.min(s.output - s.generated - 1);
                    let step = 1 + draft as u64;
                    if used + step <= budget {
                        // Multiplying rather than dividing.
                        let end = s.computed + step;
                        if (s.blocks.len() as u64) * bt < end && !kv.fill_free(&mut s.blocks, end.div_ceil(bt) as usize)
                        {
                            break;
                        }
                        s.step = step;
                        s.draft = draft;
                        used += step;
                        if draft == 0 {
                            let b = &mut batch.shape;
                            b.decode_seqs += 1;
                            b.decode_context_tokens += s.context();
                            b.sampled_seqs += 1;
                        } else {
                            batch.add(s);
                        }
                    }
                } else if s.step == 0 {
                    prefills = true;
                }
                i += 1;
            }
        }
        // The rest, evicting cached blocks and preempting when the free ones run out.
        while i < self.running.len() {
            let s = &mut self.running[i];
            if s.step == 0 && s.is_decode() {
                let draft = k.min(s.output - s.generated - 1);
                let step = 1 + draft as u64;
                if used + step <= budget {
                    s.step = step;
                    s.draft = draft;
                    used += step;
                    self.batch.add(s);
                    let need = (s.computed + step).div_ceil(bt) as usize;
                    if s.blocks.len() < need {
                        self.grow_slow(i, need, rec);
                    }
                }
            } else if s.step == 0 {
                prefills = true;
            }
            i += 1;
        }
        prefills
    }

    /// Keeps the decode steps of running requests, in order, while their tokens fit in `keep`;
    /// the rest skip this iteration (their blocks stay).
    fn trim_decodes(&mut self, keep: u64) {
        let mut used = 0;
        for s in &mut self.running {
            if s.step > 0 && s.is_decode() {
                if used + s.step <= keep {
                    used += s.step;
                } else {
                    self.batch.remove(s);
                    s.step = 0;
                    s.draft = 0;
                }
            }
        }
    }

    /// Gives each running request in the middle of a prefill its next chunk while `budget`
    /// lasts, and the blocks for it.
    fn step_running_prefills(&mut self, budget: u64, rec: &mut dyn Observer) {
        let mut used = 0;
        let mut i = 0;
        while i < self.running.len() {
            let s = &self.running[i];
            if s.step == 0 && !s.is_decode() && used < budget {
                let chunk = s.pending().min(budget - used);
                self.running[i].step = chunk;
                self.batch.add(&self.running[i]);
                used += chunk;
                self.grow(i, rec);
            }
            i += 1;
        }
    }

    /// vLLM V1's pass over the running requests: in admission order, each gets the tokens it
    /// is owed (a decode step, or a prefill chunk of at most the policy's chunk cap) while
    /// `budget` lasts, and the blocks for them, preempting the most recently admitted
    /// requests when none are free; stops when the budget is spent or a request had to preempt
    /// itself.
    fn step_running_in_order(&mut self, budget: u64, rec: &mut dyn Observer) {
        let cap = self.cfg.policy.batching.chunk_cap();
        let mut used = 0;
        let mut i = 0;
        while i < self.running.len() && used < budget {
            let s = &self.running[i];
            if s.step == 0 {
                let (step, draft) =
                    if s.is_decode() { self.decode_step(s) } else { (s.pending().min(cap).min(budget - used), 0) };
                if used + step > budget {
                    // A speculative step larger than what is left (vLLM would cut its drafts).
                    break;
                }
                let s = &mut self.running[i];
                s.step = step;
                s.draft = draft;
                self.batch.add(&self.running[i]);
                used += step;
                if !self.grow(i, rec) {
                    break;
                }
            }
            i += 1;
        }
    }

    /// Gives running request `i` the blocks its step needs, preempting the most recently
    /// admitted requests while none are free. Returns false if `i` itself was preempted.
    #[inline]
    fn grow(&mut self, i: usize, rec: &mut dyn Observer) -> bool {
        let s = &self.running[i];
        let need = self.blocks_for(s.computed + s.step) as usize;
        if s.blocks.len() >= need {
            return true;
        }
        self.grow_slow(i, need, rec)
    }

    fn grow_slow(&mut self, i: usize, need: usize, rec: &mut dyn Observer) -> bool {
        while self.running[i].blocks.len() < need {
            if let Some(b) = self.kv.alloc_block(rec) {
                self.running[i].blocks.push(b);
                continue;
            }
            self.preempt_last(rec);
            if i == self.running.len() {
                // The request itself was the most recent: it waits.
                return false;
            }
        }
        true
    }

    /// Preempts the most recently admitted running request: swaps it out when the policy says
    /// so and the swap space has room, otherwise frees its blocks for recomputation.
    fn preempt_last(&mut self, rec: &mut dyn Observer) {
        let last = self.running.len().checked_sub(1).expect("running is not empty");
        self.preempt_at(last, rec);
    }

    /// Preempts running request `i` (see [`Instance::preempt_last`]); later ones move up.
    fn preempt_at(&mut self, i: usize, rec: &mut dyn Observer) {
        let mut v = self.running.remove(i);
        self.waiting.queue.left(&v);
        rec.preempted(v.id);
        self.preempted_now = true;
        self.batch.remove(&v);
        v.step = 0;
        v.draft = 0;
        let blocks = self.blocks_for(v.computed);
        let swap = matches!(self.cfg.policy.preemption, PreemptionSpec::Swap(_));
        if swap && blocks > 0 && self.kv.swap_has_room(blocks) {
            self.kv.blocks.release_at(&mut v.blocks, v.last_token);
            self.kv.swap_out(blocks);
            v.cold.swapped_blocks = blocks;
            rec.policy().swap_out_blocks += blocks;
            self.waiting.swapped.push_front(v);
        } else {
            if swap {
                rec.policy().swap_fallbacks += 1;
            }
            self.kv.blocks.release_at(&mut v.blocks, v.last_token);
            v.computed = 0;
            self.waiting.push_preempted(v);
        }
    }

    /// Swaps requests back in, oldest preemption first, while the limits allow; each takes its
    /// step in this iteration.
    fn swap_in(&mut self, budget: &mut u64, chunked: bool) {
        while let Some(s) = self.waiting.swapped.front() {
            if self.running.len() + self.xfer.slots() >= self.cfg.max_num_seqs as usize {
                break;
            }
            let (step, draft) = if s.is_decode() {
                self.decode_step(s)
            } else if chunked {
                (s.pending().min(*budget), 0)
            } else {
                (s.pending(), 0)
            };
            if step == 0 || step > *budget {
                break;
            }
            let need = self.blocks_for(s.computed + step).max(self.reserved_blocks(s));
            if !self.fits(need, 0) {
                break;
            }
            let mut s = self.waiting.swapped.pop_front().expect("front exists");
            for _ in 0..need {
                // Evictions here cannot reach the CPU tier's accounting of this iteration's
                // bytes wrongly: they are ordinary evictions.
                let (b, _) = self.kv.blocks.alloc_evicting().expect("checked free blocks");
                s.blocks.push(b);
            }
            self.kv.swap_in(s.cold.swapped_blocks);
            s.cold.swapped_blocks = 0;
            self.register_computed(&s, 0);
            s.step = step;
            s.draft = draft;
            self.batch.add(&s);
            *budget -= step;
            self.admitted_now += 1;
            self.waiting.queue.admitted(&s);
            self.running.push(s);
        }
    }

    /// Registers the full computed blocks of `s` from block `from` on (prefix caching).
    fn register_computed(&mut self, s: &Seq, from: u64) {
        let hashes = &s.cold.hashes;
        if hashes.is_empty() {
            return;
        }
        let to = (s.computed / self.cfg.block_tokens).min(hashes.len() as u64).min(s.blocks.len() as u64);
        for i in from..to {
            self.kv.blocks.register(s.blocks[i as usize], hashes[i as usize]);
        }
    }

    /// Admits waiting requests (preempted ones first, then the queue in policy order) while
    /// `max_num_seqs`, `budget` and the free blocks allow; whole prompts, or with `chunked` the
    /// first chunk that fits the budget. Returns how many were admitted.
    fn admit(&mut self, now: SimTime, budget: &mut u64, chunked: bool, rec: &mut dyn Observer) -> u32 {
        let rule = BudgetRule {
            budget,
            chunked,
            max_batched: self.cfg.max_num_batched_tokens,
            cap: self.cfg.policy.batching.chunk_cap(),
        };
        self.admit_by(now, rule, rec)
    }

    /// [`Instance::admit`] with the batching policy's `rule` deciding each candidate's step
    /// (after its prefix-cache hit) or stopping the admissions.
    fn admit_by(&mut self, now: SimTime, mut rule: impl AdmitRule, rec: &mut dyn Observer) -> u32 {
        let bt = self.cfg.block_tokens;
        let mut n = 0u32;
        loop {
            if self.running.len() + self.xfer.slots() >= self.cfg.max_num_seqs as usize {
                break;
            }
            let ctx = QueueCtx { waiting: self.waiting_len() };
            let from_preempted = !self.waiting.preempted.is_empty();
            let cand = if from_preempted {
                self.waiting.preempted.front().expect("not empty")
            } else {
                match self.waiting.queue.peek(&ctx) {
                    Some(s) => s,
                    None => break,
                }
            };
            let context = cand.context();
            // The longest cached prefix, leaving at least one token to compute (its logits
            // give the next token).
            let (mut gpu_hits, mut evictable_hits) = (0, 0);
            self.kv.hits.clear();
            if self.cfg.policy.prefix.enabled {
                let max_blocks = (context - 1) / bt;
                (gpu_hits, evictable_hits) = prefix::lookup(
                    &self.kv.blocks,
                    self.kv.cpu_tier.as_ref(),
                    &cand.cold.hashes,
                    max_blocks,
                    &mut self.kv.hits,
                );
                if (self.kv.hits.len() as u64 * bt) < self.cfg.policy.prefix.min_prefix_tokens {
                    self.kv.hits.clear();
                    (gpu_hits, evictable_hits) = (0, 0);
                }
            }
            let hit_tokens = self.kv.hits.len() as u64 * bt;
            let pending = context - hit_tokens;
            let Some(step) = rule.step(cand, pending, n) else { break };
            if step == 0 {
                break;
            }
            let need = self.blocks_for(hit_tokens + step).max(self.reserved_blocks(cand));
            let new = need - gpu_hits;
            if !self.fits(new, evictable_hits) {
                break;
            }
            let mut seq = self.waiting.take(from_preempted, &ctx);
            // Its whole block table at once (it grows to this as it decodes).
            let table = self.blocks_for(seq.prompt as u64 + seq.output as u64) as usize;
            seq.blocks.reserve_exact(table.max(need as usize).saturating_sub(seq.blocks.len()));
            let hits = std::mem::take(&mut self.kv.hits);
            for h in &hits {
                if let Hit::Gpu(b) = h {
                    self.kv.blocks.acquire(*b);
                }
            }
            let mut cpu_hits = 0u64;
            for h in &hits {
                match *h {
                    Hit::Gpu(b) => seq.blocks.push(b),
                    Hit::Cpu(hash) => {
                        let b = self.kv.alloc_block(rec).expect("checked free blocks");
                        self.kv.blocks.register(b, hash);
                        if let Some(t) = &mut self.kv.cpu_tier {
                            t.put(hash);
                        }
                        seq.blocks.push(b);
                        cpu_hits += 1;
                    }
                }
            }
            let missing = (need as usize).saturating_sub(seq.blocks.len());
            if !self.kv.blocks.alloc_free_into(missing, &mut seq.blocks) {
                // Some must be evicted from the prefix cache.
                while (seq.blocks.len() as u64) < need {
                    let b = self.kv.alloc_block(rec).expect("checked free blocks");
                    seq.blocks.push(b);
                }
            }
            self.kv.hits = hits;
            self.kv.cpu_hits_in(cpu_hits);
            seq.computed = hit_tokens;
            seq.step = step;
            self.batch.add(&seq);
            if self.cfg.policy.prefix.enabled {
                let p = rec.policy();
                p.prefix_saved_tokens += hit_tokens;
                p.prefix_cpu_hit_tokens += cpu_hits * bt;
                if !seq.admitted {
                    p.prefix_lookups += 1;
                    p.prefix_lookup_tokens += seq.prompt as u64;
                    p.prefix_hit_tokens += hit_tokens;
                    p.prefix_hit_requests += (hit_tokens > 0) as u64;
                }
            }
            seq.admitted = true;
            rec.scheduled(seq.id, now);
            rule.taken(&seq, step);
            self.waiting.queue.admitted(&seq);
            self.running.push(seq);
            self.admitted_now += 1;
            n += 1;
        }
        n
    }

    /// Ends the in-flight iteration at `now`: every request in the batch gains its tokens;
    /// finished ones leave (pushed to `departed`), and so do queued requests whose queue
    /// timeout has passed.
    pub fn finish_iteration(&mut self, now: SimTime, rec: &mut dyn Observer, departed: &mut Vec<Departure>) {
        let start = self.iteration_start.take().expect("an iteration is in flight");
        self.iteration_end = None;
        let bt = self.cfg.block_tokens;
        let alpha = self.cfg.policy.speculative.as_ref().map_or(0.0, |s| s.acceptance);
        let prefix_on = self.cfg.policy.prefix.enabled;
        let (running, kv, queue, spec_rng) =
            (&mut self.running, &mut self.kv.blocks, &mut self.waiting.queue, &mut self.spec_rng);
        let mut ctx = Finish { now, start, alpha, bt, prefix_on, steady: 0, gained: 0 };
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
        self.pending_decode -= ctx.gained;
        if self.cfg.policy.role == Role::Prefill {
            self.hand_off_prefilled(now);
        }
        let steady = ctx.steady;
        if steady > 0 {
            rec.token_gap(now - start, steady);
        }
        let pending_decode = &mut self.pending_decode;
        self.waiting.expire(now, |s, deadline| {
            *pending_decode -= (s.output - s.generated) as u64;
            rec.timed_out(s.id, deadline);
            departed.push(Departure { id: s.id, client: s.client });
        });
        self.debug_check();
    }

    /// KV conservation: blocks in use are exactly those in running block tables (counted once
    /// each, shared or not), and waiting requests hold none. O(running) per call, debug builds
    /// only.
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        {
            if !self.cfg.policy.prefix.enabled {
                let owned: usize = self.running.iter().map(|s| s.blocks.len()).sum::<usize>()
                    + self.xfer.tables().map(<[u32]>::len).sum::<usize>();
                assert_eq!(owned, self.kv.blocks.used() as usize, "KV blocks not conserved on instance {}", self.id);
            }
            self.waiting.debug_check();
            self.kv.debug_check();
            assert!(self.running.len() <= self.cfg.max_num_seqs as usize);
            self.check_load_signals();
        }
    }

    /// The load signals routers read agree with the queues (O(requests here)).
    pub fn check_load_signals(&self) {
        self.waiting.check_pending();
        let decode: u64 = self
            .waiting
            .iter()
            .chain(self.running.iter().map(|b| &**b))
            .map(|s| (s.output - s.generated) as u64)
            .sum::<u64>()
            + self.xfer.pending_decode();
        assert_eq!(decode, self.pending_decode, "pending decode tokens out of step on instance {}", self.id);
    }

    /// Full check of every block's ownership (O(blocks)) and of the policies' state: the
    /// prefix cache's shared and evictable blocks, swap space, the CPU tier, the queue; used
    /// by tests.
    pub fn check_kv_ownership(&self) {
        let tables: Vec<&[u32]> = self.running.iter().map(|s| s.blocks.as_slice()).chain(self.xfer.tables()).collect();
        let swapped: u64 = self.waiting.swapped.iter().map(|s| s.cold.swapped_blocks).sum();
        self.kv.check(&tables, swapped);
        self.check_transfers();
        self.waiting.check(|s| self.blocks_for(s.computed));
        for s in &self.running {
            assert!(s.computed <= s.context(), "request {} computed past its context", s.id);
            assert!(s.blocks.len() as u64 >= self.blocks_for(s.computed), "request {} lacks blocks", s.id);
        }
        assert!(self.running.len() <= self.cfg.max_num_seqs as usize);
    }
}

/// How a batching policy admits: the step each candidate takes (after its prefix-cache hit,
/// `pending` tokens are left to compute), or `None` to stop admitting.
trait AdmitRule {
    /// `n`: requests admitted so far in this iteration.
    fn step(&mut self, s: &Seq, pending: u64, n: u32) -> Option<u64>;
    /// The candidate was admitted with `step` tokens.
    fn taken(&mut self, s: &Seq, step: u64);
}

/// The token-budget rule of continuous and chunked batching (see [`Instance::admit`]).
struct BudgetRule<'a> {
    budget: &'a mut u64,
    chunked: bool,
    max_batched: u64,
    cap: u64,
}

impl AdmitRule for BudgetRule<'_> {
    #[inline]
    fn step(&mut self, _s: &Seq, pending: u64, n: u32) -> Option<u64> {
        if self.chunked {
            return Some(pending.min(*self.budget).min(self.cap));
        }
        // A recomputation can exceed the token budget (prompt + generated tokens); it then
        // runs as the only prefill of its iteration rather than never.
        let oversized = pending > self.max_batched && n == 0;
        (pending <= *self.budget || oversized).then_some(pending)
    }

    #[inline]
    fn taken(&mut self, _s: &Seq, step: u64) {
        *self.budget = self.budget.saturating_sub(step);
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
    rng: &mut ChaCha8Rng,
    alpha: f64,
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
        let a = speculative::accepted(rng, draft, alpha);
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
struct Finish {
    now: SimTime,
    start: SimTime,
    alpha: f64,
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
    rng: &mut ChaCha8Rng,
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
        advance(s, step, kv, rng, f.alpha, f.bt, f.prefix_on, rec)
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
        rec.finished(s.id, f.now);
        departed.push(Departure { id: s.id, client: s.client });
        false
    } else {
        true
    }
}
