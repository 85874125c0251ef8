//! Multi-head latent attention tables (DeepSeek-V3/R1, Kimi-K2): the attention kernels and the
//! absorbed batched matrix products, latency (ms).
//!
//! ```text
//!   mla/<fw>/<v>/context_mla_perf:     batch_size × isl        prefill attention over the
//!                                                               decompressed heads
//!   mla/<fw>/<v>/generation_mla_perf:  batch_size × (isl+step)  decode attention over the latent
//!   mla_bmm/<fw>/<v>/mla_bmm_perf:     num_tokens, op_name       mla_gen_pre (q_nope · W_UK) and
//!                                                               mla_gen_post (· W_UV), decode
//!   keyed by num_heads (per GPU: the model's heads / TP), kv_cache_dtype (attention) or
//!   bmm_dtype, kernel_source
//! ```
//! As AIConfigurator's granular MLA model reads them (ai-dynamo/aiconfigurator 095f58a51,
//! `sdk/models/deepseek.py`: `ContextMLA` and `GenerationMLA` at `128 // tp_size` heads, with
//! `MLABmm` pre and post around the decode kernel); SGLang and TensorRT-LLM measure these
//! kernel-level tables. vLLM measures the whole attention block instead:
//!
//! ```text
//!   mla/vllm/<v>/mla_context_module_perf:     batch_size × isl        the block of a prefill:
//!   mla/vllm/<v>/mla_generation_module_perf:  batch_size × (isl+step) down- and up-projections,
//!                                                                     attention, output projection
//!   keyed by num_heads per GPU, kv_cache_dtype, gemm_type (the projections' dtype), kernel_source
//! ```
//! which AIConfigurator's model reads in place of the granular ops for vLLM (`MLAModule`,
//! `context_mla_module` / `generation_mla_module`, same file).

use std::collections::BTreeMap;

use crate::db::{most_rows, Db, Selection};

/// The MLA kernels of one GPU, framework and version at one head count.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MlaRead {
    /// (batch, tokens, ms) of prefill attention and of decode attention.
    pub(crate) context: Vec<(u64, u64, f64)>,
    pub(crate) generation: Vec<(u64, u64, f64)>,
    /// (tokens, ms) of the two absorbed products of a decode step.
    pub(crate) bmm_pre: Vec<(u64, f64)>,
    pub(crate) bmm_post: Vec<(u64, f64)>,
    pub(crate) files: [String; 3],
    pub(crate) selection: String,
}

/// (batch, tokens, ms) points of an attention table, and the kernel they are of.
type Attention = (Vec<(u64, u64, f64)>, String);

/// The rows of an attention table (kernel or module) for `heads` per GPU and a `kv_dtype`
/// cache — and, for a module table, projections of `gemm` — of the kernel with the most rows:
/// (batch, prompt tokens, ms) of a prefill table, (batch, context, ms) of a decode one.
fn attention(
    db: &Db,
    file: &str,
    heads: u64,
    kv_dtype: &str,
    gemm: Option<&str>,
    decode: bool,
) -> Result<Attention, crate::Error> {
    let mut cols = vec!["kernel_source", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step", "latency"];
    if gemm.is_some() {
        cols.push("gemm_type");
    }
    let f = db.frame(file, &cols)?;
    let (kernel, kv, nh, b, isl, step, lat) = (
        f.strs("kernel_source")?,
        f.strs("kv_cache_dtype")?,
        f.ints("num_heads")?,
        f.ints("batch_size")?,
        f.ints("isl")?,
        f.ints("step")?,
        f.floats("latency")?,
    );
    let gt = if gemm.is_some() { f.strs("gemm_type")? } else { Vec::new() };
    let head_rows = |i: usize| kv[i] == kv_dtype && nh[i] as u64 == heads;
    let ok = |i: usize| head_rows(i) && gemm.is_none_or(|g| gt[i] == g);
    let Some(k) = most_rows((0..f.rows).filter(|&i| ok(i)).map(|i| kernel[i])) else {
        let mut has: Vec<&str> = (0..f.rows).filter(|&i| head_rows(i)).filter_map(|i| gt.get(i).copied()).collect();
        has.sort();
        has.dedup();
        return Err(match gemm {
            Some(g) if !has.is_empty() => format!(
                "{file}: no rows for {heads} heads per GPU with a {kv_dtype} KV cache and {g} projections (it has {})",
                has.join(", ")
            ),
            _ => format!("{file}: no rows for {heads} heads per GPU with a {kv_dtype} KV cache"),
        }
        .into());
    };
    let mut pts: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    for i in (0..f.rows).filter(|&i| ok(i) && kernel[i] == k) {
        let tokens = isl[i] + if decode { step[i] } else { 0 };
        if b[i] <= 0 || tokens <= 0 || !(lat[i].is_finite() && lat[i] > 0.0) {
            return Err(format!(
                "{file}: row {i}: batch {} tokens {tokens} latency {}: expected positive numbers",
                b[i], lat[i]
            )
            .into());
        }
        pts.entry((b[i] as u64, tokens as u64)).or_insert(lat[i]);
    }
    Ok((pts.into_iter().map(|((b, t), ms)| (b, t, ms)).collect(), k.to_string()))
}

/// vLLM's whole attention blocks of one GPU, framework and version at one head count.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModuleRead {
    /// (batch, tokens, ms) of a prefill's block and of a decode step's.
    pub(crate) context: Vec<(u64, u64, f64)>,
    pub(crate) generation: Vec<(u64, u64, f64)>,
    pub(crate) files: [String; 2],
    pub(crate) selection: String,
}

