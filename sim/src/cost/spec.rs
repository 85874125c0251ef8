//! `[cost]`: which cost model gives iteration times, chosen by `kind` (default `"roofline"`,
//! so files written before there was a choice keep working), and what a group asks of a kernel
//! database.

use serde::{Deserialize, Serialize};

use crate::config::de::{self, join_path};
use crate::config::{check, ConfigError};
use crate::cost::{LinearCost, RooflineParams};

/// The cost model of an instance group.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[allow(clippy::large_enum_variant)] // one per instance group
pub enum CostSpec {
    /// The analytic roofline (`cost::Roofline`), the default.
    Roofline(CostSection),
    /// `base_us + per_token_us × tokens + per_seq_us × sequences` (`cost::LinearCost`).
    Linear(LinearCost),
}

impl CostSpec {
    pub const KINDS: &'static [&'static str] = &["roofline", "linear"];

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        match self {
            CostSpec::Roofline(c) => c.validate(path),
            CostSpec::Linear(l) => l.validate(path),
        }
    }
}

impl Default for CostSpec {
    fn default() -> Self {
        CostSpec::Roofline(CostSection::default())
    }
}

impl<'de> Deserialize<'de> for CostSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut table = <toml::Table as Deserialize>::deserialize(d)?;
        if !table.contains_key("kind") {
            table.insert("kind".into(), toml::Value::String("roofline".into()));
        }
        let kind = de::take_kind::<D::Error>(&mut table, CostSpec::KINDS)?;
        match kind.as_str() {
            "roofline" => de::variant::<CostSection, D::Error>(table).map(CostSpec::Roofline),
            "linear" => de::variant::<LinearCost, D::Error>(table).map(CostSpec::Linear),
            _ => unreachable!("take_kind accepts only listed kinds"),
        }
    }
}

/// `[cost]`: the roofline cost model's constants (see `cost::roofline` for their sources), a
/// measured profile or kernel database to price iterations from, and the engine's CPU overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostSection {
    /// Fraction of peak FLOP/s that compute-bound kernels reach. Default 0.7.
    pub(crate) compute_efficiency: f64,
    /// Fraction of memory bandwidth that memory-bound kernels reach. Default 0.8.
    pub(crate) memory_efficiency: f64,
    /// Fraction of interconnect bandwidth all-reduces reach. Default 0.8.
    pub(crate) interconnect_efficiency: f64,
    /// Fixed cost per kernel, µs. Default 3.
    pub(crate) kernel_launch_us: f64,
    /// Fixed latency per all-reduce, µs. Default 15.
    pub(crate) allreduce_latency_us: f64,
    /// The engine whose CPU overhead each iteration pays (`cost::overhead`: vllm, sglang,
    /// trtllm, vidur-2023, none). Default: the database's framework, else vllm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) overhead: Option<String>,
    /// CPU time per iteration, µs. Default: the overhead's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cpu_overhead_base_us: Option<f64>,
    /// Extra CPU time per sequence in the batch, µs. Default: the overhead's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cpu_overhead_per_seq_us: Option<f64>,
    /// A cost profile (from `servesim calibrate`), relative to the scenario file: iteration
    /// times come from its measured tables, and the keys above only from ops it lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// A kernel database to build the profile from, for this scenario's model, GPU and TP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) database: Option<DatabaseSpec>,
    /// A calibration fitted on the deployment's measured runs (`servesim calibrate fit`),
    /// relative to the scenario file: its factors correct this cost model's iteration times
    /// for the groups on the GPU, engine and cost source it was fitted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// Make fallbacks errors: an op the profile lacks, or a table read beyond its measured range.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// MoE load imbalance: the busiest expert's tokens over the mean (≥ 1); MoE layers take
    /// this much longer than under uniform routing. Default 1 (uniform).
    #[serde(skip_serializing_if = "is_one")]
    pub(crate) moe_imbalance: f64,
}

/// `[cost] database = { framework = "vllm", ... }`: AIConfigurator's measured kernels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSpec {
    /// vllm, sglang or trtllm: whose kernels. Default: the scenario's `engine` (filled in by
    /// its rules), else vllm; one other than the scenario's `engine` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) framework: Option<String>,
    /// The database's system (`h100_sxm`). Default: the GPU preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) system: Option<String>,
    /// The engine version. Default: the newest the database has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    /// GEMM weights: bf16, fp8, fp8-block or fp4. Default: the model's weight dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) weights: Option<String>,
    /// One GEMM kernel among several for the dtype. Default: the most measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gemm_kernel: Option<String>,
    /// How a MoE layer's tokens spread over its experts, as the database measured it:
    /// `balanced`, `power_law_1.01` or `power_law_1.2`. Default: [`DEFAULT_MOE_DISTRIBUTION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) moe_distribution: Option<String>,
    /// The database folder, relative to the scenario. Default: the profiles shipped with
    /// servesim, then `$SERVESIM_AIC_DATA`, then an installed aiconfigurator_core package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
}

impl DatabaseSpec {
    /// Whose kernels are read: the framework given or filled in, else vLLM's.
    pub fn framework(&self) -> &str {
        self.framework.as_deref().unwrap_or("vllm")
    }
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

/// The GEMM weight names a database knows.
pub const DATABASE_WEIGHTS: [&str; 5] = ["bf16", "fp8", "fp8-block", "fp4", "mxfp4"];
/// The expert routings a database measured (`distribution` of its MoE tables).
pub const MOE_DISTRIBUTIONS: [&str; 3] = ["balanced", "power_law_1.01", "power_law_1.2"];
/// AIConfigurator's own default routing: a power law of exponent 1.2 (ai-dynamo/aiconfigurator
/// 095f58a51, aic-core/.../sdk/config.py `workload_distribution = "power_law"` and
/// sdk/models/moe.py `_power_law_alpha = 1.2`). Decode batches under real routing touch fewer
/// experts than tokens × top-k, which `balanced` assumes.
pub const DEFAULT_MOE_DISTRIBUTION: &str = "power_law_1.2";
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
            calibration: None,
            strict: false,
            moe_imbalance: 1.0,
        }
    }
}

