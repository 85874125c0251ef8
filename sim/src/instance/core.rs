//! The scheduler core of one instance: its limits, KV memory, waiting lists and running batch,
//! and the operations a batching policy forms an iteration from — step the running requests,
//! swap in, admit, preempt. A batching policy sees it only through [`Sched`]: those operations
//! and read-only views, never the fields.

use crate::rng::SimRng;

use super::batch::Batch;
use super::handoff;
use super::kv_manager::KvManager;
use super::prefix::{self, Hit};
use super::queue::QueueCtx;
use super::seq::Seq;
use super::waiting::Waiting;
use super::InstanceConfig;
use crate::metrics::Observer;
use crate::time::SimTime;

/// What the scheduling of one instance works on.
pub(crate) struct Core {
    pub(super) cfg: InstanceConfig,
    /// KV memory: GPU blocks, CPU tier, swap space, host-link bytes.
    pub(super) kv: KvManager,
    /// Swapped-out, preempted and queued requests, and the queue timeouts.
    pub(super) waiting: Waiting,
    /// Running requests in admission order. Boxed on purpose: the batch is compacted every
    /// iteration a request finishes, and moving pointers is cheaper than moving requests.
    #[allow(clippy::vec_box)]
    pub(super) running: Vec<Box<Seq>>,
    /// The iteration being formed.
    pub(super) batch: Batch,
    /// Requests handed off to, or taken in from, the other pool (disaggregation).
    pub(super) xfer: handoff::Transfers,
    /// Per-iteration scratch: admissions, whether anyone was preempted.
    pub(super) admitted_now: u32,
    pub(super) preempted_now: bool,
    /// Tokens of this iteration's steps that preemptions took back out of the batch (vLLM's
    /// priority policy can preempt a request already given its step).
    pub(super) returned: u64,
    /// Preemptions free the lowest-priority running request by this rank (vLLM's priority
    /// policy: [`super::batching::BatchingPolicy::preempts_lowest_priority`] with a queue
    /// ranked by priority), else the last admitted.
    pub(super) victim_rank: Option<super::queue::Rank>,
    /// The most requests running (or receiving their KV) at once: `max_num_seqs`, or the
    /// batching kind's admission limit where lower (vLLM's `--max-num-active-seqs`).
    pub(super) seq_slots: usize,
    /// This iteration runs no context (no admission, no prefill chunk): TensorRT-LLM's
    /// attention-DP balancing ([`super::adp`]) or batch waiting ([`super::batch_wait`]) holds them.
    pub(super) hold_context: bool,
    /// This iteration's cap on a prefill chunk, where the batching kind sets one per step
    /// (vLLM's, which follows the requests there are); else the kind's own.
    pub(super) step_cap: Option<u64>,
    /// Output tokens every request here has yet to produce.
    pub(super) pending_decode: u64,
    /// Speculative acceptance draws.
    pub(super) spec_rng: SimRng,
}

impl Core {
    /// Requests waiting: queued, preempted and swapped out.
    pub(super) fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// What TensorRT-LLM's batch waiting weighs before an iteration: the tokens of the context
    /// requests its scheduler would pick — those mid-prefill, then waiting ones (preempted
    /// first, then the queue), whole prompts in order while `max_num_seqs` and the token budget
    /// left by the decodes allow — and the requests decoding, one token each.
    pub(super) fn picked_tokens(&self) -> (u64, u64) {
        let generation = self.running.iter().filter(|s| s.is_decode()).count() as u64;
        let mut context: u64 = self.running.iter().filter(|s| !s.is_decode()).map(|s| s.context()).sum();
        let mut slots = (self.cfg.max_num_seqs as usize).saturating_sub(self.running.len());
        let budget = self.cfg.max_num_batched_tokens.saturating_sub(generation);
        for s in self.waiting.preempted.iter().map(|b| &**b).chain(self.waiting.queue.iter()) {
            if slots == 0 || context + s.context() > budget {
                break;
            }
            context += s.context();
            slots -= 1;
        }
        (context, generation)
    }

