//! Chunked prefill (Sarathi-Serve, vLLM's `enable_chunked_prefill`): each iteration has a token
//! budget of `max_num_batched_tokens`, filled with decodes and with prefill chunks; a chunk
//! attends to the prompt tokens already in the cache. Long prompts no longer stall the decodes
//! of everyone else for a whole prefill, so TPOT tails shrink.
//!
//! `priority = "decode"` (default, stall-free): decodes first, then the chunks of prompts in
//! progress, then new prompts. `priority = "prefill"`: prompts in progress and new prompts
//! first, decodes take what is left of the budget (and skip the iteration when nothing is).

use serde::{Deserialize, Serialize};

use super::super::Instance;
use crate::metrics::Observer;
use crate::time::SimTime;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ChunkedPriority {
    #[default]
    Decode,
    Prefill,
}

/// `kind = "chunked"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Chunked {
    /// `decode` (default) or `prefill`.
    pub(crate) priority: ChunkedPriority,
}

pub(in crate::instance) fn form(inst: &mut Instance, now: SimTime, c: &Chunked, rec: &mut dyn Observer) {
    let max = inst.cfg.max_num_batched_tokens;
    // The budget left is recounted after each phase: a preempted request gives its tokens back.
    let left = |inst: &Instance| max.saturating_sub(inst.budget_used());
    match c.priority {
        ChunkedPriority::Decode => {
            if inst.step_running_decodes(left(inst), rec) {
                inst.step_running_prefills(left(inst), rec);
            }
            if !inst.preempted_now {
                let mut budget = left(inst);
                inst.swap_in(&mut budget, true);
                if inst.waiting.swapped.is_empty() {
                    inst.admit(now, &mut budget, true, rec);
                }
            }
        }
        ChunkedPriority::Prefill => {
            inst.step_running_prefills(left(inst), rec);
            // Decodes get their blocks first (so admissions do not take what a running request
            // needs to grow, only to be preempted for it), then lend their budget to prompts.
            let prefill_tokens = inst.budget_used();
            inst.step_running_decodes(u64::MAX, rec);
            if !inst.preempted_now {
                let mut budget = max.saturating_sub(prefill_tokens);
                if inst.waiting.swapped.is_empty() {
                    inst.admit(now, &mut budget, true, rec);
                }
                inst.trim_decodes(budget);
                inst.swap_in(&mut left(inst), true);
            }
        }
    }
}
