//! SGLang's scheduler (`kind = "sglang"`), read in `python/sglang/srt/managers/scheduler.py`
//! (`get_next_batch_to_run`, `get_new_batch_prefill`, `update_running_batch`) and
//! `schedule_policy.py` (`PrefillAdder`, sgl-project/sglang ad0119fd), with the constants of
//! `python/sglang/srt/environ.py` (SGLANG_INIT_NEW_TOKEN_RATIO 0.7,
//! SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600,
//! SGLANG_RETRACT_DECODE_STEPS 20, SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION 4096).
//!
//! An iteration is a prefill batch if one can be formed, else a decode batch of every running
//! request — the two never mix, unless `mixed_chunk` (`--enable-mixed-chunk`, off by default):
//! then the running requests decode in the prefill batch too, and their tokens come off its
//! prompt and chunk budgets first (`PrefillAdder`'s `mixed_with_decode_tokens`; the scheduler's
//! `get_new_batch_prefill` mixes the running batch in with `mix_with_running`).
//!
//! **Prefill batch.** The request in the middle of a chunked prefill, if any, takes its next
//! chunk first: min(tokens left, chunk budget, tokens the KV budget leaves). Then waiting
//! requests, in queue order, while `max_num_seqs` allows, each adding its prompt (less its
//! prefix-cache hit) and a reservation of min(max new tokens, 4096) to the batch's offset:
//!
//! ```text
//!   KV tokens left = (free + evictable blocks) × block_tokens
//!                    − Σ running requests min(output left, 4096) × new_token_ratio
//!                    − Σ this batch's (prompt tokens + min(output, 4096))
//! ```
//!
//! A candidate needing prompt + min(output left, 4096) ≥ what is left stops the batch and
//! marks the running batch full (no prefill is tried again until a running request leaves);
//! one whose prompt reaches the `max_prefill_tokens` left stops it unless it would be the
//! first; a prompt longer than the chunk budget (`max_num_batched_tokens`, SGLang's
//! `--chunked-prefill-size`) is cut there and becomes the chunked request, which ends the batch.
//!
//! **Decode batch.** If the free and evictable blocks cannot give every running request its
//! next token, requests are retracted (recomputed later) — fewest output tokens first, longest
//! prompt among equals, at least one, never the last — and
//! `new_token_ratio` = min(1, (Σ output so far + 20 × requests left) / (Σ max new tokens + 1))
//! over the requests left; otherwise it decays by (init − min) / 600 towards
//! min = 0.14 × init, init = min(0.7 × `schedule_conservativeness`, 1). It returns to init
//! when the instance has nothing running (SGLang resets it when idle).
//!
//! A retracted request goes back to the waiting queue (`_add_request_to_queue`), where the
//! queue's order places it: behind the requests already waiting under FCFS.
//!
//! **Priority preemption** (`priority_preemption_threshold`: SGLang's
//! `--enable-priority-scheduling`, whose preemption is on unless `--disable-priority-preemption`,
//! `--priority-scheduling-preemption-threshold` 10 by default; `PrefillAdder.preempt_to_schedule`,
//! managers/schedule_policy.py, and `get_new_batch_prefill`, managers/scheduler.py, 0.5.15),
//! with `[scheduler.queue] kind = "priority"`: the running batch is never taken as full; when the
//! waiting request next in line finds no request slot left, the decoding requests are taken
//! lowest priority first (the highest class, the latest arrived among equals), each whose class
//! exceeds the candidate's by more than the threshold (a class difference standing for SGLang's
//! priority difference), until their reservations (min(output left, 4096) × `new_token_ratio`)
//! cover what the candidate's prompt and reservation exceed the KV budget by; if any are found
//! and they cover it, they are retracted (their KV released as above, back in the queue once the
//! batch is formed) and admission goes on, else it stops. The candidate's prompt is taken whole
//! (SGLang subtracts its cached prefix).
//!
//! Differences that remain: the KV budget counts in whole blocks of
//! `scheduler.block_tokens` (SGLang's page size is 1 token by default); the queue order is
//! `[scheduler.queue]`'s (SGLang's default `lpm` sorts by cached prefix, falling back to FCFS
//! beyond 128 waiting requests).

