//! What servesim knows of each serving engine, in one place: the defaults `engine = "..."`
//! applies to a scenario, and the scheduler limits each engine chooses by itself on a GPU — read
//! by the scenario resolve, `scenario from-vllm` / `from-sglang` and `validate --silicon`.

use serde::{Deserialize, Serialize};

use super::file::ScenarioFile;
use crate::config::ConfigError;
use crate::cost::CostSpec;
use crate::instance::batching::{BatchingSpec, Sglang, VllmV1};
use crate::instance::{SchedulerSection, SeqsFromPool, VLLM_NO_START};
use crate::memory::MemoryEngine;
use crate::spec::GpuSpec;

/// An engine's scheduler limits when its launch command does not set them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineLimits {
    /// vLLM `--max-num-seqs`, SGLang `--max-running-requests`, TensorRT-LLM `max_batch_size`.
    pub max_num_seqs: u32,
    /// vLLM `--max-num-batched-tokens`, SGLang `--chunked-prefill-size`, TensorRT-LLM
    /// `max_num_tokens`.
    pub max_num_batched_tokens: u32,
}

pub use crate::memory::EngineVersion;

/// The newest vLLM release whose defaults servesim has read: what a scenario or launch command
/// without a version is taken to run.
pub const VLLM_NEWEST_READ: EngineVersion = (0, 34, 0);

/// The vLLM releases from which [`vllm_limits`]'s rule changed, oldest first.
pub const VLLM_LIMIT_RULES: &[EngineVersion] = &[(0, 8, 0), (0, 8, 4), (0, 8, 5), (0, 9, 0), (0, 28, 0), (0, 33, 0)];

/// The vLLM release from which its scheduler admits a request only when its whole sequence
/// fits (`scheduler_reserve_full_isl`, on by default; 0.18.1 has none).
pub const VLLM_RESERVES_FULL_ISL_FROM: EngineVersion = (0, 19, 0);
/// The vLLM release from which a request alone is exempt from `long_prefill_token_threshold`
/// (`Scheduler.schedule`; 0.30.0 caps it).
pub(super) const VLLM_LONE_REQUEST_UNCAPPED_FROM: EngineVersion = (0, 31, 0);
/// The vLLM release from which, under its priority policy, the pass over the running requests
/// goes on past one that preempted itself (`Scheduler.schedule`; 0.32.0 stops there).
pub(super) const VLLM_PRIORITY_PASS_CONTINUES_FROM: EngineVersion = (0, 33, 0);
/// The vLLM release from which an engine without DP ranks paces its own prefill by
/// `--prefill-schedule-interval` (`local_prefill_interval`; 0.32.0 has none).
pub const VLLM_LOCAL_PREFILL_CADENCE_FROM: EngineVersion = (0, 33, 0);

/// The top-level `engine` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServingEngine {
    Vllm,
    Sglang,
    Trtllm,
}

