//! Static (request-level) batching, as older frameworks do it: a batch is formed only when the
//! previous one has completely finished, and runs until its last request is done. Short
//! requests leave early and their slots stay empty; arrivals wait for the whole batch — worse
//! TTFT than continuous batching at the same load. A new batch takes every waiting request
//! that `max_num_seqs` and the KV blocks allow, all prompts prefilled in its first iteration
//! (`max_num_batched_tokens` does not split a static batch).

use super::super::Instance;
use crate::metrics::Observer;
use crate::time::SimTime;

pub(in crate::instance) fn form(inst: &mut Instance, now: SimTime, rec: &mut dyn Observer) {
    if !inst.running.is_empty() {
        inst.step_running_decodes(u64::MAX, rec);
        return;
    }
    let mut budget = u64::MAX;
    inst.swap_in(&mut budget, false);
    if inst.waiting.swapped.is_empty() {
        inst.admit(now, &mut budget, false, rec);
    }
}
