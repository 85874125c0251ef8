//! The scenario file model: one struct per TOML section, each field documented with its default.

use serde::{Deserialize, Serialize};

use super::cluster::GroupSection;
use super::engines::ServingEngine;
use super::plan_file::PlanSection;
use crate::config::{check, ConfigError};
use crate::cost::CostSpec;
pub use crate::instance::SchedulerSection;
use crate::memory::{EngineMemory, MemoryEngine};
use crate::metrics::{MetricsSection, SloSection};
pub use crate::router::RouterSpec;
pub use crate::spec::{GpuSection, ModelSection, MAX_KV_BYTES_PER_TOKEN, MAX_PARAMS};
use crate::workload::WorkloadSpec;

/// The whole scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Names the output folder `outputs/<name>/`. Default: the file name without `.toml`.
    pub(crate) name: Option<String>,
    /// Seed of every random choice in the run. Default 0; `--seed` overrides.
    #[serde(default)]
    pub(crate) seed: u64,
    /// The serving engine the scenario models (`vllm`, `sglang`, `trtllm`): its rules become
    /// the defaults of the keys the file leaves out (see [`ServingEngine::apply_defaults`]).
    /// Default: none (servesim's own defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine: Option<ServingEngine>,
    /// The engine's release (`"0.15.1"`), where its defaults changed with it: vLLM's default
    /// limits and asynchronous scheduling. Default: none (the newest release servesim has read
    /// for the limits; the CPU overlap of `cost.overhead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine_version: Option<String>,
    pub(crate) model: ModelSection,
    /// Required unless every `[[cluster.groups]]` names its own GPU.
    #[serde(default)]
    pub(crate) gpu: GpuSection,
    #[serde(default)]
    pub(crate) cluster: ClusterSection,
    #[serde(default)]
    pub(crate) scheduler: SchedulerSection,
    #[serde(default)]
    pub(crate) memory: MemorySection,
    #[serde(default)]
    pub cost: CostSpec,
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub(crate) slo: SloSection,
    #[serde(default)]
    pub(crate) metrics: MetricsSection,
    #[serde(default)]
    pub(crate) run: RunSection,
    /// `[plan]`: the candidates `servesim plan` searches (ignored by `simulate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSection>,
    /// `[tune]`: the knobs `servesim tune` searches (ignored by the other commands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<super::plan_file::TuneSection>,
    /// `[fleet]`: instance start-up, failures and restarts, autoscaling. Default: a fixed
    /// fleet that never fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fleet: Option<crate::fleet::FleetSection>,
    /// `[frontend]`: the API server's work per request and per token. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) frontend: Option<crate::frontend::FrontendSection>,
    /// The limits `engine`'s rules fill in, taken again on each group's own GPU. Not a key: the
    /// resolved file holds the numbers.
    #[serde(skip)]
    pub(crate) limits_from_gpu: Option<super::engines::LimitsFromGpu>,
}

fn is_one(x: &u32) -> bool {
    *x == 1
}

/// `[cluster]`: how many instances, their tensor-parallel degree, and the router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSection {
    /// Identical instances behind the router. Default 1.
    pub(crate) instances: u32,
    /// Tensor-parallel degree: GPUs per instance. Default 1.
    pub(crate) tp: u32,
    /// Attention data-parallel ranks over the `tp` GPUs of a MoE instance (SGLang
    /// `--enable-dp-attention --dp`): each rank of tp / dp_attention GPUs serves its own
    /// sequences; the experts span all `tp`. Default 1 (tensor-parallel attention).
    #[serde(skip_serializing_if = "is_one")]
    pub(crate) dp_attention: u32,
    /// Expert parallelism: whole experts per GPU instead of TP slices (`--enable-expert-parallel`,
    /// `--ep`). Default false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) ep: bool,
    /// Pipeline-parallel stages (`--pipeline-parallel-size`): each of `pp` stages of `tp` GPUs
    /// holds its share of the layers, the running batch flows through them in micro-batches;
    /// an instance has `tp × pp` GPUs. Default 1.
    #[serde(skip_serializing_if = "is_one")]
    pub(crate) pp: u32,
    /// How arrivals are spread over instances. Default round-robin.
    pub(crate) router: RouterSpec,
    /// How an instance with DP attention ranks spreads its requests over them (the engine's own
    /// balancer): "vllm-dp" (vLLM's lowest 4 × waiting + running) or "round-robin" (SGLang's
    /// default). Default: the engine's (vllm-dp with engine = "vllm", round-robin otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dp_balance: Option<crate::router::DpBalance>,
    /// TensorRT-LLM's `attention_dp_config` for instances with DP attention ranks: with
    /// `enable_balance`, every rank's new prompts wait until all ranks have one (at most
    /// `timeout_iters` iterations), see `instance::adp`. Default: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) attention_dp_config: Option<crate::instance::adp::AttentionDpConfig>,
    /// Heterogeneous cluster: groups of instances, each with its own GPU, TP degree and
    /// overrides (replaces `instances` and `tp`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) groups: Vec<GroupSection>,
    /// `[cluster.disaggregation]`: the KV link and decode router of a cluster whose groups
    /// have `role = "prefill"` and `"decode"`. Default: written in full when there are roles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) disaggregation: Option<crate::disagg::DisaggregationSection>,
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection {
            instances: 1,
            tp: 1,
            dp_attention: 1,
            ep: false,
            pp: 1,
            dp_balance: None,
            attention_dp_config: None,
            router: RouterSpec::default(),
            groups: Vec::new(),
            disaggregation: None,
        }
    }
}

