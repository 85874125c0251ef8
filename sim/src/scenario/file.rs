//! The scenario file model: one struct per TOML section, each field documented with its default.

use serde::{Deserialize, Serialize};

use super::cluster::GroupSection;
use super::cost::CostSpec;
use super::{check, ScenarioError};
use crate::cost::RooflineParams;
use crate::instance::admission::AdmissionSection;
use crate::instance::batching::BatchingSpec;
use crate::instance::cpu::CpuSection;
use crate::instance::kv_policy::KvCacheSection;
use crate::instance::preemption::PreemptionSpec;
use crate::instance::prefix::PrefixCacheSection;
use crate::instance::queue::QueueSpec;
use crate::instance::speculative::SpeculativeSection;
use crate::plan::PlanSection;
use crate::router::{LeastPendingTokensSpec, SessionAffinitySpec};
use crate::spec::{Dtype, GpuSpec, ModelSpec};
use crate::spec::{GPU_PRESETS, MODEL_PRESETS};
use crate::tagged_enum;
use crate::workload::WorkloadSpec;

/// The whole scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Names the output folder `outputs/<name>/`. Default: the file name without `.toml`.
    pub name: Option<String>,
    /// Seed of every random choice in the run. Default 0; `--seed` overrides.
    #[serde(default)]
    pub seed: u64,
    pub model: ModelSection,
    /// Required unless every `[[cluster.groups]]` names its own GPU.
    #[serde(default)]
    pub gpu: GpuSection,
    #[serde(default)]
    pub cluster: ClusterSection,
    #[serde(default)]
    pub scheduler: SchedulerSection,
    #[serde(default)]
    pub memory: MemorySection,
    #[serde(default)]
    pub cost: CostSpec,
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub slo: SloSection,
    #[serde(default)]
    pub metrics: MetricsSection,
    #[serde(default)]
    pub run: RunSection,
    /// `[plan]`: the candidates `servesim plan` searches (ignored by `simulate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSection>,
    /// `[fleet]`: instance start-up, failures and restarts, autoscaling. Default: a fixed
    /// fleet that never fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::fleet::FleetSection>,
}

/// `[model]`: a preset, optionally with dimensions overridden, or every dimension given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// One of the presets (llama-3-8b, llama-3-70b, ...). Without it, give every dimension.
    pub preset: Option<String>,
    pub name: Option<String>,
    /// bf16 (default) or fp8.
    pub weight_dtype: Option<Dtype>,
    /// bf16 (default) or fp8.
    pub kv_dtype: Option<Dtype>,
    pub layers: Option<u64>,
    pub hidden: Option<u64>,
    pub heads: Option<u64>,
    pub kv_heads: Option<u64>,
    pub head_dim: Option<u64>,
    pub intermediate: Option<u64>,
    pub vocab: Option<u64>,
    pub max_context: Option<u64>,
    /// MoE experts per layer (1 = dense, the default without a preset).
    pub experts: Option<u64>,
    /// Experts per token (1 = dense).
    pub top_k: Option<u64>,
    pub tied_embeddings: Option<bool>,
}

fn unknown_preset(path: &str, name: &str, known: Vec<&str>) -> ScenarioError {
    ScenarioError::at(&format!("{path}.preset"), format!("unknown preset \"{name}\"; known: {}", known.join(", ")))
}

fn required<T: Copy>(v: Option<T>, path: &str, key: &str) -> Result<T, ScenarioError> {
    v.ok_or_else(|| ScenarioError::at(&format!("{path}.{key}"), "required when no preset is given".into()))
}

/// The largest model servesim sizes, in parameters (today's largest have about 2·10¹²), and the
/// largest KV bytes per token: far past any real model, and far inside 64-bit arithmetic.
pub const MAX_PARAMS: f64 = 1e17;
pub const MAX_KV_BYTES_PER_TOKEN: f64 = 1e12;