/// Reads the module tables for `heads` per GPU, a `kv_dtype` cache and `gemm` projections
/// (`bfloat16`, `fp8_block`, ... as the table names them).
pub(crate) fn read_modules(
    db: &Db,
    files: &[String; 2],
    heads: u64,
    kv_dtype: &str,
    gemm: &str,
) -> Result<ModuleRead, crate::Error> {
    let (context, ck) = attention(db, &files[0], heads, kv_dtype, Some(gemm), false)?;
    let (generation, gk) = attention(db, &files[1], heads, kv_dtype, Some(gemm), true)?;
    Ok(ModuleRead {
        context,
        generation,
        selection: format!(
            "{heads} heads per GPU, {kv_dtype} KV cache, {gemm} projections; kernels {ck} (prefill), {gk} (decode)"
        ),
        files: files.clone(),
    })
}

/// Reads the tables for `heads` per GPU, a `kv_dtype` (`bfloat16`, `fp8`) cache and
/// `bmm_dtype` (`bfloat16`, `fp8`) absorbed products.
pub(crate) fn read(
    db: &Db,
    files: &[String; 3],
    heads: u64,
    kv_dtype: &str,
    bmm_dtype: &str,
) -> Result<MlaRead, crate::Error> {
    let [cf, gf, bf] = files.clone();
    let (context, ck) = attention(db, &cf, heads, kv_dtype, None, false)?;
    let (generation, gk) = attention(db, &gf, heads, kv_dtype, None, true)?;
    let f = db.frame(&bf, &["kernel_source", "op_name", "bmm_dtype", "num_tokens", "num_heads", "latency"])?;
    let (kernel, op, dt, tokens, nh, lat) = (
        f.strs("kernel_source")?,
        f.strs("op_name")?,
        f.strs("bmm_dtype")?,
        f.ints("num_tokens")?,
        f.ints("num_heads")?,
        f.floats("latency")?,
    );
    let bmm = |name: &str| -> Result<Vec<(u64, f64)>, crate::Error> {
        let ok = |i: usize| op[i] == name && dt[i] == bmm_dtype && nh[i] as u64 == heads;
        let k = most_rows((0..f.rows).filter(|&i| ok(i)).map(|i| kernel[i]))
            .ok_or_else(|| format!("{bf}: no {name} rows for {heads} heads per GPU in {bmm_dtype}"))?;
        let mut pts: BTreeMap<u64, f64> = BTreeMap::new();
        for i in (0..f.rows).filter(|&i| ok(i) && kernel[i] == k) {
            if tokens[i] <= 0 || !(lat[i].is_finite() && lat[i] > 0.0) {
                return Err(format!(
                    "{bf}: row {i}: tokens {} latency {}: expected positive numbers",
                    tokens[i], lat[i]
                )
                .into());
            }
            pts.entry(tokens[i] as u64).or_insert(lat[i]);
        }
        Ok(pts.into_iter().collect())
    };
    let (bmm_pre, bmm_post) = (bmm("mla_gen_pre")?, bmm("mla_gen_post")?);
    Ok(MlaRead {
        context,
        generation,
        bmm_pre,
        bmm_post,
        selection: format!(
            "{heads} heads per GPU, {kv_dtype} KV cache; kernels {ck} (prefill), {gk} (decode), {bmm_dtype} absorbed products"
        ),
        files: [cf, gf, bf],
    })
}

/// Where a selection's latent attention is timed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tables {
    /// The kernels and the absorbed products (SGLang, TensorRT-LLM).
    Kernels([String; 3]),
    /// The whole attention block (vLLM).
    Modules([String; 2]),
}

/// The MLA files of a selection — the kernel-level ones, else the module ones — or an error
/// naming the first kernel-level file missing.
pub(crate) fn check_tables(db: &Db, sel: &Selection) -> Result<Tables, crate::Error> {
    let dir = |family: &str, file: &str| format!("{}/{family}/{}/{}/{file}", sel.system, sel.framework, sel.version);
    let files = [
        dir("mla", "context_mla_perf.parquet"),
        dir("mla", "generation_mla_perf.parquet"),
        dir("mla_bmm", "mla_bmm_perf.parquet"),
    ];
    if let Some(f) = files.iter().find(|f| !db.exists(f)) {
        let modules = [dir("mla", "mla_context_module_perf.parquet"), dir("mla", "mla_generation_module_perf.parquet")];
        if modules.iter().all(|m| db.exists(m)) {
            return Ok(Tables::Modules(modules));
        }
        return Err(format!(
            "{f} is not in the database: {} {} has neither kernel-level MLA tables nor the attention-block ones \
             ({})",
            sel.framework, sel.version, modules[0]
        )
        .into());
    }
    Ok(Tables::Kernels(files))
}