use serde::{Deserialize, Serialize};

use super::super::core::AdmitRule;
use super::super::seq::Seq;
use super::{Batcher, BatchingPolicy, Sched};
use crate::config::{check, ConfigError};
use crate::metrics::Observer;
use crate::time::SimTime;

/// SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: the most output tokens a request reserves.
pub(crate) const CLIP_MAX_NEW_TOKENS: u64 = 4096;
/// SGLANG_RETRACT_DECODE_STEPS.
pub(crate) const RETRACT_DECODE_STEPS: u64 = 20;
/// SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
/// SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS.
const INIT_RATIO: f64 = 0.7;
const MIN_RATIO_FACTOR: f64 = 0.14;
const DECAY_STEPS: f64 = 600.0;

/// `kind = "sglang"`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sglang {
    /// `--max-prefill-tokens`: prompt tokens one prefill batch may take (the first request may
    /// exceed it). Default 16384.
    pub(crate) max_prefill_tokens: u64,
    /// `--schedule-conservativeness`: scales the new-token ratio's start. Default 1.
    pub(crate) schedule_conservativeness: f64,
    /// `--enable-mixed-chunk`: running requests decode in prefill batches. Default false.
    pub(crate) mixed_chunk: bool,
    /// SGLang's priority preemption and its threshold (`--priority-scheduling-preemption-threshold`),
    /// with a queue ranked by priority; none (default): off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority_preemption_threshold: Option<i64>,
}

impl Default for Sglang {
    fn default() -> Self {
        Sglang {
            max_prefill_tokens: 16384,
            schedule_conservativeness: 1.0,
            mixed_chunk: false,
            priority_preemption_threshold: None,
        }
    }
}

impl BatchingPolicy for Sglang {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let m = self.max_prefill_tokens;
        check((1..=1 << 40).contains(&m), path, "max_prefill_tokens", "must be in [1, 2^40]", m)?;
        let c = self.schedule_conservativeness;
        check(c.is_finite() && (0.0..=100.0).contains(&c), path, "schedule_conservativeness", "must be in [0, 100]", c)
    }

    fn is_chunked(&self) -> bool {
        true
    }

    /// SGLang's `PrefillAdder` counts free and evictable tokens, keeping none back.
    fn keeps_watermark(&self) -> bool {
        false
    }

    fn priority_preemption(&self) -> Option<i64> {
        self.priority_preemption_threshold
    }

    fn recompute_only(&self) -> Option<&'static str> {
        Some("SGLang's scheduler retracts by recomputation: only \"recompute\" with batching kind \"sglang\"")
    }

    fn build(&self) -> Box<dyn Batcher> {
        Box::new(State { spec: self.clone(), ratio: None, full: None })
    }
}

impl Sglang {
    /// The new-token ratio's start, floor and decay per decode batch.
    pub(crate) fn ratios(&self) -> (f64, f64, f64) {
        let init = (INIT_RATIO * self.schedule_conservativeness).min(1.0);
        let min = (init * MIN_RATIO_FACTOR).min(1.0);
        (init, min, (init - min) / DECAY_STEPS)
    }
}

/// What SGLang's scheduler carries from one iteration to the next.
#[derive(Clone, Debug)]
struct State {
    spec: Sglang,
    /// `new_token_ratio` (`None` until the first iteration).
    ratio: Option<f64>,
    /// `running_batch.batch_is_full`, and the running requests when it was set: it clears when
    /// fewer run.
    full: Option<usize>,
}