impl ModelSection {
    pub fn resolve(&self, path: &str) -> Result<ModelSpec, ScenarioError> {
        let wd = self.weight_dtype.unwrap_or(Dtype::Bf16);
        let kd = self.kv_dtype.unwrap_or(Dtype::Bf16);
        let mut m = match &self.preset {
            Some(p) => {
                let preset = MODEL_PRESETS
                    .iter()
                    .find(|x| x.name == p)
                    .ok_or_else(|| unknown_preset(path, p, MODEL_PRESETS.iter().map(|x| x.name).collect()))?;
                ModelSpec::from_preset(preset, wd, kd)
            }
            None => ModelSpec {
                name: self.name.clone().unwrap_or_else(|| "custom".into()),
                layers: required(self.layers, path, "layers")?,
                hidden: required(self.hidden, path, "hidden")?,
                heads: required(self.heads, path, "heads")?,
                kv_heads: required(self.kv_heads, path, "kv_heads")?,
                head_dim: required(self.head_dim, path, "head_dim")?,
                intermediate: required(self.intermediate, path, "intermediate")?,
                vocab: required(self.vocab, path, "vocab")?,
                max_context: required(self.max_context, path, "max_context")?,
                experts: 1,
                top_k: 1,
                tied_embeddings: false,
                weight_dtype: wd,
                kv_dtype: kd,
            },
        };
        if let Some(n) = &self.name {
            m.name = n.clone();
        }
        macro_rules! over {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { m.$f = v; } )* };
        }
        over!(
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            max_context,
            experts,
            top_k,
            tied_embeddings
        );
        for (key, v) in [
            ("layers", m.layers),
            ("hidden", m.hidden),
            ("heads", m.heads),
            ("kv_heads", m.kv_heads),
            ("head_dim", m.head_dim),
            ("intermediate", m.intermediate),
            ("vocab", m.vocab),
            ("max_context", m.max_context),
            ("experts", m.experts),
            ("top_k", m.top_k),
        ] {
            check((1..=crate::spec::MAX_DIMENSION).contains(&v), path, key, "must be in [1, 2^40]", v)?;
        }
        // Products of the dimensions (parameters, KV bytes) must stay far inside 64 bits: sizes
        // near 2^32 each would otherwise wrap around silently.
        let f = |x: u64| x as f64;
        let params = f(m.layers)
            * (f(m.hidden) * f(m.head_dim) * (2.0 * f(m.heads) + 2.0 * f(m.kv_heads))
                + f(m.experts) * 3.0 * f(m.hidden) * f(m.intermediate))
            + 2.0 * f(m.vocab) * f(m.hidden);
        check(
            params <= MAX_PARAMS,
            path,
            "layers",
            &format!("with these dimensions the model has about {params:.3e} parameters; at most {MAX_PARAMS:.0e} can be sized"),
            m.layers,
        )?;
        let kv = 2.0 * f(m.layers) * f(m.kv_heads) * f(m.head_dim) * 4.0;
        check(
            kv <= MAX_KV_BYTES_PER_TOKEN,
            path,
            "kv_heads",
            &format!(
                "with these dimensions a token's KV takes about {kv:.3e} bytes; at most {MAX_KV_BYTES_PER_TOKEN:.0e}"
            ),
            m.kv_heads,
        )?;
        check(m.heads % m.kv_heads == 0, path, "kv_heads", &format!("must divide heads ({})", m.heads), m.kv_heads)?;
        check(m.top_k <= m.experts, path, "top_k", &format!("must be ≤ experts ({})", m.experts), m.top_k)?;
        Ok(m)
    }

    /// The section with every dimension written out (for the resolved scenario).
    pub fn from_spec(m: &ModelSpec) -> ModelSection {
        ModelSection {
            preset: None,
            name: Some(m.name.clone()),
            weight_dtype: Some(m.weight_dtype),
            kv_dtype: Some(m.kv_dtype),
            layers: Some(m.layers),
            hidden: Some(m.hidden),
            heads: Some(m.heads),
            kv_heads: Some(m.kv_heads),
            head_dim: Some(m.head_dim),
            intermediate: Some(m.intermediate),
            vocab: Some(m.vocab),
            max_context: Some(m.max_context),
            experts: Some(m.experts),
            top_k: Some(m.top_k),
            tied_embeddings: Some(m.tied_embeddings),
        }
    }
}

