//! `servesim compare`: what-if tables. Every combination of `--vary KEY=V1,V2` values runs on
//! the identical request stream (same seed), next to the scenario as written (the baseline);
//! each row shows its change against the baseline in %.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use servesim_sim::engine;
use servesim_sim::scenario::edit::{from_table, parse_value, set_path, split_values};
use servesim_sim::scenario::ScenarioFile;
use servesim_sim::Scenario;

use super::Format;
use crate::error::{CliError, Result};
use crate::output::thousands;
use crate::progress::Progress;
use crate::scenario_file;
use crate::shard::{self, Shard};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Scenario TOML file. Default: the embedded scenarios/chat.toml.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// A dotted key of the scenario and the values to try: `scheduler.max_num_seqs=64,128`,
    /// `gpu.preset=h100-sxm,a100-80g`, `cluster.router={kind="least-outstanding"}`. Repeat for
    /// a cartesian product.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    vary: Vec<String>,
    /// Seed of every run (overrides the scenario's `seed`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=servesim_sim::scenario::MAX_SEED))]
    seed: Option<u64>,
    /// Output folder for compare.csv (or the shard file). Default: outputs/<scenario name>/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write a self-contained HTML report (charts and the table) to this path.
    #[arg(long)]
    report: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Run only shard I of N of the variants (1-based) and write its results for `servesim merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// What is compared: identical in every shard of one sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompareHeader {
    pub scenario: String,
    pub seed: u64,
    /// The varied keys, in `--vary` order.
    pub keys: Vec<String>,
    /// Row labels; row 0 is the baseline.
    pub rows: Vec<String>,
    /// Each row's value of each key, as typed (empty for the baseline).
    pub values: Vec<Vec<String>>,
    /// What the baseline's workload offers (requests, span, mean and peak rates, a trace's
    /// steps); `None` for a closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<servesim_sim::workload::offered::Offered>,
}

impl CompareHeader {
    fn new(base: &Scenario, varies: &[Vary], rows: &[(String, Vec<String>, Scenario)]) -> CompareHeader {
        CompareHeader {
            scenario: base.name.clone(),
            seed: base.seed,
            keys: varies.iter().map(|(k, _)| k.clone()).collect(),
            rows: rows.iter().map(|r| r.0.clone()).collect(),
            values: rows.iter().map(|r| r.1.clone()).collect(),
            offered: servesim_sim::workload::offered::offered(&base.workload, base.seed),
        }
    }
}

/// One row's numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Metrics {
    pub ttft_ms_p50: f64,
    pub ttft_ms_p99: f64,
    pub tpot_ms_p50: f64,
    pub tpot_ms_p99: f64,
    pub itl_ms_p99: f64,
    pub e2e_ms_p99: f64,
    pub queue_ms_p99: f64,
    pub throughput_rps: f64,
    pub output_tokens_per_s: f64,
    pub attainment: f64,
    pub goodput_rps: f64,
    pub kv_peak: f64,
    pub preemptions: u64,
    pub finished: u64,
    pub rejected: u64,
    /// The variant's SLO thresholds and attainment target (`[slo]`), for the report's lines.
    #[serde(default)]
    pub slo_ttft_ms: Option<f64>,
    #[serde(default)]
    pub slo_tpot_ms: Option<f64>,
    #[serde(default)]
    pub slo_target: Option<f64>,
    /// Each priority class's figures, when the workload has several (`summary.classes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassMetrics>,
}

/// One priority class's figures in a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClassMetrics {
    pub class: u8,
    pub ttft_ms_p99: f64,
    pub queue_ms_p99: f64,
    pub attainment: f64,
    pub goodput_rps: f64,
}

/// The classes any row has, in order.
fn classes_of(rows: &[Metrics]) -> Vec<u8> {
    let set: std::collections::BTreeSet<u8> = rows.iter().flat_map(|m| m.classes.iter().map(|c| c.class)).collect();
    set.into_iter().collect()
}

/// A metric of a row, by name.
type Field = (&'static str, fn(&Metrics) -> f64);

/// Metrics whose change against the baseline is shown.
const CHANGED: [Field; 7] = [
    ("ttft_ms_p99", |m| m.ttft_ms_p99),
    ("tpot_ms_p99", |m| m.tpot_ms_p99),
    ("e2e_ms_p99", |m| m.e2e_ms_p99),
    ("throughput_rps", |m| m.throughput_rps),
    ("goodput_rps", |m| m.goodput_rps),
    ("attainment", |m| m.attainment),
    ("kv_peak", |m| m.kv_peak),
];

/// The metrics whose change is a column (`<name>_change_pct`).
#[cfg(test)]
pub(crate) fn changed_names() -> impl Iterator<Item = &'static str> {
    CHANGED.iter().map(|(n, _)| *n)
}

