//! Continuous batching (Orca, vLLM): each iteration every running request decodes one token
//! and waiting requests are admitted, whole prompt at once, while `max_num_seqs`,
//! `max_num_batched_tokens` and the free KV blocks allow.
//!
//! `priority = "mixed"` (default) runs new prompts in the same iteration as the decodes.
//! `priority = "prefill"` is vLLM V0's prefill-first scheduler: an iteration that admits any
//! prompt runs only prompts, and the running requests' decodes wait for the next one — better
//! TTFT, worse TPOT.

use serde::{Deserialize, Serialize};

use super::{Batcher, BatchingPolicy, Sched};
use crate::metrics::Observer;
use crate::time::SimTime;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContinuousPriority {
    #[default]
    Mixed,
    Prefill,
}

/// `kind = "continuous"`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Continuous {
    /// `mixed` (default) or `prefill`.
    pub(crate) priority: ContinuousPriority,
}

impl BatchingPolicy for Continuous {
    fn build(&self) -> Box<dyn Batcher> {
        Box::new(self.clone())
    }
}

impl Batcher for Continuous {
    fn form(&mut self, sched: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer) {
        let max = sched.limits().max_num_batched_tokens;
        match self.priority {
            ContinuousPriority::Mixed => {
                sched.step_running_decodes(u64::MAX, rec);
                if !sched.preempted_now() {
                    let mut budget = max.saturating_sub(sched.budget_used());
                    sched.swap_in(&mut budget, false, rec);
                    if !sched.has_swapped() {
                        sched.admit(now, &mut budget, false, rec);
                    }
                }
            }
            ContinuousPriority::Prefill => {
                let mut budget = max;
                let admitted = if !sched.has_swapped() { sched.admit(now, &mut budget, false, rec) } else { 0 };
                if admitted == 0 {
                    sched.step_running_decodes(u64::MAX, rec);
                    if !sched.preempted_now() {
                        let mut budget = max.saturating_sub(sched.budget_used());
                        sched.swap_in(&mut budget, false, rec);
                    }
                }
            }
        }
    }
}
