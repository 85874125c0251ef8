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
//! kernel-level tables, vLLM only whole-module ones, which are not read.

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

/// Reads the tables for `heads` per GPU, a `kv_dtype` (`bfloat16`, `fp8`) cache and
/// `bmm_dtype` (`bfloat16`, `fp8`) absorbed products.
pub(crate) fn read(
    db: &Db,
    sel: &Selection,
    heads: u64,
    kv_dtype: &str,
    bmm_dtype: &str,
) -> Result<MlaRead, crate::Error> {
    let [cf, gf, bf] = check_tables(db, sel)?;
    let attention = |file: &str, decode: bool| -> Result<Attention, crate::Error> {
        let f =
            db.frame(file, &["kernel_source", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step", "latency"])?;
        let (kernel, kv, nh, b, isl, step, lat) = (
            f.strs("kernel_source")?,
            f.strs("kv_cache_dtype")?,
            f.ints("num_heads")?,
            f.ints("batch_size")?,
            f.ints("isl")?,
            f.ints("step")?,
            f.floats("latency")?,
        );
        let ok = |i: usize| kv[i] == kv_dtype && nh[i] as u64 == heads;
        let k = most_rows((0..f.rows).filter(|&i| ok(i)).map(|i| kernel[i]))
            .ok_or_else(|| format!("{file}: no rows for {heads} heads per GPU with a {kv_dtype} KV cache"))?;
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
    };
    let (context, ck) = attention(&cf, false)?;
    let (generation, gk) = attention(&gf, true)?;
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

/// The three MLA files of a selection, or an error naming the first missing.
pub(crate) fn check_tables(db: &Db, sel: &Selection) -> Result<[String; 3], crate::Error> {
    let dir = |family: &str, file: &str| format!("{}/{family}/{}/{}/{file}", sel.system, sel.framework, sel.version);
    let files = [
        dir("mla", "context_mla_perf.parquet"),
        dir("mla", "generation_mla_perf.parquet"),
        dir("mla_bmm", "mla_bmm_perf.parquet"),
    ];
    for f in &files {
        if !db.exists(f) {
            return Err(format!(
                "{f} is not in the database: {} {} has no kernel-level MLA tables (latent attention is read from \
                 SGLang's and TensorRT-LLM's)",
                sel.framework, sel.version
            )
            .into());
        }
    }
    Ok(files)
}
