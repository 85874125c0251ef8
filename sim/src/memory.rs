//! Per-GPU memory budget: weights, a workspace reserve, and what is left for paged KV blocks.
//!
//! ```text
//!   memory_bytes × gpu_memory_utilization
//!   ├── weights per GPU           (params × bytes / tp)
//!   ├── reserve                   (CUDA context, activations, logits; `memory.reserve_gib`)
//!   ├── windowed layers' KV       (max_num_seqs × (window + block) tokens; gpt-oss, Llama-4;
//!   │                              under vLLM's rule drawn from the KV blocks: SharedWindow;
//!   │                              under SGLang's a pool of their own: sglang_swa_pools)
//!   └── KV cache                  → floor(kv bytes / (block_tokens × KV bytes per token per GPU)) blocks
//! ```
//! Every GPU of a tensor-parallel instance holds the same number of blocks, each covering the same
//! `block_tokens` tokens (its share of the heads), so the instance's block count is one GPU's.
//!
//! `memory.engine = "vllm"` or `"sglang"` sizes the KV cache by that engine's own rule instead
//! (the terms are in [`EngineTerms`]):
//!
//! ```text
//!   vLLM   (vllm/v1/worker/gpu_worker.py, Worker.determine_available_memory; vllm/utils/mem_utils.py,
//!           memory_profiling):
//!     KV = total as CUDA sees it × gpu_memory_utilization
//!          − (weights + peak activation of the profiling run + non-torch memory [+ CUDA graphs])
//!   SGLang (model_runner.py, profile_max_num_token):
//!     KV = free memory at start-up × mem_fraction_static − weights
//! ```

use crate::spec::{GpuSpec, ModelSpec};

/// An engine release as (major, minor, patch), as `scenario::ServingEngine::version` reads it
/// (defined here, below the scenario layer that re-exports it, as SGLang's memory rule needs it).
pub type EngineVersion = (u32, u32, u32);

pub use crate::spec::GIB;

/// Fixed part of the default reserve: CUDA context, cuBLAS workspaces and CUDA graphs.
pub const DEFAULT_FIXED_RESERVE_BYTES: u64 = 1 << 30;

/// The inputs of the memory plan that come from the scheduler settings.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryConfig {
    pub tp: u64,
    /// Attention data-parallel ranks of the instance (1: none; see [`crate::cost::Layout`]).
    pub dp_attention: u64,
    /// Pipeline stages of the instance (1: none): each GPU holds its stage's layers.
    pub pp: u64,
    pub gpu_memory_utilization: f64,
    pub block_tokens: u64,
    /// Explicit reserve per GPU in bytes; `None` uses [`default_reserve_bytes`].
    pub reserve_bytes: Option<u64>,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: u64,
    /// KV blocks per GPU as the engine reported them (vLLM's "# GPU blocks", SGLang's
    /// max_total_num_tokens ÷ page size): pinned instead of computed (`memory.kv_blocks`).
    pub kv_blocks: Option<u64>,
    /// Whose rule sizes the KV cache, with the terms only a real start-up measures.
    pub engine: EngineMemory,
}

/// Whose rule sizes the KV cache (`memory.engine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryEngine {
    /// servesim's own: weights, a reserve ([`default_reserve_bytes`]), the rest for KV.
    #[default]
    Servesim,
    /// vLLM V1's profiling rule.
    Vllm,
    /// SGLang's `mem_fraction_static` rule.
    Sglang,
    /// TensorRT-LLM's `free_gpu_memory_fraction` rule (PyTorch executor).
    Trtllm,
}

impl MemoryEngine {
    pub fn is_servesim(&self) -> bool {
        *self == MemoryEngine::Servesim
    }

    pub fn name(self) -> &'static str {
        match self {
            MemoryEngine::Servesim => "servesim",
            MemoryEngine::Vllm => "vllm",
            MemoryEngine::Sglang => "sglang",
            MemoryEngine::Trtllm => "trtllm",
        }
    }
}

/// The engine rule and the inputs a start-up log measures, which servesim otherwise estimates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineMemory {
    pub engine: MemoryEngine,
    /// vLLM: the "non-torch memory" its profiling run adds (NCCL, cuBLAS and attention
    /// workspaces); SGLang: the memory already in use when it measures the free memory (CUDA
    /// context, NCCL). `None`: [`default_non_torch_bytes`].
    pub non_torch_bytes: Option<u64>,
    /// vLLM: CUDA-graph memory counted against the budget. vLLM before its CUDA-graph memory
    /// profiling took the graphs from outside the budget (0); with it, its estimate is
    /// subtracted ("Estimated CUDA graph memory: X GiB" in the log). `None`: 0.
    pub cuda_graph_bytes: Option<u64>,
    /// SGLang's `--mem-fraction-static`; `None`: [`sglang_mem_fraction_static`].
    pub mem_fraction_static: Option<f64>,
    /// SGLang's `--cuda-graph-max-bs`, which its default fraction reserves memory for; `None`:
    /// [`sglang_cuda_graph_max_bs`].
    pub cuda_graph_max_bs: Option<u64>,
    /// The engine's release (`engine_version`), where its rule changed with it: SGLang's.
    pub engine_version: Option<EngineVersion>,
    /// SGLang's `--max-total-tokens`: each scheduler's pool is at most this many tokens.
    pub max_total_tokens: Option<u64>,
    /// vLLM's `--kv-cache-memory-bytes`: the KV cache of each GPU, in place of what
    /// gpu_memory_utilization leaves.
    pub kv_cache_bytes: Option<u64>,
    /// vLLM's `--disable-hybrid-kv-cache-manager`, SGLang's `--disable-hybrid-swa-memory`:
    /// windowed layers stored as full attention.
    pub disable_hybrid_kv_cache: bool,
    /// SGLang's `--swa-full-tokens-ratio`; `None`: [`SGLANG_SWA_FULL_TOKENS_RATIO`].
    pub swa_full_tokens_ratio: Option<f64>,
}

/// SGLang's default `--swa-full-tokens-ratio` (server_args.py, 0.5.3 to 0.5.15).
pub const SGLANG_SWA_FULL_TOKENS_RATIO: f64 = 0.8;

/// Every term of an engine's rule, as `servesim memory --engine` shows them (bytes per GPU).
#[derive(Clone, Debug, PartialEq)]
pub struct EngineTerms {
    pub engine: MemoryEngine,
    /// The GPU's memory as CUDA reports it (`torch.cuda.mem_get_info()[1]`).
    pub visible_bytes: u64,
    /// Whether `visible_bytes` is a measured CUDA total; false: the nominal capacity stands in.
    pub visible_measured: bool,
    /// vLLM: gpu_memory_utilization; SGLang: mem_fraction_static.
    pub fraction: f64,
    /// The weights as counted by parameters (without the RoPE table).
    pub parameter_bytes: u64,
    /// The RoPE cos/sin table every GPU holds: max_position_embeddings × rotary dim × 2 bytes.
    pub rope_cache_bytes: u64,
    /// vLLM's profiling forward pass at max_num_batched_tokens: its largest live activations.
    pub forward_peak_bytes: u64,
    /// vLLM's dummy sampler run over min(max_num_seqs, max_num_batched_tokens) sequences.
    pub sampler_peak_bytes: u64,
    /// vLLM's "peak activation": the larger of the two.
    pub activation_bytes: u64,
    /// See [`EngineMemory::non_torch_bytes`].
    pub non_torch_bytes: u64,
    pub non_torch_estimated: bool,
    pub cuda_graph_bytes: u64,
}

/// The memory budget of one GPU of an instance.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryBudget {
    pub memory_bytes: u64,
    pub usable_bytes: u64,
    pub weight_bytes: u64,
    pub reserve_bytes: u64,
    pub kv_bytes: u64,
    pub kv_bytes_per_token: u64,
    pub block_tokens: u64,
    pub(crate) block_bytes: u64,
    /// The instance's blocks: one GPU's, times the attention DP ranks (each rank's GPUs hold
    /// their own sequences).
    pub kv_blocks: u64,
    /// KV of the windowed layers: set apart, `max_num_seqs` sequences × (window + one block)
    /// tokens × their bytes per token; under SGLang's rule its sliding-window pool
    /// ([`Self::swa_tokens`]); 0 without windowed layers, or where they take their blocks from
    /// the pool ([`Self::window`]). The paged blocks cover the full-attention layers.
    pub window_kv_bytes: u64,
    /// The windowed layers take their blocks from the same pool as the full-attention ones as
    /// each request runs (vLLM's hybrid KV cache manager), instead of memory set apart.
    pub window: Option<SharedWindow>,
    /// SGLang's sliding-window pool, tokens ([`sglang_swa_pools`]; `window_kv_bytes` are its
    /// bytes), 0 otherwise.
    pub swa_tokens: u64,
    /// The engine rule's terms (`memory.engine` other than servesim; not for a pinned count).
    pub terms: Option<EngineTerms>,
}

/// vLLM's hybrid KV cache manager (`_get_kv_cache_groups_uniform_page_size` and
/// `get_kv_cache_config_from_groups`, vllm/v1/core/kv_cache_utils.py at 0.11.0): the layers are
/// grouped by attention type into groups of as many layers as the fewest of one type (the
/// full-attention ones for gpt-oss and for any model with at least as many windowed layers), and
/// every group takes its blocks from one pool of `available ÷ (page × group size)` blocks. A
/// request holds, per full-attention group, a block for every 16 tokens, and per sliding-window
/// group only the blocks from the one holding token `computed − window + 1` on
/// (`SlidingWindowManager.remove_skipped_blocks`): the blocks its step writes are taken first
/// and those that slid out are freed when it is next scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedWindow {
    /// The sliding window, tokens.
    pub tokens: u64,
    /// Sliding-window groups per full-attention group: ⌈windowed ÷ full-attention layers⌉ (the
    /// last one padded, as vLLM pads it); each block of the window takes this many of the pool.
    pub groups: u64,
    /// The windowed layers' bytes per block on one GPU, and the tokens of one request's window
    /// vLLM's start-up check counts (`SlidingWindowSpec.max_memory_usage_bytes`, window − 1 +
    /// `max_num_batched_tokens`): [`MemoryBudget::vllm_longest_request`].
    pub block_bytes: u64,
    pub check_tokens: u64,
}

