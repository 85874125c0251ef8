//! `servesim memory`: the per-GPU memory budget of a model on a GPU.

use servesim_sim::memory::{plan_memory, EngineMemory, EngineTerms, MemoryBudget, MemoryConfig, MemoryEngine, GIB};
use servesim_sim::spec::{Dtype, GpuPreset, GpuSpec, ModelPreset, ModelSpec};

use super::Format;
use crate::error::{CliError, Result};
use crate::output::thousands;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Model preset (llama-3.1-8b, deepseek-r1, gpt-oss-120b, ...; an unknown name lists them all), or a TOML file with a [model] section like a scenario's.
    #[arg(long)]
    model: String,
    /// GPU preset (h100-sxm, h200, b200, ...; an unknown name lists them all), or a TOML file with a [gpu] section like a scenario's (a custom GPU).
    #[arg(long)]
    gpu: String,
    /// Tensor-parallel degree.
    #[arg(long, default_value_t = 1)]
    tp: u64,
    /// Attention data-parallel ranks over the tp GPUs of a MoE model (SGLang --enable-dp-attention --dp).
    #[arg(long, default_value_t = 1)]
    dp_attention: u64,
    /// Pipeline-parallel stages of tp GPUs each (--pipeline-parallel-size): each GPU holds its
    /// stage's layers and their KV; the budget shown is the stage with the fewest blocks.
    #[arg(long, default_value_t = 1)]
    pp: u64,
    /// Context length (prompt + output) of the requests to count.
    #[arg(long, default_value_t = 4096)]
    context: u64,
    /// Weight dtype (nvfp4, mxfp4: the FFN weights in 4 bits, attention and embeddings in bf16). Default: the preset's published checkpoint's (fp8 for DeepSeek-V3/R1 and Kimi-K2, mxfp4 for gpt-oss, else bf16), or the --model file's.
    #[arg(long, value_enum)]
    weight_dtype: Option<DtypeArg>,
    /// The attention projections' dtype, where the checkpoint stores them otherwise than the
    /// weight dtype's rule (a ModelOpt NVFP4 Llama quantizes them too). Default: the weight
    /// dtype, bf16 under a 4-bit one, or the --model file's.
    #[arg(long, value_enum)]
    attention_dtype: Option<DtypeArg>,
    /// KV-cache dtype. Default: bf16, or the --model file's.
    #[arg(long, value_enum)]
    kv_dtype: Option<DtypeArg>,
    /// Fraction of GPU memory the engine may use.
    #[arg(long, default_value_t = 0.9)]
    gpu_memory_utilization: f64,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    block_tokens: u64,
    /// Reserve per GPU in GiB (default: computed from the batch limits below).
    #[arg(long)]
    reserve_gib: Option<f64>,
    /// The token budget, each DP attention rank's (SGLang: its share of --chunked-prefill-size,
    /// which its memory fraction depends on). Default: 8192; with --engine sglang, SGLang's
    /// default for the GPU and release.
    #[arg(long)]
    max_num_batched_tokens: Option<u64>,
    #[arg(long, default_value_t = 256)]
    max_num_seqs: u64,
    /// Whose rule sizes the KV cache: servesim (weights + reserve), vllm (its profiling rule:
    /// total as CUDA sees it × --gpu-memory-utilization − weights − peak activation − non-torch
    /// − CUDA graphs), sglang (free memory at start × --mem-fraction-static − weights) or trtllm
    /// ((total as CUDA sees it − weights − peak activation − non-torch) ×
    /// --gpu-memory-utilization, read as its free_gpu_memory_fraction). Each term is shown.
    #[arg(long, value_enum, default_value_t = EngineArg::Servesim)]
    engine: EngineArg,
    /// vllm: the "non-torch memory" of your start-up log; sglang: memory in use at start (CUDA
    /// context, NCCL), GiB. Default: an estimate from published logs (shown as such).
    #[arg(long)]
    non_torch_gib: Option<f64>,
    /// vllm: CUDA-graph memory counted in the budget ("Estimated CUDA graph memory" of a vLLM
    /// with CUDA-graph memory profiling), GiB. Default 0: older vLLM takes the graphs from
    /// outside the budget.
    #[arg(long)]
    cuda_graph_gib: Option<f64>,
    /// sglang: --mem-fraction-static. Default: SGLang's own rule for the GPU, TP degree, chunked
    /// prefill size and release.
    #[arg(long)]
    mem_fraction_static: Option<f64>,
    /// sglang: --cuda-graph-max-bs, which SGLang's default fraction keeps memory for. Default:
    /// SGLang's for the GPU and TP degree.
    #[arg(long)]
    cuda_graph_max_bs: Option<u64>,
    /// The engine's release (0.5.9), where its rule changed with it (SGLang's default memory
    /// fraction). Default: the newest release servesim has read.
    #[arg(long)]
    engine_version: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EngineArg {
    Servesim,
    Vllm,
    Sglang,
    Trtllm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DtypeArg {
    Bf16,
    Fp8,
    Nvfp4,
    Mxfp4,
}

impl From<DtypeArg> for Dtype {
    fn from(d: DtypeArg) -> Dtype {
        match d {
            DtypeArg::Bf16 => Dtype::Bf16,
            DtypeArg::Fp8 => Dtype::Fp8,
            DtypeArg::Nvfp4 => Dtype::Nvfp4,
            DtypeArg::Mxfp4 => Dtype::Mxfp4,
        }
    }
}

pub(crate) fn run(a: Args) -> Result<()> {
    let (model, gpu) = model_and_gpu(&a)?;
    check(&a, &model)?;
    let cfg = config(&a, &gpu)?;
    let b = plan_memory(&model, &gpu, &cfg).map_err(CliError::input)?;
    match a.format {
        Format::Json => print_json(&a, &model, &gpu, &b, cfg.engine.engine),
        Format::Table => {
            print_usable(&a, &model, (&gpu, cfg.max_num_batched_tokens * cfg.dp_attention.max(1)), &b);
            print_weights_and_terms(&a, &model, &b, cfg.max_num_batched_tokens);
            print_kv(&a, &model, &b);
        }
    }
    Ok(())
}

/// The model and GPU the flags name (presets or TOML files), with the dtypes asked for.
fn model_and_gpu(a: &Args) -> Result<(ModelSpec, GpuSpec)> {
    let mut model = if std::path::Path::new(&a.model).is_file() {
        super::calibrate::load_model(&a.model)?
    } else {
        let preset = ModelPreset::find(&a.model).ok_or_else(|| {
            CliError::input(format!(
                "--model: unknown preset \"{}\"; known: {}",
                a.model,
                ModelPreset::names().join(", ")
            ))
        })?;
        ModelSpec::from_preset(preset, preset.checkpoint_dtype(), Dtype::Bf16)
    };
    if let Some(d) = a.weight_dtype {
        model.weight_dtype = d.into();
    }
    if let Some(d) = a.attention_dtype {
        model.attention_dtype = Some(d.into());
    }
    if let Some(d) = a.kv_dtype {
        model.kv_dtype = d.into();
    }
    let gpu_file = std::path::Path::new(&a.gpu);
    let gpu = if gpu_file.is_file() {
        super::calibrate::load_gpu(gpu_file)?
    } else {
        GpuPreset::find(&a.gpu)
            .ok_or_else(|| {
                let why = GpuPreset::why_none(&a.gpu).map(|w| format!(" ({w})")).unwrap_or_default();
                CliError::input(format!(
                    "--gpu: unknown preset \"{}\"{why}; known: {}",
                    a.gpu,
                    GpuPreset::names().join(", ")
                ))
            })?
            .spec()
    };
    Ok((model, gpu))
}

/// The flags' values against the model.
fn check(a: &Args, model: &ModelSpec) -> Result<()> {
    if model.kv_dtype == Dtype::Mxfp4 {
        return Err(CliError::input("--kv-dtype: mxfp4 is a weight format; KV caches are bf16, fp8 or nvfp4"));
    }
    if a.tp == 0 || !model.heads.is_multiple_of(a.tp) {
        return Err(CliError::input(format!(
            "--tp: must divide the model's {} attention heads, got {}",
            model.heads, a.tp
        )));
    }
    if !(a.gpu_memory_utilization > 0.0 && a.gpu_memory_utilization <= 1.0) {
        return Err(CliError::input(format!(
            "--gpu-memory-utilization: must be in (0, 1], got {}",
            a.gpu_memory_utilization
        )));
    }
    if a.block_tokens == 0 || a.context == 0 {
        return Err(CliError::input("--block-tokens and --context must be ≥ 1"));
    }
    if let Some(r) = a.reserve_gib {
        if !(r.is_finite() && r >= 0.0) {
            return Err(CliError::input(format!("--reserve-gib: must be ≥ 0, got {r}")));
        }
    }
    if a.dp_attention > 1 && (model.experts <= 1 || !a.tp.is_multiple_of(a.dp_attention)) {
        return Err(CliError::input(format!(
            "--dp-attention: needs a MoE model and must divide --tp ({}), got {}",
            a.tp, a.dp_attention
        )));
    }
    if !(1..=64).contains(&a.pp) || a.pp > model.layers || (a.pp > 1 && a.dp_attention > 1) {
        return Err(CliError::input(format!(
            "--pp: must be in [1, 64], at most the model's {} layers, and 1 with --dp-attention, got {}",
            model.layers, a.pp
        )));
    }
    Ok(())
}

/// The memory rule the flags ask for; the engine-only flags checked against the engine.
fn config(a: &Args, gpu: &GpuSpec) -> Result<MemoryConfig> {
    let engine = match a.engine {
        EngineArg::Servesim => MemoryEngine::Servesim,
        EngineArg::Vllm => MemoryEngine::Vllm,
        EngineArg::Sglang => MemoryEngine::Sglang,
        EngineArg::Trtllm => MemoryEngine::Trtllm,
    };
    let only = |flag: &str, set: bool, ok: bool, with: &str| -> Result<()> {
        if set && !ok {
            return Err(CliError::input(format!("{flag}: only with --engine {with}")));
        }
        Ok(())
    };
    only("--reserve-gib", a.reserve_gib.is_some(), engine == MemoryEngine::Servesim, "servesim")?;
    only("--non-torch-gib", a.non_torch_gib.is_some(), engine != MemoryEngine::Servesim, "vllm, sglang or trtllm")?;
    only("--cuda-graph-gib", a.cuda_graph_gib.is_some(), engine == MemoryEngine::Vllm, "vllm")?;
    only("--mem-fraction-static", a.mem_fraction_static.is_some(), engine == MemoryEngine::Sglang, "sglang")?;
    only("--cuda-graph-max-bs", a.cuda_graph_max_bs.is_some(), engine == MemoryEngine::Sglang, "sglang")?;
    if let Some(n) = a.cuda_graph_max_bs.filter(|n| !(1..=1 << 20).contains(n)) {
        return Err(CliError::input(format!("--cuda-graph-max-bs: must be in [1, 1048576], got {n}")));
    }
    for (flag, v) in [("--non-torch-gib", a.non_torch_gib), ("--cuda-graph-gib", a.cuda_graph_gib)] {
        if let Some(x) = v {
            if !(x.is_finite() && (0.0..=1e4).contains(&x)) {
                return Err(CliError::input(format!("{flag}: must be in [0, 1e4] GiB, got {x}")));
            }
        }
    }
    if let Some(x) = a.mem_fraction_static {
        if !(x.is_finite() && x > 0.0 && x < 1.0) {
            return Err(CliError::input(format!("--mem-fraction-static: must be in (0, 1), got {x}")));
        }
    }
    let engine_version = match &a.engine_version {
        None => None,
        Some(v) => Some(
            servesim_sim::scenario::ServingEngine::version(v)
                .ok_or_else(|| CliError::input(format!("--engine-version {v:?}: expected a version such as 0.5.9")))?,
        ),
    };
    // SGLang's memory fraction depends on its chunked prefill size: its own default when not
    // given, each DP attention rank's share of it (as the scenario's limits are each rank's).
    let tokens = match (a.max_num_batched_tokens, engine) {
        (Some(n), _) => n,
        (None, MemoryEngine::Sglang) => {
            (servesim_sim::memory::sglang_chunked_prefill_size(gpu, engine_version) / a.dp_attention.max(1)).max(1)
        }
        (None, _) => 8192,
    };
    Ok(MemoryConfig {
        tp: a.tp,
        dp_attention: a.dp_attention.max(1),
        pp: a.pp,
        gpu_memory_utilization: a.gpu_memory_utilization,
        block_tokens: a.block_tokens,
        reserve_bytes: a.reserve_gib.map(|g| (g * GIB) as u64),
        max_num_batched_tokens: tokens,
        max_num_seqs: a.max_num_seqs,
        kv_blocks: None,
        engine: EngineMemory {
            engine,
            non_torch_bytes: a.non_torch_gib.map(|g| (g * GIB) as u64),
            cuda_graph_bytes: a.cuda_graph_gib.map(|g| (g * GIB) as u64),
            mem_fraction_static: a.mem_fraction_static,
            cuda_graph_max_bs: a.cuda_graph_max_bs,
            engine_version,
            ..Default::default()
        },
    })
}

fn print_json(a: &Args, model: &ModelSpec, gpu: &GpuSpec, b: &MemoryBudget, engine: MemoryEngine) {
    let fits = b.concurrent_requests(a.context);
    let v = serde_json::json!({
        "model": model.name, "gpu": gpu.name, "tp": a.tp, "dp_attention": a.dp_attention.max(1), "pp": a.pp,
        "memory_bytes": b.memory_bytes, "usable_bytes": b.usable_bytes,
        "params": model.params(), "active_params": model.active_params(),
        "weight_bytes": b.weight_bytes, "reserve_bytes": b.reserve_bytes,
        "window_kv_bytes": b.window_kv_bytes, "window_pooled": b.window.is_some(), "swa_tokens": b.swa_tokens, "kv_bytes": b.kv_bytes,
        "kv_bytes_per_token": model.kv_bytes_per_token(), "kv_bytes_per_token_per_gpu": b.kv_bytes_per_token,
        "block_tokens": b.block_tokens, "kv_blocks": b.kv_blocks, "kv_tokens": b.kv_tokens(),
        "context": a.context, "concurrent_requests": fits,
        "engine": engine.name(), "terms": b.terms.as_ref().map(terms_json),
        "max_running_requests": sglang_running(a, model, b),
        "vllm_longest_request": vllm_longest(a, b).map(|n| n.min(model.max_context)),
    });
    outln!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
}

/// The table's head: the GPU's memory and what the engine may use of it.
fn print_usable(a: &Args, model: &ModelSpec, (gpu, chunk): (&GpuSpec, u64), b: &MemoryBudget) {
    let gib = |x: u64| x as f64 / GIB;
    let stages = if a.pp > 1 { format!(" × {} stages", a.pp) } else { String::new() };
    outln!(
        "{} ({} weights, {} KV) on {} × {}{stages}, per GPU{}:",
        model.name,
        model.weight_dtype.name(),
        model.kv_dtype.name(),
        a.tp,
        gpu.name,
        if a.pp > 1 { " of the stage with the fewest blocks" } else { "" }
    );
    outln!("  GPU memory              {:>10.2} GiB", gib(b.memory_bytes));
    match &b.terms {
        None => {
            outln!("  usable at {:<4}          {:>10.2} GiB", a.gpu_memory_utilization, gib(b.usable_bytes))
        }
        Some(t) => {
            let seen = if t.visible_measured {
                "as CUDA reports it"
            } else {
                "not known for this GPU: its capacity stands in; set [gpu] visible_gib"
            };
            outln!("  visible to CUDA         {:>10.2} GiB  ({seen})", gib(t.visible_bytes));
            match t.engine {
                MemoryEngine::Sglang => {
                    outln!(
                        "  in use at start         {:>10.2} GiB  (CUDA context, NCCL{})",
                        gib(t.non_torch_bytes),
                        estimate(t.non_torch_estimated)
                    );
                    let rule = match (a.mem_fraction_static, &a.engine_version) {
                        (Some(_), _) => String::new(),
                        (None, v) => format!(
                            "; its default in {} at a chunked prefill size of {}",
                            v.as_deref().unwrap_or("the newest release read"),
                            thousands(chunk)
                        ),
                    };
                    outln!(
                        "  × mem_fraction_static {:<5} {:>8.2} GiB  (SGLang: weights + KV{rule})",
                        t.fraction,
                        gib(b.usable_bytes)
                    );
                }
                MemoryEngine::Trtllm => outln!(
                    "  usable                  {:>10.2} GiB  (TensorRT-LLM: weights + peak + {} × the rest, its \
                     free_gpu_memory_fraction)",
                    gib(b.usable_bytes),
                    t.fraction
                ),
                _ => outln!(
                    "  requested at {:<5}      {:>10.2} GiB  (vLLM: total × gpu_memory_utilization)",
                    t.fraction,
                    gib(b.usable_bytes)
                ),
            }
        }
    }
}

/// Where the weights are not all in one dtype, which parts are in which.
fn dtype_split(model: &ModelSpec) -> String {
    let (w, attn, rest) = (model.weight_dtype, model.attention_weight_dtype(), model.other_weight_dtype());
    if rest != w || attn != w {
        format!("; FFN in {}, attention in {}, embeddings in {}", w.name(), attn.name(), rest.name())
    } else {
        String::new()
    }
}

/// The weights and the engine's own terms.
/// `tokens`: the token budget the rule was sized with (`MemoryConfig::max_num_batched_tokens`).
fn print_weights_and_terms(a: &Args, model: &ModelSpec, b: &MemoryBudget, tokens: u64) {
    let gib = |x: u64| x as f64 / GIB;
    let mut split = dtype_split(model);
    if a.pp > 1 {
        let layers = servesim_sim::cost::stage_layers(model.layers, a.pp);
        let parts: Vec<String> = layers.iter().map(u64::to_string).collect();
        split +=
            &format!("; stages of {} layers, the embedding on the first, the LM head on the last", parts.join(", "));
    }
    outln!(
        "  weights                 {:>10.2} GiB  ({} parameters, {} active / tp {}{split})",
        gib(b.weight_bytes),
        thousands(model.params()),
        thousands(model.active_params()),
        a.tp
    );
    match &b.terms {
        None => outln!("  reserve                 {:>10.2} GiB", gib(b.reserve_bytes)),
        Some(t) => {
            outln!(
                "    of which RoPE table   {:>10.2} GiB  (max_position × rotary dim × 2 B)",
                gib(t.rope_cache_bytes)
            );
            if t.engine == MemoryEngine::Trtllm {
                outln!(
                    "  peak activation         {:>10.2} GiB  (profiling forward pass, {} tokens)",
                    gib(t.activation_bytes),
                    thousands(tokens)
                );
                outln!(
                    "  non-torch memory        {:>10.2} GiB  (NCCL, workspaces{})",
                    gib(t.non_torch_bytes),
                    estimate(t.non_torch_estimated)
                );
            }
            if t.engine == MemoryEngine::Vllm {
                outln!(
                    "  peak activation         {:>10.2} GiB  (profiling run: the larger of the two below)",
                    gib(t.activation_bytes)
                );
                outln!(
                    "    forward pass          {:>10.2} GiB  ({} tokens)",
                    gib(t.forward_peak_bytes),
                    thousands(tokens)
                );
                outln!(
                    "    sampler               {:>10.2} GiB  ({} sequences × vocabulary)",
                    gib(t.sampler_peak_bytes),
                    thousands(a.max_num_seqs.min(tokens))
                );
                outln!(
                    "  non-torch memory        {:>10.2} GiB  (NCCL, workspaces{})",
                    gib(t.non_torch_bytes),
                    estimate(t.non_torch_estimated)
                );
                let graphs = if t.cuda_graph_bytes == 0 {
                    "not counted: older vLLM takes them from outside the budget; --cuda-graph-gib"
                } else {
                    "counted, as vLLM's CUDA-graph memory profiling does"
                };
                outln!("  CUDA graphs             {:>10.2} GiB  ({graphs})", gib(t.cuda_graph_bytes));
            }
        }
    }
}

/// The KV cache and what it holds.
fn print_kv(a: &Args, model: &ModelSpec, b: &MemoryBudget) {
    let gib = |x: u64| x as f64 / GIB;
    let fits = b.concurrent_requests(a.context);
    let unified = print_window(a, model, b);
    outln!("  KV cache                {:>10.2} GiB", gib(b.kv_bytes));
    let kind = match (model.arch.mla, model.arch.window) {
        (Some(_), _) => ", MLA latent: every GPU holds all of it",
        (None, Some(_)) if unified => ", every layer as full attention",
        (None, Some(_)) => ", full-attention layers",
        (None, None) => "",
    };
    let all = ModelSpec { arch: servesim_sim::spec::Arch { window: None, ..model.arch }, ..model.clone() };
    outln!(
        "  KV bytes per token      {:>10}      ({} per GPU{kind})",
        thousands(if unified { all.kv_bytes_per_token() } else { model.kv_bytes_per_token() }),
        thousands(b.kv_bytes_per_token)
    );
    if a.dp_attention > 1 {
        outln!(
            "  attention DP ranks      {:>10}      (each of {} GPUs holds its own sequences' KV: {} blocks, its scheduler's)",
            a.dp_attention,
            a.tp / a.dp_attention,
            thousands(b.kv_blocks / a.dp_attention)
        );
    }
    outln!(
        "  KV blocks               {:>10}      × {} tokens = {} tokens",
        thousands(b.kv_blocks),
        b.block_tokens,
        thousands(b.kv_tokens())
    );
    if let Some(w) = b.window {
        // get_kv_cache_config_from_groups logs num_blocks ÷ groups × block_size (kv_cache_utils.py at 0.11.0;
        // at 0.34.0 update_kv_cache_capacity logs max_model_len × get_max_concurrency_for_kv_cache_config).
        outln!(
            "    as vLLM 0.11 logs it  {:>10}      tokens (\"GPU KV cache size\": the blocks over its {} KV cache groups; \
             later releases log max_model_len × the requests of that length the blocks hold)",
            thousands(b.kv_blocks / (1 + w.groups) * b.block_tokens),
            1 + w.groups
        );
    }
    outln!("  requests of {} tokens   {:>10}      at once", a.context, thousands(fits));
    if let Some(n) = vllm_longest(a, b) {
        outln!(
            "  longest request         {:>10}      tokens (vLLM's start-up check: a larger max_model_len is refused; \
             --max-model-len auto takes this)",
            thousands(n.min(model.max_context))
        );
    }
    if let Some(n) = sglang_running(a, model, b) {
        outln!(
            "  max running requests    {:>10}      (SGLang's default from each scheduler's pool at the model's {} context)",
            thousands(n),
            thousands(model.max_context)
        );
    }
    if b.terms.is_some() {
        outln!(
            "  (engine terms are estimates of what its start-up measures; docs/fidelity.md compares them with logs)"
        );
    }
}

/// The windowed layers' line: drawn from the pool, stored as full attention (returns true), or
/// set apart.
fn print_window(a: &Args, model: &ModelSpec, b: &MemoryBudget) -> bool {
    let gib = |x: u64| x as f64 / GIB;
    let Some(w) = model.arch.window else { return false };
    let windowed = model.layers - model.full_attention_layers();
    let own = model.kv_bytes_per_token_per_gpu(a.tp / a.dp_attention.max(1));
    match b.window {
        Some(shared) => outln!(
            "  windowed layers' KV     {:>10}      ({windowed} layers, from the KV blocks below as requests run: vLLM's hybrid KV \
             cache manager, {} sliding-window group(s) beside the full-attention one; a request holds the blocks of its \
             last {} tokens)",
            "pooled",
            shared.groups,
            w.tokens
        ),
        None if b.swa_tokens > 0 => outln!(
            "  windowed layers' KV     {:>10.2} GiB  ({windowed} layers: SGLang's sliding-window pool of {} tokens beside the \
             full-attention pool's {}, swa_full_tokens_ratio; each request keeps its last {} tokens there)",
            gib(b.window_kv_bytes),
            thousands(b.swa_tokens),
            thousands(b.kv_tokens() / a.dp_attention.max(1)),
            w.tokens
        ),
        None if b.window_kv_bytes == 0 && b.kv_bytes_per_token > own => {
            let why = if b.terms.as_ref().is_some_and(|t| t.engine == MemoryEngine::Sglang) {
                "SGLang's hybrid SWA memory is off for gpt-oss before 0.5.8, and on Blackwell before 0.5.10"
            } else {
                "vLLM's hybrid KV cache manager is off for them"
            };
            outln!(
                "  windowed layers' KV     {:>10}      ({windowed} {}layers stored as full attention: {why})",
                "as full",
                if w.chunked { "chunked-attention " } else { "" }
            );
            return true;
        }
        None => outln!(
            "  windowed layers' KV     {:>10.2} GiB  ({windowed} layers × {} seqs × ({} window + {} block) tokens; a bound)",
            gib(b.window_kv_bytes),
            a.max_num_seqs,
            w.tokens,
            a.block_tokens
        ),
    }
    false
}

/// Under vLLM's rule, the longest request its KV cache holds by its start-up check
/// ([`MemoryBudget::vllm_longest_request`]), of `--max-num-seqs` per DP attention rank.
fn vllm_longest(a: &Args, b: &MemoryBudget) -> Option<u64> {
    let vllm = b.terms.as_ref().is_some_and(|t| t.engine == MemoryEngine::Vllm);
    vllm.then(|| b.vllm_longest_request(a.max_num_seqs.div_ceil(a.dp_attention.max(1))))
}

/// Under SGLang's rule, the requests each scheduler runs at once by default
/// ([`servesim_sim::memory::sglang_max_running_requests`]), from its share of the pool.
fn sglang_running(a: &Args, model: &ModelSpec, b: &MemoryBudget) -> Option<u64> {
    let sglang = b.terms.as_ref().is_some_and(|t| t.engine == MemoryEngine::Sglang);
    let pool = b.kv_tokens() / a.dp_attention.max(1);
    sglang.then(|| servesim_sim::memory::sglang_max_running_requests(pool, model.max_context))
}

fn estimate(estimated: bool) -> &'static str {
    if estimated {
        "; an estimate from published logs: --non-torch-gib from yours"
    } else {
        "; as given"
    }
}

fn terms_json(t: &EngineTerms) -> serde_json::Value {
    serde_json::json!({
        "engine": t.engine.name(), "visible_bytes": t.visible_bytes, "visible_measured": t.visible_measured,
        "fraction": t.fraction, "parameter_bytes": t.parameter_bytes, "rope_cache_bytes": t.rope_cache_bytes,
        "forward_peak_bytes": t.forward_peak_bytes, "sampler_peak_bytes": t.sampler_peak_bytes,
        "activation_bytes": t.activation_bytes, "non_torch_bytes": t.non_torch_bytes,
        "non_torch_estimated": t.non_torch_estimated, "cuda_graph_bytes": t.cuda_graph_bytes,
    })
}
