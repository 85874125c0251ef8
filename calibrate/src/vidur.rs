//! Importing Vidur's profiling CSVs into the profile format, keeping Vidur's op names.
//!
//! ```text
//!   mlp.csv           time_stats.<op>.median by num_tokens × num_tensor_parallel_workers
//!                     (emb, input_layernorm, attn_pre_proj, attn_rope, attn_post_proj,
//!                      post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj, add)
//!   attention.csv     attn_prefill by (prefill_chunk_size, kv_cache_size), batch 1;
//!                     attn_decode by (batch_size, kv_cache_size); per n_q_head/n_kv_head/TP
//!   all_reduce.csv    all_reduce by size (bytes) × num_workers
//!   cpu_overheads.csv schedule, sampler_e2e, prepare_inputs_e2e, process_model_outputs by batch_size
//! ```
//! Times are Vidur's per-op medians in ms. The library parses text; the binary reads the files.

use std::collections::BTreeMap;

use servesim_sim::cost::profile::{Axis, ModelDims, OpTable, Profile, ProfileMeta, PROFILE_FORMAT_VERSION};

use crate::fit::{add_interp_note, fit_table};

/// (op, TP, hidden, query heads, KV heads) of an attention table.
type AttnKey = (&'static str, u32, u64, u64, u64);

/// One CSV: where it came from (for messages and notes) and its text.
pub struct Csv<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// What to import.
pub struct Inputs<'a> {
    pub mlp: Csv<'a>,
    pub attention: Option<Csv<'a>>,
    pub all_reduce: Option<Csv<'a>>,
    pub cpu_overheads: Option<Csv<'a>>,
    /// The model's name for the metadata (the folder of mlp.csv, say).
    pub model_name: String,
    pub gpu: String,
    pub date: String,
    pub servesim_version: String,
}

struct Table {
    name: String,
    headers: Vec<String>,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    fn parse(c: &Csv) -> Result<Table, String> {
        let mut r = csv::ReaderBuilder::new().flexible(false).from_reader(c.text.as_bytes());
        let headers = r.headers().map_err(|e| format!("{}: {e}", c.name))?.iter().map(str::to_string).collect();
        let rows = r.records().collect::<Result<Vec<_>, _>>().map_err(|e| format!("{}: {e}", c.name))?;
        if rows.is_empty() {
            return Err(format!("{}: no rows", c.name));
        }
        Ok(Table { name: c.name.to_string(), headers, rows })
    }

    fn col(&self, h: &str) -> Result<usize, String> {
        self.headers.iter().position(|x| x == h).ok_or_else(|| format!("{}: no column {h}", self.name))
    }

    /// The number in column `c` of row `i` (line i + 2 of the file); None when empty.
    fn num(&self, i: usize, c: usize) -> Result<Option<f64>, String> {
        let s = self.rows[i].get(c).unwrap_or("").trim();
        if s.is_empty() {
            return Ok(None);
        }
        let v = s
            .parse::<f64>()
            .map_err(|_| format!("{}: line {}: column {}: not a number: {s:?}", self.name, i + 2, self.headers[c]))?;
        // Sizes and times: a NaN, an infinity or a negative number would make a profile that
        // servesim's own reader refuses.
        if !v.is_finite() || v < 0.0 {
            return Err(format!(
                "{}: line {}: column {}: must be a finite number ≥ 0, got {s}",
                self.name,
                i + 2,
                self.headers[c]
            ));
        }
        Ok(Some(v))
    }

    fn req(&self, i: usize, c: usize) -> Result<f64, String> {
        self.num(i, c)?.ok_or_else(|| format!("{}: line {}: column {} is empty", self.name, i + 2, self.headers[c]))
    }

    /// A column that must hold one value in every row.
    fn constant(&self, h: &str) -> Result<u64, String> {
        let c = self.col(h)?;
        let v = self.req(0, c)?;
        for i in 1..self.rows.len() {
            if self.req(i, c)? != v {
                return Err(format!(
                    "{}: column {h} differs between rows (line 2 has {v}, line {} has {})",
                    self.name,
                    i + 2,
                    self.req(i, c)?
                ));
            }
        }
        Ok(v as u64)
    }
}

/// The op names of `time_stats.<op>.median` columns, in file order.
fn ops_of(t: &Table) -> Vec<String> {
    t.headers
        .iter()
        .filter_map(|h| h.strip_prefix("time_stats.")?.strip_suffix(".median").map(str::to_string))
        .collect()
}

/// Imports the CSVs; the error names the file, line and column.
pub fn import(inp: Inputs) -> Result<Profile, crate::Error> {
    import_tables(inp).map_err(crate::Error::Input)
}