/// `[gpu]`: a preset, optionally with numbers overridden, or every number given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSection {
    /// A GPU preset (`servesim memory --help` lists them), or a kernel database system name.
    pub preset: Option<String>,
    pub name: Option<String>,
    /// Dense bf16 TFLOP/s.
    pub bf16_tflops: Option<f64>,
    /// Dense fp8 TFLOP/s (omit or 0 for none).
    pub fp8_tflops: Option<f64>,
    /// Dense fp4 TFLOP/s (omit or 0 for none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp4_tflops: Option<f64>,
    /// Memory bandwidth, GB/s.
    pub hbm_gb_per_s: Option<f64>,
    /// Memory capacity, GiB.
    pub memory_gib: Option<f64>,
    /// GPU-to-GPU bandwidth per direction, GB/s.
    pub interconnect_gb_per_s: Option<f64>,
    /// Host link bandwidth per direction, GB/s.
    pub pcie_gb_per_s: Option<f64>,
    /// Whether the GPUs talk over NVLink (default: when the interconnect is faster than the host
    /// link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<bool>,
}

impl GpuSection {
    pub fn resolve(&self, path: &str) -> Result<GpuSpec, ScenarioError> {
        let mut g = match &self.preset {
            Some(p) => crate::spec::GpuPreset::find(p)
                .ok_or_else(|| unknown_preset(path, p, GPU_PRESETS.iter().map(|x| x.name).collect()))?
                .spec(),
            None => GpuSpec {
                name: self.name.clone().unwrap_or_else(|| "custom".into()),
                bf16_flops: required(self.bf16_tflops, path, "bf16_tflops")? * 1e12,
                fp8_flops: None,
                fp4_flops: None,
                hbm_bytes_per_s: required(self.hbm_gb_per_s, path, "hbm_gb_per_s")? * 1e9,
                memory_bytes: (required(self.memory_gib, path, "memory_gib")? * crate::memory::GIB) as u64,
                interconnect_bytes_per_s: required(self.interconnect_gb_per_s, path, "interconnect_gb_per_s")? * 1e9,
                pcie_bytes_per_s: required(self.pcie_gb_per_s, path, "pcie_gb_per_s")? * 1e9,
                nvlink: false,
            },
        };
        let custom = self.preset.is_none();
        let pos = |key: &str, v: Option<f64>| -> Result<(), ScenarioError> {
            match v {
                Some(x) => check(x.is_finite() && x > 0.0 && x < 1e9, path, key, "must be > 0", x),
                None => Ok(()),
            }
        };
        pos("bf16_tflops", self.bf16_tflops)?;
        pos("hbm_gb_per_s", self.hbm_gb_per_s)?;
        pos("memory_gib", self.memory_gib)?;
        pos("interconnect_gb_per_s", self.interconnect_gb_per_s)?;
        pos("pcie_gb_per_s", self.pcie_gb_per_s)?;
        for (key, v) in [("fp8_tflops", self.fp8_tflops), ("fp4_tflops", self.fp4_tflops)] {
            if let Some(f) = v {
                check(f.is_finite() && (0.0..1e9).contains(&f), path, key, "must be ≥ 0", f)?;
            }
        }
        if let Some(n) = &self.name {
            g.name = n.clone();
        }
        if let Some(x) = self.bf16_tflops {
            g.bf16_flops = x * 1e12;
        }
        if let Some(x) = self.fp8_tflops {
            g.fp8_flops = (x > 0.0).then_some(x * 1e12);
        }
        if let Some(x) = self.fp4_tflops {
            g.fp4_flops = (x > 0.0).then_some(x * 1e12);
        }
        if let Some(x) = self.hbm_gb_per_s {
            g.hbm_bytes_per_s = x * 1e9;
        }
        if let Some(x) = self.memory_gib {
            g.memory_bytes = (x * crate::memory::GIB) as u64;
        }
        if let Some(x) = self.interconnect_gb_per_s {
            g.interconnect_bytes_per_s = x * 1e9;
        }
        if let Some(x) = self.pcie_gb_per_s {
            g.pcie_bytes_per_s = x * 1e9;
        }
        match self.nvlink {
            Some(v) => g.nvlink = v,
            None if custom => g.nvlink = g.interconnect_bytes_per_s > g.pcie_bytes_per_s,
            None => {}
        }
        Ok(g)
    }