impl SharedWindow {
    /// The index of the first block a request with `computed` tokens in the cache still reads:
    /// vLLM's `last_useful_block`, `(computed − window + 1) ÷ block_tokens`, 0 while the window
    /// reaches back to the first token.
    #[inline]
    pub fn first_block(&self, computed: u64, block_tokens: u64) -> u64 {
        (computed + 1).saturating_sub(self.tokens) / block_tokens
    }

    /// Pool blocks the windowed layers of a request hold for a step of `step` tokens on
    /// `computed` ones: the blocks from [`Self::first_block`] to the one the step ends in.
    #[inline]
    pub fn blocks(&self, computed: u64, step: u64, block_tokens: u64) -> u64 {
        let end = (computed + step).div_ceil(block_tokens);
        (end - self.first_block(computed, block_tokens).min(end)) * self.groups
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "{model} does not fit {at}: weights {weights:.2} GiB + reserve {reserve:.2} GiB \
         per GPU exceed the {usable:.2} GiB usable at {rule} by {short:.2} GiB"
    )]
    DoesNotFit {
        model: String,
        /// `on <gpu> at tp <tp>` (and the pipeline stage).
        at: String,
        weights: f64,
        reserve: f64,
        usable: f64,
        rule: String,
        short: f64,
    },
    #[error("{model} leaves room for no KV block {at}: {kv_bytes} bytes free, one block needs {block_bytes}")]
    NoKvBlock { model: String, at: String, kv_bytes: u64, block_bytes: u64 },
    /// Speculative decoding: the draft model's weights take all the KV memory left.
    #[error("the draft model's {weights:.2} GiB of weights per GPU leave no room for KV ({kv:.2} GiB)")]
    DraftWeights { weights: f64, kv: f64 },
    /// Speculative decoding: the draft's KV per token leaves no whole block.
    #[error("target and draft leave room for no KV block")]
    DraftNoKvBlock,
    /// A pinned block count that cannot fit beside the weights.
    #[error(
        "{blocks} KV blocks of {block_bytes} bytes ({kv:.2} GiB) and {weights:.2} GiB of weights exceed the \
         {gpu}'s {memory:.2} GiB"
    )]
    PinnedTooMany { blocks: u64, block_bytes: u64, kv: f64, weights: f64, gpu: String, memory: f64 },
}

/// Default reserve per GPU: 1 GiB fixed, plus the activations of the largest batch
/// (`max_num_batched_tokens` tokens × (4 × hidden + 2 × FFN width per GPU) bf16 values) and
/// the fp32 logits of `max_num_seqs` sequences over this GPU's vocabulary shard. This is the
/// quantity vLLM measures in its profiling run; the formula keeps it explainable.
pub fn default_reserve_bytes(model: &ModelSpec, cfg: &MemoryConfig) -> u64 {
    // In floating point, so that absurd batch limits saturate (and do not fit) instead of
    // wrapping around to a small reserve.
    let f = |x: u64| x as f64;
    let moe_ffn = (model.top_k + model.arch.shared_experts) * model.intermediate;
    let widest = if model.moe_layers() > 0 { moe_ffn.max(model.dense_ffn_width()) } else { model.intermediate };
    let ffn_per_gpu = f(widest / cfg.tp);
    let activations = f(cfg.max_num_batched_tokens) * (4.0 * f(model.hidden) + 2.0 * ffn_per_gpu) * 2.0;
    let logits = f(cfg.max_num_seqs) * f(model.vocab.div_ceil(cfg.tp)) * 4.0;
    (f(DEFAULT_FIXED_RESERVE_BYTES) + activations + logits) as u64
}

pub fn plan_memory(model: &ModelSpec, gpu: &GpuSpec, cfg: &MemoryConfig) -> Result<MemoryBudget, MemoryError> {
    if cfg.pp <= 1 {
        // Under DP attention each rank of tp / dp GPUs holds the attention weights and its own
        // sequences' KV; the FFNs and the embeddings are split over all tp GPUs.
        let dp = cfg.dp_attention.max(1);
        let weights = model.weight_bytes_per_gpu_dp(cfg.tp, dp);
        return plan_stage(model, gpu, cfg, weights, model, cfg.tp.to_string());
    }
    // Pipeline stages: each GPU holds its stage's layers (vLLM's partition) and their KV; the
    // first stage the embedding, the last the LM head (a tied one too: vLLM loads it there).
    // Every stage's GPUs hold the same blocks (a sequence's KV lives on every stage), so the
    // instance has the fewest any stage has room for.
    let stages = crate::spec::stage_layers(model.layers, cfg.pp);
    let d = model.weight_dtype;
    let head = if d.is_4bit() { crate::spec::Dtype::Bf16 } else { d }.bytes_for(model.vocab * model.hidden);
    let embedding = if d.is_4bit() { crate::spec::Dtype::Bf16 } else { d }.bytes_for(model.embedding_params());
    let body = model.weight_bytes().saturating_sub(embedding);
    let last = stages.len() - 1;
    let mut best: Option<MemoryBudget> = None;
    for (j, &n) in stages.iter().enumerate() {
        let ends = u64::from(j == 0) + u64::from(j == last);
        let weights = (body as f64 * n as f64 / model.layers as f64).ceil() as u64 + ends * head;
        let stage = model.pipeline_stage(n);
        let what = format!("{} × pp {} (stage {} of {}: {n} layers)", cfg.tp, cfg.pp, j + 1, stages.len());
        let b = plan_stage(&stage, gpu, cfg, weights.div_ceil(cfg.tp), model, what)?;
        if best.as_ref().is_none_or(|x| b.kv_blocks < x.kv_blocks) {
            best = Some(b);
        }
    }
    Ok(best.expect("pp ≥ 2 stages"))
}

/// One GPU's budget: `stage` holds the layers whose KV it stores (the whole model without
/// pipeline stages), `weight_bytes` its weights; `whole` names the model in errors, `what` the
/// parallelism.
fn plan_stage(
    stage: &ModelSpec,
    gpu: &GpuSpec,
    cfg: &MemoryConfig,
    weight_bytes: u64,
    whole: &ModelSpec,
    what: String,
) -> Result<MemoryBudget, MemoryError> {
    let (dp, mut weight_bytes) = (cfg.dp_attention.max(1), weight_bytes);
    let model = &*kv_layout(stage, gpu, cfg);
    let kv_bytes_per_token = model.kv_bytes_per_token_per_gpu(cfg.tp / dp);
    let block_bytes = kv_bytes_per_token * cfg.block_tokens;
    if let Some(n) = cfg.kv_blocks {
        let b = pinned_memory(gpu, cfg, n, weight_bytes, block_bytes)?;
        return Ok(MemoryBudget { window: shared_window(model, cfg), ..b });
    }
    let (usable_bytes, reserve_bytes, rule, terms) = engine_budget(model, gpu, cfg, &mut weight_bytes);
    // Weights and `reserve` (GiB shown as the reserve) past `usable` under `rule`.
    let does_not_fit = |reserve: u64, usable: u64, rule: String| MemoryError::DoesNotFit {
        model: whole.name.clone(),
        at: format!("on {} at tp {what}", gpu.name),
        weights: weight_bytes as f64 / GIB,
        reserve: reserve as f64 / GIB,
        usable: usable as f64 / GIB,
        rule,
        short: weight_bytes.saturating_add(reserve).saturating_sub(usable) as f64 / GIB,
    };
    // vLLM's kv_cache_memory_bytes beside the weights and the reserve must fit the GPU.
    let visible = terms.as_ref().map_or(gpu.memory_bytes, |t| t.visible_bytes);
    if cfg.engine.kv_cache_bytes.is_some() && cfg.engine.engine == MemoryEngine::Vllm && usable_bytes > visible {
        let rule = format!("the GPU's memory as CUDA reports it, the reserve holding {rule}");
        return Err(does_not_fit(usable_bytes - weight_bytes, visible, rule));
    }
    let (window, mut window_kv_bytes) = window_kv(model, cfg);
    let needed = weight_bytes.saturating_add(reserve_bytes).saturating_add(window_kv_bytes);
    if needed > usable_bytes {
        return Err(does_not_fit(reserve_bytes.saturating_add(window_kv_bytes), usable_bytes, rule));
    }
    let (kv_bytes, swa) = sglang_kv(model, cfg, usable_bytes - needed, block_bytes);
    window_kv_bytes = swa.map_or(window_kv_bytes, |p| p.swa_bytes);
    // vLLM: available // page_size // group size (kv_cache_utils.get_num_blocks), the same floor as
    // here as every such layer's page is the same size; SGLang: rest // cell_size, whole pages.
    let kv_blocks = kv_bytes / block_bytes * dp;
    if kv_blocks == 0 {
        return Err(MemoryError::NoKvBlock {
            model: whole.name.clone(),
            at: format!("on {} at tp {what}", gpu.name),
            kv_bytes,
            block_bytes,
        });
    }
    Ok(MemoryBudget {
        memory_bytes: gpu.memory_bytes,
        usable_bytes,
        weight_bytes,
        reserve_bytes,
        kv_bytes,
        kv_bytes_per_token,
        block_tokens: cfg.block_tokens,
        block_bytes,
        kv_blocks,
        window_kv_bytes,
        window,
        swa_tokens: swa.map_or(0, |p| p.swa_tokens),
        terms,
    })
}

/// The windowed layers' terms: drawn from the pool under vLLM ([`shared_window`]), in a pool of
/// their own under SGLang ([`sglang_swa_pools`], sized once the KV memory is known), else set
/// apart ([`window_set_apart`]).
fn window_kv(model: &ModelSpec, cfg: &MemoryConfig) -> (Option<SharedWindow>, u64) {
    match shared_window(model, cfg) {
        Some(w) => (Some(w), 0),
        None if sglang_swa(model, cfg).is_some() => (None, 0),
        None => (None, window_set_apart(model, cfg)),
    }
}