impl ServingEngine {
    pub fn name(self) -> &'static str {
        match self {
            ServingEngine::Vllm => "vllm",
            ServingEngine::Sglang => "sglang",
            ServingEngine::Trtllm => "trtllm",
        }
    }

    /// Fills in the engine's own rules where `given` (the file as written) leaves the key out:
    ///
    /// | key | vllm | sglang | trtllm |
    /// |---|---|---|---|
    /// | `scheduler.batching` | `vllm-v1` | `sglang` | — |
    /// | `scheduler.max_num_seqs`, `max_num_batched_tokens` | [`ServingEngine::default_limits`] on each instance's GPU (the top-level `[gpu]` or a group's own, [`LimitsFromGpu`]), at `engine_version` | same, each DP attention rank's share; `max_num_seqs` from each rank's KV pool ([`crate::memory::sglang_max_running_requests`]) | same |
    /// | `scheduler.cpu.overlap` (with `engine_version`) | [`ServingEngine::schedules_async_by_default`] | — | — |
    /// | `scheduler.prefix_cache.enabled` | true | true (the radix cache) | — |
    /// | `scheduler.watermark` | 0 (vLLM V1 keeps none) | — | — |
    /// | `memory.engine` (unless `reserve_gib` or `kv_blocks` is given) | `vllm` | `sglang` | `trtllm` |
    /// | `cost.overhead` (roofline) | `vllm` | `sglang` | `trtllm` |
    /// | `cost.database.framework` (a database named) | `vllm` | `sglang` | `trtllm` |
    /// | `scheduler.kv_cache` (unless `allocation` is given) | — | — | `reserve-max`, each request's own output, `scheduler.watermark` 0 |
    ///
    /// vLLM V1 always chunks prefills and caches prefixes by default (vllm/config/cache.py,
    /// `enable_prefix_caching`); SGLang's radix cache is on unless `--disable-radix-cache`.
    pub(crate) fn apply_defaults(self, file: &mut ScenarioFile, given: &toml::Table) {
        let has = |path: &[&str]| -> bool {
            let mut t = given;
            for (i, k) in path.iter().enumerate() {
                match t.get(*k) {
                    None => return false,
                    Some(_) if i + 1 == path.len() => return true,
                    Some(toml::Value::Table(inner)) => t = inner,
                    Some(_) => return true,
                }
            }
            true
        };
        let (vllm, sglang) = (self == ServingEngine::Vllm, self == ServingEngine::Sglang);
        if !has(&["scheduler", "batching"]) {
            if vllm {
                file.scheduler.batching = BatchingSpec::VllmV1(VllmV1::default());
            } else if sglang {
                file.scheduler.batching = BatchingSpec::Sglang(Sglang::default());
            }
        }
        self.apply_version_defaults(file, &has);
        // vLLM V1 keeps no watermark unless `--watermark` says (`SchedulerConfig.watermark`, 0
        // by default); a batching kind other than vllm-v1 would keep `scheduler.watermark`.
        if vllm && !has(&["scheduler", "watermark"]) {
            file.scheduler.watermark = 0.0;
        }
        if (vllm || sglang) && !has(&["scheduler", "prefix_cache", "enabled"]) {
            file.scheduler.prefix_cache.enabled = true;
        }
        let sized_by_hand = has(&["memory", "reserve_gib"]) || has(&["memory", "kv_blocks"]);
        if !has(&["memory", "engine"]) && !sized_by_hand {
            file.memory.engine = match self {
                ServingEngine::Vllm => MemoryEngine::Vllm,
                ServingEngine::Sglang => MemoryEngine::Sglang,
                ServingEngine::Trtllm => MemoryEngine::Trtllm,
            };
        }
        if let CostSpec::Roofline(c) = &mut file.cost {
            if c.overhead.is_none() {
                c.overhead = Some(self.name().to_string());
            }
            if let Some(d) = &mut c.database {
                d.framework.get_or_insert_with(|| self.name().to_string());
            }
        }
        // TensorRT-LLM's default capacity scheduler, GUARANTEED_NO_EVICT (the
        // `capacity_scheduler_policy` default of `SchedulerConfig`, tensorrt_llm/llmapi/llm_args.py,
        // NVIDIA/TensorRT-LLM), admits a request only with blocks for its prompt and all the tokens
        // it may generate, its max_tokens (`GuaranteedNoEvictScheduler`,
        // tensorrt_llm/_torch/pyexecutor/scheduler.py).
        if self == ServingEngine::Trtllm && !has(&["scheduler", "kv_cache", "allocation"]) {
            let dtype = file.scheduler.kv_cache.dtype;
            file.scheduler.kv_cache = crate::instance::kv_policy::KvCacheSection {
                dtype,
                ..crate::instance::kv_policy::KvCacheSection::trtllm()
            };
            // Nothing is kept back beyond the reservations: the reservation is the guarantee.
            if !has(&["scheduler", "watermark"]) {
                file.scheduler.watermark = 0.0;
            }
        }
    }
}