fn import_tables(inp: Inputs) -> Result<Profile, String> {
    let mlp = Table::parse(&inp.mlp)?;
    let dims = ModelDims {
        name: inp.model_name.clone(),
        hidden: mlp.constant("n_embd")?,
        heads: mlp.constant("n_head")?,
        kv_heads: mlp.constant("n_kv_head")?,
        head_dim: mlp.constant("n_embd")? / mlp.constant("n_head")?.max(1),
        intermediate: mlp.constant("n_expanded_embd")?,
        vocab: mlp.constant("vocab_size")?,
    };
    let (c_tokens, c_tp) = (mlp.col("num_tokens")?, mlp.col("num_tensor_parallel_workers")?);
    let mut ops: Vec<OpTable> = Vec::new();
    let mut tps = std::collections::BTreeSet::new();
    let mut notes = vec![format!("imported from Vidur's {} (per-op medians)", inp.mlp.name)];
    for op in ops_of(&mlp) {
        let c = mlp.col(&format!("time_stats.{op}.median"))?;
        let mut by_tp: BTreeMap<u32, Vec<Vec<f64>>> = BTreeMap::new();
        for i in 0..mlp.rows.len() {
            let Some(ms) = mlp.num(i, c)? else { continue };
            let tp = mlp.req(i, c_tp)? as u32;
            tps.insert(tp);
            by_tp.entry(tp).or_default().push(vec![mlp.req(i, c_tokens)?, ms]);
        }
        for (tp, pts) in by_tp {
            ops.push(fit_table(&op, Some(tp), vec![Axis::Tokens], pts));
        }
    }

    if let Some(a) = &inp.attention {
        let t = Table::parse(a)?;
        let (c_pre, c_b, c_chunk, c_kv, c_tp) = (
            t.col("is_prefill")?,
            t.col("batch_size")?,
            t.col("prefill_chunk_size")?,
            t.col("kv_cache_size")?,
            t.col("num_tensor_parallel_workers")?,
        );
        let (c_h, c_q, c_k) = (t.col("n_embd")?, t.col("n_q_head")?, t.col("n_kv_head")?);
        let (c_pf, c_dec) = (t.col("time_stats.attn_prefill.median")?, t.col("time_stats.attn_decode.median")?);
        // Keyed by (op, tp, hidden, q heads, kv heads).
        let mut groups: BTreeMap<AttnKey, Vec<Vec<f64>>> = BTreeMap::new();
        for i in 0..t.rows.len() {
            let prefill = match t.rows[i].get(c_pre).unwrap_or("").trim() {
                "True" | "true" | "1" => true,
                "False" | "false" | "0" => false,
                other => {
                    return Err(format!("{}: line {}: is_prefill must be True or False, got {other:?}", t.name, i + 2))
                }
            };
            let key = |op| -> Result<_, String> {
                Ok((op, t.req(i, c_tp)? as u32, t.req(i, c_h)? as u64, t.req(i, c_q)? as u64, t.req(i, c_k)? as u64))
            };
            if prefill {
                if t.req(i, c_b)? != 1.0 {
                    return Err(format!("{}: line {}: prefill rows must have batch_size 1", t.name, i + 2));
                }
                if let Some(ms) = t.num(i, c_pf)? {
                    groups.entry(key("attn_prefill")?).or_default().push(vec![t.req(i, c_chunk)?, t.req(i, c_kv)?, ms]);
                }
            } else if let Some(ms) = t.num(i, c_dec)? {
                groups.entry(key("attn_decode")?).or_default().push(vec![t.req(i, c_b)?, t.req(i, c_kv)?, ms]);
            }
        }
        for ((op, tp, hidden, q, k), pts) in groups {
            let axes =
                if op == "attn_prefill" { vec![Axis::Chunk, Axis::Cached] } else { vec![Axis::Batch, Axis::Context] };
            let mut table = fit_table(op, Some(tp), axes, pts);
            if (hidden, q, k) != (dims.hidden, dims.heads, dims.kv_heads) {
                table.dims = Some(ModelDims {
                    name: format!("attention geometry of {}", a.name),
                    hidden,
                    heads: q,
                    kv_heads: k,
                    head_dim: hidden / q.max(1),
                    intermediate: 0,
                    vocab: 0,
                });
            }
            ops.push(table);
        }
        notes.push(format!(
            "attention from Vidur's {} (FlashAttention; decode by uniform batch × context per sequence)",
            a.name
        ));
    }

    if let Some(a) = &inp.all_reduce {
        let t = Table::parse(a)?;
        let (c_ms, c_n, c_size) = (t.col("time_stats.all_reduce.median")?, t.col("num_workers")?, t.col("size")?);
        let mut by_n: BTreeMap<u32, Vec<Vec<f64>>> = BTreeMap::new();
        for i in 0..t.rows.len() {
            if let Some(ms) = t.num(i, c_ms)? {
                by_n.entry(t.req(i, c_n)? as u32).or_default().push(vec![t.req(i, c_size)?, ms]);
            }
        }
        for (n, pts) in by_n {
            ops.push(fit_table("all_reduce", Some(n), vec![Axis::Bytes], pts));
        }
        notes.push(format!("all_reduce from Vidur's {} (size in bytes, by GPU count)", a.name));
    }

    if let Some(a) = &inp.cpu_overheads {
        let t = Table::parse(a)?;
        let c_b = t.col("batch_size")?;
        for op in ["schedule", "sampler_e2e", "prepare_inputs_e2e", "process_model_outputs"] {
            let c = t.col(&format!("{op}_median"))?;
            let mut pts = Vec::new();
            for i in 0..t.rows.len() {
                if let Some(ms) = t.num(i, c)? {
                    pts.push(vec![t.req(i, c_b)?, ms]);
                }
            }
            ops.push(fit_table(op, None, vec![Axis::Batch], pts));
        }
        let model = t.col("model_name").ok().and_then(|c| t.rows[0].get(c).map(str::to_string)).unwrap_or_default();
        notes.push(format!(
            "CPU overheads (schedule, sampler_e2e, prepare_inputs_e2e, process_model_outputs) from Vidur's {} ({model}); applied at any TP",
            a.name
        ));
    }
    let mut meta = ProfileMeta {
        source: "servesim calibrate import-vidur".into(),
        backend: "vidur".into(),
        gpu: inp.gpu,
        driver: None,
        clocks: None,
        dtype: "fp16/bf16 (Vidur's PyTorch kernels)".into(),
        model: dims,
        tp: tps.into_iter().collect(),
        date: inp.date,
        servesim_version: inp.servesim_version,
        notes,
        database: None,
    };
    add_interp_note(&mut meta);
    Ok(Profile { format_version: PROFILE_FORMAT_VERSION, meta, ops })
}
