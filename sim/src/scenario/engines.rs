//! What servesim knows of each serving engine, in one place: the defaults `engine = "..."`
//! applies to a scenario, and the scheduler limits each engine chooses by itself on a GPU — read
//! by the scenario resolve, `scenario from-vllm` / `from-sglang` and `validate --silicon`.

use serde::{Deserialize, Serialize};

use super::file::ScenarioFile;
use crate::cost::CostSpec;
use crate::instance::batching::{BatchingSpec, Sglang, VllmV1};
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
    /// | `scheduler.max_num_seqs`, `max_num_batched_tokens` | [`ServingEngine::default_limits`] on the top-level `[gpu]` | same | same |
    /// | `scheduler.prefix_cache.enabled` | true | true (the radix cache) | — |
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
        // The engine's default limits on the scenario's GPU (its top-level `[gpu]`).
        if let Ok(gpu) = file.gpu.resolve("gpu") {
            let limits = self.default_limits(&gpu);
            if !has(&["scheduler", "max_num_seqs"]) {
                file.scheduler.max_num_seqs = limits.max_num_seqs;
            }
            if !has(&["scheduler", "max_num_batched_tokens"]) {
                file.scheduler.max_num_batched_tokens = limits.max_num_batched_tokens;
            }
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

impl ServingEngine {
    /// A document whose `engine` a what-if changed (`compare --vary engine=...`): the kernel
    /// database goes with the engine, so `cost.database.framework` is left out for the engine's
    /// rules to fill in (another engine's database would be refused).
    pub fn varied_in(doc: &mut toml::Table) {
        let db = doc.get_mut("cost").and_then(|c| c.get_mut("database")).and_then(toml::Value::as_table_mut);
        if let Some(db) = db {
            db.remove("framework");
        }
    }

    /// The limits the engine picks by itself on `gpu` (memory as the GPU reports it):
    ///
    /// - vLLM (`vllm/engine/arg_utils.py`, `EngineArgs.get_batch_defaults`, v0.11–0.19), for the
    ///   OpenAI API server: 1024 sequences and 8192 tokens on a GPU of ≥ 70 GiB other than the
    ///   A100, else 256 and 2048.
    /// - SGLang (`python/sglang/srt/server_args.py`, `ServerArgs._handle_gpu_memory_settings`):
    ///   `chunked_prefill_size` 2048 under 35 GiB, 4096 under 60 GiB, 8192 under 160 GiB, 16384
    ///   above. Its `max_running_requests` is sized from the KV pool at start; servesim assumes
    ///   1024.
    /// - TensorRT-LLM (`LlmArgs`): `max_batch_size` 2048, `max_num_tokens` 8192.
    pub fn default_limits(self, gpu: &GpuSpec) -> EngineLimits {
        let gib = gpu.memory_gib();
        let (max_num_seqs, max_num_batched_tokens) = match self {
            ServingEngine::Vllm if gib >= 70.0 && !gpu.name.starts_with("a100") => (1024, 8192),
            ServingEngine::Vllm => (256, 2048),
            ServingEngine::Sglang => (
                1024,
                if gib < 35.0 {
                    2048
                } else if gib < 60.0 {
                    4096
                } else if gib < 160.0 {
                    8192
                } else {
                    16384
                },
            ),
            ServingEngine::Trtllm => (2048, 8192),
        };
        EngineLimits { max_num_seqs, max_num_batched_tokens }
    }

    /// Whether the engine at `version` (major, minor) overlaps each step's CPU work with the
    /// GPU's by default: vLLM from 0.14, when asynchronous scheduling became its default
    /// (vllm-project/vllm PR #27614, "[Core] Enable async scheduling by default", the last step
    /// of the plan in issue #27679; 0.14 as its first release is read from downstream reports,
    /// deepjavalibrary/djl #3833 — an assumption: vLLM's release notes were not read). No other
    /// engine's version-dependent default is modelled.
    pub fn schedules_async_by_default(self, version: (u32, u32)) -> bool {
        self == ServingEngine::Vllm && version >= (0, 14)
    }

    /// (major, minor) of a version string: `0.14.1`, `v0.14.0`, `0.15.0rc1`; `None` if it has no
    /// numeric major and minor.
    pub fn version(v: &str) -> Option<(u32, u32)> {
        let mut parts = v.strip_prefix('v').unwrap_or(v).split('.').map(|p| p.parse::<u32>().ok());
        Some((parts.next()??, parts.next()??))
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