/// The scheduler limits an engine's rules fill in where the file gives none
/// ([`ServingEngine::default_limits`]): on the top-level `[gpu]`, and on each group's own GPU in
/// a cluster of groups.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LimitsFromGpu {
    engine: ServingEngine,
    version: Option<EngineVersion>,
    /// Whether the top-level `[scheduler]` leaves `max_num_seqs` to the engine.
    seqs: bool,
    /// Whether it leaves `max_num_batched_tokens` to the engine.
    tokens: bool,
}

impl LimitsFromGpu {
    /// The engine's limits on `gpu` into `s`, where neither the top-level `[scheduler]` nor a
    /// group's own table (`own`) gives them; SGLang's shared among its `ranks` DP attention
    /// ranks, each given its share as SGLang's `_handle_data_parallelism` gives it
    /// (`chunked_prefill_size // dp_size`).
    pub(crate) fn apply(&self, s: &mut SchedulerSection, gpu: &GpuSpec, ranks: u32, own: Option<&toml::Table>) {
        let limits = self.engine.default_limits(gpu, self.version);
        let ranks = if self.engine == ServingEngine::Sglang { ranks.max(1) } else { 1 };
        let own = |key: &str| own.is_some_and(|t| t.contains_key(key));
        if self.seqs && !own("max_num_seqs") {
            s.max_num_seqs = (limits.max_num_seqs / ranks).max(1);
        }
        if self.tokens && !own("max_num_batched_tokens") {
            s.max_num_batched_tokens = (limits.max_num_batched_tokens / ranks).max(1);
        }
    }

    /// vLLM's own settling of the two limits once the context length is known
    /// ([`vllm_settled_limits`]), on those it filled in (neither the top-level `[scheduler]`
    /// nor the group's `own` table gives them); the other engines' limits stay as they are.
    pub(crate) fn settle(
        &self,
        s: &mut SchedulerSection,
        own: Option<&toml::Table>,
        path: &str,
    ) -> Result<(), ConfigError> {
        if self.engine != ServingEngine::Vllm {
            return Ok(());
        }
        let own = |key: &str| own.is_some_and(|t| t.contains_key(key));
        let given = |filled: bool, n: u32| (!filled).then_some(n as u64);
        let len = s.model_len().expect("resolved before the limits settle");
        let (seqs, tokens) = vllm_settled_limits(
            EngineLimits { max_num_seqs: s.max_num_seqs, max_num_batched_tokens: s.max_num_batched_tokens },
            (
                given(self.seqs && !own("max_num_seqs"), s.max_num_seqs),
                given(self.tokens && !own("max_num_batched_tokens"), s.max_num_batched_tokens),
            ),
            s.batching.is_chunked(),
            len,
        )
        .map_err(|e| ConfigError::at(&format!("{path}.max_num_batched_tokens"), e))?;
        s.max_num_seqs = u32::try_from(seqs).unwrap_or(u32::MAX);
        s.max_num_batched_tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        Ok(())
    }
}

/// How `vllm serve` settles `--max-num-seqs` and `--max-num-batched-tokens` from those it is
/// `given` and its defaults on the GPU (`default`), for a context of `max_model_len` tokens, as
/// `EngineArgs._set_default_args` does (vllm/engine/arg_utils.py, the same in the 0.11.2 and
/// 0.34.0 sdists; `default` is the GPU's, as `scenario from-vllm` changes it first for
/// `--performance-mode throughput` and a batched DP all-to-all):
/// - a budget not given is the default, raised to `max_model_len` without chunked prefill
///   (every prompt must fit one step), then held to `max_num_seqs × max_model_len`;
/// - `max_num_seqs` not given is the default, held to that budget.
///
/// vLLM refuses to start, as `SchedulerConfig.verify_max_model_len` (vllm/config/scheduler.py,
/// both releases) does, with a budget below `max_num_seqs`, or without chunked prefill below
/// `max_model_len`: the error is vLLM's message. Returns (sequences, tokens).
pub fn vllm_settled_limits(
    default: EngineLimits,
    given: (Option<u64>, Option<u64>),
    chunked: bool,
    max_model_len: u64,
) -> Result<(u64, u64), String> {
    let seqs = given.0.unwrap_or(default.max_num_seqs as u64);
    let tokens = match given.1 {
        Some(t) => t,
        None => {
            let t = default.max_num_batched_tokens as u64;
            let t = if chunked { t } else { t.max(max_model_len) };
            t.min(seqs.saturating_mul(max_model_len))
        }
    };
    let seqs = if given.0.is_none() { seqs.min(tokens) } else { seqs };
    if !chunked && tokens < max_model_len {
        return Err(format!(
            "{VLLM_NO_START} with max_num_batched_tokens {tokens} below max_model_len {max_model_len} without \
             chunked prefill: \"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({max_model_len}). This \
             effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer \
             sequences.\" (SchedulerConfig.verify_max_model_len, vllm/config/scheduler.py); give at least \
             {max_model_len}, or a shorter max_model_len"
        ));
    }
    if tokens < seqs {
        return Err(format!(
            "{VLLM_NO_START} with max_num_batched_tokens {tokens} below max_num_seqs {seqs}: \
             \"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs ({seqs}).\" \
             (SchedulerConfig.verify_max_model_len, vllm/config/scheduler.py); give max_num_seqs ≤ {tokens}, or a \
             larger max_num_batched_tokens"
        ));
    }
    Ok((seqs, tokens))
}