    pub fn from_spec(g: &GpuSpec) -> GpuSection {
        GpuSection {
            preset: None,
            name: Some(g.name.clone()),
            bf16_tflops: Some(g.bf16_flops / 1e12),
            fp8_tflops: Some(g.fp8_flops.unwrap_or(0.0) / 1e12),
            fp4_tflops: g.fp4_flops.map(|f| f / 1e12),
            hbm_gb_per_s: Some(g.hbm_bytes_per_s / 1e9),
            memory_gib: Some(g.memory_bytes as f64 / crate::memory::GIB),
            interconnect_gb_per_s: Some(g.interconnect_bytes_per_s / 1e9),
            pcie_gb_per_s: Some(g.pcie_bytes_per_s / 1e9),
            nvlink: Some(g.nvlink),
        }
    }
}

/// `[cluster]`: how many instances, their tensor-parallel degree, and the router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSection {
    /// Identical instances behind the router. Default 1.
    pub instances: u32,
    /// Tensor-parallel degree: GPUs per instance. Default 1.
    pub tp: u32,
    /// How arrivals are spread over instances. Default round-robin.
    pub router: RouterSpec,
    /// Heterogeneous cluster: groups of instances, each with its own GPU, TP degree and
    /// overrides (replaces `instances` and `tp`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupSection>,
    /// `[cluster.disaggregation]`: the KV link and decode router of a cluster whose groups
    /// have `role = "prefill"` and `"decode"`. Default: written in full when there are roles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disaggregation: Option<crate::disagg::DisaggregationSection>,
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection {
            instances: 1,
            tp: 1,
            router: RouterSpec::RoundRobin(Empty {}),
            groups: Vec::new(),
            disaggregation: None,
        }
    }
}

impl ClusterSection {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
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
        }
        self.router.validate(&format!("{path}.router"))
    }
}

/// A routing policy (`kind = "..."`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RouterSpec {
    RoundRobin(Empty),
    Random(Empty),
    LeastOutstanding(Empty),
    LeastKvUsage(Empty),
    LeastPendingTokens(LeastPendingTokensSpec),
    PowerOfTwo(Empty),
    SessionAffinity(SessionAffinitySpec),
}

tagged_enum!(RouterSpec {
    "round-robin" => RoundRobin(Empty),
    "random" => Random(Empty),
    "least-outstanding" => LeastOutstanding(Empty),
    "least-kv-usage" => LeastKvUsage(Empty),
    "least-pending-tokens" => LeastPendingTokens(LeastPendingTokensSpec),
    "power-of-two" => PowerOfTwo(Empty),
    "session-affinity" => SessionAffinity(SessionAffinitySpec),
});

