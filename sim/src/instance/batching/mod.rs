//! Batch forming: which requests run in the next iteration and how many tokens each processes.
//!
//! A policy assigns each running request its tokens for the iteration (`Seq::step`: one decode
//! token, a prefill chunk, a whole prompt, or a speculative step), grows its KV blocks (which
//! may preempt the most recently admitted requests), and admits waiting ones, through the
//! scheduler core's operations ([`Sched`]); its state lives in its [`Batcher`]. The instance then turns the running set into a [`crate::cost::BatchShape`]
//! of aggregates, so an iteration costs O(1) in the cost model.

pub use chunked::ChunkedPriority;
pub use continuous::ContinuousPriority;

pub use super::core::Sched;
use crate::config::ConfigError;
use crate::metrics::Observer;
use crate::policy_family;
use crate::time::SimTime;

policy_family!(
    /// `[scheduler.batching]` (`kind = "..."`). A new kind is a file in this folder (its
    /// settings, implementing [`BatchingPolicy`], and its [`Batcher`]) and a line here.
    pub enum BatchingSpec: dyn BatchingPolicy {
        "continuous" => Continuous(continuous::Continuous),
        "static" => Static(static_batch::Static),
        "chunked" => Chunked(chunked::Chunked),
        "vllm-v1" => VllmV1(vllm_v1::VllmV1),
        "sglang" => Sglang(sglang::Sglang),
    }
);

/// A batching kind's settings: what the rest of the scheduler must know of it, and the
/// per-instance [`Batcher`] it builds.
pub trait BatchingPolicy {
    /// Checks the settings; `path` names the section in errors.
    fn validate(&self, _path: &str) -> Result<(), ConfigError> {
        Ok(())
    }
    /// Whether prompts are split into chunks (so a prompt may exceed the token budget).
    fn is_chunked(&self) -> bool {
        false
    }
    /// The most tokens one request computes in one iteration.
    fn chunk_cap(&self) -> u64 {
        u64::MAX
    }
    /// Whether admissions keep `scheduler.watermark` free (SGLang keeps none).
    fn keeps_watermark(&self) -> bool {
        true
    }
    /// The watermark the kind keeps instead of `scheduler.watermark`, if it has its own.
    fn own_watermark(&self) -> Option<f64> {
        None
    }
    /// Whether a waiting request is admitted only when the free blocks hold its whole sequence
    /// so far, not just its first chunk (vLLM's `scheduler_reserve_full_isl`).
    fn full_sequence_must_fit(&self) -> bool {
        false
    }
    /// The most requests admitted into running at once where the kind sets its own limit below
    /// `max_num_seqs` (vLLM's `--max-num-active-seqs`).
    fn active_seqs(&self) -> Option<u32> {
        None
    }
    /// Whether a preemption frees the lowest-priority running request when the queue order
    /// ranks requests by priority (vLLM's priority policy), rather than the last admitted.
    fn preempts_lowest_priority(&self) -> bool {
        false
    }
    /// Whether, preempting by priority, the pass over the running requests goes on past one
    /// that had to preempt itself (vLLM from 0.33.0) rather than stopping there.
    fn passes_self_preempted(&self) -> bool {
        false
    }
    /// The threshold of SGLang's priority preemption, where the kind runs it (it needs a queue
    /// ranked by priority).
    fn priority_preemption(&self) -> Option<i64> {
        None
    }
    /// Why the engine allows only preemption by recomputation with this kind, if it does.
    fn recompute_only(&self) -> Option<&'static str> {
        None
    }
    /// The batch former of one instance.
    fn build(&self) -> Box<dyn Batcher>;
}

/// Forms each iteration's batch on one instance, keeping whatever state the policy carries
/// from one iteration to the next.
pub trait Batcher: Send {
    fn form(&mut self, s: &mut Sched<'_>, now: SimTime, rec: &mut dyn Observer);
}

impl Default for BatchingSpec {
    fn default() -> Self {
        BatchingSpec::Continuous(Continuous::default())
    }
}

impl BatchingSpec {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.spec().validate(path)
    }

    /// Whether prompts are split into chunks (so a prompt may exceed the token budget).
    pub(crate) fn is_chunked(&self) -> bool {
        self.spec().is_chunked()
    }

    /// The most tokens one request computes in one iteration.
    pub(crate) fn chunk_cap(&self) -> u64 {
        self.spec().chunk_cap()
    }

    /// Whether admissions keep `scheduler.watermark` free.
    pub(crate) fn keeps_watermark(&self) -> bool {
        self.spec().keeps_watermark()
    }

    /// The fraction of the blocks admissions keep free: the kind's own, else `scheduler`'s.
    pub(crate) fn watermark(&self, scheduler: f64) -> f64 {
        self.spec().own_watermark().unwrap_or(scheduler)
    }

    /// Whether a waiting request is admitted only when its whole sequence so far fits.
    pub(crate) fn full_sequence_must_fit(&self) -> bool {
        self.spec().full_sequence_must_fit()
    }

    /// [`BatchingPolicy::priority_preemption`].
    pub(crate) fn priority_preemption(&self) -> Option<i64> {
        self.spec().priority_preemption()
    }

    /// [`BatchingPolicy::active_seqs`].
    pub(crate) fn active_seqs(&self) -> Option<u32> {
        self.spec().active_seqs()
    }

    /// [`BatchingPolicy::preempts_lowest_priority`].
    pub(crate) fn preempts_lowest_priority(&self) -> bool {
        self.spec().preempts_lowest_priority()
    }

    /// [`BatchingPolicy::passes_self_preempted`].
    pub(crate) fn passes_self_preempted(&self) -> bool {
        self.spec().passes_self_preempted()
    }

    /// The batch former of one instance.
    pub(crate) fn build(&self) -> Box<dyn Batcher> {
        self.spec().build()
    }
}