/// SGLang's `PrefillAdder` budget for one prefill batch (tokens).
struct Adder {
    /// Free and evictable KV tokens when the batch started forming.
    available: f64,
    /// `rem_total_token_offset`: the running requests' reservations and this batch's tokens.
    total_offset: f64,
    /// `cur_rem_token_offset`: this batch's prompt tokens.
    cur_offset: f64,
    /// `rem_input_tokens` (from `max_prefill_tokens`).
    rem_input: i64,
    /// `rem_chunk_tokens` (from the chunk budget).
    rem_chunk: i64,
    /// Requests in the batch, the chunked one included.
    can_run: u32,
    /// Why admissions stopped: the KV budget ran out (marks the batch full).
    no_token: bool,
    /// Why the last candidate was not taken: no request slot was left (SGLang checks this
    /// first, and may preempt for it), rather than the budgets.
    no_slot: bool,
    /// Whether a request was cut into a chunk (ends the batch).
    chunked: bool,
    /// Requests the running batch may still take (`max_num_seqs` − running).
    allocatable: u32,
    /// Nothing runs: the first request is admitted whatever its reservation (SGLang would
    /// wait forever for memory no one will free).
    idle: bool,
}

impl Adder {
    fn rem_total(&self) -> f64 {
        self.available - self.total_offset
    }

    fn cur_rem(&self) -> f64 {
        self.available - self.cur_offset
    }

    /// `_update_prefill_budget`.
    fn update(&mut self, extend: u64, reserve: u64) {
        self.total_offset += (extend + reserve) as f64;
        self.cur_offset += extend as f64;
        self.rem_input -= extend as i64;
        self.rem_chunk -= extend as i64;
        self.can_run += 1;
    }

    /// `budget_state`: whether more requests may be added.
    fn open(&mut self) -> bool {
        if self.rem_total() <= 0.0 || self.cur_rem() <= 0.0 {
            self.no_token = true;
            return false;
        }
        !self.chunked && self.rem_input > 0 && self.rem_chunk > 0
    }
}

fn reserve(output_left: u64) -> u64 {
    output_left.min(CLIP_MAX_NEW_TOKENS)
}

impl AdmitRule for &mut Adder {
    fn step(&mut self, s: &Seq, pending: u64, _n: u32) -> Option<u64> {
        self.no_slot = false;
        if !self.open() {
            return None;
        }
        if self.can_run >= self.allocatable {
            self.no_slot = true;
            return None;
        }
        // `add_one_req`: the prompt left and the output still to come must fit what is left.
        let total = pending + reserve((s.output - s.generated) as u64);
        if total as f64 >= self.rem_total() && !(self.idle && self.can_run == 0) {
            self.no_token = true;
            return None;
        }
        if pending as i64 >= self.rem_input && self.can_run > 0 {
            return None;
        }
        if pending as i64 <= self.rem_chunk {
            return Some(pending);
        }
        // Chunked prefill: the chunk budget left, the rest in later prefill batches.
        (self.rem_chunk > 0).then_some(self.rem_chunk as u64)
    }

    fn taken(&mut self, s: &Seq, step: u64) {
        if step < s.pending() {
            self.chunked = true;
            self.update(step, 0);
        } else {
            self.update(step, reserve(s.output as u64));
        }
    }
}

impl Batcher for State {
    fn form(&mut self, sched: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer) {
        let (init, min, decay) = self.spec.ratios();
        if sched.running().is_empty() || self.ratio.is_none() {
            self.ratio = Some(init);
        }
        if self.full.is_some_and(|n| sched.running().len() < n) {
            self.full = None;
        }
        if !self.prefill_batch(sched, now, rec) {
            self.decode_batch(sched, min, decay, rec);
        } else if self.spec.mixed_chunk {
            // `mix_with_running`: the running batch decodes in this prefill batch.
            sched.step_running_decodes(u64::MAX, rec);
        }
    }
}