impl ClusterSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check(
            self.instances >= 1 && self.instances <= 100_000,
            path,
            "instances",
            "must be in [1, 100000]",
            self.instances,
        )?;
        check(self.tp >= 1 && self.tp <= 64, path, "tp", "must be in [1, 64]", self.tp)?;
        if !self.groups.is_empty() {
            check(
                self.instances == 1,
                path,
                "instances",
                "must not be set with cluster.groups (give each group a count)",
                self.instances,
            )?;
            check(self.tp == 1, path, "tp", "must not be set with cluster.groups (give each group its tp)", self.tp)?;
            let msg = "must not be set with cluster.groups (give each group its own)";
            check(self.dp_attention == 1, path, "dp_attention", msg, self.dp_attention)?;
            check(!self.ep, path, "ep", msg, self.ep)?;
            check(self.pp == 1, path, "pp", msg, self.pp)?;
        }
        self.router.validate(&format!("{path}.router"))
    }
}

/// `[memory]`: how much of each GPU the engine may use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemorySection {
    /// Fraction of GPU memory for weights, reserve and KV cache. Default 0.9.
    pub(crate) gpu_memory_utilization: f64,
    /// Workspace reserved per GPU (activations, CUDA context, graphs), GiB. Default: 1 GiB +
    /// activations of the largest batch + logits (see `memory::default_reserve_bytes`).
    pub(crate) reserve_gib: Option<f64>,
    /// KV blocks per GPU as the engine reports them at start-up (vLLM logs "# GPU blocks: N";
    /// SGLang max_total_num_tokens ÷ page size), in blocks of `scheduler.block_tokens`: used
    /// instead of the computed count. Default: computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kv_blocks: Option<u64>,
    /// Whose rule sizes the KV cache: "servesim" (weights + reserve, the default), "vllm"
    /// (total as CUDA sees it × gpu_memory_utilization − weights − profiled peak activation −
    /// non-torch memory − CUDA graphs) or "sglang" (free memory at start × mem_fraction_static −
    /// weights). See `memory::plan_memory`.
    #[serde(skip_serializing_if = "MemoryEngine::is_servesim")]
    pub(crate) engine: MemoryEngine,
    /// vLLM: the "non-torch memory" of its start-up log; SGLang: the memory in use when it
    /// starts (CUDA context, NCCL), GiB. Default: `memory::default_non_torch_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) non_torch_gib: Option<f64>,
    /// vLLM: CUDA-graph memory its budget counts (its log's "Estimated CUDA graph memory"),
    /// GiB. Default 0 (vLLM before CUDA-graph memory profiling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cuda_graph_gib: Option<f64>,
    /// SGLang's `--mem-fraction-static`. Default: SGLang's own rule for the GPU and TP degree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mem_fraction_static: Option<f64>,
    /// SGLang's `--cuda-graph-max-bs`: the largest batch its CUDA graphs capture, which its
    /// default `mem_fraction_static` keeps memory for. Default: SGLang's by GPU and TP degree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cuda_graph_max_bs: Option<u64>,
    /// SGLang's `--max-total-tokens`: each scheduler's KV pool holds at most this many tokens
    /// (the smaller of it and what the memory rule gives). Default: no cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_total_tokens: Option<u64>,
    /// vLLM's `--kv-cache-memory-bytes`, GiB: each GPU's KV cache, in place of what
    /// `gpu_memory_utilization` leaves. Default: vLLM's rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kv_cache_gib: Option<f64>,
    /// vLLM's `--disable-hybrid-kv-cache-manager`: every windowed layer's KV stored as full
    /// attention. Default: vLLM's hybrid manager (sliding windows take blocks from the pool as
    /// requests run).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) disable_hybrid_kv_cache_manager: bool,
    /// SGLang's `--swa-full-tokens-ratio`: a model with sliding windows gets a windowed pool of
    /// this many tokens per token of its full-attention pool. Default: SGLang's, 0.8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) swa_full_tokens_ratio: Option<f64>,
    /// SGLang's `--disable-hybrid-swa-memory`: every windowed layer's KV stored as full
    /// attention. Default: SGLang's own choice by release and GPU.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) disable_hybrid_swa_memory: bool,
}

