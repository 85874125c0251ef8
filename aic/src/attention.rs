//! Attention tables: context (prefill) and generation (decode) attention latency (ms).
//!
//! ```text
//!   context_attention_perf:    batch_size × isl        whole prompts of isl tokens, no prefix
//!   generation_attention_perf: batch_size × (isl+step)  one token per sequence over isl+step KV
//!   keyed by num_heads, num_key_value_heads, head_dim, attn_dtype (context), kv_cache_dtype,
//!   window_size (0: full attention; absent in older files), kernel_source
//! ```
//! Columns as AIConfigurator's loader reads them (`aic-core/.../perf_database/attention.rs`:
//! context grids over `(num_heads, isl, batch_size)`, generation over `(num_heads, batch_size,
//! isl + step)`). A head count the database did not measure is read linearly between the
//! measured head counts with the same KV heads (all heads when query and KV heads are equal,
//! as the database groups multi-head attention), point by point, and said so.

use std::collections::BTreeMap;

use crate::db::{most_rows, Db};

/// Which table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Context,
    Generation,
}

impl Phase {
    pub(crate) fn file(self) -> &'static str {
        match self {
            Phase::Context => "context_attention_perf.parquet",
            Phase::Generation => "generation_attention_perf.parquet",
        }
    }
}

/// What to select.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttnShape {
    pub(crate) heads: u64,
    pub(crate) kv_heads: u64,
    pub(crate) head_dim: u64,
    /// `bfloat16` or `fp8`.
    pub(crate) kv_dtype: String,
    /// The sliding window in tokens (`window_size`); 0: full attention.
    pub(crate) window: u64,
}

/// An attention table read for one shape: (batch, tokens, ms) points.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttnRead {
    pub(crate) points: Vec<(u64, u64, f64)>,
    pub(crate) kernel: String,
    /// The rows used, in words.
    pub(crate) selection: String,
    pub(crate) measured: bool,
    pub(crate) shape: String,
}

/// Reads the rows of one shape (or between measured head counts) from an attention file.
pub(crate) fn read(db: &Db, file: &str, phase: Phase, s: &AttnShape) -> Result<AttnRead, crate::Error> {
    let mut want = vec![
        "kernel_source",
        "batch_size",
        "isl",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
        "window_size",
        "latency",
    ];
    if phase == Phase::Context {
        want.push("attn_dtype");
    } else {
        want.push("step");
    }
    let f = db.frame(file, &want)?;
    let rows = f.rows;
    let kernels = if f.has("kernel_source") { f.strs("kernel_source")? } else { vec![""; rows] };
    let (b, isl, nh, nkv, hd) = (
        f.ints("batch_size")?,
        f.ints("isl")?,
        f.ints("num_heads")?,
        f.ints("num_key_value_heads")?,
        f.ints("head_dim")?,
    );
    let kv = f.strs("kv_cache_dtype")?;
    let window = if f.has("window_size") { f.ints("window_size")? } else { vec![0; rows] };
    let attn = if phase == Phase::Context { f.strs("attn_dtype")? } else { vec!["bfloat16"; rows] };
    let step = if phase == Phase::Generation { f.ints("step")? } else { vec![0; rows] };
    let lat = f.floats("latency")?;
    let mha = s.heads == s.kv_heads;
    // Rows of the right kind: the window (0: full attention), bf16 math, the KV dtype and head
    // size, and the same KV heads (any equal count for multi-head attention).
    let ok = |i: usize| {
        window[i] == s.window as i64
            && attn[i] == "bfloat16"
            && kv[i] == s.kv_dtype
            && hd[i] as u64 == s.head_dim
            && if mha { nh[i] == nkv[i] } else { nkv[i] as u64 == s.kv_heads }
    };
    let attends = if s.window == 0 { "full attention".to_string() } else { format!("window {}", s.window) };
    let Some(kernel) = most_rows((0..rows).filter(|&i| ok(i)).map(|i| kernels[i])).map(str::to_string) else {
        return Err(format!(
            "{file}: no rows for {} KV heads of {} ({} KV cache, {attends})",
            s.kv_heads, s.head_dim, s.kv_dtype
        )
        .into());
    };
    // heads → (batch, tokens) → ms; first row wins.
    let mut by_heads: BTreeMap<u64, BTreeMap<(u64, u64), f64>> = BTreeMap::new();
    for i in (0..rows).filter(|&i| ok(i) && kernels[i] == kernel) {
        if b[i] <= 0 || isl[i] + step[i] <= 0 || !(lat[i].is_finite() && lat[i] > 0.0) {
            return Err(format!(
                "{file}: row {i}: batch {} isl {} latency {}: expected positive numbers",
                b[i], isl[i], lat[i]
            )
            .into());
        }
        let tokens = (isl[i] + step[i]) as u64;
        by_heads.entry(nh[i] as u64).or_default().entry((b[i] as u64, tokens)).or_insert(lat[i]);
    }
    let selection = format!(
        "kernel {kernel}, {} KV cache, head_dim {}, {} KV heads, {attends}",
        s.kv_dtype,
        s.head_dim,
        if mha { "as many".to_string() } else { s.kv_heads.to_string() }
    );
    if let Some(pts) = by_heads.get(&s.heads) {
        let points = pts.iter().map(|(&(b, t), &ms)| (b, t, ms)).collect();
        return Ok(AttnRead {
            points,
            kernel,
            selection,
            measured: true,
            shape: format!("{} query heads measured", s.heads),
        });
    }
    let measured: Vec<u64> = by_heads.keys().copied().collect();
    let lo = measured.iter().rev().find(|&&h| h < s.heads).copied();
    let hi = measured.iter().find(|&&h| h > s.heads).copied();
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return Err(format!(
            "{file}: {} query heads are outside the measured head counts {measured:?} ({selection})",
            s.heads
        )
        .into());
    };
    let t = (s.heads - lo) as f64 / (hi - lo) as f64;
    let (a, c) = (&by_heads[&lo], &by_heads[&hi]);
    let points: Vec<(u64, u64, f64)> =
        a.iter().filter_map(|(key, &ya)| c.get(key).map(|&yc| (key.0, key.1, ya + t * (yc - ya)))).collect();
    if points.is_empty() {
        return Err(format!("{file}: head counts {lo} and {hi} share no measured shapes ({selection})").into());
    }
    Ok(AttnRead {
        points,
        kernel,
        selection,
        measured: false,
        shape: format!("{} query heads not measured: read linearly between {lo} and {hi}", s.heads),
    })
}