    /// Requests waiting, running or in a KV transfer here.
    pub(super) fn outstanding(&self) -> u64 {
        (self.waiting_len() + self.running.len() + self.xfer.held()) as u64
    }

    /// [`KvManager::fits`], the one admission-capacity rule, for this instance: the watermark
    /// applies while requests hold blocks that may grow (running ones, and ones receiving their
    /// KV).
    pub(super) fn fits(&self, need: u64, unusable: u64) -> bool {
        let growing = !self.running.is_empty() || self.xfer.slots() > 0;
        self.kv.fits(need, unusable, growing && self.cfg.policy.batching.keeps_watermark())
    }

    pub(super) fn blocks_for(&self, tokens: u64) -> u64 {
        self.kv.blocks_for(tokens)
    }

    /// Under vLLM's `scheduler_reserve_full_isl` (the batching kind's
    /// [`full_sequence_must_fit`]), whether the free blocks would hold the blocks of a waiting
    /// request's whole sequence so far, `context` tokens (capped at `max_model_len`), that its
    /// cached prefix (`hit_tokens` in `gpu_hits` resident blocks, `evictable` of them free)
    /// does not; always true otherwise.
    ///
    /// [`full_sequence_must_fit`]: super::batching::BatchingSpec::full_sequence_must_fit
    fn whole_fits(&self, context: u64, (hit_tokens, gpu_hits, evictable): (u64, u64, u64)) -> bool {
        if !self.cfg.policy.batching.full_sequence_must_fit() {
            return true;
        }
        let full = context.min(self.cfg.max_model_len);
        let new = self.blocks_for(full).saturating_sub(gpu_hits)
            + self.window_need(hit_tokens, full.saturating_sub(hit_tokens));
        self.fits(new, evictable)
    }

    /// The most tokens a prefill chunk takes in this iteration ([`Core::step_cap`], else the
    /// batching kind's).
    fn chunk_cap(&self) -> u64 {
        self.step_cap.unwrap_or_else(|| self.cfg.policy.batching.chunk_cap())
    }