impl Default for MemorySection {
    fn default() -> Self {
        MemorySection {
            gpu_memory_utilization: 0.9,
            reserve_gib: None,
            kv_blocks: None,
            engine: MemoryEngine::Servesim,
            non_torch_gib: None,
            cuda_graph_gib: None,
            mem_fraction_static: None,
            cuda_graph_max_bs: None,
            max_total_tokens: None,
            kv_cache_gib: None,
            disable_hybrid_kv_cache_manager: false,
            swa_full_tokens_ratio: None,
            disable_hybrid_swa_memory: false,
        }
    }
}

impl MemorySection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let u = self.gpu_memory_utilization;
        check(u.is_finite() && u > 0.0 && u <= 1.0, path, "gpu_memory_utilization", "must be in (0, 1]", u)?;
        if let Some(r) = self.reserve_gib {
            check(r.is_finite() && (0.0..=1e6).contains(&r), path, "reserve_gib", "must be in [0, 1e6] GiB", r)?;
        }
        if let Some(n) = self.kv_blocks {
            check((1..=u32::MAX as u64).contains(&n), path, "kv_blocks", "must be in [1, 2^32)", n)?;
        }
        let engine = self.engine.name();
        let only = |key: &str, set: bool, allowed: bool, what: &str| -> Result<(), ConfigError> {
            if set && !allowed {
                Err(ConfigError::at(
                    &format!("{path}.{key}"),
                    format!("only with engine = {what} (this section has engine = \"{engine}\")"),
                ))
            } else {
                Ok(())
            }
        };
        only("reserve_gib", self.reserve_gib.is_some(), self.engine.is_servesim(), "\"servesim\"")?;
        only(
            "non_torch_gib",
            self.non_torch_gib.is_some(),
            !self.engine.is_servesim(),
            "\"vllm\", \"sglang\" or \"trtllm\"",
        )?;
        only("cuda_graph_gib", self.cuda_graph_gib.is_some(), self.engine == MemoryEngine::Vllm, "\"vllm\"")?;
        only(
            "mem_fraction_static",
            self.mem_fraction_static.is_some(),
            self.engine == MemoryEngine::Sglang,
            "\"sglang\"",
        )?;
        for (key, v) in [("non_torch_gib", self.non_torch_gib), ("cuda_graph_gib", self.cuda_graph_gib)] {
            if let Some(x) = v {
                check(x.is_finite() && (0.0..=1e4).contains(&x), path, key, "must be in [0, 1e4] GiB", x)?;
            }
        }
        if let Some(x) = self.mem_fraction_static {
            check(x.is_finite() && x > 0.0 && x < 1.0, path, "mem_fraction_static", "must be in (0, 1)", x)?;
        }
        let bs = self.cuda_graph_max_bs;
        only("cuda_graph_max_bs", bs.is_some(), self.engine == MemoryEngine::Sglang, "\"sglang\"")?;
        if let Some(n) = bs {
            check((1..=1 << 20).contains(&n), path, "cuda_graph_max_bs", "must be in [1, 1048576]", n)?;
        }
        let cap = self.max_total_tokens;
        only("max_total_tokens", cap.is_some(), self.engine == MemoryEngine::Sglang, "\"sglang\"")?;
        if let Some(n) = cap {
            check((1..=1 << 40).contains(&n), path, "max_total_tokens", "must be in [1, 2^40]", n)?;
        }
        let kv = self.kv_cache_gib;
        only("kv_cache_gib", kv.is_some(), self.engine == MemoryEngine::Vllm, "\"vllm\"")?;
        let ratio = self.swa_full_tokens_ratio;
        only("swa_full_tokens_ratio", ratio.is_some(), self.engine == MemoryEngine::Sglang, "\"sglang\"")?;
        if let Some(x) = ratio {
            check(x.is_finite() && x > 0.0 && x <= 1.0, path, "swa_full_tokens_ratio", "must be in (0, 1]", x)?;
        }
        let swa_off = self.disable_hybrid_swa_memory;
        only("disable_hybrid_swa_memory", swa_off, self.engine == MemoryEngine::Sglang, "\"sglang\"")?;
        let hybrid_off = self.disable_hybrid_kv_cache_manager;
        only("disable_hybrid_kv_cache_manager", hybrid_off, self.engine == MemoryEngine::Vllm, "\"vllm\"")?;
        if let Some(x) = kv {
            check(x.is_finite() && x > 0.0 && x <= 1e4, path, "kv_cache_gib", "must be in (0, 1e4] GiB", x)?;
        }
        Ok(())
    }

    /// The engine rule and its measured inputs, for [`crate::memory::MemoryConfig`].
    pub fn engine_memory(&self, engine_version: Option<&str>) -> EngineMemory {
        let bytes = |g: Option<f64>| g.map(|x| (x * crate::memory::GIB) as u64);
        EngineMemory {
            engine: self.engine,
            non_torch_bytes: bytes(self.non_torch_gib),
            cuda_graph_bytes: bytes(self.cuda_graph_gib),
            mem_fraction_static: self.mem_fraction_static,
            cuda_graph_max_bs: self.cuda_graph_max_bs,
            engine_version: engine_version.and_then(ServingEngine::version),
            max_total_tokens: self.max_total_tokens,
            kv_cache_bytes: bytes(self.kv_cache_gib),
            disable_hybrid_kv_cache: self.disable_hybrid_kv_cache_manager || self.disable_hybrid_swa_memory,
            swa_full_tokens_ratio: self.swa_full_tokens_ratio,
        }
    }
}