impl State {
    /// `get_new_batch_prefill`: forms a prefill batch; false if there is none to run.
    fn prefill_batch(&mut self, sched: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer) -> bool {
        let c = &self.spec;
        let running_now = sched.running();
        let chunked = running_now.iter().position(|s| !s.is_decode());
        // With priority preemption SGLang never takes the running batch as full.
        let preempting = c.priority_preemption_threshold.is_some();
        if chunked.is_none() && ((self.full.is_some() && !preempting) || sched.waiting() == 0) {
            return false;
        }
        let max_seqs = sched.limits().max_num_seqs as usize;
        let running = running_now.len() - chunked.is_some() as usize;
        if chunked.is_none() && running >= max_seqs && !preempting {
            self.full = Some(running_now.len());
            return false;
        }
        let ratio = self.ratio.expect("set by form");
        let bt = sched.limits().block_tokens;
        // The running batch's reservations (the chunked request is not in it).
        let reserved: f64 = running_now
            .iter()
            .filter(|s| s.is_decode())
            .map(|s| reserve((s.output - s.generated) as u64) as f64 * ratio)
            .sum();
        // `mixed_with_decode_tokens`: with mixed chunks the running requests' decode tokens come
        // off the batch's budgets first.
        let mixed = if c.mixed_chunk { running as i64 } else { 0 };
        let mut adder = Adder {
            available: (sched.kv_free_blocks() as u64 * bt) as f64,
            total_offset: reserved + mixed as f64,
            cur_offset: mixed as f64,
            rem_input: c.max_prefill_tokens as i64 - mixed,
            rem_chunk: sched.limits().max_num_batched_tokens as i64 - mixed,
            can_run: 0,
            no_token: false,
            no_slot: false,
            chunked: false,
            allocatable: (max_seqs - running) as u32,
            idle: running_now.is_empty(),
        };
        if let Some(i) = chunked.filter(|_| !sched.holds_context()) {
            // `add_chunked_req`: the next chunk, as much as the chunk and KV budgets leave.
            let s = &sched.running()[i];
            let room = adder.rem_chunk.min(adder.rem_total() as i64).max(0) as u64;
            let step = longest_step(sched, s, s.pending().min(room));
            if step > 0 {
                let truncated = step < s.pending();
                let output = s.output as u64;
                let grown = sched.step_one(i, step, rec);
                debug_assert!(grown, "blocks were counted");
                adder.chunked = truncated;
                adder.update(step, if truncated { 0 } else { reserve(output) });
            }
        }
        if (self.full.is_none() || preempting) && !sched.has_swapped() {
            self.admit_preempting(sched, &mut adder, now, rec);
            // It clears when fewer requests run; with none running it could never clear.
            if (adder.no_token || adder.can_run >= adder.allocatable) && !sched.running().is_empty() {
                self.full = Some(sched.running().len());
            }
        }
        !sched.batch_is_empty()
    }

    /// The waiting requests, in queue order, into the prefill batch; with priority preemption,
    /// where the next finds no request slot, the running requests it may preempt are retracted
    /// for it and admission goes on ([`State::preempt_for`]); those retracted rejoin the queue
    /// once the batch is formed.
    fn admit_preempting(&mut self, sched: &mut Sched<'_>, adder: &mut Adder, now: SimTime, rec: &mut dyn Observer) {
        let mut aside = Vec::new();
        loop {
            sched.admit_by(now, &mut *adder, rec);
            let no_slot = adder.no_slot || sched.running().len() >= sched.limits().max_num_seqs as usize;
            if !no_slot || !self.preempt_for(sched, adder, &mut aside, rec) {
                break;
            }
        }
        for s in aside {
            sched.requeue(s);
        }
    }