/// A policy with no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `[scheduler]`: the per-instance batch scheduler (vLLM's names and defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSection {
    /// Most sequences in one iteration. Default 256.
    pub max_num_seqs: u32,
    /// Most tokens in one iteration (prefill tokens + one per decode). Default 8192.
    pub max_num_batched_tokens: u32,
    /// Tokens per KV block. Default 16.
    pub block_tokens: u32,
    /// Fraction of KV blocks kept free when admitting new requests, so running ones can grow
    /// without immediate preemption. Default 0.01 (vLLM's watermark).
    pub watermark: f64,
    /// Longest prompt + output accepted. Default: the model's max context.
    pub max_model_len: Option<u64>,
    /// `[scheduler.batching]`: continuous (default), static or chunked.
    pub batching: BatchingSpec,
    /// `[scheduler.queue]`: queue order. Default FCFS.
    pub queue: QueueSpec,
    /// `[scheduler.admission]`: overload control. Default: none.
    pub admission: AdmissionSection,
    /// `[scheduler.preemption]`: recompute (default) or swap.
    pub preemption: PreemptionSpec,
    /// `[scheduler.kv_cache]`: paged (default) or max-length reservation; KV dtype override.
    pub kv_cache: KvCacheSection,
    /// `[scheduler.prefix_cache]`: automatic prefix caching. Default off.
    pub prefix_cache: PrefixCacheSection,
    /// `[scheduler.speculative]`: speculative decoding. Default off.
    pub speculative: Option<SpeculativeSection>,
    /// `[scheduler.cpu]`: CPU overhead per iteration and its overlap with the GPU.
    pub cpu: CpuSection,
}

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            block_tokens: 16,
            watermark: 0.01,
            max_model_len: None,
            batching: BatchingSpec::default(),
            queue: QueueSpec::default(),
            admission: AdmissionSection::default(),
            preemption: PreemptionSpec::default(),
            kv_cache: KvCacheSection::default(),
            prefix_cache: PrefixCacheSection::default(),
            speculative: None,
            cpu: CpuSection::default(),
        }
    }
}

impl SchedulerSection {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        check(self.max_num_seqs >= 1, path, "max_num_seqs", "must be ≥ 1", self.max_num_seqs)?;
        check(
            self.max_num_batched_tokens >= 1,
            path,
            "max_num_batched_tokens",
            "must be ≥ 1",
            self.max_num_batched_tokens,
        )?;
        check(
            self.block_tokens >= 1 && self.block_tokens <= 1 << 20,
            path,
            "block_tokens",
            "must be in [1, 1048576]",
            self.block_tokens,
        )?;
        check(
            self.watermark.is_finite() && (0.0..0.5).contains(&self.watermark),
            path,
            "watermark",
            "must be in [0, 0.5)",
            self.watermark,
        )?;
        if let Some(m) = self.max_model_len {
            check(m >= 2, path, "max_model_len", "must be ≥ 2", m)?;
        }
        self.batching.validate(&format!("{path}.batching"))?;
        self.queue.validate(&format!("{path}.queue"))?;
        self.admission.validate(&format!("{path}.admission"))?;
        self.preemption.validate(&format!("{path}.preemption"))?;
        self.kv_cache.validate(&format!("{path}.kv_cache"))?;
        self.prefix_cache.validate(&format!("{path}.prefix_cache"))?;
        if let Some(s) = &self.speculative {
            s.validate(&format!("{path}.speculative"))?;
        }
        self.cpu.validate(&format!("{path}.cpu"))
    }
}

/// `[memory]`: how much of each GPU the engine may use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemorySection {
    /// Fraction of GPU memory for weights, reserve and KV cache. Default 0.9.
    pub gpu_memory_utilization: f64,
    /// Workspace reserved per GPU (activations, CUDA context, graphs), GiB. Default: 1 GiB +
    /// activations of the largest batch + logits (see `memory::default_reserve_bytes`).
    pub reserve_gib: Option<f64>,
}

impl Default for MemorySection {
    fn default() -> Self {
        MemorySection { gpu_memory_utilization: 0.9, reserve_gib: None }
    }
}

impl MemorySection {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        let u = self.gpu_memory_utilization;
        check(u.is_finite() && u > 0.0 && u <= 1.0, path, "gpu_memory_utilization", "must be in (0, 1]", u)?;
        if let Some(r) = self.reserve_gib {
            check(r.is_finite() && (0.0..=1e6).contains(&r), path, "reserve_gib", "must be in [0, 1e6] GiB", r)?;
        }
        Ok(())
    }
}