fn change_pct(v: f64, base: f64) -> Option<f64> {
    (base != 0.0).then(|| (v - base) / base * 100.0)
}

/// A varied key and its values (as typed, and parsed).
type Vary = (String, Vec<(String, toml::Value)>);

/// Parses `KEY=V1,V2` flags.
fn parse_varies(varies: &[String]) -> Result<Vec<Vary>> {
    let mut out: Vec<Vary> = Vec::new();
    for v in varies {
        let (key, values) =
            v.split_once('=').ok_or_else(|| CliError::input(format!("--vary {v}: expected KEY=V1,V2,...")))?;
        let key = key.trim().to_string();
        if key.is_empty() {
            return Err(CliError::input(format!("--vary {v}: empty key")));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(CliError::input(format!("--vary {key}: given twice; list every value in one --vary")));
        }
        let vals: Vec<(String, toml::Value)> =
            split_values(values).into_iter().filter(|t| !t.is_empty()).map(|t| (t.clone(), parse_value(&t))).collect();
        if vals.is_empty() {
            return Err(CliError::input(format!("--vary {v}: no values")));
        }
        out.push((key, vals));
    }
    Ok(out)
}

pub(crate) fn run(a: Args) -> Result<()> {
    let src = scenario_file::read_source(a.scenario.as_deref(), "chat")?;
    let mut base = src.scenario()?;
    base.check_calibration(false).map_err(|e| CliError::input(format!("{}: {e}", src.label)))?;
    if let Some(seed) = a.seed {
        base.set_seed(seed);
    }
    let varies = parse_varies(&a.vary)?;
    let doc: toml::Table = src.text.parse().expect("validated scenario text parses");

    // Row 0 is the baseline; then the cartesian product, the first --vary slowest.
    let mut rows: Vec<(String, Vec<String>, Scenario)> =
        vec![("baseline".into(), vec![String::new(); varies.len()], base.clone())];
    let mut combos: Vec<Vec<usize>> = vec![vec![]];
    for (_, vals) in &varies {
        combos = combos.into_iter().flat_map(|c| (0..vals.len()).map(move |j| [c.clone(), vec![j]].concat())).collect();
    }
    if varies.is_empty() {
        combos.clear();
    }
    for combo in combos {
        let mut d = doc.clone();
        let mut label = Vec::new();
        let mut values = Vec::new();
        for ((key, vals), &j) in varies.iter().zip(&combo) {
            let (text, value) = &vals[j];
            let flag = format!("--vary {key}={text}");
            set_path(&mut d, key, value.clone()).map_err(|m| CliError::input(format!("{flag}: {m}")))?;
            label.push(format!("{key}={text}"));
            values.push(text.clone());
        }
        let label = label.join(" ");
        let bad = |e: servesim_sim::ConfigError| CliError::input(format!("--vary {label}: {e}"));
        let file: ScenarioFile = from_table(d.clone(), "").map_err(bad)?;
        // A variant's `engine` rules fill in what its document leaves out, as for the baseline.
        let mut s = base.derive(file.with_engine_defaults(&d)).map_err(bad)?;
        servesim_sim::plan::check_candidates(&s).map_err(bad)?;
        s.set_seed(base.seed);
        rows.push((label, values, s));
    }

    let header = CompareHeader::new(&base, &varies, &rows);
    let picked = Shard::before_sweep(a.shard, rows.len(), a.out.as_deref(), a.report.as_deref())?;
    if !a.quiet {
        for l in crate::output::cost_lines(&base) {
            errln!("cost (baseline): {l}");
        }
    }
    let progress = Progress::new(a.quiet, "compare", picked.len());
    // Once the command is asked to stop, the variants not yet started are skipped.
    let results: Vec<Option<(usize, Metrics, Option<String>)>> = picked
        .par_iter()
        .map(|&i| {
            crate::error::cancelled().is_none().then(|| {
                let out = engine::run(&rows[i].2);
                progress.run_done(out.summary.requests.arrived);
                progress.item_done();
                let stopped =
                    out.summary.stopped.as_ref().map(|st| format!("{} ({} at {:.3} s)", rows[i].0, st.reason, st.at_s));
                (i, metrics(&out.summary), stopped)
            })
        })
        .collect();
    progress.finish();
    crate::error::check_cancel()?;
    let stopped: Vec<String> = results.iter().flatten().filter_map(|r| r.2.clone()).collect();
    let results: Vec<(usize, Metrics)> = results.into_iter().flatten().map(|(i, m, _)| (i, m)).collect();
    // Rows of runs cut short (run.max_events, run.max_requests, the time-series bound) are
    // written, and the command says so and exits with code 3.
    let stopped_error = (!stopped.is_empty()).then(|| {
        CliError::Stopped(format!(
            "stopped: {} of the runs stopped before their workload ended, so their rows cover only the part \
             simulated: {}; raise the bound named",
            stopped.len(),
            stopped.join(", ")
        ))
    });
    let (runs, requests, wall) = progress.totals();
    if !a.quiet {
        errln!("compare: {runs} runs, {} simulated requests in {wall:.2} s", thousands(requests));
    }
    let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&base.name));
    let vary = format!("{:?}", a.vary);
    let digest = shard::digest(&[&base.resolved_toml(), &base.seed.to_string(), &vary]);
    if let Some(sh) = a.shard {
        let path = shard::write(&dir, sh, "compare", (header, digest), results)?;
        if !a.quiet {
            errln!("wrote shard {}/{} ({} of the variants) to {}", sh.index, sh.count, picked.len(), path.display());
        }
        return stopped_error.map_or(Ok(()), Err);
    }
    finish(&header, &results.into_iter().map(|(_, m)| m).collect::<Vec<_>>(), &dir, a.format, digest)?;
    if let Some(path) = &a.report {
        let html = crate::report::compare_report(&dir)?;
        super::report::write(path, &html)?;
    }
    stopped_error.map_or(Ok(()), Err)
}