/// The KV bytes of `available` SGLang gives the full-attention pool: all of them, or where
/// sliding windows have a pool of their own, its share ([`sglang_swa_pools`]); at most
/// `--max-total-tokens` (`_apply_token_constraints`, model_runner_kv_cache_mixin.py at 0.5.15).
fn sglang_kv(model: &ModelSpec, cfg: &MemoryConfig, available: u64, block_bytes: u64) -> (u64, Option<SwaPools>) {
    let cap = cfg.engine.max_total_tokens.filter(|_| cfg.engine.engine == MemoryEngine::Sglang);
    let swa = sglang_swa_pools(model, cfg, available, cap);
    let kv_bytes = match (swa, cap) {
        // The pools are sized under the cap already.
        (Some(p), _) => p.full_bytes,
        (None, Some(cap)) => available.min(cap / cfg.block_tokens * block_bytes),
        (None, None) => available,
    };
    (kv_bytes, swa)
}

/// SGLang's two pools for a model with sliding windows beside full attention.
#[derive(Clone, Copy)]
struct SwaPools {
    full_bytes: u64,
    swa_bytes: u64,
    swa_tokens: u64,
}

/// Under SGLang's rule, a model with sliding windows beside full attention: (full-attention,
/// windowed layers' bytes a token on one GPU, the ratio).
fn sglang_swa(model: &ModelSpec, cfg: &MemoryConfig) -> Option<(u64, u64, f64)> {
    let w = model.arch.window?;
    let hybrid = cfg.engine.engine == MemoryEngine::Sglang && !w.chunked && model.full_attention_layers() > 0;
    let tp = cfg.tp / cfg.dp_attention.max(1);
    let ratio = cfg.engine.swa_full_tokens_ratio.unwrap_or(SGLANG_SWA_FULL_TOKENS_RATIO);
    hybrid.then(|| (model.kv_bytes_per_token_per_gpu(tp), model.window_kv_bytes_per_token_per_gpu(tp), ratio))
}

/// SGLang's hybrid SWA memory (`HybridSWAPoolConfigurator`, model_executor/pool_configurator.py
/// at 0.5.15; `set_num_token_hybrid`, model_runner.py at 0.5.3): of `available` bytes, a
/// full-attention pool of ⌊available ÷ (F + ratio × S)⌋ tokens (F, S: the full-attention and
/// windowed layers' bytes a token), in whole pages, and a sliding-window pool of `ratio` × as
/// many, where the windowed layers keep only their windows; a `cap` (`--max-total-tokens`) on
/// the full-attention tokens sizes both (`calculate_pool_sizes_from_max_tokens`). Under SGLang's
/// default ratio of 0.8 the windowed pool holds whatever windows the full pool's requests need
/// (a request's window never holds more tokens than its full-attention KV), so runs draw on the
/// full pool alone.
fn sglang_swa_pools(model: &ModelSpec, cfg: &MemoryConfig, available: u64, cap: Option<u64>) -> Option<SwaPools> {
    let (f, s, ratio) = sglang_swa(model, cfg)?;
    let bt = cfg.block_tokens;
    let fit = (available as f64 / (f as f64 + ratio * s as f64)).floor() as u64;
    let full_tokens = cap.map_or(fit, |c| c.min(fit)) / bt * bt;
    let swa_tokens = (full_tokens as f64 * ratio) as u64 / bt * bt;
    Some(SwaPools { full_bytes: full_tokens * f, swa_bytes: swa_tokens * s, swa_tokens })
}

/// The layers as the engine stores their KV: every layer's as full attention where the engine
/// keeps no separate account of the windows. vLLM turns its hybrid manager off for chunked local
/// attention (VllmConfig.__post_init__, vllm/config/vllm.py at 0.11.2 and 0.34.0, unless
/// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE) or when told to, and then stores every
/// layer's KV as full attention (`unify_hybrid_kv_cache_specs`, vllm/v1/core/kv_cache_utils.py at
/// 0.11.0); SGLang does so where its hybrid SWA memory is off ([`sglang_hybrid_swa`]).
fn kv_layout<'a>(stage: &'a ModelSpec, gpu: &GpuSpec, cfg: &MemoryConfig) -> std::borrow::Cow<'a, ModelSpec> {
    let unify = match (cfg.engine.engine, stage.arch.window) {
        (MemoryEngine::Vllm, Some(w)) => w.chunked || cfg.engine.disable_hybrid_kv_cache,
        (MemoryEngine::Sglang, Some(w)) => {
            !w.chunked && (cfg.engine.disable_hybrid_kv_cache || !sglang_hybrid_swa(stage, gpu, cfg))
        }
        _ => false,
    };
    if !unify {
        return std::borrow::Cow::Borrowed(stage);
    }
    std::borrow::Cow::Owned(ModelSpec { arch: crate::spec::Arch { window: None, ..stage.arch }, ..stage.clone() })
}

/// Whether SGLang keeps a model's sliding windows in a pool of their own. For gpt-oss its
/// server_args turn the hybrid SWA memory off before 0.5.8 (`disable_hybrid_swa_memory = True`
/// for GptOssForCausalLM, server_args.py at 0.5.3 and 0.5.6), and in 0.5.8 and 0.5.9 with the
/// trtllm_mha attention backend, its default on Blackwell (taken here as a GPU with FP4 tensor
/// cores); from 0.5.10 on, and without a release (the newest read, 0.5.15), it stays on. Other
/// windowed models (not Llama 4's chunked attention): on, as in `ModelRunner.__init__` (0.5.3).
fn sglang_hybrid_swa(model: &ModelSpec, gpu: &GpuSpec, cfg: &MemoryConfig) -> bool {
    if !model.name.starts_with("gpt-oss") {
        return true;
    }
    match cfg.engine.engine_version {
        Some(v) if v < (0, 5, 8) => false,
        Some(v) if v < (0, 5, 10) => !gpu.has_fp4(),
        _ => true,
    }
}

/// The windowed layers under vLLM's hybrid KV cache manager ([`SharedWindow`]): sliding windows
/// on at least as many layers as attend fully. Otherwise (other engines, windows on fewer layers
/// than the full-attention ones, no full-attention layer) their KV is set apart.
fn shared_window(model: &ModelSpec, cfg: &MemoryConfig) -> Option<SharedWindow> {
    let w = model.arch.window?;
    let full = model.full_attention_layers();
    let hybrid = cfg.engine.engine == MemoryEngine::Vllm && !w.chunked && full > 0 && w.layers >= full;
    let dp = cfg.dp_attention.max(1);
    hybrid.then(|| SharedWindow {
        tokens: w.tokens,
        groups: w.layers.min(model.layers).div_ceil(full),
        block_bytes: model.window_kv_bytes_per_token_per_gpu(cfg.tp / dp).saturating_mul(cfg.block_tokens),
        check_tokens: (w.tokens - 1).saturating_add(cfg.max_num_batched_tokens),
    })
}

/// The windowed layers' KV one GPU sets apart ([`MemoryBudget::window_kv_bytes`]): each of a DP
/// attention rank's `max_num_seqs` sequences holding its window and one block.
fn window_set_apart(model: &ModelSpec, cfg: &MemoryConfig) -> u64 {
    let dp = cfg.dp_attention.max(1);
    model.arch.window.map_or(0, |w| {
        let tokens = (w.tokens + cfg.block_tokens).min(model.max_context.max(1));
        let seqs = cfg.max_num_seqs.div_ceil(dp);
        seqs.saturating_mul(tokens).saturating_mul(model.window_kv_bytes_per_token_per_gpu(cfg.tp / dp))
    })
}

/// The bytes an engine's rule makes usable for weights, reserve and KV on one GPU, the reserve,
/// the rule in words, and its terms; `weight_bytes` gains what the rule counts with the weights
/// (the RoPE table).
fn engine_budget(
    model: &ModelSpec,
    gpu: &GpuSpec,
    cfg: &MemoryConfig,
    weight_bytes: &mut u64,
) -> (u64, u64, String, Option<EngineTerms>) {
    match cfg.engine.engine {
        MemoryEngine::Servesim => {
            let usable = (gpu.memory_bytes as f64 * cfg.gpu_memory_utilization).floor() as u64;
            let reserve = cfg.reserve_bytes.unwrap_or_else(|| default_reserve_bytes(model, cfg));
            (usable, reserve, format!("gpu_memory_utilization {}", cfg.gpu_memory_utilization), None)
        }
        MemoryEngine::Trtllm => {
            let t = engine_terms(model, gpu, cfg, *weight_bytes);
            *weight_bytes += t.rope_cache_bytes;
            // KvCacheCreator._cal_max_tokens (tensorrt_llm/_torch/pyexecutor/_util.py): the KV
            // cache gets (total − peak) × free_gpu_memory_fraction, the peak being the weights,
            // the profiling forward's activations and what lies outside torch.
            let reserve = t.activation_bytes.saturating_add(t.non_torch_bytes);
            let peak = weight_bytes.saturating_add(reserve);
            let usable = match t.visible_bytes.checked_sub(peak) {
                Some(free) => peak + (free as f64 * t.fraction).floor() as u64,
                None => t.visible_bytes,
            };
            (usable, reserve, format!("TensorRT-LLM's free_gpu_memory_fraction {}", t.fraction), Some(t))
        }
        MemoryEngine::Vllm | MemoryEngine::Sglang => {
            let t = engine_terms(model, gpu, cfg, *weight_bytes);
            *weight_bytes += t.rope_cache_bytes;
            if t.engine == MemoryEngine::Vllm {
                // requested_memory = total × gpu_memory_utilization (a float; int() at the end).
                let usable = (t.visible_bytes as f64 * t.fraction).floor() as u64;
                let reserve = t.activation_bytes.saturating_add(t.non_torch_bytes).saturating_add(t.cuda_graph_bytes);
                if let Some(kv) = cfg.engine.kv_cache_bytes {
                    // kv_cache_memory_bytes: the KV cache is that, whatever the fraction
                    // (Worker.determine_available_memory, vllm/v1/worker/gpu_worker.py at 0.34.0);
                    // plan_stage checks it against the GPU.
                    let usable = weight_bytes.saturating_add(reserve).saturating_add(kv);
                    return (
                        usable,
                        reserve,
                        format!("vLLM's kv_cache_memory_bytes {:.2} GiB", kv as f64 / GIB),
                        Some(t),
                    );
                }
                (usable, reserve, format!("vLLM's gpu_memory_utilization {}", t.fraction), Some(t))
            } else {
                // rest = free after weights − free at start × (1 − f) = free at start × f − weights.
                let free = t.visible_bytes.saturating_sub(t.non_torch_bytes);
                let usable = (free as f64 * t.fraction).floor() as u64;
                (usable, 0, format!("SGLang's mem_fraction_static {}", t.fraction), Some(t))
            }
        }
    }
}