/// vLLM's `--prefill-schedule-interval` as servesim runs it (`[scheduler.batching]
/// prefill_schedule_interval`): one engine's own cadence, which vLLM applies from 0.33.0
/// (`Scheduler.__init__`, `local_prefill_interval`; 0.24.0–0.32.0 pace only DP ranks, through
/// their coordinator). Refused with DP attention, whose ranks vLLM's coordinator paces together
/// (not modelled), and under an `engine_version` before 0.33, where it changes nothing (`engine`:
/// the engine's rules, if the scenario has an engine).
pub(super) fn check_prefill_cadence(
    batching: &BatchingSpec,
    dp_attention: u32,
    engine: Option<LimitsFromGpu>,
    path: &str,
) -> Result<(), ConfigError> {
    let BatchingSpec::VllmV1(b) = batching else { return Ok(()) };
    let n = b.prefill_schedule_interval;
    if n <= 1 {
        return Ok(());
    }
    let at = format!("{path}.batching.prefill_schedule_interval");
    if dp_attention > 1 {
        return Err(ConfigError::at(
            &at,
            format!(
                "{n} with dp_attention = {dp_attention}: vLLM's DP coordinator paces all ranks' prefill together, \
                 which servesim does not model; leave it out"
            ),
        ));
    }
    let version = engine.filter(|e| e.engine == ServingEngine::Vllm).and_then(|e| e.version);
    match version.filter(|&v| v < VLLM_LOCAL_PREFILL_CADENCE_FROM) {
        Some((a, b, c)) => Err(ConfigError::at(
            &at,
            format!(
                "{n} under vLLM {a}.{b}.{c}: before 0.33.0 vLLM paces prefill only across DP ranks, and an engine \
                 alone runs prefill every step; leave it out"
            ),
        )),
        None => Ok(()),
    }
}