/// `[cost]`: the roofline cost model's constants (see `cost::roofline` for their sources), a
/// measured profile or kernel database to price iterations from, and the engine's CPU overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostSection {
    /// Fraction of peak FLOP/s that compute-bound kernels reach. Default 0.7.
    pub compute_efficiency: f64,
    /// Fraction of memory bandwidth that memory-bound kernels reach. Default 0.8.
    pub memory_efficiency: f64,
    /// Fraction of interconnect bandwidth all-reduces reach. Default 0.8.
    pub interconnect_efficiency: f64,
    /// Fixed cost per kernel, µs. Default 3.
    pub kernel_launch_us: f64,
    /// Fixed latency per all-reduce, µs. Default 15.
    pub allreduce_latency_us: f64,
    /// The engine whose CPU overhead each iteration pays (`cost::overhead`: vllm, sglang,
    /// trtllm, vidur-2023, none). Default: the database's framework, else vllm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<String>,
    /// CPU time per iteration, µs. Default: the overhead's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_overhead_base_us: Option<f64>,
    /// Extra CPU time per sequence in the batch, µs. Default: the overhead's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_overhead_per_seq_us: Option<f64>,
    /// A cost profile (from `servesim calibrate`), relative to the scenario file: iteration
    /// times come from its measured tables, and the keys above only from ops it lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// A kernel database to build the profile from, for this scenario's model, GPU and TP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseSpec>,
    /// Make fallbacks errors: an op the profile lacks, or a table read beyond its measured range.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

/// `[cost] database = { framework = "vllm", ... }`: AIConfigurator's measured kernels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSpec {
    /// vllm, sglang or trtllm.
    pub framework: String,
    /// The database's system (`h100_sxm`). Default: the GPU preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The engine version. Default: the newest the database has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// GEMM weights: bf16, fp8, fp8-block or fp4. Default: the model's weight dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    /// One GEMM kernel among several for the dtype. Default: the most measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm_kernel: Option<String>,
    /// The database folder, relative to the scenario. Default: the profiles shipped with
    /// servesim, then `$SERVESIM_AIC_DATA`, then an installed aiconfigurator_core package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The GEMM weight names a database knows.
pub const DATABASE_WEIGHTS: [&str; 4] = ["bf16", "fp8", "fp8-block", "fp4"];
/// The frameworks a database measured.
pub const DATABASE_FRAMEWORKS: [&str; 3] = ["vllm", "sglang", "trtllm"];

impl Default for CostSection {
    fn default() -> Self {
        let p = RooflineParams::default();
        CostSection {
            compute_efficiency: p.compute_efficiency,
            memory_efficiency: p.memory_efficiency,
            interconnect_efficiency: p.interconnect_efficiency,
            kernel_launch_us: p.kernel_launch_us,
            allreduce_latency_us: p.allreduce_latency_us,
            overhead: None,
            cpu_overhead_base_us: None,
            cpu_overhead_per_seq_us: None,
            profile: None,
            database: None,
            strict: false,
        }
    }
}