fn metrics(s: &servesim_sim::metrics::Summary) -> Metrics {
    Metrics {
        ttft_ms_p50: s.ttft_ms.p50,
        ttft_ms_p99: s.ttft_ms.p99,
        tpot_ms_p50: s.tpot_ms.p50,
        tpot_ms_p99: s.tpot_ms.p99,
        itl_ms_p99: s.itl_ms.p99,
        e2e_ms_p99: s.e2e_ms.p99,
        queue_ms_p99: s.queue_ms.p99,
        throughput_rps: s.throughput.requests_per_s,
        output_tokens_per_s: s.throughput.output_tokens_per_s,
        attainment: s.slo.attainment,
        goodput_rps: s.slo.goodput_rps,
        kv_peak: s.kv.utilization_max,
        preemptions: s.preemptions,
        finished: s.requests.finished,
        rejected: s.requests.rejected,
        slo_ttft_ms: s.slo.ttft_ms,
        slo_tpot_ms: s.slo.tpot_ms,
        slo_target: Some(s.slo.target),
        classes: s
            .classes
            .iter()
            .map(|c| ClassMetrics {
                class: c.class,
                ttft_ms_p99: c.ttft_ms.p99,
                queue_ms_p99: c.queue_ms.p99,
                attainment: c.attainment,
                goodput_rps: c.goodput_rps,
            })
            .collect(),
    }
}

/// Writes compare.csv into `dir` and prints the table (or JSON); shared with `merge`.
pub(crate) fn finish(h: &CompareHeader, rows: &[Metrics], dir: &Path, format: Format, digest: String) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("compare.csv");
    crate::atomic::write(&path, csv(h, rows))?;
    crate::manifest::record(dir, "compare", crate::manifest::Run::new(&h.scenario, h.seed, digest, &["compare.csv"]))?;
    match format {
        Format::Table => {
            out!("{}", table(h, rows));
            outln!("csv         {}", path.display());
        }
        Format::Json => {
            let base = &rows[0];
            let v: Vec<serde_json::Value> = rows
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let change: serde_json::Map<String, serde_json::Value> = CHANGED
                        .iter()
                        .map(|(name, f)| (format!("{name}_change_pct"), serde_json::json!(change_pct(f(m), f(base)))))
                        .collect();
                    serde_json::json!({ "variant": h.rows[i], "values": h.values[i], "metrics": m, "change": change })
                })
                .collect();
            let doc = serde_json::json!({ "scenario": h.scenario, "seed": h.seed, "offered": h.offered, "keys": h.keys, "rows": v });
            outln!("{}", serde_json::to_string_pretty(&doc).expect("serialises"));
        }
    }
    Ok(())
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(x) if x.abs() < 0.05 => "±0%".into(),
        Some(x) => format!("{x:+.1}%"),
        None => "n/a".into(),
    }
}

/// The table's first lines: what is compared, and what was simulated.
fn title(h: &CompareHeader, variants: usize) -> String {
    let simulated = h
        .offered
        .as_ref()
        .map(|off| format!("  simulated (the baseline's workload): {}\n", off.line()))
        .unwrap_or_default();
    format!(
        "servesim compare: {} (seed {}), {variants} variants against the baseline\n{simulated}\n",
        h.scenario, h.seed
    )
}