/// `[run]`: limits on the run itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSection {
    /// Stop the clock here; requests not finished count as in flight. Default: run until every
    /// request has finished.
    pub max_time_s: Option<f64>,
    /// The event budget: a run that has processed this many events stops there (its summary
    /// says so, `stopped`), so that no scenario, however absurd, runs forever. The default is
    /// 10⁹: `servesim bench` processes about 0.4 million events a second at about two events
    /// per request, so it stops a run after roughly 40 minutes and 500 million requests.
    pub max_events: u64,
    /// The most requests a run holds: each keeps a record of about 56 bytes (plus its share of
    /// the output files), so the default of 5·10⁷ is about 3 GB. A workload known to be larger
    /// (`workload.requests`, a trace's count) is refused before it runs; a synthetic one that
    /// draws more stops there, its summary saying so.
    pub max_requests: u64,
}

impl RunSection {
    pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000_000;
    pub const DEFAULT_MAX_REQUESTS: u64 = 50_000_000;

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(t) = self.max_time_s {
            check(t.is_finite() && t > 0.0, path, "max_time_s", "must be > 0", t)?;
        }
        check(self.max_events >= 1, path, "max_events", "must be ≥ 1", self.max_events)?;
        check(self.max_requests >= 1, path, "max_requests", "must be ≥ 1", self.max_requests)
    }
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection { max_time_s: None, max_events: Self::DEFAULT_MAX_EVENTS, max_requests: Self::DEFAULT_MAX_REQUESTS }
    }
}

impl ScenarioFile {
    /// The file with its top-level `engine`'s rules filled in where `given` (the document as
    /// written, before defaults) leaves the keys out; unchanged without an `engine`.
    pub fn with_engine_defaults(mut self, given: &toml::Table) -> ScenarioFile {
        if let Some(engine) = self.engine {
            engine.apply_defaults(&mut self, given);
        }
        self
    }

    /// The top-level `[scheduler]`: its context length resolved on `model`, the limits the
    /// engine filled in settled on it as the engine settles them ([`LimitsFromGpu::settle`]),
    /// checked, and its queue order resolved on the SLO.
    ///
    /// [`LimitsFromGpu::settle`]: super::engines::LimitsFromGpu::settle
    pub(crate) fn resolve_scheduler(&mut self, model: &crate::spec::ModelSpec) -> Result<(), ConfigError> {
        self.scheduler.resolve_model_len(model, "scheduler")?;
        if let Some(rule) = self.limits_from_gpu {
            rule.settle(&mut self.scheduler, None, "scheduler")?;
        }
        let (batching, dp) = (&self.scheduler.batching, self.cluster.dp_attention);
        super::engines::check_prefill_cadence(batching, dp, self.limits_from_gpu, "scheduler")?;
        self.scheduler.validate("scheduler")?;
        self.scheduler.queue.resolve(&self.slo, "scheduler.queue")
    }
}
