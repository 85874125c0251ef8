//! Routers: which instance an arriving request goes to. One policy per file.
//!
//! Routers that compare instances compare load per unit of capacity, so that in a
//! heterogeneous cluster a faster instance takes proportionally more. An instance's capacity
//! weight ([`capacity_weight`]) is the decode throughput of a reference batch under its own cost
//! model and limits; instances of one group have equal weights, so in a homogeneous cluster the
//! weighting changes nothing. Ties go to the next instance in turn after the last one chosen,
//! so an idle cluster is filled round-robin rather than from instance 0.
//!
//! Every router sends only to instances it believes healthy ([`Instance::routable`]): not to
//! ones starting, draining, down, or whose failure has been detected — but still to a failed
//! one before its failure is detected. The engine calls a router only when at least one
//! instance is routable.

mod capacity;

pub use capacity::{capacity_weight, REFERENCE_BATCH, REFERENCE_CONTEXT};
pub use least_kv_usage::LeastKvUsage;
pub use least_outstanding::LeastOutstanding;
pub use least_pending_tokens::LeastPendingTokens;
pub use power_of_two::PowerOfTwo;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use session_affinity::{AffinityKey, SessionAffinity};
pub use vllm_dp::VllmDp;

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;
use crate::instance::{Instance, RankLoad};
use crate::policy_family;
use crate::workload::Request;

/// Picks an instance for each arriving request, from what it sees of their load.
pub trait Router<L: Load = Instance>: Send {
    fn route(&mut self, req: &Request, instances: &[L]) -> usize;
}

/// What a router sees of an instance: its load and health, never its queues, batch or KV
/// manager. The engine's instances show it; a test may show any load it likes.
pub trait Load {
    /// Whether the router believes it healthy (it may be hung: see the module docs).
    fn routable(&self) -> bool;
    /// Requests waiting, running or in a KV transfer there.
    fn outstanding(&self) -> u64;
    /// Its relative speed ([`capacity_weight`]).
    fn capacity(&self) -> f64;
    /// Prompt tokens still to prefill, and decode tokens still to generate.
    fn pending_prefill_tokens(&self) -> u64;
    fn pending_decode_tokens(&self) -> u64;
    fn kv_blocks_used(&self) -> u32;
    fn kv_blocks_total(&self) -> u32;
    /// Tokens per KV block.
    fn block_tokens(&self) -> u64;
    /// Requests queued there (waiting, preempted, swapped out, awaiting their KV).
    fn waiting(&self) -> u64;
    /// Requests in its running batch.
    fn running(&self) -> u64;
}

impl Load for Instance {
    fn routable(&self) -> bool {
        Instance::routable(self)
    }
    fn outstanding(&self) -> u64 {
        Instance::outstanding(self)
    }
    fn capacity(&self) -> f64 {
        Instance::capacity(self)
    }
    fn pending_prefill_tokens(&self) -> u64 {
        Instance::pending_prefill_tokens(self)
    }
    fn pending_decode_tokens(&self) -> u64 {
        Instance::pending_decode_tokens(self)
    }
    fn kv_blocks_used(&self) -> u32 {
        Instance::kv_blocks_used(self)
    }
    fn kv_blocks_total(&self) -> u32 {
        Instance::kv_blocks_total(self)
    }
    fn block_tokens(&self) -> u64 {
        self.config().block_tokens
    }
    fn waiting(&self) -> u64 {
        self.gauges().waiting
    }
    fn running(&self) -> u64 {
        self.gauges().running
    }
}

policy_family!(
    /// A routing policy (`[cluster] router = { kind = "..." }`). A new router is a file in this
    /// folder (its settings, implementing [`RouterPolicy`], and its [`Router`]) and a line here.
    pub enum RouterSpec: dyn RouterPolicy {
        "round-robin" => RoundRobin(round_robin::RoundRobinSpec),
        "random" => Random(random::RandomSpec),
        "least-outstanding" => LeastOutstanding(least_outstanding::LeastOutstandingSpec),
        "least-kv-usage" => LeastKvUsage(least_kv_usage::LeastKvUsageSpec),
        "least-pending-tokens" => LeastPendingTokens(least_pending_tokens::LeastPendingTokensSpec),
        "power-of-two" => PowerOfTwo(power_of_two::PowerOfTwoSpec),
        "session-affinity" => SessionAffinity(session_affinity::SessionAffinitySpec),
        "vllm-dp" => VllmDp(vllm_dp::VllmDpSpec),
    }
);

/// A router's settings: checked, then built once per cluster (or per pool).
pub trait RouterPolicy {
    /// Checks the settings; `path` names the key in errors.
    fn validate(&self, _path: &str) -> Result<(), ConfigError> {
        Ok(())
    }
    /// The router; `seed` and `index` (0: the cluster's router, 1: the decode router of a
    /// disaggregated cluster) seed its random substream ([`crate::rng::Stream::Router`]), if it draws.
    fn build(&self, seed: u64, index: u64) -> Box<dyn Router>;
}

impl Default for RouterSpec {
    fn default() -> Self {
        RouterSpec::RoundRobin(RoundRobinSpec {})
    }
}

impl RouterSpec {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.spec().validate(path)
    }
}

/// Builds the router a scenario asks for.
pub fn build(spec: &RouterSpec, seed: u64) -> Box<dyn Router> {
    build_indexed(spec, seed, 0)
}

/// Builds a router drawing from random substream `index` (0: the cluster's router; 1: the
/// decode router of a disaggregated cluster).
pub fn build_indexed(spec: &RouterSpec, seed: u64, index: u64) -> Box<dyn Router> {
    spec.spec().build(seed, index)
}

