//! Chunked prefill (Sarathi-Serve, vLLM's `enable_chunked_prefill`): each iteration has a token
//! budget of `max_num_batched_tokens`, filled with decodes and with prefill chunks; a chunk
//! attends to the prompt tokens already in the cache. Long prompts no longer stall the decodes
//! of everyone else for a whole prefill, so TPOT tails shrink.
//!
//! `priority = "decode"` (default, stall-free): decodes first, then the chunks of prompts in
//! progress, then new prompts. `priority = "prefill"`: prompts in progress and new prompts
//! first, decodes take what is left of the budget (and skip the iteration when nothing is).

use serde::{Deserialize, Serialize};

use super::{Batcher, BatchingPolicy, Sched};
use crate::metrics::Observer;
use crate::time::SimTime;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChunkedPriority {
    #[default]
    Decode,
    Prefill,
}

/// `kind = "chunked"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Chunked {
    /// `decode` (default) or `prefill`.
    pub(crate) priority: ChunkedPriority,
}

impl BatchingPolicy for Chunked {
    fn is_chunked(&self) -> bool {
        true
    }

    fn build(&self) -> Box<dyn Batcher> {
        Box::new(self.clone())
    }
}

impl Batcher for Chunked {
    fn form(&mut self, sched: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer) {
        let max = sched.limits().max_num_batched_tokens;
        // The budget left is recounted after each phase: a preempted request gives its tokens back.
        let left = |sched: &Sched| max.saturating_sub(sched.budget_used());
        match self.priority {
            ChunkedPriority::Decode => {
                if sched.step_running_decodes(left(sched), rec) {
                    sched.step_running_prefills(left(sched), rec);
                }
                if !sched.preempted_now() {
                    let mut budget = left(sched);
                    sched.swap_in(&mut budget, true, rec);
                    if !sched.has_swapped() {
                        sched.admit(now, &mut budget, true, rec);
                    }
                }
            }
            ChunkedPriority::Prefill => {
                sched.step_running_prefills(left(sched), rec);
                // Decodes get their blocks first (so admissions do not take what a running request
                // needs to grow, only to be preempted for it), then lend their budget to prompts.
                let prefill_tokens = sched.budget_used();
                sched.step_running_decodes(u64::MAX, rec);
                if !sched.preempted_now() {
                    let mut budget = max.saturating_sub(prefill_tokens);
                    if !sched.has_swapped() {
                        sched.admit(now, &mut budget, true, rec);
                    }
                    sched.trim_decodes(budget);
                    sched.swap_in(&mut left(sched), true, rec);
                }
            }
        }
    }
}
