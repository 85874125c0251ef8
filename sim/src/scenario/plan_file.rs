//! `[plan]`: what `servesim plan` searches, as the file says it. The planner (`crate::plan`)
//! turns the candidates into scenarios and checks them ([`crate::plan::candidates`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::gpu_or_preset;
use crate::config::{check, ConfigError};
use crate::spec::GpuSection;

/// `[plan]`: what `servesim plan` searches and how it reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSection {
    /// Seeds run at each decisive point (the scenario's seed, then seed + 1, ...). Default 3.
    #[serde(default = "default_seeds")]
    pub(crate) seeds: u32,
    /// Extra instances as a fraction of the minimum: ⌈N × (1 + headroom)⌉. Default 0.
    #[serde(default)]
    pub(crate) headroom: f64,
    /// Spare instances added on top (N + k), e.g. for a failure or a rolling update. Default 0.
    /// Added, not simulated: see `spare`.
    #[serde(default)]
    pub(crate) spare_instances: u32,
    /// Instances that may be down while the SLO still holds: the count is searched with this
    /// many instances failed for the whole run (N + k verified by simulation). Default 0.
    #[serde(default)]
    pub(crate) spare: u32,
    /// Most instances tried per candidate; more needed = infeasible. Default 512.
    #[serde(default = "default_max_instances")]
    pub(crate) max_instances: u32,
    /// Relative precision of the single-instance capacity search. Default 0.01.
    #[serde(default = "default_capacity_precision")]
    pub(crate) capacity_precision: f64,
    /// $ per GPU-hour by GPU name (a preset name such as "h100-sxm", or a custom GPU's `name`).
    /// When given, every candidate's GPU needs a price; without it the cheapest is the one with
    /// the fewest GPUs.
    #[serde(default)]
    pub(crate) price_per_gpu_hour: BTreeMap<String, f64>,
    /// The configurations to size. Default: the scenario's own cluster, as one candidate.
    #[serde(default)]
    pub(crate) candidates: Vec<CandidateSection>,
}

fn default_seeds() -> u32 {
    3
}

fn default_max_instances() -> u32 {
    512
}

fn default_capacity_precision() -> f64 {
    0.01
}

impl Default for PlanSection {
    fn default() -> Self {
        PlanSection {
            seeds: default_seeds(),
            headroom: 0.0,
            spare_instances: 0,
            spare: 0,
            max_instances: default_max_instances(),
            capacity_precision: default_capacity_precision(),
            price_per_gpu_hour: BTreeMap::new(),
            candidates: Vec::new(),
        }
    }
}

impl PlanSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check((1..=100).contains(&self.seeds), path, "seeds", "must be in [1, 100]", self.seeds)?;
        let h = self.headroom;
        check(h.is_finite() && (0.0..=10.0).contains(&h), path, "headroom", "must be in [0, 10]", h)?;
        check(self.spare_instances <= 100_000, path, "spare_instances", "must be ≤ 100000", self.spare_instances)?;
        check(self.spare < self.max_instances, path, "spare", "must be < max_instances", self.spare)?;
        check(
            (1..=100_000).contains(&self.max_instances),
            path,
            "max_instances",
            "must be in [1, 100000]",
            self.max_instances,
        )?;
        let p = self.capacity_precision;
        check(p.is_finite() && (0.0001..=0.5).contains(&p), path, "capacity_precision", "must be in [0.0001, 0.5]", p)?;
        for (gpu, price) in &self.price_per_gpu_hour {
            check(
                price.is_finite() && *price >= 0.0,
                &format!("{path}.price_per_gpu_hour"),
                &format!("\"{gpu}\""),
                "must be ≥ 0",
                price,
            )?;
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.candidates.iter().enumerate() {
            let cp = format!("{path}.candidates[{i}]");
            check(
                !c.name.is_empty()
                    && !c.name.starts_with('.')
                    && c.name.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch)),
                &cp,
                "name",
                "must be letters, digits, '-', '_' or '.', not starting with '.'",
                format!("{:?}", c.name),
            )?;
            check(names.insert(c.name.clone()), &cp, "name", "is used by another candidate", format!("{:?}", c.name))?;
        }
        Ok(())
    }
}

/// `[[plan.candidates]]`: one configuration to size. Unset keys keep the scenario's values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateSection {
    /// Label in the report (letters, digits, `-`, `_`, `.`; unique).
    pub(crate) name: String,
    /// A GPU preset name or a `[gpu]`-like table; replaces `[gpu]`.
    #[serde(default, deserialize_with = "gpu_or_preset")]
    pub(crate) gpu: Option<GpuSection>,
    /// Tensor-parallel degree; replaces `cluster.tp`.
    pub(crate) tp: Option<u32>,
    /// Pipeline stages; replaces `cluster.pp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pp: Option<u32>,
    /// Keys merged over `[scheduler]`.
    pub(crate) scheduler: Option<toml::Table>,
    /// Keys merged over `[memory]`.
    pub(crate) memory: Option<toml::Table>,
    /// Keys merged over `[cost]` (a different `kind` replaces it).
    pub(crate) cost: Option<toml::Table>,
    /// Keys merged over `cluster.router` (a different `kind` replaces it).
    pub(crate) router: Option<toml::Table>,
    /// Any other key by dotted path, e.g. `set = { "model.weight_dtype" = "fp8" }`.
    pub(crate) set: Option<toml::Table>,
}

