//! `servesim validate --iterations --scenario S --backend B`: predicted vs executed time of
//! seeded batches across the scenario's batch space (decodes, prefill chunks, both).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use servesim_calibrate::iterations::{batches, Kind, Space};
use servesim_sim::cost::SeqWork;
use servesim_sim::engine;
use servesim_sim::metrics::compare::error_pct;

use super::report::ErrorStats;
use super::{emulator, interleave, take_back, with_profile, Args, BackendKind, OutFormat, Predictor};
use crate::error::{CliError, Result};

#[derive(Clone, Debug, Serialize)]
pub(super) struct KindStats {
    /// `decode`, `prefill`, `mixed` or `all`.
    pub kind: &'static str,
    pub batches: u64,
    pub profiled: ErrorStats,
    pub roofline: ErrorStats,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct BatchRow {
    pub kind: &'static str,
    pub decode_seqs: u64,
    pub decode_context_tokens: u64,
    pub prefill_seqs: u64,
    pub prefill_tokens: u64,
    pub prefill_cached_tokens: u64,
    pub measured_ms: f64,
    pub profiled_ms: f64,
    pub profiled_error_pct: Option<f64>,
    pub roofline_ms: f64,
    pub roofline_error_pct: Option<f64>,
}

/// One op over all batches: its time inside the executed forward passes (the last execution
/// of each batch) against the profiled model's time for it.
#[derive(Clone, Debug, Serialize)]
pub(super) struct OpRow {
    pub op: String,
    pub measured_ms: f64,
    pub profiled_ms: f64,
    pub error_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct IterationsReport {
    pub scenario: String,
    pub seed: u64,
    pub backend: &'static str,
    pub executor: String,
    pub repeat: u32,
    pub profile: String,
    pub calibrated_s: Option<f64>,
    /// How the calibration timed ops (`isolated` or `in-pass`), when it was made here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_timing: Option<&'static str>,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub max_context: u64,
    pub by_kind: Vec<KindStats>,
    /// Per op, summed over the batches (empty when the executor does not time ops: cuda).
    pub ops: Vec<OpRow>,
    pub batches: Vec<BatchRow>,
}

pub(super) fn run(a: &Args, backend: BackendKind, s: servesim_sim::Scenario, out_dir: &Path) -> Result<()> {
    if a.batches == 0 {
        return Err(CliError::input("--batches: must be ≥ 1, got 0"));
    }
    std::fs::create_dir_all(out_dir)?;
    let emu = emulator(a, backend, &s)?;
    let predictor = interleave(&emu, Predictor::new(a, backend, &s, &emu)?);
    let g = &s.groups[0];
    let space = Space {
        max_seqs: g.scheduler.max_num_seqs as u64,
        max_tokens: g.scheduler.max_num_batched_tokens as u64,
        max_context: g.max_model_len,
    };
    let list = batches(space, a.batches, s.seed);
    // The calibration runs between the batches (see `Predictor`).
    a.progress(&format!("iterations {} batches, median of {} executions each", list.len(), a.repeat()));
    let mut times = Vec::with_capacity(list.len());
    // Each op of the executed passes timed too, to show where the prediction's error lies.
    emu.record_ops(true);
    let mut op_ms: BTreeMap<&'static str, f64> = BTreeMap::new();
    let mut total_ms = 0.0;
    for (i, b) in list.iter().enumerate() {
        times.push(emu.measure(&b.seqs).map_err(|e| CliError::Other(anyhow::anyhow!("executing batch {i}: {e}")))?);
        // The last execution's ops and whole pass (the median execution's ops are not kept).
        for (name, ns) in emu.op_times() {
            match name {
                "pass" => total_ms += ns as f64 * 1e-6,
                _ => *op_ms.entry(name).or_default() += ns as f64 * 1e-6,
            }
        }
    }
    emu.record_ops(false);
    let (prof, source) = take_back(&emu, predictor).finish(a, backend, &s, out_dir)?;
    let (sp, sr) = with_profile(&s, &prof, &source.path)?;
    let profiled = engine::cost_model(&sp, 0);
    let model = super::profiled(&s, 0, &prof, &source.path)?;
    let mut predicted_ms: BTreeMap<&'static str, f64> = BTreeMap::new();
    for b in &list {
        for o in model.breakdown(&SeqWork::shape_of(&b.seqs)) {
            *predicted_ms.entry(o.name).or_default() += o.seconds * 1e3;
        }
    }
    let ops = op_rows(&op_ms, total_ms, &predicted_ms);
    let roofline = engine::cost_model(&sr, 0);
    let mut rows = Vec::with_capacity(list.len());
    for (b, &ns) in list.iter().zip(&times) {
        let shape = SeqWork::shape_of(&b.seqs);
        let measured_ms = ns as f64 * 1e-6;
        let p = profiled.iteration_time(&shape).0 as f64 * 1e-6;
        let r = roofline.iteration_time(&shape).0 as f64 * 1e-6;
        rows.push(BatchRow {
            kind: b.kind.name(),
            decode_seqs: shape.decode_seqs,
            decode_context_tokens: shape.decode_context_tokens,
            prefill_seqs: shape.prefill_seqs,
            prefill_tokens: shape.prefill_tokens,
            prefill_cached_tokens: shape.prefill_cached_tokens,
            measured_ms,
            profiled_ms: p,
            profiled_error_pct: error_pct(p, measured_ms),
            roofline_ms: r,
            roofline_error_pct: error_pct(r, measured_ms),
        });
    }
    let stats = |kind: &'static str, pick: &dyn Fn(&BatchRow) -> bool| {
        let sel: Vec<&BatchRow> = rows.iter().filter(|r| pick(r)).collect();
        let p: Vec<f64> = sel.iter().filter_map(|r| r.profiled_error_pct).collect();
        let r: Vec<f64> = sel.iter().filter_map(|r| r.roofline_error_pct).collect();
        KindStats { kind, batches: sel.len() as u64, profiled: ErrorStats::of(&p), roofline: ErrorStats::of(&r) }
    };
    let mut by_kind: Vec<KindStats> = Kind::ALL.iter().map(|k| stats(k.name(), &|r| r.kind == k.name())).collect();
    by_kind.push(stats("all", &|_| true));
    let rep = IterationsReport {
        scenario: s.name.clone(),
        seed: s.seed,
        backend: backend.name(),
        executor: emu.describe(),
        repeat: a.repeat(),
        profile: source.path.display().to_string(),
        calibrated_s: source.calibrated_s,
        op_timing: source.op_timing.map(|t| t.name()),
        max_num_seqs: space.max_seqs,
        max_num_batched_tokens: space.max_tokens,
        max_context: space.max_context,
        by_kind,
        ops,
        batches: rows,
    };
    let json = serde_json::to_string_pretty(&rep).expect("report serialises");
    crate::atomic::write(&out_dir.join("iterations.json"), json.clone() + "\n")?;
    let csv = iterations_csv(&rep);
    crate::atomic::write(&out_dir.join("iterations.csv"), &csv)?;
    if !a.quiet {
        match a.format {
            OutFormat::Json => outln!("{json}"),
            OutFormat::Csv => out!("{csv}"),
            OutFormat::Table => {
                out!("{}", table(&rep));
                outln!("outputs     {}/iterations.csv", out_dir.display());
            }
        }
    }
    Ok(())
}

fn opt(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| v.to_string())
}

