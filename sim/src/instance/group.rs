//! One group of identical instances: its `[scheduler]` section (the file's words, vLLM's names
//! and defaults), and the group as resolved (GPU, TP degree, memory budget, cost model, role).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::admission::AdmissionSection;
use super::batch_wait::BatchWaitSection;
use super::batching::BatchingSpec;
use super::cpu::CpuSection;
use super::kv_policy::KvCacheSection;
use super::preemption::PreemptionSpec;
use super::prefix::PrefixCacheSection;
use super::queue::QueueSpec;
use super::speculative::SpeculativeSection;
use crate::config::{check, ConfigError};
use crate::cost::profile::Profile;
use crate::cost::CostSpec;
use crate::memory::MemoryBudget;
use crate::spec::GpuSpec;

/// `[scheduler]`: the per-instance batch scheduler (vLLM's names and defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSection {
    /// Most sequences in one iteration. Default 256.
    pub max_num_seqs: u32,
    /// Most tokens in one iteration (prefill tokens + one per decode). Default 8192.
    pub max_num_batched_tokens: u32,
    /// Tokens per KV block. Default 16.
    pub(crate) block_tokens: u32,
    /// Fraction of KV blocks kept free when admitting new requests, so running ones can grow
    /// without immediate preemption. Default 0.01 (vLLM's watermark).
    pub(crate) watermark: f64,
    /// Longest prompt + output accepted: tokens, or "auto" (the model's context, shortened to
    /// what the KV pool holds for one request, as vLLM's `--max-model-len auto`). Default: the
    /// model's max context.
    pub(crate) max_model_len: Option<ModelLen>,
    /// Set while an "auto" length waits for the memory plan ([`SchedulerSection::fit_to_pool`]).
    #[serde(skip)]
    pub(crate) fit_model_len: bool,
    /// `[scheduler.batching]`: continuous (default), static or chunked.
    pub(crate) batching: BatchingSpec,
    /// `[scheduler.queue]`: queue order. Default FCFS.
    pub queue: QueueSpec,
    /// `[scheduler.admission]`: overload control. Default: none.
    pub(crate) admission: AdmissionSection,
    /// `[scheduler.preemption]`: recompute (default) or swap.
    pub(crate) preemption: PreemptionSpec,
    /// `[scheduler.kv_cache]`: paged (default) or max-length reservation; KV dtype override.
    pub kv_cache: KvCacheSection,
    /// `[scheduler.prefix_cache]`: automatic prefix caching. Default off.
    pub prefix_cache: PrefixCacheSection,
    /// `[scheduler.speculative]`: speculative decoding. Default off.
    pub(crate) speculative: Option<SpeculativeSection>,
    /// `[scheduler.cpu]`: CPU overhead per iteration and its overlap with the GPU.
    pub cpu: CpuSection,
    /// `[scheduler.batch_wait]`: TensorRT-LLM's batch waiting. Default off.
    #[serde(skip_serializing_if = "BatchWaitSection::is_default")]
    pub(crate) batch_wait: BatchWaitSection,
    /// SGLang's `--scheduler-recv-interval`: while the scheduler only decodes, it takes new
    /// requests in every this many iterations ([`super::recv`]). Default 1 (every iteration).
    #[serde(skip_serializing_if = "is_one")]
    pub recv_interval: u32,
    /// How SGLang's rules size `max_num_seqs` from each rank's KV pool once the memory is
    /// planned ([`SeqsFromPool`]): set by `engine = "sglang"`. Not a key: the resolved file
    /// holds the number.
    #[serde(skip)]
    pub(crate) seqs_from_pool: Option<SeqsFromPool>,
}

/// SGLang's `max_running_requests` against the KV pool each scheduler has, as its model
/// runner resolves it (`_resolve_max_num_reqs`, python/sglang/srt/model_executor/
/// model_runner_kv_cache_mixin.py, 0.5.10–0.5.15).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SeqsFromPool {
    /// `max_num_seqs` was given (`--max-running-requests`, each rank's share): as given before
    /// 0.5.10; no more than the pool's estimate (⌊pool / context × 512⌋ held between 2048 and
    /// 4096) in 0.5.10–0.5.13; no more than half the pool from 0.5.14 (read in 0.5.14, 0.5.15
    /// and 0.5.23's mem_cache/kv_cache_configurator.py). Not given: SGLang's default,
    /// [`crate::memory::sglang_max_running_requests`].
    pub given: bool,
    /// The release whose rule applies.
    pub version: crate::memory::EngineVersion,
}

