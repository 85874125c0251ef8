//! Iteration cost: how long one forward pass of a batch takes on one instance.
//!
//! The scheduler describes each iteration as a [`BatchShape`] of aggregates, so the cost of an
//! iteration is O(1) however many requests it holds. A [`CostModel`] turns it into time.

mod calibrated;
mod dp;
mod linear;
pub(crate) mod overhead;
mod pipeline;
pub mod profile;
mod profiled;
mod roofline;
mod scaled;
pub mod shipped;
mod spec;

pub use calibrated::{
    Calibrated, Calibration, FactorEntry, FactorInfo, FactorTable, Factors, CALIBRATION_FORMAT, COST_SOURCES, FACTORS,
    FACTOR_STATUSES,
};
pub use dp::DpProfiled;
pub use linear::LinearCost;
pub use overhead::{EngineOverhead, OVERHEADS};
pub use pipeline::{stage_layers, stage_links, Pipeline, P2P_LATENCY_S};
pub use profiled::{
    check_op_axes, Fallback, FallbackShare, Profiled, ProfiledOp, KNOWN_OPS, NO_TABLES_AT_TP, OTHER_AXES,
};
pub use roofline::{Layout, OpTime, Roofline, RooflineParams};
pub use scaled::Scaled;
pub use spec::{
    CostSection, CostSpec, DatabaseRequest, DatabaseSpec, DATABASE_FRAMEWORKS, DATABASE_WEIGHTS,
    DEFAULT_MOE_DISTRIBUTION, MOE_DISTRIBUTIONS,
};

use crate::time::SimTime;

/// An iteration's time from its seconds: rounded up, and never zero for real work, so time
/// always advances (and held finite).
pub(crate) fn to_ns(seconds: f64) -> SimTime {
    let ns = (seconds * 1e9).ceil();
    let ns = if ns.is_finite() { ns.min(u64::MAX as f64 / 4.0) } else { u64::MAX as f64 / 4.0 };
    SimTime((ns as u64).max(1))
}

/// A part of an iteration (its CPU work, its collectives), to the nearest nanosecond.
pub(crate) fn cpu_ns(seconds: f64) -> SimTime {
    SimTime((seconds * 1e9).round() as u64)
}

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

    /// Adds a speculative verification: `new` tokens of one sequence (its newest and the drafts)
    /// over `context` tokens, as `new` decode rows that share the context between them — so
    /// attention reads the sequence's KV once, as a decode does, while the GEMMs and the LM head
    /// see every token. AIConfigurator prices a verification as `nextn + 1` decodes each over the
    /// whole context (`sdk/rust_engine_step.py` of aiconfigurator-core 0.12.0), which reads the KV
    /// `nextn + 1` times; the engines' decode kernels take the k + 1 queries of a request together
    /// (FlashMLA, FlashInfer and FlashAttention with several queries per sequence).
    pub fn add_verify(&mut self, new: u64, context: u64) {
        self.decode_seqs += new;
        self.decode_context_tokens += context;
        self.sampled_seqs += new;
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

    /// The batches of `parts` as one batch (every aggregate summed).
    pub fn union(parts: &[BatchShape]) -> BatchShape {
        parts.iter().fold(BatchShape::default(), |a, b| BatchShape {
            prefill_seqs: a.prefill_seqs + b.prefill_seqs,
            prefill_tokens: a.prefill_tokens + b.prefill_tokens,
            prefill_cached_tokens: a.prefill_cached_tokens + b.prefill_cached_tokens,
            prefill_attn_pairs: a.prefill_attn_pairs + b.prefill_attn_pairs,
            decode_seqs: a.decode_seqs + b.decode_seqs,
            decode_context_tokens: a.decode_context_tokens + b.decode_context_tokens,
            sampled_seqs: a.sampled_seqs + b.sampled_seqs,
        })
    }
}

/// One sequence of an iteration, for cost models that execute batches rather than price their
/// aggregates (emulation, in `servesim-calibrate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeqWork {
    /// Tokens the iteration computes for this sequence: its prefill chunk, 1 for a decode, or
    /// k + 1 for a speculative verification (a decode of k drafts, `BatchShape::add_verify`).
    pub new_tokens: u64,
    /// Tokens its attention covers after the iteration: cached tokens plus the new ones.
    pub context_tokens: u64,
    /// A prefill chunk (else one decode step).
    pub prefill: bool,
    /// Whether it samples a token at the end of the iteration.
    pub samples: bool,
}

impl SeqWork {
    pub fn decode(context: u64) -> SeqWork {
        SeqWork { new_tokens: 1, context_tokens: context, prefill: false, samples: true }
    }

    pub fn prefill(new: u64, cached: u64, samples: bool) -> SeqWork {
        SeqWork { new_tokens: new, context_tokens: cached + new, prefill: true, samples }
    }

    /// The aggregates of a list of sequences.
    pub fn shape_of(seqs: &[SeqWork]) -> BatchShape {
        let mut b = BatchShape::default();
        for s in seqs {
            if s.prefill {
                b.add_prefill(s.new_tokens, s.context_tokens - s.new_tokens, s.samples);
            } else {
                b.add_decode(s.context_tokens);
            }
        }
        b
    }
}

/// How busy a group's pipeline stages were over a run (`cost.pipelines` in summary.json).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PipelineShare {
    /// The instance group (empty from the cost model itself; the run fills it in).
    pub group: String,
    pub stages: u64,
    /// Seconds the stages worked over stages × the iterations' GPU seconds: 1 without bubbles.
    pub busy_share: f64,
}

