//! Iteration cost: how long one forward pass of a batch takes on one instance.
//!
//! The scheduler describes each iteration as a [`BatchShape`] of aggregates, so the cost of an
//! iteration is O(1) however many requests it holds. A [`CostModel`] turns it into time.

mod linear;
pub mod profile;
mod profiled;
mod roofline;

pub use linear::LinearCost;
pub use profiled::{Profiled, ProfiledOp, KNOWN_OPS};
pub use roofline::{OpTime, Roofline, RooflineParams};

use crate::time::SimTime;

/// What the cost model sees of one iteration: prefill chunks and the decode set as aggregates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchShape {
    /// Sequences with a prefill chunk in this iteration.
    pub prefill_seqs: u64,
    /// New tokens computed by prefill chunks.
    pub prefill_tokens: u64,
    /// Tokens already in the KV cache that the prefill chunks attend to (cached prefix, earlier
    /// chunks). Zero for a whole-prompt prefill without prefix caching.
    pub prefill_cached_tokens: u64,
    /// Causal query-key pairs of the prefill chunks: for a chunk of n new tokens over c cached
    /// ones, n·c + n(n+1)/2. Kept as f64: for absurd prompts it overflows integers.
    pub prefill_attn_pairs: f64,
    /// Sequences decoding one token each.
    pub decode_seqs: u64,
    /// Sum over decoding sequences of the context each attends to (tokens in KV, this step's
    /// token included).
    pub decode_context_tokens: u64,
    /// Sequences that sample a token at the end of the iteration (finished prefills and decodes).
    pub sampled_seqs: u64,
}

impl BatchShape {
    /// Adds a prefill chunk of `new` tokens on top of `cached` tokens already in the cache.
    pub fn add_prefill(&mut self, new: u64, cached: u64, samples: bool) {
        self.prefill_seqs += 1;
        self.prefill_tokens += new;
        self.prefill_cached_tokens += cached;
        let n = new as f64;
        self.prefill_attn_pairs += n * cached as f64 + n * (n + 1.0) / 2.0;
        if samples {
            self.sampled_seqs += 1;
        }
    }

    /// Adds one decoding sequence whose attention covers `context` tokens.
    pub fn add_decode(&mut self, context: u64) {
        self.decode_seqs += 1;
        self.decode_context_tokens += context;
        self.sampled_seqs += 1;
    }

    /// Tokens the GEMMs process: every prefill token plus one per decode.
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_seqs
    }

    /// Sequences in the batch.
    pub fn seqs(&self) -> u64 {
        self.prefill_seqs + self.decode_seqs
    }

    pub fn is_empty(&self) -> bool {
        self.tokens() == 0
    }
}

/// Turns a batch into the time one iteration takes. Implementations must return more than zero
/// for a non-empty batch and be pure: the same shape always costs the same.
pub trait CostModel: Send + Sync {
    fn iteration_time(&self, batch: &BatchShape) -> SimTime;

    /// The part of [`CostModel::iteration_time`] spent on the CPU (scheduling, input
    /// preparation, sampling, output processing), during which the GPU waits. Default: none.
    fn cpu_time(&self, _batch: &BatchShape) -> SimTime {
        SimTime::ZERO
    }
}
