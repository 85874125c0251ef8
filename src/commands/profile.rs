//! `servesim profile show` (what a profile holds) and `servesim profile query` (one op's time).

use std::path::{Path, PathBuf};

use servesim_sim::cost::profile::{Curve, OpTable};

use super::Format;
use crate::error::{CliError, Result};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// List a profile's metadata and ops: axes, ranges, interpolation, held-out errors.
    Show {
        /// Profile file (JSON, from `servesim calibrate`).
        profile: PathBuf,
    },
    /// Print one op's time in ms as its table reads (outside the measured range, a note says
    /// how a run reads it instead).
    Query(QueryArgs),
}

#[derive(clap::Args)]
struct QueryArgs {
    #[arg(long)]
    profile: PathBuf,
    /// Op name (Vidur's: attn_pre_proj, mlp_up_proj, attn_decode, all_reduce, ...).
    #[arg(long)]
    op: String,
    /// Tokens, or the op's first axis: bytes (all_reduce), batch (attn_decode, sample, CPU
    /// ops), chunk (attn_prefill).
    #[arg(long)]
    tokens: f64,
    /// The second axis of two-axis ops: context per sequence (attn_decode), cached tokens
    /// (attn_prefill).
    #[arg(long)]
    context: Option<f64>,
    /// TP degree; needed when the op was measured at several.
    #[arg(long)]
    tp: Option<u32>,
    /// A bare number (table) or a JSON object.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub(crate) fn run(a: Args) -> Result<()> {
    match a.command {
        Sub::Show { profile } => show(&profile),
        Sub::Query(q) => query(q),
    }
}

fn range(t: &OpTable, axis: usize) -> String {
    let lo = t.points.iter().map(|p| p[axis]).fold(f64::INFINITY, f64::min);
    let hi = t.points.iter().map(|p| p[axis]).fold(f64::NEG_INFINITY, f64::max);
    format!("{}..{}", lo, hi)
}

fn show(path: &Path) -> Result<()> {
    let p = crate::input::load_profile(path).map_err(CliError::input)?;
    let m = &p.meta;
    outln!("profile     {}", path.display());
    outln!("source      {} ({}), {}", m.source, m.backend, m.date);
    outln!("device      {}", m.gpu);
    if let Some(d) = &m.driver {
        outln!("driver      {d}");
    }
    if let Some(c) = &m.clocks {
        outln!("clocks      {c}");
    }
    let d = &m.model;
    outln!(
        "model       {}: hidden {}, heads {}/{} kv, head_dim {}, intermediate {}, vocab {}; dtype {}; TP {:?}",
        d.name,
        d.hidden,
        d.heads,
        d.kv_heads,
        d.head_dim,
        d.intermediate,
        d.vocab,
        m.dtype,
        m.tp
    );
    outln!("servesim    {}", m.servesim_version);
    if let Some(db) = &m.database {
        outln!(
            "database    {} {}: {} {} {} ({} weights, {} KV)",
            db.name,
            db.package.as_deref().unwrap_or(""),
            db.system,
            db.framework,
            db.version,
            db.weights,
            db.kv
        );
        for f in &db.files {
            outln!("  file      {} ({} rows, sha256 {})", f.path, f.rows, f.sha256);
        }
    }
    for n in &m.notes {
        outln!("note        {n}");
    }
    outln!();
    outln!(
        "{:<26} {:>3} {:<16} {:>6} {:<22} {:<7} {:>9} {:>9} {:>9}",
        "op",
        "tp",
        "axes",
        "points",
        "range",
        "interp",
        "ho med%",
        "ho p90%",
        "ho max%"
    );
    for t in &p.ops {
        let axes: Vec<&str> = t.axes.iter().map(|a| a.name()).collect();
        let ranges: Vec<String> = (0..t.axes.len()).map(|i| range(t, i)).collect();
        let (med, p90, max) = match t.chosen_heldout() {
            Some(h) => (format!("{:.1}", h.median_pct), format!("{:.1}", h.p90_pct), format!("{:.1}", h.max_pct)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        outln!(
            "{:<26} {:>3} {:<16} {:>6} {:<22} {:<7} {:>9} {:>9} {:>9}",
            t.name,
            t.tp.map_or("any".to_string(), |v| v.to_string()),
            axes.join("×"),
            t.points.len(),
            ranges.join(" × "),
            t.interp.name(),
            med,
            p90,
            max
        );
        if let Some(src) = &t.source {
            let tr = src.transfer_error.as_ref().map_or(String::new(), |e| {
                format!(
                    "; read between shapes: median {:.1}%, P90 {:.1}% over {} points",
                    e.median_pct, e.p90_pct, e.points
                )
            });
            outln!("    {}; {}{tr}", src.selection, src.shape);
        }
    }
    Ok(())
}

fn query(q: QueryArgs) -> Result<()> {
    let p = crate::input::load_profile(&q.profile).map_err(CliError::input)?;
    let tables: Vec<&OpTable> = p.ops.iter().filter(|t| t.name == q.op).collect();
    if tables.is_empty() {
        let mut names: Vec<&str> = p.ops.iter().map(|t| t.name.as_str()).collect();
        names.dedup();
        return Err(CliError::input(format!(
            "--op: no op {:?} in {}; it has {}",
            q.op,
            q.profile.display(),
            names.join(", ")
        )));
    }
    let tps: Vec<String> = tables.iter().map(|t| t.tp.map_or("any".into(), |v| v.to_string())).collect();
    let t = match q.tp {
        Some(tp) => {
            tables.iter().find(|t| t.tp == Some(tp)).or_else(|| tables.iter().find(|t| t.tp.is_none())).ok_or_else(
                || CliError::input(format!("--tp: op {} was measured at TP {}, not {tp}", q.op, tps.join(", "))),
            )?
        }
        None if tables.len() == 1 => &tables[0],
        None => {
            return Err(CliError::input(format!("--tp: op {} was measured at TP {}; say which", q.op, tps.join(", "))))
        }
    };
    if !(q.tokens.is_finite() && q.tokens >= 0.0) {
        return Err(CliError::input(format!("--tokens: must be ≥ 0, got {}", q.tokens)));
    }
    let mut x = vec![q.tokens];
    if t.axes.len() == 2 {
        let c = q.context.ok_or_else(|| {
            CliError::input(format!(
                "--context: op {} has two axes ({} × {}); give the second",
                q.op,
                t.axes[0].name(),
                t.axes[1].name()
            ))
        })?;
        x.push(c);
    }
    let curve = Curve::from_table(t);
    let (ms, inside) = curve.read(&x);
    if !inside {
        // What a run reads there depends on the model and GPU the table prices.
        eprintln!(
            "note: {} at {x:?} lies outside its measured range ({}): the table's own reading (flat below, in \
             proportion above); a run carries it beyond the range along the op's roofline bound for its model and \
             GPU (docs/scenario.md, [cost])",
            t.name,
            curve.range_text(&t.name)
        );
    }
    match q.format {
        Format::Table => outln!("{ms:.6}"),
        Format::Json => {
            let v = serde_json::json!({
                "op": t.name, "tp": t.tp, "axes": t.axes, "at": x, "interp": t.interp, "ms": ms, "measured_range": inside,
            });
            outln!("{v}");
        }
    }
    Ok(())
}
