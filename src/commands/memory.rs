//! `servesim memory`: the per-GPU memory budget of a model on a GPU.

use servesim_sim::memory::{plan_memory, MemoryConfig, GIB};
use servesim_sim::spec::{Dtype, GpuPreset, ModelPreset, ModelSpec};

use super::Format;
use crate::error::{CliError, Result};
use crate::output::thousands;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Model preset (llama-3-8b, llama-3-70b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, llama-2-7b, llama-2-70b, codellama-34b, mistral-7b, qwen2.5-72b, qwen3-8b, qwen3-32b, mixtral-8x7b, qwen3-30b-a3b, qwen3-235b-a22b).
    #[arg(long)]
    model: String,
    /// GPU preset (a100-80g, h100-sxm, h200, l40s, b200).
    #[arg(long)]
    gpu: String,
    /// Tensor-parallel degree.
    #[arg(long, default_value_t = 1)]
    tp: u64,
    /// Context length (prompt + output) of the requests to count.
    #[arg(long, default_value_t = 4096)]
    context: u64,
    /// Weight dtype.
    #[arg(long, value_enum, default_value_t = DtypeArg::Bf16)]
    weight_dtype: DtypeArg,
    /// KV-cache dtype.
    #[arg(long, value_enum, default_value_t = DtypeArg::Bf16)]
    kv_dtype: DtypeArg,
    /// Fraction of GPU memory the engine may use.
    #[arg(long, default_value_t = 0.9)]
    gpu_memory_utilization: f64,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    block_tokens: u64,
    /// Reserve per GPU in GiB (default: computed from the batch limits below).
    #[arg(long)]
    reserve_gib: Option<f64>,
    #[arg(long, default_value_t = 8192)]
    max_num_batched_tokens: u64,
    #[arg(long, default_value_t = 256)]
    max_num_seqs: u64,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DtypeArg {
    Bf16,
    Fp8,
}

impl From<DtypeArg> for Dtype {
    fn from(d: DtypeArg) -> Dtype {
        match d {
            DtypeArg::Bf16 => Dtype::Bf16,
            DtypeArg::Fp8 => Dtype::Fp8,
        }
    }
}

pub(crate) fn run(a: Args) -> Result<()> {
    let preset = ModelPreset::find(&a.model).ok_or_else(|| {
        CliError::input(format!("--model: unknown preset \"{}\"; known: {}", a.model, ModelPreset::names().join(", ")))
    })?;
    let gpu = GpuPreset::find(&a.gpu)
        .ok_or_else(|| {
            CliError::input(format!("--gpu: unknown preset \"{}\"; known: {}", a.gpu, GpuPreset::names().join(", ")))
        })?
        .spec();
    let model = ModelSpec::from_preset(preset, a.weight_dtype.into(), a.kv_dtype.into());
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
    let cfg = MemoryConfig {
        tp: a.tp,
        gpu_memory_utilization: a.gpu_memory_utilization,
        block_tokens: a.block_tokens,
        reserve_bytes: a.reserve_gib.map(|g| (g * GIB) as u64),
        max_num_batched_tokens: a.max_num_batched_tokens,
        max_num_seqs: a.max_num_seqs,
    };
    let b = plan_memory(&model, &gpu, &cfg).map_err(CliError::input)?;
    let fits = b.concurrent_requests(a.context);
    match a.format {
        Format::Json => {
            let v = serde_json::json!({
                "model": model.name, "gpu": gpu.name, "tp": a.tp,
                "memory_bytes": b.memory_bytes, "usable_bytes": b.usable_bytes,
                "weight_bytes": b.weight_bytes, "reserve_bytes": b.reserve_bytes, "kv_bytes": b.kv_bytes,
                "kv_bytes_per_token": model.kv_bytes_per_token(), "kv_bytes_per_token_per_gpu": b.kv_bytes_per_token,
                "block_tokens": b.block_tokens, "kv_blocks": b.kv_blocks, "kv_tokens": b.kv_tokens(),
                "context": a.context, "concurrent_requests": fits,
            });
            outln!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
        }
        Format::Table => {
            let gib = |x: u64| x as f64 / GIB;
            outln!(
                "{} ({} weights, {} KV) on {} × {}, per GPU:",
                model.name,
                model.weight_dtype.name(),
                model.kv_dtype.name(),
                a.tp,
                gpu.name
            );
            outln!("  GPU memory              {:>10.2} GiB", gib(b.memory_bytes));
            outln!("  usable at {:<4}          {:>10.2} GiB", a.gpu_memory_utilization, gib(b.usable_bytes));
            outln!(
                "  weights                 {:>10.2} GiB  ({} parameters / tp {})",
                gib(b.weight_bytes),
                thousands(model.params()),
                a.tp
            );
            outln!("  reserve                 {:>10.2} GiB", gib(b.reserve_bytes));
            outln!("  KV cache                {:>10.2} GiB", gib(b.kv_bytes));
            outln!(
                "  KV bytes per token      {:>10}      ({} per GPU)",
                thousands(model.kv_bytes_per_token()),
                thousands(b.kv_bytes_per_token)
            );
            outln!(
                "  KV blocks               {:>10}      × {} tokens = {} tokens",
                thousands(b.kv_blocks),
                b.block_tokens,
                thousands(b.kv_tokens())
            );
            outln!("  requests of {} tokens   {:>10}      at once", a.context, thousands(fits));
        }
    }
    Ok(())
}