fn table(h: &CompareHeader, rows: &[Metrics]) -> String {
    let mut o = title(h, rows.len() - 1);
    let width = h.rows.iter().map(|r| r.chars().count()).max().unwrap_or(8).max(8);
    let _ = writeln!(
        o,
        "  {:<width$}  {:>17}  {:>17}  {:>19}  {:>17}  {:>17}  {:>8}  {:>6}  {:>7}",
        "variant",
        "TTFT p99 ms",
        "TPOT p99 ms",
        "E2E p99 ms",
        "throughput req/s",
        "goodput req/s",
        "attain%",
        "KV pk%",
        "preempt"
    );
    let base = &rows[0];
    for (i, m) in rows.iter().enumerate() {
        let cell = |v: f64, b: f64, d: usize| {
            if i == 0 {
                format!("{v:.d$}")
            } else {
                format!("{v:.d$} ({})", pct(change_pct(v, b)))
            }
        };
        let _ = writeln!(
            o,
            "  {:<width$}  {:>17}  {:>17}  {:>19}  {:>17}  {:>17}  {:>8.2}  {:>6.1}  {:>7}",
            h.rows[i],
            cell(m.ttft_ms_p99, base.ttft_ms_p99, 1),
            cell(m.tpot_ms_p99, base.tpot_ms_p99, 1),
            cell(m.e2e_ms_p99, base.e2e_ms_p99, 0),
            cell(m.throughput_rps, base.throughput_rps, 2),
            cell(m.goodput_rps, base.goodput_rps, 2),
            m.attainment * 100.0,
            m.kv_peak * 100.0,
            thousands(m.preemptions),
        );
    }
    let classes = classes_of(rows);
    if !classes.is_empty() {
        let _ = writeln!(o, "\n  per priority class: TTFT p99 ms / queueing p99 ms / attainment %");
        let mut head = format!("  {:<width$}", "variant");
        for c in &classes {
            head += &format!("  {:>26}", format!("class {c}"));
        }
        let _ = writeln!(o, "{head}");
        for (i, m) in rows.iter().enumerate() {
            let mut line = format!("  {:<width$}", h.rows[i]);
            for c in &classes {
                let cell = m.classes.iter().find(|x| x.class == *c).map_or("-".to_string(), |x| {
                    format!("{:.1} / {:.1} / {:.2}", x.ttft_ms_p99, x.queue_ms_p99, x.attainment * 100.0)
                });
                line += &format!("  {cell:>26}");
            }
            let _ = writeln!(o, "{line}");
        }
    }
    o
}

fn csv(h: &CompareHeader, rows: &[Metrics]) -> String {
    use crate::rows::{header, ClassCells, CompareCells, Fixed, Plain};
    let classes = classes_of(rows);
    let mut head = vec!["variant".to_string()];
    head.extend(h.keys.iter().cloned());
    head.extend(header::<CompareCells>());
    head.extend(CHANGED.iter().map(|(n, _)| format!("{n}_change_pct")));
    for c in &classes {
        head.extend(header::<ClassCells>().iter().map(|k| format!("class{c}_{k}")));
    }
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(vec![]);
    w.write_record(&head).expect("writes to memory");
    let base = &rows[0];
    for (i, m) in rows.iter().enumerate() {
        let cells = CompareCells {
            ttft_ms_p50: Fixed(m.ttft_ms_p50),
            ttft_ms_p99: Fixed(m.ttft_ms_p99),
            tpot_ms_p50: Fixed(m.tpot_ms_p50),
            tpot_ms_p99: Fixed(m.tpot_ms_p99),
            itl_ms_p99: Fixed(m.itl_ms_p99),
            e2e_ms_p99: Fixed(m.e2e_ms_p99),
            queue_ms_p99: Fixed(m.queue_ms_p99),
            throughput_rps: Fixed(m.throughput_rps),
            output_tokens_per_s: Fixed(m.output_tokens_per_s),
            attainment: Fixed(m.attainment),
            goodput_rps: Fixed(m.goodput_rps),
            kv_peak: Fixed(m.kv_peak),
            preemptions: m.preemptions,
            finished: m.finished,
            rejected: m.rejected,
            slo_ttft_ms: m.slo_ttft_ms.map(Plain),
            slo_tpot_ms: m.slo_tpot_ms.map(Plain),
            slo_target: m.slo_target.map(Plain),
        };
        let changes: Vec<Option<Fixed<3>>> =
            CHANGED.iter().map(|(_, f)| change_pct(f(m), f(base)).map(Fixed)).collect();
        let per_class: Vec<ClassCells> = classes
            .iter()
            .map(|c| match m.classes.iter().find(|x| x.class == *c) {
                Some(x) => ClassCells {
                    ttft_ms_p99: Some(Fixed(x.ttft_ms_p99)),
                    queue_ms_p99: Some(Fixed(x.queue_ms_p99)),
                    attainment: Some(Fixed(x.attainment)),
                    goodput_rps: Some(Fixed(x.goodput_rps)),
                },
                None => ClassCells::default(),
            })
            .collect();
        w.serialize((&h.rows[i], &h.values[i], cells, changes, per_class)).expect("writes to memory");
    }
    String::from_utf8(w.into_inner().expect("writes to memory")).expect("UTF-8 cells")
}
