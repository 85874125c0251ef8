//! Static (request-level) batching, as older frameworks do it: a batch is formed only when the
//! previous one has completely finished, and runs until its last request is done. Short
//! requests leave early and their slots stay empty; arrivals wait for the whole batch — worse
//! TTFT than continuous batching at the same load. A new batch takes every waiting request
//! that `max_num_seqs` and the KV blocks allow, all prompts prefilled in its first iteration
//! (`max_num_batched_tokens` does not split a static batch).

use serde::{Deserialize, Serialize};

use super::{Batcher, BatchingPolicy, Sched};
use crate::metrics::Observer;
use crate::time::SimTime;

/// `kind = "static"`: no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Static {}

impl BatchingPolicy for Static {
    fn build(&self) -> Box<dyn Batcher> {
        Box::new(Static {})
    }
}

impl Batcher for Static {
    fn form(&mut self, sched: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer) {
        if !sched.running().is_empty() {
            sched.step_running_decodes(u64::MAX, rec);
            return;
        }
        let mut budget = u64::MAX;
        sched.swap_in(&mut budget, false, rec);
        if !sched.has_swapped() {
            sched.admit(now, &mut budget, false, rec);
        }
    }
}