/// What a cost model priced without measurements over a run (per instance, summed per group):
/// seconds and iterations per op slot of the model, and the seconds of every iteration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostAccount {
    pub(crate) iterations: u64,
    pub(crate) total_s: f64,
    /// Indexed by the model's op slot: (seconds, iterations).
    pub(crate) by_slot: Vec<(f64, u64)>,
    /// A pipeline's stages: seconds they worked, and stages × the iterations' seconds.
    pub(crate) stage_busy_s: f64,
    pub(crate) stage_span_s: f64,
}

impl CostAccount {
    /// Adds `seconds` of one iteration to slot `i`.
    pub fn add(&mut self, i: usize, seconds: f64) {
        if self.by_slot.len() <= i {
            self.by_slot.resize(i + 1, (0.0, 0));
        }
        self.by_slot[i].0 += seconds;
        self.by_slot[i].1 += 1;
    }

    /// Adds another account of the same model.
    pub fn merge(&mut self, o: &CostAccount) {
        self.iterations += o.iterations;
        self.total_s += o.total_s;
        self.stage_busy_s += o.stage_busy_s;
        self.stage_span_s += o.stage_span_s;
        for (i, &(s, n)) in o.by_slot.iter().enumerate() {
            if n > 0 {
                self.add(i, 0.0);
                self.by_slot[i].0 += s;
                self.by_slot[i].1 += n - 1;
            }
        }
    }
}

/// Turns a batch into the time one iteration takes. Implementations must return more than zero
/// for a non-empty batch. The analytic and profiled models are pure: the same shape always
/// costs the same. An emulating model (`servesim_calibrate::emulate`) times a real execution of
/// the batch instead, so a run with it is not reproducible; the simulator itself still reads no
/// clock.
pub trait CostModel: Send + Sync {
    fn iteration_time(&self, batch: &BatchShape) -> SimTime;

    /// Whether the model needs each iteration's sequences ([`CostModel::iteration_time_of`]).
    /// Only models that execute batches do; the scheduler builds the list only for them, so
    /// pricing by aggregates stays O(1) per iteration.
    fn wants_seqs(&self) -> bool {
        false
    }

    /// The time of an iteration given its sequences as well (decodes first, then prefills, in
    /// the batch's order). By default the aggregates decide.
    fn iteration_time_of(&self, batch: &BatchShape, seqs: &[SeqWork]) -> SimTime {
        let _ = seqs;
        self.iteration_time(batch)
    }

    /// [`CostModel::iteration_time_of`] and the CPU part together, adding to `acc` what the
    /// model priced without measurements (models that keep an account and execute batches by
    /// sequence: the pipeline). By default the account is left alone.
    fn iteration_times_of(
        &self,
        batch: &BatchShape,
        seqs: &[SeqWork],
        acc: Option<&mut CostAccount>,
    ) -> (SimTime, SimTime) {
        let _ = acc;
        (self.iteration_time_of(batch, seqs), self.cpu_time(batch))
    }

    /// The part of the iteration's GPU time outside the transformer layers — embedding, LM
    /// head, sampling — which a pipeline's first and last stages add to their layers. Default:
    /// none (all of it scales with the layers).
    fn head_time(&self, _batch: &BatchShape) -> SimTime {
        SimTime::ZERO
    }

    /// The part of the iteration's GPU time spent in collectives (all-reduce, all-to-all) —
    /// what a calibration's collective scale corrects (`cost::calibrated`). Default: none.
    fn collective_time(&self, _batch: &BatchShape) -> SimTime {
        SimTime::ZERO
    }

    /// Whether the model keeps a [`CostAccount`]: what it priced without measurements.
    fn accounts(&self) -> bool {
        false
    }

    /// [`CostModel::iteration_time`], adding to `acc` the time of ops the model priced without
    /// measurements or read outside their measured range (called only when
    /// [`CostModel::accounts`]).
    fn iteration_time_accounted(&self, batch: &BatchShape, acc: &mut CostAccount) -> SimTime {
        let _ = acc;
        self.iteration_time(batch)
    }

    /// The ops this model prices without measurements (a profile's fallbacks), with the reason.
    fn fallbacks(&self) -> Vec<Fallback> {
        Vec::new()
    }

    /// What an account holds, in words, with each entry's share of the run's iteration time.
    fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        let _ = acc;
        Vec::new()
    }

    /// A pipeline's stages and the share of their time they worked over a run's account (the
    /// rest: bubbles); `None` for a model without stages.
    fn pipeline(&self, acc: &CostAccount) -> Option<PipelineShare> {
        let _ = acc;
        None
    }

    /// The part of [`CostModel::iteration_time`] spent on the CPU (scheduling, input
    /// preparation, sampling, output processing), during which the GPU waits. Default: none.
    fn cpu_time(&self, _batch: &BatchShape) -> SimTime {
        SimTime::ZERO
    }

    /// The iteration's time and its CPU part together — [`CostModel::iteration_time`] (or
    /// [`CostModel::iteration_time_accounted`] with `acc`) and [`CostModel::cpu_time`] — for
    /// models that price both from one pass over their tables.
    fn iteration_times(&self, batch: &BatchShape, acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        let total = match acc {
            Some(a) => self.iteration_time_accounted(batch, a),
            None => self.iteration_time(batch),
        };
        (total, self.cpu_time(batch))
    }

    /// One lock-step iteration of an instance's DP attention ranks (`cluster.dp_attention`),
    /// each rank's own batch in `ranks` (an idle rank's is empty): its time and CPU part. The
    /// ranks meet at every MoE layer, so the step is the slowest rank's own work plus the
    /// experts' over every rank's tokens. By default the ranks' batches are priced as one batch
    /// (a model that does not split its ops by rank: every rank carries an even share).
    fn dp_iteration_times(&self, ranks: &[BatchShape], acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        self.iteration_times(&BatchShape::union(ranks), acc)
    }
}