impl CostSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
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
        let skew = self.moe_imbalance;
        check(skew.is_finite() && (1.0..=100.0).contains(&skew), path, "moe_imbalance", "must be in [1, 100]", skew)?;
        if let Some(o) = &self.overhead {
            check(
                crate::cost::EngineOverhead::find(o).is_some(),
                path,
                "overhead",
                &format!("must be one of {}", crate::cost::EngineOverhead::names().join(", ")),
                format!("{o:?}"),
            )?;
        }
        if let Some(p) = &self.calibration {
            check(!p.trim().is_empty(), path, "calibration", "must be a file path", "\"\"")?;
        }
        if let Some(p) = &self.profile {
            check(!p.trim().is_empty(), path, "profile", "must be a file path", "\"\"")?;
            check(self.database.is_none(), path, "database", "give either cost.profile or cost.database", "both")?;
        }
        if let Some(d) = &self.database {
            let dp = join_path(path, "database");
            check(
                DATABASE_FRAMEWORKS.contains(&d.framework()),
                &dp,
                "framework",
                &format!("must be one of {}", DATABASE_FRAMEWORKS.join(", ")),
                format!("{:?}", d.framework()),
            )?;
            for (key, v, names) in [
                ("weights", &d.weights, &DATABASE_WEIGHTS[..]),
                ("moe_distribution", &d.moe_distribution, &MOE_DISTRIBUTIONS[..]),
            ] {
                if let Some(v) = v {
                    check(
                        names.contains(&v.as_str()),
                        &dp,
                        key,
                        &format!("must be one of {}", names.join(", ")),
                        format!("{v:?}"),
                    )?;
                }
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

    /// The kernel database's framework, when the section names a database.
    pub fn database_framework(&self) -> Option<&str> {
        self.database.as_ref().map(DatabaseSpec::framework)
    }

    /// The kernel database's engine version, when the section names one.
    pub fn database_version(&self) -> Option<String> {
        self.database.as_ref().and_then(|d| d.version.clone())
    }

    /// The engine overhead this section names, or its default.
    pub fn engine_overhead(&self) -> &'static crate::cost::EngineOverhead {
        match &self.overhead {
            Some(o) => crate::cost::EngineOverhead::find(o).expect("validated"),
            None => crate::cost::EngineOverhead::default_for(self.database.as_ref().map(DatabaseSpec::framework)),
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
            moe_imbalance: self.moe_imbalance,
        }
    }
}

/// What a group asks of a kernel database: the database's system, framework, version and GEMM
/// selection, and the group's model, KV dtype, TP degree and GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct DatabaseRequest {
    pub system: String,
    pub framework: String,
    pub version: Option<String>,
    /// bf16, fp8, fp8-block or fp4.
    pub weights: String,
    pub gemm_kernel: Option<String>,
    /// The experts' routing ([`MOE_DISTRIBUTIONS`]).
    pub moe_distribution: String,
    /// The database folder as the scenario names it (relative to the scenario).
    pub path: Option<String>,
    pub model: crate::spec::ModelSpec,
    pub tp: u32,
    pub gpu: crate::spec::GpuSpec,
    /// Whether the experts' table is wanted (false: a DP attention rank's slice at its own TP
    /// degree, the experts read from the instance's slice).
    pub experts: bool,
    /// Expert parallelism (`cluster.ep`): the experts' table read at its expert-parallel rows.
    pub expert_parallel: bool,
}

impl DatabaseRequest {
    /// The dtype a slice's GEMMs were measured in, by its `weights` name, when it is one of
    /// servesim's weight dtypes' narrower kinds (for the physical-floor check).
    pub fn measured_dtype(weights: &str) -> Option<crate::spec::Dtype> {
        match weights {
            "fp4" => Some(crate::spec::Dtype::Nvfp4),
            "fp8" | "fp8-block" => Some(crate::spec::Dtype::Fp8),
            _ => None,
        }
    }

    /// What is asked, in words: `llama-3-8b on h100_sxm (vllm newest, bf16 weights, bf16 KV, TP 1)`.
    pub fn describe(&self) -> String {
        format!(
            "{} on {} ({} {}, {} weights, {} KV, TP {})",
            self.model.name,
            self.system,
            self.framework,
            self.version.as_deref().unwrap_or("newest"),
            self.weights,
            self.model.kv_dtype.name(),
            self.tp
        )
    }

    /// A key naming the inputs, for caches.
    pub fn key(&self) -> String {
        let m = &self.model;
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{} {} {} {} {} {} {} {} {}|{:?}|tp{}{}{}",
            self.system,
            self.framework,
            self.version.as_deref().unwrap_or("newest"),
            self.weights,
            self.gemm_kernel.as_deref().unwrap_or(""),
            self.moe_distribution,
            self.path.as_deref().unwrap_or(""),
            m.name,
            m.layers,
            m.hidden,
            m.heads,
            m.kv_heads,
            m.head_dim,
            m.intermediate,
            m.vocab,
            m.experts,
            m.top_k,
            m.kv_dtype,
            self.tp,
            if self.experts { "" } else { "|no experts" },
            if self.expert_parallel { "|ep" } else { "" }
        )
    }
}
