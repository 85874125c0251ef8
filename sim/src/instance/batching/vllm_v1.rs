//! vLLM V1's scheduler (`vllm/v1/core/sched/scheduler.py`, `Scheduler.schedule`, read at
//! vllm-project/vllm 00024d31): one token budget, `max_num_batched_tokens`, and no prefill or
//! decode phase — each request is owed the tokens it has not computed yet.
//!
//! 1. The running requests, in the order they were admitted, each take
//!    min(tokens owed, `long_prefill_token_threshold` if set, budget left) while the budget
//!    lasts: a request still prefilling ahead of a decoding one is served first, and the loop
//!    stops when the budget is spent (later running requests skip the iteration).
//! 2. A request that needs a KV block when none is free preempts the last-admitted running
//!    request (its blocks freed, recomputed later from the head of the waiting queue), again
//!    until the block is found; if it preempted itself, the running loop stops.
//! 3. Waiting requests are admitted only if nobody was preempted in this iteration, in queue
//!    order, each with its first chunk, while `max_num_seqs`, the budget and the free blocks
//!    allow. `KVCacheManager.allocate_slots` keeps no watermark by default (`--watermark`, from
//!    0.24.0, keeps that fraction of the blocks free for admissions while requests run; 0.23.0
//!    has none: `watermark` here, not `scheduler.watermark`). From
//!    vLLM 0.19.0 (`scheduler_reserve_full_isl`, on by default; 0.18.1 has it not) a request is
//!    admitted only if the free blocks, less its cached prefix, would hold its whole sequence so
//!    far — the prompt, and a resumed request's generated tokens — though only its first chunk
//!    is allocated (`KVCacheManager.can_fit_full_sequence` in 0.19.0–0.19.1, the
//!    `full_sequence_must_fit` gate of `allocate_slots` in 0.34.0,
//!    `vllm/v1/core/kv_cache_manager.py`); a request that fails it stops the admissions.
//!
//! Under vLLM's priority policy (`--scheduling-policy priority`: `[scheduler.queue] kind =
//! "priority"`, the request's class its priority) the request preempted is the running one of
//! the lowest priority, the latest arrived among equals (`max(self.running, key=(priority,
//! arrival_time))`), not the last admitted; if it had been given tokens this iteration they go
//! back to the budget, and it goes back into the queue by its priority
//! (`PriorityRequestQueue.prepend_request`, vllm/v1/core/sched/request_queue.py). A request
//! that preempted itself stops the pass over the running requests; from 0.33.0, under the
//! priority policy, the pass goes on to the next (0.32.0 stops; read in 0.16.0 to 0.34.0).
//!
//! From 0.31.0 the threshold does not apply to a request alone (none other running or
//! waiting), and `--long-prefill-token-threshold-adaptive` floors it at the budget ÷ the
//! requests running and waiting (`Scheduler.schedule`; 0.30.0 has neither).
//!
//! `max_num_active_seqs` (vLLM's `--max-num-active-seqs`, 0.31.0 on) admits at most that many
//! requests into running (`Scheduler.max_num_active_reqs`), while `max_num_seqs` still sizes
//! the runner (the memory servesim plans); it may not exceed `max_num_seqs`
//! (`SchedulerConfig.__post_init__`, vllm/config/scheduler.py, 0.31.0 and 0.34.0).
//!
//! `prefill_schedule_interval` (vLLM's `--prefill-schedule-interval`, applied to an engine
//! without DP ranks from 0.33.0; before, only the DP coordinator paced its ranks) holds prefill
//! — new admissions and the chunks of prompts in progress — until that many executed steps
//! have passed since the last step that carried any, while a running request decodes; once a
//! step that admitted could not empty the waiting queue (`prefill_capacity_bound`) it holds
//! nothing until an admitting step does (`Scheduler.schedule`, vllm/v1/core/sched/
//! scheduler.py, 0.33.0 and 0.34.0).
//!
//! Chunked prefill is always on. Prefix caching is `[scheduler.prefix_cache]`'s (vLLM V1 turns
//! it on by default; servesim does not, so that a scenario's cache is what it says).

use serde::{Deserialize, Serialize};

use super::{Batcher, BatchingPolicy, Sched};
use crate::config::{check, ConfigError};
use crate::metrics::Observer;
use crate::time::SimTime;

/// `kind = "vllm-v1"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VllmV1 {
    /// The most tokens one request computes in an iteration (`--long-prefill-token-threshold`);
    /// 0 (default): no limit but the budget.
    pub(crate) long_prefill_token_threshold: u64,
    /// Admit a waiting request only when its whole sequence so far fits the free blocks
    /// (`--scheduler-reserve-full-isl`, vLLM's default from 0.19.0). Default: on; with `engine =
    /// "vllm"` and an `engine_version` before 0.19, off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reserve_full_isl: Option<bool>,
    /// The fraction of the KV blocks admissions keep free while requests run (`--watermark`,
    /// vLLM 0.24.0 on); 0, vLLM's default: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) watermark: f64,
    /// Floor the threshold at the budget ÷ the requests running and waiting
    /// (`--long-prefill-token-threshold-adaptive`, vLLM 0.31.0 on).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) long_prefill_token_threshold_adaptive: bool,
    /// Whether a request alone (none other running or waiting) takes the whole budget past
    /// the threshold, as vLLM does from 0.31.0. Default: yes; with `engine = "vllm"` and an
    /// `engine_version` before 0.31, no.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lone_request_uncapped: Option<bool>,
    /// Whether, under the priority policy, the pass over the running requests goes on past a
    /// request that preempted itself, as vLLM's does from 0.33.0. Default: yes; with `engine =
    /// "vllm"` and an `engine_version` before 0.33, no.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority_pass_continues: Option<bool>,
    /// The most requests admitted into running at once (`--max-num-active-seqs`, vLLM 0.31.0
    /// on), at most `max_num_seqs`; none (default): `max_num_seqs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_num_active_seqs: Option<u32>,
    /// Prefill runs at most once every this many executed steps while requests decode
    /// (`--prefill-schedule-interval`, vLLM 0.33.0 on without DP ranks); 0 or 1 (default):
    /// every step.
    #[serde(skip_serializing_if = "is_every_step")]
    pub(crate) prefill_schedule_interval: u64,
}