/// Bytes the dummy sampler run of vLLM's profiling keeps alive per (sequence × vocabulary
/// entry) at its peak, counted from `vllm/v1/sample/ops/topk_topp_sampler.py`
/// (`apply_top_k_top_p`, vllm-project/vllm 3babc05a) with top-k and top-p both on, as the dummy
/// run sets them: the bf16 logits (2), their fp32 copy (4), the raw log-probs (4), the sorted
/// logits (4) and their int64 indices (8), the top-k mask (1), the top-p softmax and its
/// in-place cumsum (4), the top-p mask (1) and the scattered result (4).
pub const VLLM_SAMPLER_BYTES_PER_LOGIT: u64 = 32;

/// Default [`EngineMemory::non_torch_bytes`]. vLLM's profiling adds little outside torch on
/// one GPU — 0.02, 0.04 and 0.07 GiB in three published start-up logs (docs/fidelity.md lists
/// them) — so 0.05 GiB; with TP the NCCL and custom all-reduce
/// buffers add about a GiB (0.95 and 1.38 GiB logged), so 1 GiB. SGLang measures free memory
/// after the CUDA context and NCCL are up: 0.53 GiB in use on one H100 and 0.60 GiB per GPU on
/// H200 with TP in vLLM's start-up lines ("Free memory on device (78.66/79.19 GiB) on
/// startup"). Estimates from logs, not measured here: a log of your own beats them
/// (`memory.non_torch_gib`).
pub fn default_non_torch_bytes(engine: MemoryEngine, tp: u64) -> u64 {
    let gib = match (engine, tp > 1) {
        (MemoryEngine::Sglang, false) => 0.53,
        (MemoryEngine::Sglang, true) => 0.60,
        (_, false) => 0.05,
        (_, true) => 1.0,
    };
    (gib * GIB) as u64
}

/// The newest SGLang release whose memory defaults servesim has read: what a scenario without
/// an `engine_version` is taken to run.
pub const SGLANG_NEWEST_READ: EngineVersion = (0, 5, 15);

/// What SGLang's default `mem_fraction_static` depends on besides the GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SglangServer {
    /// The release (`None`: [`SGLANG_NEWEST_READ`]).
    pub version: Option<EngineVersion>,
    pub tp: u64,
    pub pp: u64,
    /// DP attention ranks (1: none).
    pub dp_attention: u64,
    /// The server's `--chunked-prefill-size` (all ranks').
    pub chunked_prefill_size: u64,
    /// A latent-attention model (SGLang's MLA backend).
    pub mla: bool,
    /// `--cuda-graph-max-bs` (or the largest of `--cuda-graph-bs`); `None`: SGLang's default,
    /// [`sglang_cuda_graph_max_bs`].
    pub cuda_graph_max_bs: Option<u64>,
}

/// SGLang's `--chunked-prefill-size` when the command gives none, by the GPU's memory (MiB, as
/// nvidia-smi reports it, which SGLang reads) and release (python/sglang/srt/server_args.py of
/// each sdist): 2048 under 35 GiB, 8192 under 160 GiB, 16384 above (0.4.8–0.5.2); from 0.5.3
/// also 4096 from 35 to 60 GiB. EngineVersions before 0.4.8 are given 0.4.8's.
pub fn sglang_chunked_prefill_size(gpu: &GpuSpec, version: Option<EngineVersion>) -> u64 {
    let v = version.unwrap_or(SGLANG_NEWEST_READ);
    match gpu.memory_gib() {
        g if g < 35.0 => 2048,
        g if g < 60.0 && v >= (0, 5, 3) => 4096,
        g if g < 160.0 => 8192,
        _ => 16384,
    }
}

/// SGLang's default `mem_fraction_static` (python/sglang/srt/server_args.py of each release's
/// sdist; GPU memory in MiB as nvidia-smi reports it; rounded to 3 decimals):
///
/// - 0.4.8–0.5.2 (`ServerArgs.__post_init__`): the memory less a reserve of (2.8 + P/10) GiB
///   under 35 GiB, (9.5 + P/2) GiB under 90 GiB, (12 + P/2) GiB under 160 GiB, 32 GiB above
///   (P = TP × PP), plus 4 GiB with DP attention. EngineVersions before 0.4.8 are given this rule.
/// - 0.5.3–0.5.9 (`_handle_gpu_memory_settings`): a reserve in MiB of 512 + 1.5 × max(chunked
///   prefill size, 2048) + 2 × the CUDA graphs' largest batch
///   ([`sglang_cuda_graph_max_bs`]) + TP × PP / 8 × 1024, with DP attention + 3 × that batch ×
///   ranks (and + 1.5 × it × ranks above a batch of 300), at least 10 GiB on a GPU of more than
///   60 GiB.
/// - From 0.5.10: the same, plus the prefill's piecewise CUDA graphs, on by default unless
///   DP attention or pipeline stages turn them off: 8 MiB per captured size up to the chunked
///   prefill size ([`sglang_piecewise_sizes`]), or 1.5 GiB with the MLA backend. Read for
///   0.5.10.post1 and 0.5.15; the other conditions that turn them off (speculative decoding,
///   LoRA, multimodal models, models SGLang lists) are not modelled.
pub fn sglang_mem_fraction_static(gpu: &GpuSpec, s: &SglangServer) -> f64 {
    let mib = gpu.memory_gib() * 1024.0;
    let v = s.version.unwrap_or(SGLANG_NEWEST_READ);
    let (tp, pp, dp) = (s.tp as f64, s.pp as f64, s.dp_attention as f64);
    let reserved = if v < (0, 5, 3) {
        let p = tp * pp;
        let tier = match gpu.memory_gib() {
            g if g < 35.0 => 2.8 + p / 10.0,
            g if g < 90.0 => 9.5 + p / 2.0,
            g if g < 160.0 => 12.0 + p / 2.0,
            _ => 32.0,
        };
        (tier + if s.dp_attention > 1 { 4.0 } else { 0.0 }) * 1024.0
    } else {
        let bs = s.cuda_graph_max_bs.unwrap_or_else(|| sglang_cuda_graph_max_bs(gpu, s.tp, v)) as f64;
        let mut r = 512.0 + 1.5 * (s.chunked_prefill_size.max(2048) as f64) + 2.0 * bs + tp * pp / 8.0 * 1024.0;
        if s.dp_attention > 1 {
            r += bs * dp * 3.0 + if bs > 300.0 { bs * dp * 1.5 } else { 0.0 };
        }
        if v >= (0, 5, 10) && s.dp_attention <= 1 && s.pp <= 1 {
            r += if s.mla { 1.5 * 1024.0 } else { 8.0 * sglang_piecewise_sizes(s.chunked_prefill_size) as f64 };
        }
        if mib > 60.0 * 1024.0 {
            r = r.max(10.0 * 1024.0);
        }
        r
    };
    ((mib - reserved) / mib * 1000.0).round() / 1000.0
}

/// SGLang's largest CUDA-graph batch by default (0.5.3 on): 8 under 20 GiB; under 35 GiB 16
/// (24 from 0.5.6) below TP 4, else 80; under 60 GiB 32 below TP 4, else 160; under 160 GiB
/// 256 below TP 4, else 512; 512 above.
pub fn sglang_cuda_graph_max_bs(gpu: &GpuSpec, tp: u64, version: EngineVersion) -> u64 {
    // (below TP 4, from TP 4) per memory tier.
    let (small, large) = match gpu.memory_gib() {
        g if g < 20.0 => (8, 8),
        g if g < 35.0 => (if version >= (0, 5, 6) { 24 } else { 16 }, 80),
        g if g < 60.0 => (32, 160),
        g if g < 160.0 => (256, 512),
        _ => (512, 512),
    };
    if tp < 4 {
        small
    } else {
        large
    }
}

/// SGLang's `max_running_requests` when the command gives no `--max-running-requests`: from
/// the KV pool each scheduler has (`max_total_num_tokens`, tokens; each DP attention rank's
/// own) and the context length (`--context-length`, else the model's), min(⌊pool / context ×
/// 512⌋ held between 2048 and 4096, ⌊pool / 2⌋). The same rule in every release read, 0.4.0
/// to 0.5.23: `ModelRunner.init_memory_pool` (the request pool's size) and `TpModelWorker`
/// (`max_total_num_tokens // 2`) in 0.4.0–0.5.9 (python/sglang/srt/model_executor/model_runner.py,
/// managers/tp_worker.py), `_resolve_max_num_reqs` in 0.5.10 and 0.5.15
/// (model_runner_kv_cache_mixin.py), mem_cache/kv_cache_configurator.py in 0.5.23.
pub fn sglang_max_running_requests(pool_tokens: u64, context_len: u64) -> u64 {
    sglang_running_estimate(pool_tokens, context_len).min(pool_tokens / 2)
}

/// SGLang's estimate of the requests a pool of `pool_tokens` serves at `context_len`:
/// ⌊pool / context × 512⌋ held between 2048 and 4096 ([`sglang_max_running_requests`]).
pub fn sglang_running_estimate(pool_tokens: u64, context_len: u64) -> u64 {
    ((pool_tokens as f64 / context_len.max(1) as f64 * 512.0) as u64).clamp(2048, 4096)
}

/// How many prefill sizes SGLang captures piecewise CUDA graphs for, up to `max_tokens`
/// (`_generate_piecewise_cuda_graph_tokens`, 0.5.10.post1): 4 to 32 by 4, 48 to 256 by 16,
/// 288 to 512 by 32, 576 to 1024 by 64, 1280 to 4096 by 256, then by 512.
pub fn sglang_piecewise_sizes(max_tokens: u64) -> usize {
    let steps: [(u64, u64, u64); 6] =
        [(4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256), (4608, max_tokens, 512)];
    steps.iter().flat_map(|&(from, to, by)| (from..=to).step_by(by as usize)).filter(|&n| n <= max_tokens).count()
}

