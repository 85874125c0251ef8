//! Continuous batching (Orca, vLLM): each iteration every running request decodes one token
//! and waiting requests are admitted, whole prompt at once, while `max_num_seqs`,
//! `max_num_batched_tokens` and the free KV blocks allow.
//!
//! `priority = "mixed"` (default) runs new prompts in the same iteration as the decodes.
//! `priority = "prefill"` is vLLM V0's prefill-first scheduler: an iteration that admits any
//! prompt runs only prompts, and the running requests' decodes wait for the next one — better
//! TTFT, worse TPOT.

use serde::{Deserialize, Serialize};

use super::super::Instance;
use crate::metrics::Observer;
use crate::time::SimTime;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ContinuousPriority {
    #[default]
    Mixed,
    Prefill,
}

/// `kind = "continuous"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Continuous {
    /// `mixed` (default) or `prefill`.
    pub(crate) priority: ContinuousPriority,
}

pub(in crate::instance) fn form(inst: &mut Instance, now: SimTime, c: &Continuous, rec: &mut dyn Observer) {
    let max = inst.cfg.max_num_batched_tokens;
    match c.priority {
        ContinuousPriority::Mixed => {
            inst.step_running_decodes(u64::MAX, rec);
            if !inst.preempted_now {
                let mut budget = max.saturating_sub(inst.budget_used());
                inst.swap_in(&mut budget, false);
                if inst.waiting.swapped.is_empty() {
                    inst.admit(now, &mut budget, false, rec);
                }
            }
        }
        ContinuousPriority::Prefill => {
            let mut budget = max;
            let admitted = if inst.waiting.swapped.is_empty() { inst.admit(now, &mut budget, false, rec) } else { 0 };
            if admitted == 0 {
                inst.step_running_decodes(u64::MAX, rec);
                if !inst.preempted_now {
                    let mut budget = max.saturating_sub(inst.budget_used());
                    inst.swap_in(&mut budget, false);
                }
            }
        }
    }
}