/// `[tune]`: the knobs `servesim tune` searches, each a list of values to try (a knob left out
/// keeps the scenario's value). Every combination becomes a `[plan]` candidate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TuneSection {
    /// GPU presets.
    pub(crate) gpu: Vec<String>,
    /// Tensor-parallel degrees.
    pub(crate) tp: Vec<u32>,
    /// Pipeline stages (`cluster.pp`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) pp: Vec<u32>,
    pub(crate) max_num_seqs: Vec<u32>,
    pub(crate) max_num_batched_tokens: Vec<u32>,
    /// Batching kinds (`continuous`, `chunked`, `vllm-v1`, `sglang`, `static`), with their
    /// default settings.
    pub(crate) batching: Vec<String>,
    /// Router kinds, with their default settings.
    pub(crate) router: Vec<String>,
    /// Prefix caching off and/or on.
    pub(crate) prefix_caching: Vec<bool>,
    /// Weight dtypes (`bf16`, `fp8`, `nvfp4`, `mxfp4`).
    pub(crate) weight_dtype: Vec<String>,
    /// KV cache dtypes (`bf16`, `fp8`, …, as `[model] kv_dtype`).
    pub(crate) kv_dtype: Vec<String>,
    /// A disaggregated scenario's prefill pool: GPU presets and TP degrees (each pool's
    /// instance count is the plan's search).
    pub(crate) prefill_gpu: Vec<String>,
    pub(crate) prefill_tp: Vec<u32>,
    /// The decode pool's GPU presets and TP degrees.
    pub(crate) decode_gpu: Vec<String>,
    pub(crate) decode_tp: Vec<u32>,
    /// The most combinations allowed (a guard against a typo's product). Default 5000.
    pub(crate) max_configurations: Option<u64>,
}

impl TuneSection {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        fn distinct<T: PartialEq + std::fmt::Debug>(path: &str, key: &str, xs: &[T]) -> Result<(), ConfigError> {
            for (i, x) in xs.iter().enumerate() {
                if xs[..i].contains(x) {
                    return Err(ConfigError::at(&format!("{path}.{key}"), format!("lists {x:?} twice")));
                }
            }
            Ok(())
        }
        distinct(path, "gpu", &self.gpu)?;
        distinct(path, "tp", &self.tp)?;
        distinct(path, "pp", &self.pp)?;
        distinct(path, "max_num_seqs", &self.max_num_seqs)?;
        distinct(path, "max_num_batched_tokens", &self.max_num_batched_tokens)?;
        distinct(path, "batching", &self.batching)?;
        distinct(path, "router", &self.router)?;
        distinct(path, "prefix_caching", &self.prefix_caching)?;
        distinct(path, "weight_dtype", &self.weight_dtype)?;
        distinct(path, "kv_dtype", &self.kv_dtype)?;
        distinct(path, "prefill_gpu", &self.prefill_gpu)?;
        distinct(path, "prefill_tp", &self.prefill_tp)?;
        distinct(path, "decode_gpu", &self.decode_gpu)?;
        distinct(path, "decode_tp", &self.decode_tp)?;
        for (key, xs) in [
            ("tp", &self.tp),
            ("pp", &self.pp),
            ("prefill_tp", &self.prefill_tp),
            ("decode_tp", &self.decode_tp),
            ("max_num_seqs", &self.max_num_seqs),
            ("max_num_batched_tokens", &self.max_num_batched_tokens),
        ] {
            if let Some(x) = xs.iter().find(|&&x| x == 0) {
                return Err(ConfigError::at(&format!("{path}.{key}"), format!("must be ≥ 1, got {x}")));
            }
        }
        let n = self.configurations();
        let max = self.max_configurations.unwrap_or(5000);
        check((1..=1_000_000).contains(&max), path, "max_configurations", "must be in [1, 1000000]", max)?;
        check(n <= max, path, "max_configurations", &format!("is exceeded: the lists make {n} configurations"), max)
    }

    /// How many configurations the lists make.
    pub fn configurations(&self) -> u64 {
        let len = |n: usize| n.max(1) as u64;
        len(self.gpu.len())
            * len(self.tp.len())
            * len(self.max_num_seqs.len())
            * len(self.max_num_batched_tokens.len())
            * len(self.batching.len())
            * len(self.router.len())
            * len(self.prefix_caching.len())
            * len(self.weight_dtype.len())
            * len(self.kv_dtype.len())
            * len(self.prefill_gpu.len())
            * len(self.prefill_tp.len())
            * len(self.decode_gpu.len())
            * len(self.decode_tp.len())
            * len(self.pp.len())
    }

    /// Whether a knob of a disaggregated scenario's pools is listed.
    pub fn tunes_pools(&self) -> bool {
        !(self.prefill_gpu.is_empty()
            && self.prefill_tp.is_empty()
            && self.decode_gpu.is_empty()
            && self.decode_tp.is_empty())
    }
}