fn is_every_step(n: &u64) -> bool {
    *n <= 1
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl BatchingPolicy for VllmV1 {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let t = self.long_prefill_token_threshold;
        check(t <= 1 << 40, path, "long_prefill_token_threshold", "must be ≤ 2^40", t)?;
        let n = self.prefill_schedule_interval;
        check(n <= 1 << 20, path, "prefill_schedule_interval", "must be ≤ 1048576", n)?;
        if let Some(n) = self.max_num_active_seqs {
            check(n >= 1, path, "max_num_active_seqs", "must be ≥ 1", n)?;
        }
        let w = self.watermark;
        check(w.is_finite() && (0.0..1.0).contains(&w), path, "watermark", "must be in [0, 1), as vLLM takes it", w)
    }

    fn is_chunked(&self) -> bool {
        true
    }

    fn chunk_cap(&self) -> u64 {
        match self.long_prefill_token_threshold {
            0 => u64::MAX,
            t => t,
        }
    }

    /// `KVCacheManager.allocate_slots` keeps its own (`--watermark`), none by default.
    fn own_watermark(&self) -> Option<f64> {
        Some(self.watermark)
    }

    fn full_sequence_must_fit(&self) -> bool {
        self.reserve_full_isl.unwrap_or(true)
    }

    fn active_seqs(&self) -> Option<u32> {
        self.max_num_active_seqs
    }

    fn preempts_lowest_priority(&self) -> bool {
        true
    }

    fn passes_self_preempted(&self) -> bool {
        self.priority_pass_continues.unwrap_or(true)
    }

    fn build(&self) -> Box<dyn Batcher> {
        Box::new(Former { spec: self.clone(), executed: 0, last_prefill: None, capacity_bound: false })
    }
}

/// vLLM V1's batch former on one scheduler: the settings and the prefill cadence's counters.
struct Former {
    spec: VllmV1,
    /// Steps that scheduled any token (`num_executed_steps`).
    executed: u64,
    /// The last of them that carried prefill (`last_prefill_step`); none yet.
    last_prefill: Option<u64>,
    /// The last step that admitted left requests waiting (`prefill_capacity_bound`).
    capacity_bound: bool,
}

impl Former {
    /// Whether this step holds its prefill (the module's note): the interval since the last
    /// step that carried prefill not over, not capacity-bound, and a running request decoding.
    fn defers(&self, sched: &Sched<'_>) -> bool {
        let n = self.spec.prefill_schedule_interval;
        n > 1
            && !self.capacity_bound
            && !sched.holds_context()
            && self.last_prefill.is_some_and(|last| self.executed + 1 - last < n)
            && sched.running().iter().any(|s| s.is_decode())
    }
}

impl VllmV1 {
    /// This step's cap on a prefill chunk with `requests` running and waiting and a budget of
    /// `max` (`Scheduler.schedule`, vllm/v1/core/sched/scheduler.py, 0.31.0 and 0.34.0): the
    /// threshold, none for a request alone (from 0.31), floored at `max / requests` when adaptive.
    /// `None`: no threshold, or the threshold as it stands ([`BatchingPolicy::chunk_cap`]).
    fn step_cap(&self, requests: u64, max: u64) -> Option<u64> {
        let t = self.long_prefill_token_threshold;
        if t == 0 {
            None
        } else if requests <= 1 && self.lone_request_uncapped.unwrap_or(true) {
            Some(u64::MAX)
        } else {
            self.long_prefill_token_threshold_adaptive.then(|| t.max(max / requests.max(1)))
        }
    }
}

impl Batcher for Former {
    fn form(&mut self, sched: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer) {
        let max = sched.limits().max_num_batched_tokens;
        let requests = (sched.running().len() + sched.waiting()) as u64;
        let defer = self.defers(sched);
        sched.set_hold_context(sched.holds_context() || defer);
        sched.set_step_cap(self.spec.step_cap(requests, max));
        sched.step_running_in_order(max, rec);
        if !sched.preempted_now() {
            let mut budget = max.saturating_sub(sched.budget_used());
            sched.swap_in(&mut budget, true, rec);
            if !sched.has_swapped() {
                sched.admit(now, &mut budget, true, rec);
            }
            if !defer {
                self.capacity_bound = sched.waiting() > 0;
            }
        }
        sched.set_step_cap(None);
        if defer {
            sched.set_hold_context(false);
        }
        if self.spec.prefill_schedule_interval > 1 && !sched.batch_is_empty() {
            self.executed += 1;
            if sched.running().iter().any(|s| s.step > 0 && !s.is_decode()) {
                self.last_prefill = Some(self.executed);
            }
        }
    }
}