/// How a refusal by vLLM's start-up check ([`SchedulerSection::fit_to_pool`]) begins: `plan`
/// takes a candidate it refuses as one that cannot run.
pub(crate) const VLLM_NO_START: &str = "vLLM does not start";

/// `[scheduler] max_model_len`: a length in tokens, or "auto".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModelLen {
    Tokens(u64),
    /// vLLM's `--max-model-len auto` (or -1): the model's context, shortened to the longest
    /// request the KV cache holds.
    Auto,
}

impl Serialize for ModelLen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ModelLen::Tokens(n) => s.serialize_u64(*n),
            ModelLen::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for ModelLen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ModelLen;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a whole number of tokens or \"auto\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<ModelLen, E> {
                Ok(ModelLen::Tokens(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<ModelLen, E> {
                u64::try_from(n)
                    .map(ModelLen::Tokens)
                    .map_err(|_| E::custom(format!("{n}: expected a whole number of tokens or \"auto\" (vLLM's -1)")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ModelLen, E> {
                match v {
                    "auto" => Ok(ModelLen::Auto),
                    _ => Err(E::custom(format!("{v:?}: expected a whole number of tokens or \"auto\""))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A `max_model_len` longer than the model's context (`max_position_embeddings`) is an error:
/// the engines refuse it, and a request the model cannot attend to would "meet" the SLO.
fn check_model_len(len: u64, model: &crate::spec::ModelSpec, path: &str) -> Result<(), ConfigError> {
    check(
        len <= model.max_context,
        path,
        "max_model_len",
        &format!("must be ≤ {}'s context of {} tokens (model.max_context)", model.name, model.max_context),
        len,
    )
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            block_tokens: 16,
            watermark: 0.01,
            max_model_len: None,
            fit_model_len: false,
            batching: BatchingSpec::default(),
            queue: QueueSpec::default(),
            admission: AdmissionSection::default(),
            preemption: PreemptionSpec::default(),
            kv_cache: KvCacheSection::default(),
            prefix_cache: PrefixCacheSection::default(),
            speculative: None,
            cpu: CpuSection::default(),
            batch_wait: BatchWaitSection::default(),
            recv_interval: 1,
            seqs_from_pool: None,
        }
    }
}

impl SchedulerSection {
    /// The resolved `max_model_len` in tokens (`None` before the scenario is resolved).
    pub(crate) fn model_len(&self) -> Option<u64> {
        match self.max_model_len {
            Some(ModelLen::Tokens(n)) => Some(n),
            Some(ModelLen::Auto) | None => None,
        }
    }

    /// Resolves `max_model_len` to tokens: the model's context where the file gives none or
    /// "auto" (which [`SchedulerSection::fit_to_pool`] then shortens to what the pool holds);
    /// a length past the model's context is an error ([`check_model_len`]).
    pub(crate) fn resolve_model_len(&mut self, model: &crate::spec::ModelSpec, path: &str) -> Result<(), ConfigError> {
        let len = match self.max_model_len {
            Some(ModelLen::Tokens(n)) => n,
            Some(ModelLen::Auto) => {
                self.fit_model_len = true;
                model.max_context
            }
            None => model.max_context,
        };
        check_model_len(len, model, path)?;
        self.max_model_len = Some(ModelLen::Tokens(len));
        Ok(())
    }

    /// vLLM's start-up check on a budget its rule planned (`memory.engine = "vllm"`): the KV
    /// cache must hold one request of `max_model_len` tokens, else the engine stops with "To serve
    /// at least one request with the model's max seq len (…), (… GiB KV cache is needed, which is
    /// larger than the available KV cache memory (… GiB)" (`_check_enough_kv_cache_memory`,
    /// `vllm/v1/core/kv_cache_planning.py` in 0.34.0; `kv_cache_utils.py` in 0.11). An "auto"
    /// length becomes the longest that fits, as `_auto_fit_max_model_len` (same file) makes it.
    /// SGLang and TensorRT-LLM start with any length; a pinned block count is not checked.
    /// `ranks`: the group's DP attention ranks. Then SGLang's running requests from the pool
    /// ([`SchedulerSection::size_seqs_from_pool`]).
    pub(crate) fn fit_to_pool(&mut self, memory: &MemoryBudget, ranks: u64, path: &str) -> Result<(), ConfigError> {
        self.fit_model_len(memory, ranks, path)?;
        self.size_seqs_from_pool(memory, ranks);
        Ok(())
    }

    fn fit_model_len(&mut self, memory: &MemoryBudget, ranks: u64, path: &str) -> Result<(), ConfigError> {
        let fit = std::mem::take(&mut self.fit_model_len);
        if memory.terms.as_ref().is_none_or(|t| t.engine != crate::memory::MemoryEngine::Vllm) {
            return Ok(());
        }
        let len = self.model_len().expect("resolved before memory is planned");
        let longest = memory.vllm_longest_request((self.max_num_seqs as u64).div_ceil(ranks.max(1)));
        if len <= longest {
            return Ok(());
        }
        let gib = |b: u64| b as f64 / crate::memory::GIB;
        let needed = gib(memory.vllm_request_bytes(len));
        let available = gib(memory.kv_bytes + memory.window_kv_bytes);
        if longest < 2 {
            return Err(ConfigError::at(
                &format!("{path}.max_model_len"),
                format!(
                    "{VLLM_NO_START}: its KV cache ({available:.2} GiB per GPU) holds no request of even two tokens; give \
                     the engine more memory (memory.gpu_memory_utilization, cluster.tp)"
                ),
            ));
        }
        if fit {
            self.max_model_len = Some(ModelLen::Tokens(longest));
            return Ok(());
        }
        Err(ConfigError::at(
            &format!("{path}.max_model_len"),
            format!(
                "{VLLM_NO_START} with max_model_len {len}: \"To serve at least one request with the model's max seq len \
                 ({len}), ({needed:.2} GiB KV cache is needed, which is larger than the available KV cache memory \
                 ({available:.2} GiB)\" (vllm/v1/core/kv_cache_planning.py); the longest that fits is {longest}: \
                 give max_model_len ≤ {longest} or \"auto\" (vllm serve --max-model-len auto), or more memory for \
                 the KV cache (memory.gpu_memory_utilization, cluster.tp)"
            ),
        ))
    }

    /// Tokens per KV block.
    pub fn block_tokens(&self) -> u64 {
        self.block_tokens as u64
    }

    /// With [`SchedulerSection::seqs_from_pool`], `max_num_seqs` as SGLang sizes it from the
    /// pool `memory` gives each of `ranks` DP attention ranks, at the scheduler's context
    /// length (resolved before memory is planned); at least 1.
    fn size_seqs_from_pool(&mut self, memory: &MemoryBudget, ranks: u64) {
        let Some(rule) = self.seqs_from_pool else { return };
        let pool = memory.kv_blocks / ranks.max(1) * self.block_tokens();
        let context = self.model_len().expect("resolved before memory is planned");
        let given = self.max_num_seqs as u64;
        let seqs = match (rule.given, rule.version) {
            // With a drafter SGLang 0.4.6–0.5.12 runs 48 (ServerArgs, "Max running requests is
            // reset to 48 for speculative decoding"; not in 0.4.0 nor from 0.5.13).
            (false, v) if self.speculative.is_some() && ((0, 4, 6)..(0, 5, 13)).contains(&v) => 48,
            (false, _) => crate::memory::sglang_max_running_requests(pool, context),
            (true, v) if v < (0, 5, 10) => given,
            (true, v) if v < (0, 5, 14) => given.min(crate::memory::sglang_running_estimate(pool, context)),
            (true, _) => given.min(pool / 2),
        };
        self.max_num_seqs = seqs.clamp(1, u32::MAX as u64) as u32;
    }

    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
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
        if let Some(m) = self.model_len() {
            check(m >= 2, path, "max_model_len", "must be ≥ 2", m)?;
        }
        self.batching.validate(&format!("{path}.batching"))?;
        if let Some(n) = self.batching.active_seqs().filter(|&n| n > self.max_num_seqs) {
            let m = self.max_num_seqs;
            return Err(ConfigError::at(
                &format!("{path}.batching.max_num_active_seqs"),
                format!(
                    "{VLLM_NO_START} with max_num_active_seqs {n} above max_num_seqs {m}: \"max_num_active_seqs ({n}) \
                     cannot be greater than max_num_seqs ({m}).\" (SchedulerConfig, vllm/config/scheduler.py)"
                ),
            ));
        }
        self.queue.validate(&format!("{path}.queue"))?;
        if self.batching.priority_preemption().is_some() && self.queue.priority().is_none() {
            let why = "SGLang preempts by priority only with --enable-priority-scheduling: give [scheduler.queue] kind = \"priority\"";
            return Err(ConfigError::at(&format!("{path}.queue.kind"), why.into()));
        }
        self.admission.validate(&format!("{path}.admission"))?;
        self.preemption.validate(&format!("{path}.preemption"))?;
        if let Some(why) = self.batching.spec().recompute_only().filter(|_| self.preemption.swaps()) {
            return Err(ConfigError::at(&format!("{path}.preemption.kind"), why.into()));
        }
        self.kv_cache.validate(&format!("{path}.kv_cache"))?;
        self.prefix_cache.validate(&format!("{path}.prefix_cache"))?;
        if let Some(s) = &self.speculative {
            s.validate(&format!("{path}.speculative"))?;
        }
        self.batch_wait.validate(&format!("{path}.batch_wait"))?;
        check(
            (1..=1_000_000).contains(&self.recv_interval),
            path,
            "recv_interval",
            "must be in [1, 1000000] (SGLang's --scheduler-recv-interval; 1: every iteration)",
            self.recv_interval,
        )?;
        self.cpu.validate(&format!("{path}.cpu"))
    }
}

/// What an instance group serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Whole requests: prefill and decode on one instance (the default).
    #[default]
    Mixed,
    /// Prompts only: a request leaves after its first token, its KV transferred to a decode
    /// instance.
    Prefill,
    /// Decoding of requests prefilled elsewhere.
    Decode,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Mixed => "mixed",
            Role::Prefill => "prefill",
            Role::Decode => "decode",
        }
    }
}

/// One group of identical instances: the same GPU, TP degree and scheduler.
#[derive(Clone, Debug)]
pub struct InstanceGroup {
    pub name: String,
    pub count: u32,
    pub gpu: GpuSpec,
    pub tp: u64,
    /// DP attention and expert parallelism over the `tp` GPUs.
    pub layout: crate::cost::Layout,
    pub scheduler: SchedulerSection,
    pub memory: MemoryBudget,
    pub cost: CostSpec,
    /// The measured cost profile (`cost.profile`), checked against the model and TP degree;
    /// without one the roofline model prices iterations.
    pub profile: Option<Arc<Profile>>,
    /// Under DP attention with a kernel database: the slice at one rank's TP degree
    /// (`tp / dp_attention`), which prices each rank's attention and projections; `profile`
    /// prices the experts over all `tp` GPUs.
    pub rank_profile: Option<Arc<Profile>>,
    /// The calibration its iterations are corrected by (`cost.calibration`), or why the one
    /// the scenario names does not apply to this group.
    pub calibration: Option<Result<Arc<crate::cost::Calibration>, String>>,
    /// Longest prompt + output a request may have on this group.
    pub max_model_len: u64,
    /// Its pool in a disaggregated cluster; mixed otherwise.
    pub role: Role,
}

/// The most instances one cluster simulates, over all its groups (autoscaling's maximum
/// included): each holds its scheduler, KV allocator and queues (a run of 100,000 llama-3-8b
/// instances and 2,000 requests peaked at 234 MB; 20 groups of 100,000 aborted past 3 GB).
pub const MAX_INSTANCES: u64 = 100_000;

impl InstanceGroup {
    /// The calibration applied to this group, if any.
    pub fn calibrated(&self) -> Option<&Arc<crate::cost::Calibration>> {
        self.calibration.as_ref().and_then(|c| c.as_ref().ok())
    }

    /// What prices this group's iterations, as a calibration names it: `database`, `profile`,
    /// `roofline` or `linear`.
    pub fn cost_source(&self) -> &'static str {
        match &self.cost {
            crate::cost::CostSpec::Linear(_) => "linear",
            crate::cost::CostSpec::Roofline(c) if c.database.is_some() => "database",
            crate::cost::CostSpec::Roofline(_) if self.profile.is_some() => "profile",
            crate::cost::CostSpec::Roofline(_) => "roofline",
        }
    }

    /// What prices this group's iterations, in words: `the kernel database (vllm)`, `profile
    /// PATH`, `roofline`, `linear`; with the calibration that corrects them, or why the one
    /// the scenario names does not.
    pub fn cost_words(&self) -> String {
        let base = match &self.cost {
            crate::cost::CostSpec::Linear(_) => "linear".to_string(),
            crate::cost::CostSpec::Roofline(c) => match (c.database_framework(), &c.profile) {
                (Some(f), _) => format!("the kernel database ({f} kernels of {})", self.gpu.name),
                (None, Some(p)) => format!("profile {p}"),
                (None, None) => "roofline".to_string(),
            },
        };
        let path = match &self.cost {
            crate::cost::CostSpec::Roofline(c) => c.calibration.clone().unwrap_or_default(),
            crate::cost::CostSpec::Linear(_) => String::new(),
        };
        match &self.calibration {
            None => base,
            Some(Ok(_)) => format!("{base}, calibrated by {path}"),
            Some(Err(why)) => format!("{base}, uncalibrated ({why})"),
        }
    }

    /// GPUs of one instance: `tp` per pipeline stage.
    pub fn gpus(&self) -> u64 {
        self.tp * self.layout.pp.max(1)
    }
}