    /// `PrefillAdder.preempt_to_schedule` for the request next in the queue (the module's note):
    /// whether running requests were retracted for it (into `aside`, boxed as the queue holds
    /// them).
    #[allow(clippy::vec_box)]
    fn preempt_for(&self, sched: &mut Sched<'_>, adder: &mut Adder, aside: &mut Vec<Box<Seq>>, rec: &mut dyn Observer) -> bool {
        let (Some(threshold), Some(ratio)) = (self.spec.priority_preemption_threshold, self.ratio) else { return false };
        let Some(head) = sched.queue_head() else { return false };
        let class = head.class as i64;
        let offset = |s: &Seq| reserve((s.output - s.generated) as u64) as f64 * ratio;
        let mut short = (head.context() + reserve(head.output as u64)) as f64 - adder.rem_total();
        // Lowest priority first: the highest class, the latest arrived among equals.
        let mut order: Vec<&Box<Seq>> = sched.running().iter().filter(|s| s.is_decode()).collect();
        order.sort_by_key(|s| (std::cmp::Reverse(s.class), std::cmp::Reverse(s.cold.arrival)));
        let mut victims = Vec::new();
        for s in order {
            if s.class as i64 - class <= threshold {
                break;
            }
            victims.push((s.id, offset(s)));
            short -= offset(s);
            if short <= 0.0 {
                break;
            }
        }
        if victims.is_empty() || short > 0.0 {
            return false;
        }
        for (id, off) in victims {
            let i = sched.running().iter().position(|s| s.id == id).expect("running");
            aside.push(sched.retract_aside(i, rec));
            adder.total_offset -= off;
            adder.allocatable += 1;
        }
        adder.available = (sched.kv_free_blocks() as u64 * sched.limits().block_tokens) as f64;
        true
    }

    /// `update_running_batch`: retracts when the next tokens do not fit, then decodes everyone.
    fn decode_batch(&mut self, sched: &mut Sched<'_>, min: f64, decay: f64, rec: &mut dyn Observer) {
        let before = sched.running().len();
        if !decode_fits(sched) {
            // `retract_decode`: fewest output tokens first, longest prompt among equals; at least
            // one, never the last.
            let mut first = true;
            while first || !decode_fits(sched) {
                let decodes = sched.running().iter().filter(|s| s.is_decode()).count();
                if decodes <= 1 {
                    break;
                }
                first = false;
                let victim = sched
                    .running()
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.is_decode())
                    .min_by_key(|(i, s)| (s.generated, std::cmp::Reverse(s.prompt), std::cmp::Reverse(*i)))
                    .map(|(i, _)| i)
                    .expect("two decodes at least");
                sched.retract(victim, rec);
            }
            let (mut done, mut max_new, mut n) = (0u64, 0u64, 0u64);
            for s in sched.running().iter().filter(|s| s.is_decode()) {
                done += s.generated as u64;
                max_new += s.output as u64;
                n += 1;
            }
            self.ratio = Some((((done + RETRACT_DECODE_STEPS * n) as f64) / (max_new + 1) as f64).min(1.0));
        } else {
            let r = self.ratio.expect("set by form");
            self.ratio = Some((r - decay).max(min));
        }
        if sched.running().len() < before {
            self.full = None;
        }
        sched.step_running_decodes(u64::MAX, rec);
    }
}

/// `check_decode_mem`: whether the free and evictable blocks give every running decode the
/// block its next token may need (and its window's, where windows take theirs from the pool).
fn decode_fits(sched: &Sched<'_>) -> bool {
    let need: u64 = sched.running().iter().filter(|s| s.is_decode()).map(|s| sched.step_blocks(s, 1)).sum();
    need <= sched.kv_free_blocks() as u64
}

/// The longest step of at most `cap` tokens of running request `s` whose blocks the free ones
/// cover (as many tokens as its table and the free blocks hold; fewer where its window takes
/// blocks from the pool too).
fn longest_step(sched: &Sched<'_>, s: &Seq, cap: u64) -> u64 {
    let free = sched.kv_free_blocks() as u64;
    let (mut lo, mut hi) = (0, cap);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if sched.step_blocks(s, mid) <= free {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}