impl CostSection {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        for (key, v) in [
            ("compute_efficiency", self.compute_efficiency),
            ("memory_efficiency", self.memory_efficiency),
            ("interconnect_efficiency", self.interconnect_efficiency),
        ] {
            check(v.is_finite() && v > 0.0 && v <= 1.0, path, key, "must be in (0, 1]", v)?;
        }
        for (key, v) in [
            ("kernel_launch_us", Some(self.kernel_launch_us)),
            ("allreduce_latency_us", Some(self.allreduce_latency_us)),
            ("cpu_overhead_base_us", self.cpu_overhead_base_us),
            ("cpu_overhead_per_seq_us", self.cpu_overhead_per_seq_us),
        ] {
            if let Some(v) = v {
                check(v.is_finite() && (0.0..1e9).contains(&v), path, key, "must be ≥ 0", v)?;
            }
        }
        if let Some(o) = &self.overhead {
            check(
                crate::cost::EngineOverhead::find(o).is_some(),
                path,
                "overhead",
                &format!("must be one of {}", crate::cost::EngineOverhead::names().join(", ")),
                format!("{o:?}"),
            )?;
        }
        if let Some(p) = &self.profile {
            check(!p.trim().is_empty(), path, "profile", "must be a file path", "\"\"")?;
            check(self.database.is_none(), path, "database", "give either cost.profile or cost.database", "both")?;
        }
        if let Some(d) = &self.database {
            let dp = super::de::join_path(path, "database");
            check(
                DATABASE_FRAMEWORKS.contains(&d.framework.as_str()),
                &dp,
                "framework",
                &format!("must be one of {}", DATABASE_FRAMEWORKS.join(", ")),
                format!("{:?}", d.framework),
            )?;
            if let Some(w) = &d.weights {
                check(
                    DATABASE_WEIGHTS.contains(&w.as_str()),
                    &dp,
                    "weights",
                    &format!("must be one of {}", DATABASE_WEIGHTS.join(", ")),
                    format!("{w:?}"),
                )?;
            }
            for (key, v) in
                [("system", &d.system), ("version", &d.version), ("gemm_kernel", &d.gemm_kernel), ("path", &d.path)]
            {
                if let Some(v) = v {
                    check(!v.trim().is_empty(), &dp, key, "must not be empty", "\"\"")?;
                }
            }
        }
        Ok(())
    }

    /// The engine overhead this section names, or its default.
    pub fn engine_overhead(&self) -> &'static crate::cost::EngineOverhead {
        match &self.overhead {
            Some(o) => crate::cost::EngineOverhead::find(o).expect("validated"),
            None => crate::cost::EngineOverhead::default_for(self.database.as_ref().map(|d| d.framework.as_str())),
        }
    }

    pub fn params(&self) -> RooflineParams {
        let o = self.engine_overhead();
        RooflineParams {
            compute_efficiency: self.compute_efficiency,
            memory_efficiency: self.memory_efficiency,
            interconnect_efficiency: self.interconnect_efficiency,
            kernel_launch_us: self.kernel_launch_us,
            allreduce_latency_us: self.allreduce_latency_us,
            cpu_overhead_base_us: self.cpu_overhead_base_us.unwrap_or(o.base_us),
            cpu_overhead_per_seq_us: self.cpu_overhead_per_seq_us.unwrap_or(o.per_seq_us),
        }
    }
}

/// `[slo]`: per-request latency thresholds. A request meets the SLO when it finished and met
/// every threshold given; rejected requests miss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SloSection {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    pub e2e_ms: Option<f64>,
    /// Required fraction of requests meeting the SLO (for `plan`). Default 0.99.
    pub attainment: f64,
}

impl Default for SloSection {
    fn default() -> Self {
        SloSection { ttft_ms: None, tpot_ms: None, e2e_ms: None, attainment: 0.99 }
    }
}

impl SloSection {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        for (key, v) in [("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms)] {
            if let Some(v) = v {
                check(v.is_finite() && v > 0.0, path, key, "must be > 0", v)?;
            }
        }
        check(self.attainment > 0.0 && self.attainment <= 1.0, path, "attainment", "must be in (0, 1]", self.attainment)
    }
}

/// `[metrics]`: which requests count and how the time series is cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSection {
    /// Requests arriving in the first `warmup_s` seconds are left out of the statistics.
    pub warmup_s: f64,
    /// Requests arriving in the last `cooldown_s` seconds of the workload are left out.
    pub cooldown_s: f64,
    /// Width of a time-series window, seconds. Default 1.
    pub window_s: f64,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection { warmup_s: 0.0, cooldown_s: 0.0, window_s: 1.0 }
    }
}

impl MetricsSection {
    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        check(self.warmup_s.is_finite() && self.warmup_s >= 0.0, path, "warmup_s", "must be ≥ 0", self.warmup_s)?;
        check(
            self.cooldown_s.is_finite() && self.cooldown_s >= 0.0,
            path,
            "cooldown_s",
            "must be ≥ 0",
            self.cooldown_s,
        )?;
        check(self.window_s.is_finite() && self.window_s >= 0.001, path, "window_s", "must be ≥ 0.001", self.window_s)
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

    pub fn validate(&self, path: &str) -> Result<(), ScenarioError> {
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