/// The instance with the lowest `load` per unit of capacity, scanning from `start` so that
/// ties go to the first instance at or after `start`.
pub(crate) fn least_weighted<L: Load>(instances: &[L], start: usize, load: impl Fn(&L) -> f64) -> usize {
    least_by(instances, start, |x| load(x) / x.capacity())
}

/// The routable instance with the lowest `score`, ties to the first at or after `start`.
pub(crate) fn least_by<L: Load>(instances: &[L], start: usize, score: impl Fn(&L) -> f64) -> usize {
    let n = instances.len();
    let mut best = usize::MAX;
    let mut best_score = f64::INFINITY;
    for k in 0..n {
        let i = (start + k) % n;
        if !instances[i].routable() {
            continue;
        }
        let score = score(&instances[i]);
        if best == usize::MAX || score < best_score {
            best = i;
            best_score = score;
        }
    }
    debug_assert!(best != usize::MAX, "routed with no routable instance");
    best
}

/// The engine's own balancer between an instance's DP attention ranks (`cluster.dp_balance`):
/// vLLM's API server picks the engine core with the lowest 4 × waiting + running
/// ([`VllmDp`]); SGLang's data-parallel controller deals requests round-robin (its default
/// `--load-balance-method round_robin`); TensorRT-LLM's executor gives a new request to the
/// rank with the fewest active prompt tokens ([`TrtllmAdp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DpBalance {
    VllmDp,
    RoundRobin,
    TrtllmAdp,
}

impl DpBalance {
    pub(crate) fn build(self) -> Box<dyn Router<RankLoad>> {
        match self {
            DpBalance::VllmDp => Box::new(VllmDp::new(&VllmDpSpec::default())),
            DpBalance::RoundRobin => Box::new(RoundRobin::default()),
            DpBalance::TrtllmAdp => Box::new(TrtllmAdp),
        }
    }
}

/// TensorRT-LLM's attention-DP request router (`DefaultADPRouter.route_requests` in
/// tensorrt_llm/_torch/pyexecutor/scheduler/adp_router.py, NVIDIA/TensorRT-LLM 62b8daa4b): of
/// the ranks holding fewer active requests than `max(⌈(active + new) / ranks⌉, the most any
/// rank holds)`, the one with the fewest active prompt tokens, then the fewest requests, then
/// the lowest rank (its min-heap of (tokens, requests, rank)). A request arrives alone here:
/// `new` is 1.
#[derive(Debug)]
pub struct TrtllmAdp;

impl Router<RankLoad> for TrtllmAdp {
    fn route(&mut self, _req: &Request, ranks: &[RankLoad]) -> usize {
        let n = ranks.len() as u64;
        let total: u64 = ranks.iter().map(|r| r.outstanding).sum();
        let most = ranks.iter().map(|r| r.outstanding).max().unwrap_or(0);
        let expected = (total + 1).div_ceil(n).max(most);
        (0..ranks.len())
            .filter(|&i| ranks[i].outstanding < expected)
            .min_by_key(|&i| (ranks[i].prompt_tokens, ranks[i].outstanding, i))
            .unwrap_or(0)
    }
}

/// A DP rank is always there for its balancer (the instance's health is the router's).
impl Load for RankLoad {
    fn routable(&self) -> bool {
        true
    }
    fn outstanding(&self) -> u64 {
        self.outstanding
    }
    fn capacity(&self) -> f64 {
        1.0
    }
    fn pending_prefill_tokens(&self) -> u64 {
        self.pending_prefill_tokens
    }
    fn pending_decode_tokens(&self) -> u64 {
        self.pending_decode_tokens
    }
    fn kv_blocks_used(&self) -> u32 {
        self.kv_blocks_used
    }
    fn kv_blocks_total(&self) -> u32 {
        self.kv_blocks_total
    }
    fn block_tokens(&self) -> u64 {
        self.block_tokens
    }
    fn waiting(&self) -> u64 {
        self.waiting
    }
    fn running(&self) -> u64 {
        self.running
    }
}

/// The first routable instance at or after `start` (wrapping).
pub(crate) fn next_routable<L: Load>(instances: &[L], start: usize) -> usize {
    let n = instances.len();
    (0..n).map(|k| (start + k) % n).find(|&i| instances[i].routable()).expect("a routable instance")
}

#[cfg(test)]
pub(crate) mod testing {
    //! Instances with controlled loads, for router tests.
    use std::sync::Arc;

    use crate::cost::LinearCost;
    use crate::instance::{Instance, InstanceConfig};
    use crate::workload::{Request, NO_CLIENT, NO_SESSION};
    use crate::SimTime;

    pub(crate) fn config(kv_blocks: u32) -> InstanceConfig {
        InstanceConfig {
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            block_tokens: 16,
            watermark_blocks: 0,
            max_model_len: 100_000,
            kv_blocks,
            dp_ranks: 1,
            capacity: 1.0,
            policy: Default::default(),
        }
    }

    /// `n` identical instances (linear cost: 5 ms + 50 µs per token).
    pub(crate) fn instances(n: usize) -> Vec<Instance> {
        let cost = Arc::new(LinearCost::default());
        (0..n).map(|i| Instance::new(i as u32, config(10_000), cost.clone())).collect()
    }

    pub(crate) fn request(prompt: u32, output: u32, session: u64) -> Request {
        Request {
            id: 0,
            arrival: SimTime::ZERO,
            prompt_tokens: prompt,
            output_tokens: output,
            client: NO_CLIENT,
            session,
            class: 0,
            content: Vec::new(),
        }
    }

    /// Queues `k` requests of `prompt` tokens on instance `i`.
    pub(crate) fn load(instances: &mut [Instance], i: usize, k: usize, prompt: u32) {
        for _ in 0..k {
            instances[i].enqueue(&request(prompt, 10, NO_SESSION), true);
        }
    }
}
