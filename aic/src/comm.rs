//! All-reduce as the engine does it: the engine's own all-reduce (vLLM's and SGLang's custom
//! all-reduce, TensorRT-LLM's), timed through the engine's all-reduce entry point, so its
//! switch to NCCL for large messages or PCIe-only GPUs is in the times; NCCL's where the
//! engine's table lacks the GPU count.
//!
//! ```text
//!   comm/<framework>/<version>/custom_allreduce_perf.parquet
//!       allreduce_dtype, num_gpus, message_size (elements), latency (ms), backend (…_graph | …_eager)
//!   comm/nccl/<version>/nccl_perf.parquet
//!       op_name (all_reduce, …), nccl_dtype (half, int8), num_gpus, message_size (elements), latency
//! ```
//! `message_size` counts elements (AIConfigurator's collector builds `[tokens, 4096]` tensors of
//! that many elements, `collector/network/collect_all_reduce.py`; its query passes
//! `tokens × hidden`); servesim's table is over bytes, 2 per bf16 element. Engines run decode
//! (and small prefills) inside CUDA graphs and large batches eagerly: the table takes the
//! graph-mode times up to `graph_tokens` tokens and the eager ones above.

use crate::db::{version_cmp, Db, Selection};

/// An all-reduce table for one GPU count: (bytes, ms), bytes ascending.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ArRead {
    pub(crate) file: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) selection: String,
}

/// The engine's all-reduce at `tp` GPUs, else NCCL's; None when neither has the GPU count.
pub(crate) fn all_reduce(
    db: &Db,
    sel: &Selection,
    tp: u64,
    hidden: u64,
    graph_tokens: u64,
) -> Result<Option<ArRead>, crate::Error> {
    if let Some(r) = engine(db, sel, tp, hidden, graph_tokens)? {
        return Ok(Some(r));
    }
    nccl(db, &sel.system, tp)
}

/// The engine table of the selected version, else of the newest older one, else the newest.
fn engine(db: &Db, sel: &Selection, tp: u64, hidden: u64, graph_tokens: u64) -> Result<Option<ArRead>, crate::Error> {
    let versions = db.folder_versions(&sel.system, "comm", &sel.framework);
    let mut order: Vec<&String> =
        versions.iter().filter(|v| version_cmp(v, &sel.version) != std::cmp::Ordering::Greater).rev().collect();
    order.extend(versions.iter().filter(|v| version_cmp(v, &sel.version) == std::cmp::Ordering::Greater));
    for v in order {
        let file = format!("{}/comm/{}/{v}/custom_allreduce_perf.parquet", sel.system, sel.framework);
        if !db.exists(&file) {
            continue;
        }
        let f =
            db.frame(&file, &["allreduce_dtype", "num_gpus", "message_size", "latency", "backend", "kernel_source"])?;
        let gpus = f.ints("num_gpus")?;
        let size = f.floats("message_size")?;
        let lat = f.floats("latency")?;
        let dtype = if f.has("allreduce_dtype") { f.strs("allreduce_dtype")? } else { vec!["bfloat16"; f.rows] };
        let mode = if f.has("backend") { f.strs("backend")? } else { vec![""; f.rows] };
        let threshold = (graph_tokens * hidden) as f64;
        let mut points: Vec<(f64, f64)> = Vec::new();
        let has_modes = mode.iter().any(|m| m.ends_with("_graph")) && mode.iter().any(|m| m.ends_with("_eager"));
        for i in 0..f.rows {
            if gpus[i] as u64 != tp || dtype[i] != "bfloat16" || !(lat[i].is_finite() && lat[i] > 0.0) {
                continue;
            }
            if has_modes {
                let graph = mode[i].ends_with("_graph");
                if graph != (size[i] <= threshold) {
                    continue;
                }
            }
            points.push((size[i] * 2.0, lat[i]));
        }
        if points.is_empty() {
            continue;
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let modes = if has_modes {
            format!(", CUDA-graph times up to {graph_tokens} tokens ({} elements), eager above", threshold as u64)
        } else {
            String::new()
        };
        let note =
            if v == &sel.version { String::new() } else { format!(" (the database has no {} table)", sel.version) };
        return Ok(Some(ArRead {
            selection: format!("{} {v} all-reduce{note}, {tp} GPUs, bfloat16{modes}", sel.framework),
            file,
            points,
        }));
    }
    Ok(None)
}

/// NCCL's all-reduce, from the newest NCCL version with rows for `tp` GPUs.
fn nccl(db: &Db, system: &str, tp: u64) -> Result<Option<ArRead>, crate::Error> {
    for v in db.folder_versions(system, "comm", "nccl").iter().rev() {
        let file = format!("{system}/comm/nccl/{v}/nccl_perf.parquet");
        if !db.exists(&file) {
            continue;
        }
        let f = db.frame(&file, &["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"])?;
        let (op, dtype, gpus) = (f.strs("op_name")?, f.strs("nccl_dtype")?, f.ints("num_gpus")?);
        let (size, lat) = (f.floats("message_size")?, f.floats("latency")?);
        let mut points: Vec<(f64, f64)> = (0..f.rows)
            .filter(|&i| op[i] == "all_reduce" && dtype[i] == "half" && gpus[i] as u64 == tp && lat[i] > 0.0)
            .map(|i| (size[i] * 2.0, lat[i]))
            .collect();
        if points.is_empty() {
            continue;
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        return Ok(Some(ArRead { selection: format!("NCCL {v} all_reduce, {tp} GPUs, half"), file, points }));
    }
    Ok(None)
}