/// The terms of an engine's rule for one GPU (see the module doc).
pub fn engine_terms(model: &ModelSpec, gpu: &GpuSpec, cfg: &MemoryConfig, parameter_bytes: u64) -> EngineTerms {
    let f = |x: u64| x as f64;
    let e = &cfg.engine;
    let (visible_bytes, visible_measured) = match gpu.visible_bytes {
        Some(v) => (v, true),
        None => (gpu.memory_bytes, false),
    };
    // One RoPE table, shared by the layers (vLLM's get_rope caches it), in the model dtype
    // (bf16): llama-3.1-8b 131072 × 128 × 2 B = 32 MiB, the 0.03 GiB by which vLLM's "Model
    // loading took 14.99 GiB" exceeds 8,030,261,248 × 2 B = 14.96 GiB.
    let rotary = model.arch.mla.map_or(model.head_dim, |m| m.qk_rope_head_dim);
    let rope_cache_bytes = model.max_context.saturating_mul(rotary).saturating_mul(2);
    // The profiling forward pass (gpu_model_runner.profile_run → _dummy_run(max_num_tokens)):
    // at the FFN the residual, the normed input, the gate-up output and the activation are
    // alive: N × (2 × hidden + 3 × FFN width per GPU) bf16 values (the MoE width is the top-k
    // experts' plus the shared ones, and each routed expert's output of `hidden`).
    let moe = model.moe_layers() > 0;
    let widest = if moe {
        ((model.top_k + model.arch.shared_experts) * model.intermediate).max(model.dense_ffn_width())
    } else {
        model.intermediate
    };
    let expert_out = if moe { model.top_k * model.hidden } else { 0 };
    let n = f(cfg.max_num_batched_tokens);
    let forward = n * (2.0 * f(model.hidden) + 3.0 * f(widest) / f(cfg.tp) + f(expert_out)) * 2.0;
    // The dummy sampler run over one sequence per request, its logits gathered over the whole
    // vocabulary, while the pass's hidden states (N × hidden bf16) are still held.
    let seqs = cfg.max_num_seqs.min(cfg.max_num_batched_tokens);
    let sampler = f(seqs) * f(model.vocab) * f(VLLM_SAMPLER_BYTES_PER_LOGIT) + n * f(model.hidden) * 2.0;
    let (forward_peak_bytes, sampler_peak_bytes) = (forward as u64, sampler as u64);
    let fraction = match e.engine {
        MemoryEngine::Sglang => {
            let server = SglangServer {
                version: e.engine_version,
                tp: cfg.tp,
                pp: cfg.pp,
                dp_attention: cfg.dp_attention,
                chunked_prefill_size: cfg.max_num_batched_tokens * cfg.dp_attention.max(1),
                mla: model.arch.mla.is_some(),
                cuda_graph_max_bs: e.cuda_graph_max_bs,
            };
            e.mem_fraction_static.unwrap_or_else(|| sglang_mem_fraction_static(gpu, &server))
        }
        _ => cfg.gpu_memory_utilization,
    };
    let (vllm, sglang) = (e.engine == MemoryEngine::Vllm, e.engine == MemoryEngine::Sglang);
    // TensorRT-LLM profiles a forward pass at max_num_tokens too (no sampler run is counted).
    let trtllm = e.engine == MemoryEngine::Trtllm;
    EngineTerms {
        engine: e.engine,
        visible_bytes,
        visible_measured,
        fraction,
        parameter_bytes,
        rope_cache_bytes,
        forward_peak_bytes: if sglang { 0 } else { forward_peak_bytes },
        sampler_peak_bytes: if sglang || trtllm { 0 } else { sampler_peak_bytes },
        activation_bytes: match e.engine {
            MemoryEngine::Vllm => forward_peak_bytes.max(sampler_peak_bytes),
            MemoryEngine::Trtllm => forward_peak_bytes,
            _ => 0,
        },
        non_torch_bytes: e.non_torch_bytes.unwrap_or_else(|| default_non_torch_bytes(e.engine, cfg.tp)),
        non_torch_estimated: e.non_torch_bytes.is_none(),
        cuda_graph_bytes: if vllm { e.cuda_graph_bytes.unwrap_or(0) } else { 0 },
    }
}

/// The budget of a GPU whose engine reported its KV block count: the count as given, the
/// weights as computed, and what is left of the GPU shown as the reserve. The count must fit
/// beside the weights in the GPU's whole memory.
fn pinned_memory(
    gpu: &GpuSpec,
    cfg: &MemoryConfig,
    blocks: u64,
    weight_bytes: u64,
    block_bytes: u64,
) -> Result<MemoryBudget, MemoryError> {
    let kv_bytes = blocks.saturating_mul(block_bytes);
    if weight_bytes.saturating_add(kv_bytes) > gpu.memory_bytes {
        return Err(MemoryError::PinnedTooMany {
            blocks,
            block_bytes,
            kv: kv_bytes as f64 / GIB,
            weights: weight_bytes as f64 / GIB,
            gpu: gpu.name.clone(),
            memory: gpu.memory_bytes as f64 / GIB,
        });
    }
    Ok(MemoryBudget {
        memory_bytes: gpu.memory_bytes,
        usable_bytes: gpu.memory_bytes,
        weight_bytes,
        reserve_bytes: gpu.memory_bytes - weight_bytes - kv_bytes,
        kv_bytes,
        kv_bytes_per_token: block_bytes / cfg.block_tokens,
        block_tokens: cfg.block_tokens,
        block_bytes,
        kv_blocks: blocks * cfg.dp_attention.max(1),
        window_kv_bytes: 0,
        window: None,
        swa_tokens: 0,
        terms: None,
    })
}

impl MemoryBudget {
    /// Tokens of KV the instance can hold.
    pub fn kv_tokens(&self) -> u64 {
        self.kv_blocks * self.block_tokens
    }

    /// How many requests of `context` tokens fit at once (each rounds up to whole blocks, and
    /// with [`Self::window`] holds its window's blocks at its last decode step too).
    pub fn concurrent_requests(&self, context: u64) -> u64 {
        let context = context.max(1);
        let window = self.window.map_or(0, |w| w.blocks(context - 1, 1, self.block_tokens));
        self.kv_blocks / (context.div_ceil(self.block_tokens) + window)
    }