    /// Blocks reserved up front for a request (`reserve-max`), 0 when paged.
    fn reserved_blocks(&self, s: &Seq) -> u64 {
        self.blocks_for(self.cfg.policy.kv.reservation(s.prompt as u64, s.output as u64, self.cfg.max_model_len))
    }
    /// Tokens the running requests process in this iteration so far.
    pub(super) fn budget_used(&self) -> u64 {
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
    /// step): if not, [`Core::step_running_prefills`] has nothing to do.
    pub(super) fn step_running_decodes(&mut self, budget: u64, rec: &mut dyn Observer) -> bool {
        let bt = self.cfg.block_tokens;
        let k = self.cfg.policy.speculative.as_ref().map_or(0, |sp| sp.k);
        // Fast pass, for as long as free blocks suffice (no eviction, no preemption): this runs
        // for every request, every iteration. Not when windows take blocks from the pool: their
        // steps free and take blocks besides the table's.
        let window = self.cfg.policy.window.is_some();
        let (mut i, mut used, mut prefills) = match (window, k) {
            (true, _) => (0, 0, false),
            (false, 0) => self.fast_decodes(budget),
            (false, _) => self.fast_speculative_decodes(budget, k),
        };
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
                    if s.blocks.len() < need || window {
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

    /// [`Core::step_running_decodes`]'s fast pass without speculation: every decode step is one
    /// token, the batch's sums kept in registers. Returns (requests passed, tokens, whether it
    /// passed one in the middle of its prefill).
    #[inline]
    fn fast_decodes(&mut self, budget: u64) -> (usize, u64, bool) {
        let bt = self.cfg.block_tokens;
        let (mut used, mut i, mut prefills) = (0, 0, false);
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
        (i, used, prefills)
    }

    /// [`Core::fast_decodes`] with `k` draft tokens a step.
    #[inline]
    fn fast_speculative_decodes(&mut self, budget: u64, k: u32) -> (usize, u64, bool) {
        let bt = self.cfg.block_tokens;
        let (mut used, mut i, mut prefills) = (0, 0, false);
        let (running, kv, batch) = (&mut self.running, &mut self.kv.blocks, &mut self.batch);
        for s in running.iter_mut() {
            if s.step == 0 && s.is_decode() {
                let draft = k.min(s.output - s.generated - 1);
                let step = 1 + draft as u64;
                if used + step <= budget {
                    // Multiplying rather than dividing.
                    let end = s.computed + step;
                    if (s.blocks.len() as u64) * bt < end && !kv.fill_free(&mut s.blocks, end.div_ceil(bt) as usize) {
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
        (i, used, prefills)
    }

    /// Keeps the decode steps of running requests, in order, while their tokens fit in `keep`;
    /// the rest skip this iteration (their blocks stay).
    pub(super) fn trim_decodes(&mut self, keep: u64) {
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
    pub(super) fn step_running_prefills(&mut self, budget: u64, rec: &mut dyn Observer) {
        if self.hold_context {
            return;
        }
        let mut used = 0;
        let mut i = 0;
        while i < self.running.len() {
            let s = &self.running[i];
            if s.step == 0 && !s.is_decode() && used < budget {
                let chunk = s.pending().min(budget - used);
                self.running[i].step = chunk;
                self.batch.add(&self.running[i]);
                used += chunk;
                if let Some(at) = self.grow(i, rec) {
                    i = at;
                } else {
                    continue;
                }
            }
            i += 1;
        }
    }

    /// vLLM V1's pass over the running requests: in admission order, each gets the tokens it
    /// is owed (a decode step, or a prefill chunk of at most the policy's chunk cap) while
    /// `budget` lasts, and the blocks for them, preempting ([`Core::victim`]) when none are
    /// free; stops when the budget is spent or a request had to preempt itself (under the
    /// priority policy, from vLLM 0.33, goes on to the next).
    pub(super) fn step_running_in_order(&mut self, budget: u64, rec: &mut dyn Observer) {
        let cap = self.chunk_cap();
        let go_on = self.victim_rank.is_some() && self.cfg.policy.batching.passes_self_preempted();
        self.returned = 0;
        let mut used = 0;
        let mut i = 0;
        while i < self.running.len() && used < budget {
            let s = &self.running[i];
            if s.step == 0 && (s.is_decode() || !self.hold_context) {
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
                let grown = self.grow(i, rec);
                used -= std::mem::take(&mut self.returned);
                match grown {
                    Some(at) => i = at,
                    None if go_on => continue,
                    None => break,
                }
            }
            i += 1;
        }
    }

    /// Gives running request `i` the blocks its step needs, preempting ([`Core::victim`])
    /// while none are free. Returns where `i` is now (a request before it may have been
    /// preempted), `None` if it was preempted itself.
    #[inline]
    pub(super) fn grow(&mut self, i: usize, rec: &mut dyn Observer) -> Option<usize> {
        let s = &self.running[i];
        let need = self.blocks_for(s.computed + s.step) as usize;
        if s.blocks.len() >= need && self.cfg.policy.window.is_none() {
            return Some(i);
        }
        self.grow_slow(i, need, rec)
    }

    /// [`Core::grow`] to `need` blocks in the table, and under windows taken from the pool
    /// ([`crate::memory::SharedWindow`]) as vLLM's `allocate_slots` does it: the window blocks
    /// that slid out are freed first, then those the step writes are taken.
    fn grow_slow(&mut self, mut i: usize, need: usize, rec: &mut dyn Observer) -> Option<usize> {
        let window = self.cfg.policy.window;
        if let Some(w) = window {
            self.slide_window(i, w);
        }
        while self.running[i].blocks.len() < need {
            i = self.take_or_preempt(i, false, rec)?;
        }
        let Some(w) = window else { return Some(i) };
        let s = &self.running[i];
        let want = w.blocks(s.computed, s.step, self.cfg.block_tokens) as usize;
        while self.running[i].cold.window.len() < want {
            i = self.take_or_preempt(i, true, rec)?;
        }
        Some(i)
    }

    /// One block for running request `i`'s table (`window`: its window's), else preempts
    /// [`Core::victim`]; returns where `i` is now, `None` if the victim was `i` itself (it waits).
    fn take_or_preempt(&mut self, i: usize, window: bool, rec: &mut dyn Observer) -> Option<usize> {
        if let Some(b) = self.kv.alloc_block(rec) {
            let s = &mut self.running[i];
            if window { &mut s.cold.window } else { &mut s.blocks }.push(b);
            return Some(i);
        }
        let v = self.victim();
        if self.preempt_at(v, rec) && self.victim_rank.is_some() {
            // vLLM's priority queue has no front: the request goes back by its priority.
            self.waiting.requeue_last_preempted();
        }
        match v.cmp(&i) {
            std::cmp::Ordering::Less => Some(i - 1),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(i),
        }
    }

    /// The running request a preemption frees: the most recently admitted, or by
    /// [`Core::victim_rank`] the lowest-priority one, the latest arrived among equals, the first
    /// such in admission order (vLLM's `max(self.running, key=lambda r: (r.priority,
    /// r.arrival_time))`, `Scheduler.schedule`, vllm/v1/core/sched/scheduler.py, 0.16.0–0.34.0).
    fn victim(&self) -> usize {
        let last = self.running.len().checked_sub(1).expect("running is not empty");
        let Some(rank) = self.victim_rank else { return last };
        let key = |s: &Seq| (rank.key(s), s.cold.arrival);
        let mut v = 0;
        for (j, s) in self.running.iter().enumerate().skip(1) {
            if key(s) > key(&self.running[v]) {
                v = j;
            }
        }
        v
    }

    /// Frees the window blocks running request `i` no longer reads: those before
    /// [`crate::memory::SharedWindow::first_block`] (vLLM's `remove_skipped_blocks`).
    fn slide_window(&mut self, i: usize, w: crate::memory::SharedWindow) {
        let s = &mut self.running[i];
        let first = w.first_block(s.computed, self.cfg.block_tokens);
        if first > s.cold.window_first {
            let drop = ((first - s.cold.window_first) * w.groups).min(s.cold.window.len() as u64) as usize;
            self.kv.blocks.release_blocks(&s.cold.window[..drop], s.last_token);
            s.cold.window.drain(..drop);
            s.cold.window_first = first;
        }
    }

    /// Window blocks ([`crate::memory::SharedWindow::blocks`]) a request entering the batch
    /// with a step of `step` on `computed` tokens takes; 0 without them.
    pub(super) fn window_need(&self, computed: u64, step: u64) -> u64 {
        self.cfg.policy.window.map_or(0, |w| w.blocks(computed, step, self.cfg.block_tokens))
    }

    /// The free blocks a step of `step` tokens of running request `s` takes: its table's new
    /// blocks, and the window's it lacks once those that slid out are freed.
    pub(super) fn step_blocks(&self, s: &Seq, step: u64) -> u64 {
        let full = self.blocks_for(s.computed + step).saturating_sub(s.blocks.len() as u64);
        (full + self.window_need(s.computed, step)).saturating_sub(s.cold.window.len() as u64)
    }

    /// Takes the window blocks of `s`, entering the batch with a step of `step` on its computed
    /// tokens (the free blocks checked: [`Core::window_need`]).
    pub(super) fn take_window(&mut self, s: &mut Seq, step: u64, rec: &mut dyn Observer) {
        let Some(w) = self.cfg.policy.window else { return };
        s.cold.window_first = w.first_block(s.computed, self.cfg.block_tokens);
        for _ in 0..self.window_need(s.computed, step) {
            let b = self.kv.alloc_block(rec).expect("checked free blocks");
            s.cold.window.push(b);
        }
    }

    /// Preempts running request `i`; later ones move up. It is swapped out when the policy says
    /// so and the swap space has room, otherwise its blocks are freed for recomputation and it
    /// waits first in line of the preempted ones; returns whether it was.
    pub(super) fn preempt_at(&mut self, i: usize, rec: &mut dyn Observer) -> bool {
        let mut v = self.running.remove(i);
        self.waiting.queue.left(&v);
        rec.preempted(v.id);
        self.preempted_now = true;
        self.batch.remove(&v);
        self.returned += v.step;
        v.step = 0;
        v.draft = 0;
        self.kv.blocks.release_at(&mut v.cold.window, v.last_token);
        v.cold.window_first = 0;
        let blocks = self.blocks_for(v.computed);
        let swap = self.cfg.policy.preemption.swaps();
        if swap && blocks > 0 && self.kv.swap_has_room(blocks) {
            self.kv.blocks.release_at(&mut v.blocks, v.last_token);
            self.kv.swap_out(blocks);
            v.cold.swapped_blocks = blocks;
            rec.policy().swap_out_blocks += blocks;
            self.waiting.swapped.push_front(v);
            false
        } else {
            if swap {
                rec.policy().swap_fallbacks += 1;
            }
            self.kv.blocks.release_at(&mut v.blocks, v.last_token);
            v.computed = 0;
            self.waiting.push_preempted(v);
            true
        }
    }

    /// Swaps requests back in, oldest preemption first, while the limits allow; each takes its
    /// step in this iteration.
    pub(super) fn swap_in(&mut self, budget: &mut u64, chunked: bool, rec: &mut dyn Observer) {
        while let Some(s) = self.waiting.swapped.front() {
            if self.running.len() + self.xfer.slots() >= self.seq_slots {
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
            if !self.fits(need + self.window_need(s.computed, step), 0) {
                break;
            }
            let mut s = self.waiting.swapped.pop_front().expect("front exists");
            for _ in 0..need {
                // Evictions here cannot reach the CPU tier's accounting of this iteration's
                // bytes wrongly: they are ordinary evictions.
                let (b, _) = self.kv.blocks.alloc_evicting().expect("checked free blocks");
                s.blocks.push(b);
            }
            self.take_window(&mut s, step, rec);
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
    pub(super) fn admit(&mut self, now: SimTime, budget: &mut u64, chunked: bool, rec: &mut dyn Observer) -> u32 {
        let rule = BudgetRule { budget, chunked, max_batched: self.cfg.max_num_batched_tokens, cap: self.chunk_cap() };
        self.admit_by(now, rule, rec)
    }

    /// [`Core::admit`] with the batching policy's `rule` deciding each candidate's step
    /// (after its prefix-cache hit) or stopping the admissions.
    pub(super) fn admit_by(&mut self, now: SimTime, mut rule: impl AdmitRule, rec: &mut dyn Observer) -> u32 {
        let bt = self.cfg.block_tokens;
        let mut n = 0u32;
        loop {
            if self.running.len() + self.xfer.slots() >= self.seq_slots {
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
            let new = need - gpu_hits + self.window_need(hit_tokens, step);
            if !self.fits(new, evictable_hits) || !self.whole_fits(context, (hit_tokens, gpu_hits, evictable_hits)) {
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
            self.take_window(&mut seq, step, rec);
            seq.step = step;
            self.batch.add(&seq);
            if self.cfg.policy.prefix.enabled {
                count_hits(rec, &seq, hit_tokens, cpu_hits * bt);
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
}

/// The prefix-cache statistics of an admission of `s` with `hit_tokens` cached (`cpu_tokens`
/// of them from the CPU tier); a resumed request's hits are saved tokens, not a new lookup.
fn count_hits(rec: &mut dyn Observer, s: &Seq, hit_tokens: u64, cpu_tokens: u64) {
    let p = rec.policy();
    p.prefix_saved_tokens += hit_tokens;
    p.prefix_cpu_hit_tokens += cpu_tokens;
    if !s.admitted {
        p.prefix_lookups += 1;
        p.prefix_lookup_tokens += s.prompt as u64;
        p.prefix_hit_tokens += hit_tokens;
        p.prefix_hit_requests += (hit_tokens > 0) as u64;
    }
}

/// How a batching policy admits: the step each candidate takes (after its prefix-cache hit,
/// `pending` tokens are left to compute), or `None` to stop admitting.
pub(crate) trait AdmitRule {
    /// `n`: requests admitted so far in this iteration.
    fn step(&mut self, s: &Seq, pending: u64, n: u32) -> Option<u64>;
    /// The candidate was admitted with `step` tokens.
    fn taken(&mut self, s: &Seq, step: u64);
}

/// The token-budget rule of continuous and chunked batching (see [`Core::admit`]).
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

/// What a batching policy may do to form an iteration, and see of the instance: the scheduler
/// core's operations and read-only views of its limits, running batch and free blocks.
pub struct Sched<'a> {
    core: &'a mut Core,
}

impl<'a> Sched<'a> {
    pub(super) fn new(core: &'a mut Core) -> Sched<'a> {
        Sched { core }
    }

    /// The instance's limits (`max_num_seqs`, `max_num_batched_tokens`, `block_tokens`, …).
    pub(crate) fn limits(&self) -> &InstanceConfig {
        &self.core.cfg
    }

    /// The running requests, in admission order.
    pub(crate) fn running(&self) -> &[Box<Seq>] {
        &self.core.running
    }

    /// Requests waiting: queued, preempted and swapped out.
    pub(crate) fn waiting(&self) -> usize {
        self.core.waiting_len()
    }

    /// Whether swapped-out requests wait to come back (they go before any admission).
    pub(crate) fn has_swapped(&self) -> bool {
        !self.core.waiting.swapped.is_empty()
    }

    /// KV blocks free now (evictable cached ones included).
    pub(crate) fn kv_free_blocks(&self) -> u32 {
        self.core.kv.blocks.free()
    }

    /// Tokens the iteration being formed processes so far.
    pub(crate) fn budget_used(&self) -> u64 {
        self.core.budget_used()
    }

    /// [`Core::step_blocks`].
    pub(crate) fn step_blocks(&self, s: &Seq, step: u64) -> u64 {
        self.core.step_blocks(s, step)
    }

    /// Whether the iteration being formed has any work.
    pub(crate) fn batch_is_empty(&self) -> bool {
        self.core.batch.shape.is_empty()
    }

    /// Whether this iteration runs no context: no admission and no prefill chunk (TensorRT-LLM's
    /// attention-DP balancing or batch waiting); decodes run.
    pub(crate) fn holds_context(&self) -> bool {
        self.core.hold_context
    }

    /// Holds this iteration's context (`true`), or lets it run again (vLLM's prefill cadence).
    pub(crate) fn set_hold_context(&mut self, hold: bool) {
        self.core.hold_context = hold;
    }

    /// Whether a request was preempted while forming this iteration.
    pub(crate) fn preempted_now(&self) -> bool {
        self.core.preempted_now
    }

    /// [`Core::step_running_decodes`].
    pub(crate) fn step_running_decodes(&mut self, budget: u64, rec: &mut dyn Observer) -> bool {
        self.core.step_running_decodes(budget, rec)
    }

    /// [`Core::step_running_prefills`].
    pub(crate) fn step_running_prefills(&mut self, budget: u64, rec: &mut dyn Observer) {
        self.core.step_running_prefills(budget, rec)
    }

    /// [`Core::step_running_in_order`].
    pub(crate) fn step_running_in_order(&mut self, budget: u64, rec: &mut dyn Observer) {
        self.core.step_running_in_order(budget, rec)
    }

    /// Caps this iteration's prefill chunks at `cap` (`None`: the batching kind's own cap).
    pub(crate) fn set_step_cap(&mut self, cap: Option<u64>) {
        self.core.step_cap = cap;
    }

    /// [`Core::trim_decodes`].
    pub(crate) fn trim_decodes(&mut self, keep: u64) {
        self.core.trim_decodes(keep)
    }

    /// Gives running request `i` a step of `step` tokens and the blocks for it (preempting
    /// while none are free, [`Core::grow`]); false if `i` itself was preempted.
    pub(crate) fn step_one(&mut self, i: usize, step: u64, rec: &mut dyn Observer) -> bool {
        let c = &mut *self.core;
        c.running[i].step = step;
        c.batch.add(&c.running[i]);
        c.grow(i, rec).is_some()
    }

    /// [`Core::swap_in`].
    pub(crate) fn swap_in(&mut self, budget: &mut u64, chunked: bool, rec: &mut dyn Observer) {
        self.core.swap_in(budget, chunked, rec)
    }

    /// [`Core::admit`]; none while the iteration holds its prompts.
    pub(crate) fn admit(&mut self, now: SimTime, budget: &mut u64, chunked: bool, rec: &mut dyn Observer) -> u32 {
        if self.core.hold_context {
            return 0;
        }
        self.core.admit(now, budget, chunked, rec)
    }

    /// [`Core::admit_by`]; none while the iteration holds its prompts.
    pub(crate) fn admit_by(&mut self, now: SimTime, rule: impl AdmitRule, rec: &mut dyn Observer) -> u32 {
        if self.core.hold_context {
            return 0;
        }
        self.core.admit_by(now, rule, rec)
    }

    /// SGLang's retraction (`ScheduleBatch.release_req`, `schedule_batch.py`, sgl-project/sglang
    /// 000eaffa): running request `i` is preempted by recomputation and put back in the queue,
    /// where the queue's order places it. It frees the KV past `req.prefix_indices` — what the
    /// radix tree holds of it: its prompt, inserted after its prefill (`cache_unfinished_req` in
    /// `process_batch_result_prefill`) — and only unlocks the rest. So its prompt's blocks stay
    /// cached (evictable) and those of its generated tokens are freed: a resume re-hits the
    /// prompt at most.
    pub(crate) fn retract(&mut self, i: usize, rec: &mut dyn Observer) {
        if self.release(i, rec) {
            self.core.waiting.requeue_last_preempted();
        }
    }

    /// [`Sched::retract`] for a waiting request of higher priority (SGLang's
    /// `PrefillAdder.preempt_to_schedule`): the request is held out of the waiting queue until
    /// the prefill batch is formed ([`Sched::requeue`]), as SGLang queues its `preempt_list`
    /// then.
    pub(crate) fn retract_aside(&mut self, i: usize, rec: &mut dyn Observer) -> Box<Seq> {
        let recomputed = self.release(i, rec);
        debug_assert!(recomputed, "SGLang retracts by recomputation");
        let w = &mut self.core.waiting;
        let s = w.preempted.pop_front().expect("just preempted");
        w.pending_prefill -= s.context();
        s
    }

    /// Puts a request set aside ([`Sched::retract_aside`]) back in the queue.
    pub(crate) fn requeue(&mut self, s: Box<Seq>) {
        self.core.waiting.push(s, None);
    }

    /// `release_req`'s KV (the module's note on [`Sched::retract`]), then preempts `i`;
    /// whether it was preempted by recomputation.
    fn release(&mut self, i: usize, rec: &mut dyn Observer) -> bool {
        let c = &mut *self.core;
        let s = &c.running[i];
        let prompt_blocks = s.prompt as u64 / c.cfg.block_tokens;
        for &b in s.blocks.iter().skip(prompt_blocks as usize) {
            c.kv.blocks.forget(b);
        }
        c.preempt_at(i, rec)
    }

    /// The request the queue would admit next (not a preempted or swapped one), if any.
    pub(crate) fn queue_head(&self) -> Option<&Seq> {
        let ctx = QueueCtx { waiting: self.core.waiting_len() };
        self.core.waiting.queue.peek(&ctx)
    }
}