impl ServingEngine {
    /// The defaults that follow `engine_version` (an unreadable one is refused by the
    /// scenario's validation): the limits on the scenario's top-level `[gpu]` ([`LimitsFromGpu`],
    /// which each group takes again on its own GPU) and with a version vLLM's asynchronous
    /// scheduling as that release defaults it; `has` says which keys the file gives.
    fn apply_version_defaults(self, file: &mut ScenarioFile, has: &dyn Fn(&[&str]) -> bool) {
        let version = file.engine_version.as_deref().and_then(ServingEngine::version);
        let rule = LimitsFromGpu {
            engine: self,
            version,
            seqs: !has(&["scheduler", "max_num_seqs"]),
            tokens: !has(&["scheduler", "max_num_batched_tokens"]),
        };
        if let Ok(gpu) = file.gpu.resolve("gpu") {
            rule.apply(&mut file.scheduler, &gpu, file.cluster.dp_attention, None);
        }
        file.limits_from_gpu = Some(rule);
        // SGLang sizes it, or bounds a given one, by each rank's KV pool, known once the memory
        // is planned.
        if self == ServingEngine::Sglang {
            file.scheduler.seqs_from_pool = Some(SeqsFromPool {
                given: has(&["scheduler", "max_num_seqs"]),
                version: version.unwrap_or(crate::memory::SGLANG_NEWEST_READ),
            });
        }
        let vllm = self == ServingEngine::Vllm;
        if let Some(v) = version.filter(|_| vllm && !has(&["scheduler", "cpu", "overlap"])) {
            file.scheduler.cpu.overlap = Some(self.schedules_async_by_default(v, file.cluster.pp));
        }
        // vLLM's scheduler checks that a waiting request's whole sequence fits before admitting
        // it from 0.19.0 (`scheduler_reserve_full_isl`, vllm/config/scheduler.py; 0.18.1 has
        // none), where the file does not say.
        // From 0.31.0 a request alone takes the whole budget past `long_prefill_token_threshold`
        // (`Scheduler.schedule`, vllm/v1/core/sched/scheduler.py; 0.30.0 caps it), and from
        // 0.33.0 the priority policy's pass goes on past a request that preempted itself.
        if let (Some(v), BatchingSpec::VllmV1(b)) = (version.filter(|_| vllm), &mut file.scheduler.batching) {
            b.reserve_full_isl.get_or_insert(v >= VLLM_RESERVES_FULL_ISL_FROM);
            b.lone_request_uncapped.get_or_insert(v >= VLLM_LONE_REQUEST_UNCAPPED_FROM);
            b.priority_pass_continues.get_or_insert(v >= VLLM_PRIORITY_PASS_CONTINUES_FROM);
        }
    }

    /// A document whose `engine` a what-if changed (`compare --vary engine=...`): the kernel
    /// database goes with the engine, so `cost.database.framework` is left out for the engine's
    /// rules to fill in (another engine's database would be refused), and so does
    /// `engine_version` (one engine's release number says nothing of another's).
    pub fn varied_in(doc: &mut toml::Table) {
        doc.remove("engine_version");
        let db = doc.get_mut("cost").and_then(|c| c.get_mut("database")).and_then(toml::Value::as_table_mut);
        if let Some(db) = db {
            db.remove("framework");
        }
    }

    /// The limits the engine picks by itself on `gpu` (memory as the GPU reports it), at
    /// `version` where the engine's rule changed with it (`None`: the newest rule servesim
    /// has read):
    ///
    /// - vLLM: [`vllm_limits`], the OpenAI API server's defaults by release.
    /// - SGLang: `chunked_prefill_size` by release, [`crate::memory::sglang_chunked_prefill_size`].
    ///   Its `max_running_requests` is sized from the KV pool at start
    ///   ([`crate::memory::sglang_max_running_requests`]), which a scenario with `engine =
    ///   "sglang"` does once its memory is planned; 1024 here stands in before that.
    /// - TensorRT-LLM (`LlmArgs`): `max_batch_size` 2048, `max_num_tokens` 8192.
    pub fn default_limits(self, gpu: &GpuSpec, version: Option<EngineVersion>) -> EngineLimits {
        let (max_num_seqs, max_num_batched_tokens) = match self {
            ServingEngine::Vllm => return vllm_limits(gpu, version),
            ServingEngine::Sglang => (1024, crate::memory::sglang_chunked_prefill_size(gpu, version) as u32),
            ServingEngine::Trtllm => (2048, 8192),
        };
        EngineLimits { max_num_seqs, max_num_batched_tokens }
    }

    /// Whether the engine at `version` overlaps each step's CPU work with the GPU's by default,
    /// with `pp` pipeline stages: vLLM from 0.14.0, whose `SchedulerConfig.async_scheduling`
    /// defaults to `None`, which `VllmConfig.__post_init__` turns on unless something rules it
    /// out — pipeline parallelism in 0.14 (0.15 has no sdist on PyPI and is assumed to be as
    /// 0.14; 0.16.0 dropped the check), a drafter other than EAGLE/MTP, an executor that cannot
    /// (vllm/config/scheduler.py and vllm/config/vllm.py of each release's sdist; 0.13.0's
    /// default is `False`). No other engine's version-dependent default is modelled.
    pub fn schedules_async_by_default(self, version: EngineVersion, pp: u32) -> bool {
        self == ServingEngine::Vllm && version >= (0, 14, 0) && (pp <= 1 || version >= (0, 16, 0))
    }

