//! A request inside an instance.
//!
//! Requests move between the queue, the running batch and the preempted and swapped lists
//! boxed, so the batch — a vector the scheduler walks and compacts every iteration — moves
//! pointers, not requests. The fields every iteration touches come first.

use super::queue::QPos;
use crate::time::SimTime;

#[derive(Debug)]
pub struct Seq {
    pub(crate) id: u64,
    /// Tokens whose K and V are in the cache (prefix hits included).
    pub(crate) computed: u64,
    /// Tokens this request processes in the in-flight iteration (0: not in it).
    pub(crate) step: u64,
    /// KV block table.
    pub(crate) blocks: Vec<u32>,
    /// When this request's latest token was produced.
    pub(crate) last_token: SimTime,
    pub(crate) prompt: u32,
    pub(crate) output: u32,
    /// Output tokens produced so far.
    pub(crate) generated: u32,
    pub(crate) client: u32,
    /// Draft tokens it verifies in the in-flight iteration (speculative decoding).
    pub(crate) draft: u32,
    /// Whether this request's inter-token gaps enter the statistics.
    pub(crate) counted: bool,
    /// Whether it has been admitted before (preempted requests have).
    pub(crate) admitted: bool,
    pub(crate) class: u8,
    pub(crate) cold: Cold,
}

/// What only some policies, or only queued requests, need.
#[derive(Debug, Default)]
pub(crate) struct Cold {
    pub(crate) arrival: SimTime,
    /// Blocks of its KV held in CPU swap space while swapped out.
    pub(crate) swapped_blocks: u64,
    /// Names of its full KV blocks (prefix caching; empty without it).
    pub(crate) hashes: Vec<u64>,
    /// The blocks of its sliding-window layers where they come from the pool
    /// ([`crate::memory::SharedWindow`]), oldest first: those of block index `window_first` on,
    /// `groups` per index.
    pub(crate) window: Vec<u32>,
    pub(crate) window_first: u64,
    pub(crate) qpos: QPos,
}

impl Seq {
    /// Tokens whose K and V the next step needs in the cache: the prompt and every generated
    /// token (the newest one is written by the step itself).
    pub fn context(&self) -> u64 {
        self.prompt as u64 + self.generated as u64
    }

    /// Tokens still to process before the next token can be sampled.
    pub fn pending(&self) -> u64 {
        self.context() - self.computed
    }

    /// Whether the next step is a decode (one new token on a computed context).
    pub fn is_decode(&self) -> bool {
        self.generated >= 1 && self.pending() == 1
    }

    /// Its part of the in-flight iteration, for cost models that execute batches, as
    /// `Batch::add` prices it (`None`: not in this iteration).
    pub fn work(&self) -> Option<crate::cost::SeqWork> {
        use crate::cost::SeqWork;
        Some(if self.step == 0 {
            return None;
        } else if self.draft > 0 {
            // Speculative verification: the newest token and the drafts, logits for each, as
            // decode rows (`BatchShape::add_verify`).
            SeqWork { new_tokens: self.step, context_tokens: self.computed + self.step, prefill: false, samples: true }
        } else if self.is_decode() {
            SeqWork::decode(self.context())
        } else {
            SeqWork::prefill(self.step, self.computed, self.step == self.pending())
        })
    }
}