fn iterations_csv(r: &IterationsReport) -> String {
    let mut o = String::from(
        "kind,decode_seqs,decode_context_tokens,prefill_seqs,prefill_tokens,prefill_cached_tokens,measured_ms,profiled_ms,profiled_error_pct,roofline_ms,roofline_error_pct\n",
    );
    for b in &r.batches {
        o += &format!(
            "{},{},{},{},{},{},{},{},{},{},{}\n",
            b.kind,
            b.decode_seqs,
            b.decode_context_tokens,
            b.prefill_seqs,
            b.prefill_tokens,
            b.prefill_cached_tokens,
            b.measured_ms,
            b.profiled_ms,
            opt(b.profiled_error_pct),
            b.roofline_ms,
            opt(b.roofline_error_pct)
        );
    }
    o
}

/// Ops measured inside the passes against the model's, plus `other`: pass time outside the
/// timed ops (measured) and the model's ops the executor does not time separately.
pub(super) fn op_rows(measured: &BTreeMap<&str, f64>, total_ms: f64, predicted: &BTreeMap<&str, f64>) -> Vec<OpRow> {
    if measured.is_empty() {
        return Vec::new();
    }
    let mut rows: Vec<OpRow> = measured
        .iter()
        .map(|(&op, &m)| {
            let p = predicted.get(op).copied().unwrap_or(0.0);
            OpRow { op: op.to_string(), measured_ms: m, profiled_ms: p, error_pct: error_pct(p, m) }
        })
        .collect();
    let other_m = total_ms - measured.values().sum::<f64>();
    let other_p: f64 = predicted.iter().filter(|(op, _)| !measured.contains_key(*op)).map(|(_, v)| v).sum();
    rows.push(OpRow {
        op: "other".into(),
        measured_ms: other_m,
        profiled_ms: other_p,
        error_pct: error_pct(other_p, other_m),
    });
    let (m, p) = (total_ms, predicted.values().sum::<f64>());
    rows.push(OpRow { op: "all".into(), measured_ms: m, profiled_ms: p, error_pct: error_pct(p, m) });
    rows
}

fn table(r: &IterationsReport) -> String {
    let f = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.1}%"));
    let s = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:+.1}%"));
    let mut o = format!("servesim validate --iterations: {} (seed {}), backend {}\n", r.scenario, r.seed, r.backend);
    o += &format!("  executed: {}; median of {} executions per batch\n", r.executor, r.repeat);
    o += &format!(
        "  predicted: profiled cost model ({}{}); reference: roofline\n",
        r.profile,
        r.calibrated_s.map_or(String::new(), |t| format!(
            ", calibrated here in {t:.1} s, ops timed {}",
            r.op_timing.unwrap_or("?")
        ))
    );
    o += &format!(
        "  batch space: up to {} sequences, {} tokens per iteration, contexts up to {}\n\n",
        r.max_num_seqs, r.max_num_batched_tokens, r.max_context
    );
    o += &format!(
        "  {:<9}{:>8}  {:>13}{:>10}{:>10}  {:>13}{:>10}{:>10}\n",
        "batches", "count", "profiled |e|", "P90", "median", "roofline |e|", "P90", "median"
    );
    for k in &r.by_kind {
        o += &format!(
            "  {:<9}{:>8}  {:>13}{:>10}{:>10}  {:>13}{:>10}{:>10}\n",
            k.kind,
            k.batches,
            f(k.profiled.median_abs_pct),
            f(k.profiled.p90_abs_pct),
            s(k.profiled.median_pct),
            f(k.roofline.median_abs_pct),
            f(k.roofline.p90_abs_pct),
            s(k.roofline.median_pct)
        );
    }
    if !r.ops.is_empty() {
        o += &format!("\n  {:<26}{:>14}{:>14}{:>9}\n", "op (all batches)", "executed ms", "profiled ms", "error");
        for row in &r.ops {
            o +=
                &format!("  {:<26}{:>14.1}{:>14.1}{:>9}\n", row.op, row.measured_ms, row.profiled_ms, s(row.error_pct));
        }
    }
    o
}