    /// (major, minor, patch) of a version string: `0.14.1`, `v0.14.0`, `0.15.0rc1` (patch 0),
    /// `0.8` (patch 0); `None` if it has no numeric major and minor.
    pub fn version(v: &str) -> Option<EngineVersion> {
        let mut parts = v.strip_prefix('v').unwrap_or(v).split('.');
        let mut number = || parts.next().and_then(|p| p.parse::<u32>().ok());
        let (major, minor) = (number()?, number()?);
        let patch = parts.next().map_or(0, |p| {
            let digits = p.bytes().take_while(u8::is_ascii_digit).count();
            p[..digits].parse().unwrap_or(0)
        });
        Some((major, minor, patch))
    }

    /// The engine of a `validate --silicon` row's `backend` column, or a launch command's.
    pub fn from_name(name: &str) -> Option<ServingEngine> {
        match name {
            "vllm" => Some(ServingEngine::Vllm),
            "sglang" => Some(ServingEngine::Sglang),
            "trtllm" => Some(ServingEngine::Trtllm),
            _ => None,
        }
    }
}

/// vLLM's `--max-num-seqs` and `--max-num-batched-tokens` when `vllm serve` is not given them
/// (the `OPENAI_API_SERVER` usage context), by release, read from each release's sdist on PyPI
/// (`vllm/engine/arg_utils.py`: `_set_default_args_v1` up to 0.9.0, `get_batch_defaults`
/// after). "Memory" is what CUDA reports (`current_platform.get_device_total_memory()`: the
/// GPU's `visible_gib` where servesim knows it), names are matched as vLLM matches the device
/// name:
///
/// | release | sequences, tokens |
/// |---|---|
/// | 0.8.0–0.8.3 | 1024 on every GPU; 8192 on a GPU named H100 or H200, else 2048 |
/// | 0.8.4 | 1024, 8192 on a GPU named H100 or H200; else 256, 2048 |
/// | 0.8.5 | 1024, 8192 with ≥ 70 GiB; else 256, 2048 |
/// | 0.9.0–0.27 | 1024, 8192 with ≥ 70 GiB, the A100 excepted; else 256, 2048 |
/// | 0.28–0.32 | 1024, 16384 with ≥ 160 GiB (B200, B300, GB200); else as 0.27 |
/// | 0.33– | as 0.32, the GB10 (DGX Spark, matched by name here, by compute capability 12.1 in vLLM) kept to 256, 2048 |
///
/// A version before 0.8 (V0's engine, not modelled) gets 0.8.0's rule; `None`,
/// [`VLLM_NEWEST_READ`]'s.
pub fn vllm_limits(gpu: &GpuSpec, version: Option<EngineVersion>) -> EngineLimits {
    let v = version.unwrap_or(VLLM_NEWEST_READ);
    let gib = gpu.visible_bytes().map_or(gpu.memory_gib(), |b| b as f64 / (1u64 << 30) as f64);
    let name = gpu.name.to_ascii_lowercase();
    let named = |n: &str| name.contains(n);
    let gb10 = name.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "gb10");
    let hopper_by_name = named("h100") || named("h200");
    let limits = |max_num_seqs, max_num_batched_tokens| EngineLimits { max_num_seqs, max_num_batched_tokens };
    let (large, small) = (limits(1024, 8192), limits(256, 2048));
    if v < (0, 8, 4) {
        limits(1024, if hopper_by_name { 8192 } else { 2048 })
    } else if v < (0, 8, 5) {
        if hopper_by_name {
            large
        } else {
            small
        }
    } else if v < (0, 9, 0) {
        if gib >= 70.0 {
            large
        } else {
            small
        }
    } else if v >= (0, 28, 0) && gib >= 160.0 {
        limits(1024, 16384)
    } else if gib >= 70.0 && !named("a100") && !(gb10 && v >= (0, 33, 0)) {
        large
    } else {
        small
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::GpuPreset;

    /// vLLM's own settling of its two limits (`EngineArgs._set_default_args`,
    /// vllm/engine/arg_utils.py; `SchedulerConfig.verify_max_model_len`,
    /// vllm/config/scheduler.py; the 0.11.2 and 0.34.0 sdists alike), by hand on an H100
    /// (defaults 1024 sequences, 8192 tokens) with Llama-3.1-8B's context of 131,072 tokens.
    #[test]
    fn vllm_settles_its_limits_as_vllm_serve_does() {
        let d = EngineLimits { max_num_seqs: 1024, max_num_batched_tokens: 8192 };
        let ctx = 131_072;
        let settled = |given, chunked, len| vllm_settled_limits(d, given, chunked, len);
        assert_eq!(settled((None, None), true, ctx), Ok((1024, 8192)));
        // Without chunked prefill: min(1024 × 131072, max(131072, 8192)).
        assert_eq!(settled((None, None), false, ctx), Ok((1024, 131_072)));
        // ... unless the context is shorter than the default: max(4096, 8192).
        assert_eq!(settled((None, None), false, 4096), Ok((1024, 8192)));
        // A budget below the default sequences holds them: min(1024, 512).
        assert_eq!(settled((None, Some(512)), true, ctx), Ok((512, 512)));
        // A short context holds the default budget: min(4 × 1024, 8192).
        assert_eq!(settled((Some(4), None), true, 1024), Ok((4, 4096)));
        // What vLLM refuses to start with, in its words.
        let e = settled((Some(200), Some(100)), true, ctx).unwrap_err();
        assert!(
            e.contains("\"max_num_batched_tokens (100) must be greater than or equal to max_num_seqs (200).\""),
            "{e}"
        );
        // 10,000 sequences given, the budget the default: min(10000 × 131072, 8192) < 10000.
        let e = settled((Some(10_000), None), true, ctx).unwrap_err();
        assert!(e.contains("(8192) must be greater than or equal to max_num_seqs (10000)"), "{e}");
        let e = settled((None, Some(8192)), false, ctx).unwrap_err();
        assert!(e.contains("\"max_num_batched_tokens (8192) is smaller than max_model_len (131072)."), "{e}");
        assert_eq!(settled((None, Some(131_072)), false, ctx), Ok((1024, 131_072)));
    }

    /// vLLM's defaults by release, each cell read off that release's sdist
    /// (vllm/engine/arg_utils.py): the API server's (sequences, tokens).
    #[test]
    fn vllm_default_limits_follow_each_release() {
        let at = |gpu: &str, v: Option<EngineVersion>| {
            let l = vllm_limits(&GpuPreset::find(gpu).unwrap().spec(), v);
            (l.max_num_seqs, l.max_num_batched_tokens)
        };
        let cases: &[(&str, EngineVersion, (u32, u32))] = &[
            // 0.8.0-0.8.3: 1024 sequences everywhere, 8192 tokens only for a device named H100/H200.
            ("h100-sxm", (0, 8, 0), (1024, 8192)),
            ("l40s", (0, 8, 3), (1024, 2048)),
            ("b200", (0, 8, 3), (1024, 2048)),
            // 0.8.4: the H100/H200 names decide both.
            ("h200", (0, 8, 4), (1024, 8192)),
            ("b200", (0, 8, 4), (256, 2048)),
            ("a100-80g", (0, 8, 4), (256, 2048)),
            // 0.8.5: any GPU with 70 GiB, the A100 80GB included.
            ("a100-80g", (0, 8, 5), (1024, 8192)),
            ("b200", (0, 8, 5), (1024, 8192)),
            ("l40s", (0, 8, 5), (256, 2048)),
            // 0.9.0-0.27: the A100 excepted (PR #17885).
            ("a100-80g", (0, 9, 0), (256, 2048)),
            ("rtx-pro-6000", (0, 19, 0), (1024, 8192)),
            ("b200", (0, 27, 0), (1024, 8192)),
            // 0.28: 16384 tokens from 160 GiB; the H200 (139.81 GiB as CUDA reports it) stays.
            ("b200", (0, 28, 0), (1024, 16384)),
            ("b300", (0, 34, 0), (1024, 16384)),
            ("h200", (0, 34, 0), (1024, 8192)),
            ("h100-sxm", (0, 34, 0), (1024, 8192)),
            ("a100-80g", (0, 34, 0), (256, 2048)),
            ("l4", (0, 34, 0), (256, 2048)),
        ];
        for &(gpu, v, want) in cases {
            assert_eq!(at(gpu, Some(v)), want, "{gpu} at {v:?}");
        }
        // Without a version, the newest release read.
        assert_eq!(at("b200", None), at("b200", Some(VLLM_NEWEST_READ)));
        assert_eq!(at("b200", None), (1024, 16384));
        // The rule changes only where VLLM_LIMIT_RULES says: each release between two of its
        // entries gives the earlier entry's limits.
        for gpu in ["h100-sxm", "a100-80g", "b200", "l40s"] {
            for w in VLLM_LIMIT_RULES.windows(2) {
                let before_next = (w[1].0, w[1].1, w[1].2.saturating_sub(1));
                let before_next = if w[1].2 == 0 { (w[1].0, w[1].1 - 1, 9) } else { before_next };
                assert_eq!(at(gpu, Some(w[0])), at(gpu, Some(before_next)), "{gpu} {w:?}");
            }
        }
    }

    #[test]
    fn the_gb10_keeps_the_small_defaults_from_0_33() {
        let mut spark = GpuPreset::find("h100-sxm").unwrap().spec();
        spark.name = "gb10".into();
        spark.memory_bytes = 128 << 30;
        spark.visible_bytes = None;
        let at = |v| {
            let l = vllm_limits(&spark, Some(v));
            (l.max_num_seqs, l.max_num_batched_tokens)
        };
        assert_eq!((at((0, 32, 0)), at((0, 33, 0))), ((1024, 8192), (256, 2048)));
        // A name that only contains "gb10" is not the GB10.
        spark.name = "gb100".into();
        assert_eq!(vllm_limits(&spark, Some((0, 33, 0))).max_num_batched_tokens, 8192);
    }

    #[test]
    fn a_varied_engine_leaves_the_other_engines_release_and_database() {
        let mut doc: toml::Table =
            "engine = \"sglang\"\nengine_version = \"0.19.0\"\n[cost.database]\nframework = \"vllm\"\n"
                .parse()
                .unwrap();
        ServingEngine::varied_in(&mut doc);
        assert_eq!(doc.get("engine_version"), None);
        assert_eq!(doc["cost"]["database"].get("framework"), None);
        assert_eq!(doc["engine"].as_str(), Some("sglang"));
    }

    #[test]
    fn versions_read_as_releases() {
        let v = ServingEngine::version;
        assert_eq!(v("0.15.0rc1"), Some((0, 15, 0)));
        assert_eq!(v("v0.8.5.post1"), Some((0, 8, 5)));
        assert_eq!(v("0.8"), Some((0, 8, 0)));
        assert_eq!(v("0.14.1"), Some((0, 14, 1)));
        assert_eq!(v("nightly-5b8c30d62b754b57"), None);
        assert_eq!(v("0.x"), None);
        assert_eq!(v(""), None);
    }

    /// vllm/config/vllm.py: 0.13.0 defaults to off; 0.14.x on, off with pipeline stages;
    /// 0.16.0 on with them too.
    #[test]
    fn vllm_schedules_asynchronously_by_default_from_0_14() {
        let on = |v, pp| ServingEngine::Vllm.schedules_async_by_default(v, pp);
        assert!(!on((0, 13, 0), 1));
        assert!(on((0, 14, 0), 1));
        assert!(!on((0, 14, 1), 2));
        assert!(on((0, 16, 0), 2));
        assert!(!ServingEngine::Sglang.schedules_async_by_default((0, 16, 0), 1));
    }
}