    /// The longest request one GPU's KV cache holds by vLLM's start-up check
    /// (`estimate_max_model_len`, `vllm/v1/core/kv_cache_planning.py` at 0.34.0): whole blocks of
    /// the full-attention layers beside one sequence's share of the windowed layers' KV (of
    /// `seqs` per rank), less the one block vLLM's pool holds back (its null block).
    /// Under vLLM's hybrid manager ([`Self::window`]) the check counts, beside the full-attention
    /// blocks, the windowed layers' `⌈min(window − 1 + max_num_batched_tokens, length) ÷ 16⌉ + 1`
    /// blocks (`SlidingWindowSpec.max_memory_usage_bytes`, vllm/v1/kv_cache_interface.py at
    /// 0.11.2) out of the one pool; the longest length is found as `estimate_max_model_len` finds
    /// it, by bisection.
    pub fn vllm_longest_request(&self, seqs: u64) -> u64 {
        let room = |window: u64| (self.kv_bytes + window).saturating_sub(self.block_bytes);
        if self.window.is_none() {
            let one_window = self.window_kv_bytes / seqs.max(1);
            return room(self.window_kv_bytes).saturating_sub(one_window) / self.block_bytes.max(1) * self.block_tokens;
        }
        let (room, bt) = (room(0), self.block_tokens);
        let fits = |len: u64| self.vllm_request_bytes(len) <= room;
        let (mut lo, mut hi) = (0, room / self.block_bytes.max(1) * bt);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// The KV bytes per GPU vLLM's start-up check counts for one request of `len` tokens: its
    /// full-attention blocks, and under the hybrid manager its window's (see
    /// [`Self::vllm_longest_request`]).
    pub fn vllm_request_bytes(&self, len: u64) -> u64 {
        let bt = self.block_tokens;
        let full = len.div_ceil(bt).saturating_mul(self.block_bytes);
        self.window.map_or(full, |w| full + (w.check_tokens.min(len).div_ceil(bt) + 1) * w.block_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Dtype, GpuPreset, ModelPreset};

    fn cfg(tp: u64) -> MemoryConfig {
        MemoryConfig {
            tp,
            dp_attention: 1,
            pp: 1,
            gpu_memory_utilization: 0.9,
            block_tokens: 16,
            reserve_bytes: Some(2 << 30),
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            kv_blocks: None,
            engine: EngineMemory::default(),
        }
    }

    #[test]
    fn seventy_b_does_not_fit_on_one_h100_and_says_by_how_much() {
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-70b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let err = plan_memory(&m, &g, &cfg(1)).unwrap_err();
        // weights 141,107,412,992 B = 131.42 GiB, reserve 2 GiB, usable 0.9 × 81,559 MiB = 71.68 GiB.
        let weights = 70_553_706_496.0 * 2.0 / GIB;
        let usable = (81_559.0 * 1_048_576.0 * 0.9f64).floor() / GIB;
        let short = weights + 2.0 - usable;
        match &err {
            MemoryError::DoesNotFit { short: s, .. } => {
                assert!((s - short).abs() < 1e-6, "{s} vs {short}")
            }
            e => panic!("{e}"),
        }
        assert!(err.to_string().contains(&format!("by {short:.2} GiB")), "{err}");
        // At TP 4 it fits.
        assert!(plan_memory(&m, &g, &cfg(4)).is_ok());
    }

    #[test]
    fn pipeline_stages_hold_their_layers_and_the_fewest_blocks_bind() {
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-70b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        // TP 4 × PP 2: 40 layers per stage and one vocabulary matrix (embedding or LM head)
        // each, split 4 ways — the bytes per GPU of TP 8 (both matrices split 8 ways), and the
        // same KV per token (40 layers × 2 KV heads vs 80 × 1): the same blocks.
        let tp8 = plan_memory(&m, &g, &cfg(8)).unwrap();
        let pp2 = plan_memory(&m, &g, &MemoryConfig { pp: 2, ..cfg(4) }).unwrap();
        assert_eq!(pp2.weight_bytes, 17_638_426_624);
        assert_eq!(
            (pp2.weight_bytes, pp2.kv_bytes_per_token, pp2.kv_blocks),
            (tp8.weight_bytes, 40_960, tp8.kv_blocks)
        );
        // TP 1 × PP 3 (vLLM's partition 27, 27, 26): the first stage, 27 layers and the
        // embedding, binds. Layers' bytes: 141,107,412,992 − 2 × 128,256 × 8192 × 2 =
        // 136,904,720,384, × 27/80 rounded up = 46,205,343,130, + 2,101,346,304 for the
        // embedding = 48,306,689,434. Usable 0.9 × 81,559 MiB = 76,968,728,985, less 2 GiB
        // of reserve, over blocks of 16 × 27 × 2 × 8 × 128 × 2 bytes: 14,984 (the middle
        // stage would hold 16,172, the last 16,565).
        let pp3 = plan_memory(&m, &g, &MemoryConfig { pp: 3, ..cfg(1) }).unwrap();
        assert_eq!((pp3.weight_bytes, pp3.kv_bytes_per_token, pp3.kv_blocks), (48_306_689_434, 110_592, 14_984));
        // A stage that does not fit names itself.
        let e = plan_memory(&m, &g, &MemoryConfig { pp: 2, gpu_memory_utilization: 0.8, ..cfg(1) })
            .unwrap_err()
            .to_string();
        assert!(e.contains("at tp 1 × pp 2 (stage 1 of 2: 40 layers)"), "{e}");
    }

    #[test]
    fn gpt_oss_120b_fits_one_h100_in_mxfp4_and_not_in_bf16() {
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let p = ModelPreset::find("gpt-oss-120b").unwrap();
        let mx = ModelSpec::from_preset(p, Dtype::Mxfp4, Dtype::Bf16);
        let b = plan_memory(&mx, &g, &cfg(1)).unwrap();
        // MXFP4 FFN (114,714,874,368 parameters × 17/32 bytes) + bf16 rest (2,114,280,000 × 2).
        assert_eq!(b.weight_bytes, 60_942_277_008 + 4_228_560_000);
        // Windowed layers: 256 sequences × (128 + 16) tokens × 18 layers × 2 × 8 × 64 × 2 bytes.
        assert_eq!(b.window_kv_bytes, 256 * 144 * 36_864);
        assert_eq!(b.kv_bytes_per_token, 36_864);
        let usable = (81_559.0 * 1_048_576.0 * 0.9f64).floor() as u64;
        assert_eq!(b.kv_bytes, usable - b.weight_bytes - (2 << 30) - b.window_kv_bytes);
        let bf = ModelSpec::from_preset(p, Dtype::Bf16, Dtype::Bf16);
        match plan_memory(&bf, &g, &cfg(1)).unwrap_err() {
            MemoryError::DoesNotFit { short, .. } => {
                let need = 116_829_154_368u64 * 2 + (2 << 30) + 256 * 144 * 36_864;
                assert!((short - (need - usable) as f64 / GIB).abs() < 1e-9, "{short}");
                assert!(short > 145.0, "{short}");
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn dp_attention_replicates_attention_and_multiplies_the_latent_kv() {
        let g = GpuPreset::find("h200").unwrap().spec();
        let m = ModelSpec::from_preset(ModelPreset::find("deepseek-r1").unwrap(), Dtype::Fp8, Dtype::Bf16);
        let tp = plan_memory(&m, &g, &cfg(8)).unwrap();
        let dp = plan_memory(&m, &g, &MemoryConfig { dp_attention: 8, ..cfg(8) }).unwrap();
        // TP8: every weight split 8 ways; every GPU holds the whole latent of every sequence.
        assert_eq!(tp.weight_bytes, 671_026_404_352u64.div_ceil(8));
        assert_eq!(tp.kv_bytes_per_token, 61 * 576 * 2);
        assert_eq!(tp.kv_blocks, tp.kv_bytes / (16 * 70_272));
        // DP8: FFNs and embeddings split 8 ways, attention (with the norms) whole on each GPU;
        // each GPU holds its own sequences' latent, so the instance has 8 GPUs' worth of blocks.
        let (ffn, emb) = (m.ffn_params(), m.embedding_params());
        let attn = 671_026_404_352 - ffn - emb;
        assert_eq!(attn, 61 * (187_107_328 + 2 * 7168) + 7168);
        assert_eq!(dp.weight_bytes, (ffn + emb).div_ceil(8) + attn);
        assert_eq!(dp.kv_blocks, dp.kv_bytes / (16 * 70_272) * 8);
        // The replicated attention (11.4 GB a GPU) leaves each GPU less KV room: 6.4× the blocks.
        assert!(dp.kv_blocks > 6 * tp.kv_blocks, "{} vs {}", dp.kv_blocks, tp.kv_blocks);
    }

    #[test]
    fn a_pinned_block_count_is_taken_as_given_if_it_fits() {
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let b = plan_memory(&m, &g, &MemoryConfig { kv_blocks: Some(27_000), ..cfg(1) }).unwrap();
        assert_eq!((b.kv_blocks, b.kv_bytes), (27_000, 27_000 * 16 * 131_072));
        assert_eq!(b.reserve_bytes + b.kv_bytes + b.weight_bytes, b.memory_bytes);
        let e = plan_memory(&m, &g, &MemoryConfig { kv_blocks: Some(40_000), ..cfg(1) }).unwrap_err().to_string();
        assert!(e.contains("40000 KV blocks of 2097152 bytes (78.12 GiB) and 14.96 GiB of weights exceed"), "{e}");
    }

    /// vLLM's hybrid KV cache manager for gpt-oss-120b (18 sliding-window layers of 128 beside 18
    /// full-attention ones: one group each, `group_size` 18): nothing set apart, every block of
    /// the pool 18 layers × 16 tokens × 2 × 8 × 64 × 2 bytes = 589,824, the window's blocks drawn
    /// from it. `--disable-hybrid-kv-cache-manager` stores all 36 layers as full attention: the
    /// same bytes in blocks twice as large. Llama 4's chunked layers are stored as full attention
    /// by default (vLLM turns its hybrid manager off for chunked local attention).
    #[test]
    fn vllms_hybrid_manager_pools_sliding_windows_and_unifies_chunked_ones() {
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let oss = ModelSpec::from_preset(ModelPreset::find("gpt-oss-120b").unwrap(), Dtype::Mxfp4, Dtype::Bf16);
        let hybrid = plan_memory(&oss, &g, &engine(MemoryEngine::Vllm)).unwrap();
        let w = hybrid.window.expect("pooled");
        assert_eq!((w.tokens, w.groups, w.block_bytes, w.check_tokens), (128, 1, 589_824, 127 + 8192));
        assert_eq!((hybrid.window_kv_bytes, hybrid.block_bytes), (0, 589_824));
        assert_eq!(hybrid.kv_blocks, hybrid.kv_bytes / 589_824);
        let off = MemoryConfig {
            engine: EngineMemory { disable_hybrid_kv_cache: true, ..engine(MemoryEngine::Vllm).engine },
            ..engine(MemoryEngine::Vllm)
        };
        let unified = plan_memory(&oss, &g, &off).unwrap();
        assert_eq!((unified.window, unified.window_kv_bytes, unified.kv_bytes), (None, 0, hybrid.kv_bytes));
        assert_eq!(unified.kv_blocks, hybrid.kv_bytes / (2 * 589_824));
        // TensorRT-LLM's rule sets the windows apart: 256 sequences × (128 + 16) tokens × 36,864 B.
        let trtllm = plan_memory(&oss, &g, &engine(MemoryEngine::Trtllm)).unwrap();
        assert_eq!((trtllm.window, trtllm.window_kv_bytes), (None, 256 * 144 * 36_864));
        // A pinned count under vLLM's rule is its pool, windows drawn from it.
        let pinned = plan_memory(&oss, &g, &MemoryConfig { kv_blocks: Some(1000), ..engine(MemoryEngine::Vllm) });
        assert_eq!(pinned.unwrap().window, Some(w));
        // Llama-4-Scout, bf16 KV: 48 layers × 2 × 8 × 128 × 2 bytes a token under vLLM; 12 under
        // servesim's rule, its 36 chunked layers set apart.
        let scout = ModelSpec::from_preset(ModelPreset::find("llama-4-scout").unwrap(), Dtype::Fp8, Dtype::Bf16);
        let g200 = GpuPreset::find("h200").unwrap().spec();
        let v = plan_memory(&scout, &g200, &engine(MemoryEngine::Vllm)).unwrap();
        assert_eq!((v.kv_bytes_per_token, v.window, v.window_kv_bytes), (48 * 4096, None, 0));
        let own = plan_memory(&scout, &g200, &MemoryConfig { max_num_seqs: 8, ..cfg(1) }).unwrap();
        assert_eq!((own.kv_bytes_per_token, own.window_kv_bytes), (12 * 4096, 8 * (8192 + 16) * 36 * 4096));
    }

    /// SGLang's hybrid SWA memory for gpt-oss-120b (18 windowed beside 18 full-attention layers,
    /// 36,864 bytes a token each): of the bytes A its rule leaves, a full-attention pool of
    /// ⌊A ÷ (36,864 + 0.8 × 36,864)⌋ tokens in whole pages and a windowed pool of 0.8 × as many
    /// (`HybridSWAPoolConfigurator`, pool_configurator.py at 0.5.15), or of 0.5 × with
    /// `--swa-full-tokens-ratio 0.5`. Before 0.5.8, and on Blackwell in 0.5.8 and 0.5.9, SGLang
    /// turns it off for gpt-oss and stores all 36 layers as full attention.
    #[test]
    fn sglangs_hybrid_swa_pools_follow_its_ratio_and_release() {
        let oss = ModelSpec::from_preset(ModelPreset::find("gpt-oss-120b").unwrap(), Dtype::Mxfp4, Dtype::Bf16);
        let (h200, b200) = (GpuPreset::find("h200").unwrap().spec(), GpuPreset::find("b200").unwrap().spec());
        let at = |version: Option<(u32, u32, u32)>, ratio: Option<f64>| MemoryConfig {
            engine: EngineMemory {
                engine_version: version,
                swa_full_tokens_ratio: ratio,
                ..engine(MemoryEngine::Sglang).engine
            },
            ..engine(MemoryEngine::Sglang)
        };
        for (ratio, r) in [(None, 0.8), (Some(0.5), 0.5)] {
            let b = plan_memory(&oss, &h200, &at(Some((0, 5, 10)), ratio)).unwrap();
            let available = b.usable_bytes - b.weight_bytes - b.reserve_bytes;
            let full = (available as f64 / (36_864.0 * (1.0 + r))).floor() as u64 / 16 * 16;
            let swa = (full as f64 * r) as u64 / 16 * 16;
            assert_eq!((b.kv_tokens(), b.swa_tokens), (full, swa), "ratio {r}");
            assert_eq!((b.kv_bytes, b.window_kv_bytes, b.window), (full * 36_864, swa * 36_864, None));
        }
        // The newest release read keeps it on; 0.5.6 and Blackwell at 0.5.9 store every layer.
        assert!(plan_memory(&oss, &h200, &at(None, None)).unwrap().swa_tokens > 0);
        assert!(plan_memory(&oss, &h200, &at(Some((0, 5, 9)), None)).unwrap().swa_tokens > 0);
        for (gpu, version) in [(&h200, (0, 5, 6)), (&b200, (0, 5, 9))] {
            let b = plan_memory(&oss, gpu, &at(Some(version), None)).unwrap();
            assert_eq!((b.kv_bytes_per_token, b.swa_tokens, b.window_kv_bytes), (73_728, 0, 0), "{version:?}");
        }
        assert!(plan_memory(&oss, &b200, &at(Some((0, 5, 10)), None)).unwrap().swa_tokens > 0);
        // --max-total-tokens caps the full-attention pool, and the windows' follows it.
        let capped = MemoryConfig {
            engine: EngineMemory { max_total_tokens: Some(100_000), ..at(None, None).engine },
            ..at(None, None)
        };
        let b = plan_memory(&oss, &h200, &capped).unwrap();
        assert_eq!((b.kv_tokens(), b.swa_tokens, b.window_kv_bytes), (100_000, 80_000, 80_000 * 36_864));
    }

    fn engine(e: MemoryEngine) -> MemoryConfig {
        MemoryConfig {
            reserve_bytes: None,
            max_num_seqs: 256,
            engine: EngineMemory { engine: e, ..Default::default() },
            ..cfg(1)
        }
    }

    #[test]
    fn trtllm_rule_takes_its_fraction_of_what_the_weights_and_the_profiling_peak_leave() {
        // KvCacheCreator._cal_max_tokens (tensorrt_llm/_torch/pyexecutor/_util.py,
        // NVIDIA/TensorRT-LLM 1a0dc5f70): available = (total − peak) × free_gpu_memory_fraction,
        // peak = torch peak (weights + the profiling forward at max_num_tokens) + non-torch.
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3.1-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let b = plan_memory(&m, &g, &engine(MemoryEngine::Trtllm)).unwrap();
        let t = b.terms.clone().unwrap();
        let visible = 81_091u64 << 20;
        assert_eq!(t.visible_bytes, visible);
        // The weights with the RoPE table, as vLLM's rule counts them; the forward pass at 8192
        // tokens 8192 × (2 × 4096 + 3 × 14336) × 2 B; no sampler run; 0.05 GiB outside torch.
        assert_eq!(b.weight_bytes, 16_060_522_496 + 33_554_432);
        assert_eq!((t.activation_bytes, t.sampler_peak_bytes), (838_860_800, 0));
        assert_eq!(t.non_torch_bytes, (0.05 * GIB) as u64);
        let peak = b.weight_bytes + 838_860_800 + t.non_torch_bytes;
        let kv = ((visible - peak) as f64 * 0.9).floor() as u64;
        assert_eq!((b.reserve_bytes, b.kv_bytes), (838_860_800 + t.non_torch_bytes, kv));
        assert_eq!(b.kv_blocks, kv / (16 * 131_072));
        // vLLM's rule takes 0.9 of the whole and then the weights: on a model that fills most of
        // the GPU, TensorRT-LLM's leaves more. Llama-3.1-70B in FP8 on one H200.
        let h200 = GpuPreset::find("h200").unwrap().spec();
        let big = ModelSpec::from_preset(ModelPreset::find("llama-3.1-70b").unwrap(), Dtype::Fp8, Dtype::Fp8);
        let trt = plan_memory(&big, &h200, &engine(MemoryEngine::Trtllm)).unwrap();
        let vllm = plan_memory(&big, &h200, &engine(MemoryEngine::Vllm)).unwrap();
        let h200_visible = 143_165u64 << 20;
        let free = h200_visible - trt.weight_bytes - trt.reserve_bytes;
        assert_eq!(trt.kv_bytes, (free as f64 * 0.9).floor() as u64);
        assert!(trt.kv_bytes > vllm.kv_bytes, "{} vs {}", trt.kv_bytes, vllm.kv_bytes);
        // A model that does not fit is said so, not given a KV cache of nothing.
        let huge = ModelSpec::from_preset(ModelPreset::find("llama-3.1-70b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let e = plan_memory(&huge, &g, &engine(MemoryEngine::Trtllm)).unwrap_err().to_string();
        assert!(e.contains("does not fit on h100-sxm") && e.contains("free_gpu_memory_fraction"), "{e}");
    }

    #[test]
    fn vllm_rule_for_llama_3_1_8b_on_an_h100_term_by_term() {
        // vllm/v1/worker/gpu_worker.py (Worker.determine_available_memory) and
        // vllm/utils/mem_utils.py (memory_profiling), vllm-project/vllm 35d5cda / a6d5c39:
        // available = total × gpu_memory_utilization − (weights + torch peak increase +
        // non-torch increase); kv_cache_utils.get_num_blocks floors it to pages.
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3.1-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let b = plan_memory(&m, &g, &engine(MemoryEngine::Vllm)).unwrap();
        let t = b.terms.clone().unwrap();
        let visible = 81_091u64 << 20; // "Free memory on device (78.66/79.19 GiB)": 79.1904 GiB
        assert_eq!((t.visible_bytes, t.visible_measured), (visible, true));
        let requested = (visible as f64 * 0.9).floor() as u64;
        assert_eq!(b.usable_bytes, requested);
        // 8,030,261,248 bf16 parameters + the RoPE table 131072 × 128 × 2 B: 14.99 GiB, as
        // vLLM logs "Model loading took 14.99 GiB" for this model.
        assert_eq!(t.rope_cache_bytes, 33_554_432);
        assert_eq!(b.weight_bytes, 16_060_522_496 + 33_554_432);
        assert_eq!(format!("{:.2}", b.weight_bytes as f64 / GIB), "14.99");
        // Forward pass at 8192 tokens: 8192 × (2 × 4096 + 3 × 14336) × 2 B.
        assert_eq!(t.forward_peak_bytes, 838_860_800);
        // Sampler over 256 sequences: 256 × 128256 × 32 B + the 8192 × 4096 bf16 hidden states.
        assert_eq!(t.sampler_peak_bytes, 1_050_673_152 + 67_108_864);
        assert_eq!(t.activation_bytes, t.sampler_peak_bytes);
        assert_eq!(t.non_torch_bytes, (0.05 * GIB) as u64);
        let kv = requested - b.weight_bytes - t.activation_bytes - t.non_torch_bytes;
        assert_eq!((b.reserve_bytes, b.kv_bytes), (t.activation_bytes + t.non_torch_bytes, kv));
        assert_eq!(b.kv_blocks, kv / (16 * 131_072));
        assert_eq!(b.kv_blocks, 28_258);
        // Published start-up logs of this model (docs/fidelity.md): 14.99 GiB weights, 1.19 GiB
        // peak activation, 0.04 GiB non-torch — 16.22 GiB, which leaves vLLM 71.27 − 16.22 =
        // 55.05 GiB at 0.9 on an H100. The rule here is within 1% of that (+0.26%).
        let logged = (71.27 - 16.22) * GIB;
        let err = b.kv_bytes as f64 / logged - 1.0;
        assert!(err.abs() < 0.01, "{err}");
        // A measured term replaces its estimate; CUDA graphs come out of the budget when given.
        let measured = MemoryConfig {
            engine: EngineMemory {
                engine: MemoryEngine::Vllm,
                non_torch_bytes: Some(0),
                cuda_graph_bytes: Some(1 << 30),
                mem_fraction_static: None,
                cuda_graph_max_bs: None,
                engine_version: None,
                max_total_tokens: None,
                kv_cache_bytes: None,
                disable_hybrid_kv_cache: false,
                swa_full_tokens_ratio: None,
            },
            ..engine(MemoryEngine::Vllm)
        };
        let b2 = plan_memory(&m, &g, &measured).unwrap();
        assert_eq!(b2.kv_bytes, kv + t.non_torch_bytes - (1 << 30));
        assert!(!b2.terms.unwrap().non_torch_estimated);
    }

    #[test]
    fn sglang_rule_and_its_default_fraction() {
        let server = |version: (u32, u32, u32), tp: u64, dp_attention: u64, chunk: u64| SglangServer {
            version: Some(version),
            tp,
            pp: 1,
            dp_attention,
            chunked_prefill_size: chunk,
            mla: false,
            cuda_graph_max_bs: None,
        };
        // python/sglang/srt/server_args.py, 0.5.2's sdist: H100 (81,559 MiB, under 90 GiB) at TP
        // 1 reserves (9.5 + 1/2) GiB: round((81559 − 10240) / 81559, 3) = 0.874.
        let h100 = GpuPreset::find("h100-sxm").unwrap().spec();
        assert_eq!(sglang_mem_fraction_static(&h100, &server((0, 5, 2), 1, 1, 8192)), 0.874);
        // H200 (143,771 MiB) at TP 8: (12 + 4) GiB; with DP attention 4 GiB more.
        let h200 = GpuPreset::find("h200").unwrap().spec();
        assert_eq!(sglang_mem_fraction_static(&h200, &server((0, 5, 2), 8, 1, 8192)), 0.886);
        assert_eq!(sglang_mem_fraction_static(&h200, &server((0, 5, 2), 8, 8, 8192)), 0.858);
        // Pipeline stages count as TP there: TP 2 × PP 2 reserves (9.5 + 4/2) GiB = 0.856.
        let pp = SglangServer { pp: 2, ..server((0, 5, 2), 2, 1, 8192) };
        assert_eq!(sglang_mem_fraction_static(&h100, &pp), 0.856);
        // B200 (183,359 MiB): a flat 32 GiB, round((183359 − 32768) / 183359, 3) = 0.821.
        let b200 = GpuPreset::find("b200").unwrap().spec();
        assert_eq!(sglang_mem_fraction_static(&b200, &server((0, 5, 2), 8, 1, 16384)), 0.821);
        // 0.5.9's _handle_gpu_memory_settings: H100 TP 1, chunk 8192, CUDA graphs to 256:
        // 512 + 1.5 × 8192 + 2 × 256 + 1/8 × 1024 = 13,440 MiB → 0.835.
        assert_eq!(sglang_mem_fraction_static(&h100, &server((0, 5, 9), 1, 1, 8192)), 0.835);
        // --cuda-graph-max-bs 32 in place of the 256 default: 448 MiB less, 12,992 → 0.841.
        let bs32 = SglangServer { cuda_graph_max_bs: Some(32), ..server((0, 5, 9), 1, 1, 8192) };
        assert_eq!(sglang_mem_fraction_static(&h100, &bs32), 0.841);
        // H200 TP 8 with 8 DP attention ranks: graphs to 512, + 512 × 8 × 3 + 512 × 8 × 1.5:
        // 512 + 12,288 + 1,024 + 1,024 + 12,288 + 6,144 = 33,280 MiB → 0.769.
        assert_eq!(sglang_mem_fraction_static(&h200, &server((0, 5, 9), 8, 8, 8192)), 0.769);
        // 0.5.10: the prefill's piecewise graphs, 58 sizes to 8192 at 8 MiB: 13,904 → 0.830;
        // with the MLA backend 1.5 GiB (B200 TP 4, chunk 16384: 28,160 MiB → 0.846); off with
        // DP attention.
        assert_eq!(sglang_mem_fraction_static(&h100, &server((0, 5, 10), 1, 1, 8192)), 0.830);
        let mla = SglangServer { mla: true, ..server((0, 5, 10), 4, 1, 16384) };
        assert_eq!(sglang_mem_fraction_static(&b200, &mla), 0.846);
        assert_eq!(
            sglang_mem_fraction_static(&h200, &server((0, 5, 10), 8, 8, 8192)),
            sglang_mem_fraction_static(&h200, &server((0, 5, 9), 8, 8, 8192))
        );
        // Without a version, the newest release read.
        let newest = SglangServer { version: None, ..server((0, 5, 10), 1, 1, 8192) };
        assert_eq!(sglang_mem_fraction_static(&h100, &newest), 0.830);
        // The capture sizes, counted by hand from _generate_piecewise_cuda_graph_tokens:
        // 8 + 14 + 8 + 8 (to 1024), + 4 to 2048, + 12 to 4096, + 8 to 8192, + 16 to 16384.
        let sizes: Vec<usize> = [1024, 2048, 4096, 8192, 16384].iter().map(|&n| sglang_piecewise_sizes(n)).collect();
        assert_eq!(sizes, [38, 42, 50, 58, 74]);
        // The CUDA graphs' batch on a 24 GiB GPU below TP 4: 16 in 0.5.3, 24 from 0.5.6.
        let a10 = GpuPreset::find("a10").unwrap().spec();
        assert_eq!(
            (sglang_cuda_graph_max_bs(&a10, 1, (0, 5, 3)), sglang_cuda_graph_max_bs(&a10, 1, (0, 5, 6))),
            (16, 24)
        );
        assert_eq!(sglang_cuda_graph_max_bs(&a10, 4, (0, 5, 6)), 80);
        // The chunked prefill size: an L40S (46,068 MiB) 8192 before 0.5.3, 4096 after.
        let l40s = GpuPreset::find("l40s").unwrap().spec();
        assert_eq!(
            (sglang_chunked_prefill_size(&l40s, Some((0, 5, 2))), sglang_chunked_prefill_size(&l40s, None)),
            (8192, 4096)
        );
        // model_runner.profile_max_num_token: rest = free after weights − free at start × (1 − f)
        // = free at start × f − weights; tokens = rest // bytes per token.
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3.1-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let old = MemoryConfig {
            engine: EngineMemory { engine_version: Some((0, 5, 2)), ..engine(MemoryEngine::Sglang).engine },
            ..engine(MemoryEngine::Sglang)
        };
        let b = plan_memory(&m, &h100, &old).unwrap();
        let free = (81_091u64 << 20) - (0.53 * GIB) as u64;
        let usable = (free as f64 * 0.874).floor() as u64;
        assert_eq!(b.usable_bytes, usable);
        assert_eq!(b.kv_bytes, usable - 16_094_076_928);
        assert_eq!(b.kv_blocks, 27_525);
        let e = MemoryConfig {
            engine: EngineMemory { mem_fraction_static: Some(0.15), ..engine(MemoryEngine::Sglang).engine },
            ..engine(MemoryEngine::Sglang)
        };
        let err = plan_memory(&m, &h100, &e).unwrap_err().to_string();
        assert!(err.contains("usable at SGLang's mem_fraction_static 0.15 by"), "{err}");
    }

    #[test]
    fn sglang_running_requests_follow_the_pool_and_the_context() {
        // By hand from _resolve_max_num_reqs (0.5.15): qwen3-32b's 19,024 tokens on an H100 at
        // its 40,960 context: ⌊19,024 / 40,960 × 512⌋ = 237, held up to 2048, under 9,512.
        assert_eq!(sglang_max_running_requests(19_024, 40_960), 2048);
        // deepseek-r1's 1,129,344 tokens on 8 B200s at 163,840: ⌊3529.2⌋ = 3529.
        assert_eq!(sglang_max_running_requests(1_129_344, 163_840), 3529);
        // A large pool at a short context: held at 4096.
        assert_eq!(sglang_max_running_requests(2_000_000, 8192), 4096);
        // A small pool: half of it (3,000 tokens → 1,500 requests).
        assert_eq!(sglang_max_running_requests(3000, 131_072), 1500);
        assert_eq!(sglang_max_running_requests(1, 131_072), 0);
    }

    #[test]
    fn a_gpu_without_a_cuda_total_says_its_capacity_stands_in() {
        let g = GpuPreset::find("l40s").unwrap().spec();
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3.1-8b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let t = plan_memory(&m, &g, &engine(MemoryEngine::Vllm)).unwrap().terms.unwrap();
        assert_eq!((t.visible_bytes, t.visible_measured), (46_068 << 20, false));
        // TP > 1: NCCL and custom all-reduce buffers, 1 GiB by default.
        assert_eq!(default_non_torch_bytes(MemoryEngine::Vllm, 2), 1 << 30);
    }

    #[test]
    fn concurrent_requests_round_up_to_blocks() {
        let b = MemoryBudget {
            memory_bytes: 0,
            usable_bytes: 0,
            weight_bytes: 0,
            reserve_bytes: 0,
            kv_bytes: 0,
            kv_bytes_per_token: 1,
            block_tokens: 16,
            block_bytes: 16,
            kv_blocks: 100,
            window_kv_bytes: 0,
            window: None,
            swa_tokens: 0,
            terms: None,
        };
        assert_eq!(b.concurrent_requests(16), 100);
        assert_eq!(b.concurrent_requests(17), 50);
        assert_eq!(b.kv_tokens(), 1600);
    }

    /// vLLM's longest request by hand: blocks of 1,000 bytes and 16 tokens.
    #[test]
    fn the_longest_request_vllm_starts_with() {
        let b = |kv_bytes, window_kv_bytes| MemoryBudget {
            memory_bytes: 0,
            usable_bytes: 0,
            weight_bytes: 0,
            reserve_bytes: 0,
            kv_bytes,
            kv_bytes_per_token: 62,
            block_tokens: 16,
            block_bytes: 1000,
            kv_blocks: kv_bytes / 1000,
            window_kv_bytes,
            window: None,
            swa_tokens: 0,
            terms: None,
        };
        // 10.5 blocks: 10 whole, one held back (the null block): 9 × 16 tokens.
        assert_eq!(b(10_500, 0).vllm_longest_request(1), 144);
        // One block and a half: none left beside the null block.
        assert_eq!(b(1_500, 0).vllm_longest_request(1), 0);
        // A sliding window drawn from the pool, 500 bytes a block, 40 tokens counted
        // (window − 1 + max_num_batched_tokens): a request of L ≥ 40 tokens needs
        // ⌈L ÷ 16⌉ × 1,000 + (⌈40 ÷ 16⌉ + 1) × 500 bytes of the 9,500 beside the null block:
        // 7 blocks, 112 tokens (113 would need 8,000 + 2,000).
        let pooled = MemoryBudget {
            window: Some(SharedWindow { tokens: 8, groups: 1, block_bytes: 500, check_tokens: 40 }),
            ..b(10_500, 0)
        };
        assert_eq!(pooled.vllm_longest_request(1), 112);
        assert_eq!(pooled.vllm_request_bytes(112), 9_000);
        assert_eq!(pooled.vllm_request_bytes(113), 10_000);
        // Below 40 tokens the window counts what the request has: 16 tokens, 1,000 + 2 × 500.
        assert_eq!(pooled.vllm_request_bytes(16), 2_000);
        // Windowed layers' 8,000 bytes set apart for 4 sequences: one sequence needs 2,000 of
        // them, so (10,500 + 8,000 − 2,000 − 1,000) / 1,000 = 15 blocks, 240 tokens.
        assert_eq!(b(10_500, 8_000).vllm_longest_request(4), 240);
    }
}
