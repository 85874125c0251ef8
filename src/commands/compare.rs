//! `servesim compare`: what-if tables. Every combination of `--vary KEY=V1,V2` values runs on
//! the identical request stream (same seed), next to the scenario as written (the baseline);
//! each row shows its change against the baseline in %. Every row runs on `--seeds K` seeds
//! (the scenario's and the next K − 1): its figures are the first seed's, beside their range
//! over the seeds; a change whose range over the seeds (seed by seed, the variant against the
//! baseline on the same stream) includes 0 is marked `~`: smaller than the seeds' own spread.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use servesim_sim::engine;
use servesim_sim::scenario::edit::{from_table, parse_value, set_path, split_values};
use servesim_sim::scenario::{ScenarioFile, ServingEngine};
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
    /// Seeds each variant runs on (the seed and the next K − 1): the figures' range over them,
    /// and which changes are smaller than it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    seeds: u32,
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
    /// The seeds every row runs on, the scenario's first.
    pub seeds: Vec<u64>,
    /// What priced each row: a line per group (its cost source and what the roofline stood in
    /// for).
    #[serde(default)]
    pub priced_by: Vec<Vec<String>>,
}

impl CompareHeader {
    fn new(base: &Scenario, varies: &[Vary], rows: &[(String, Vec<String>, Scenario)], seeds: u32) -> CompareHeader {
        CompareHeader {
            seeds: (0..seeds as u64)
                .map(|i| base.seed.wrapping_add(i) % (servesim_sim::scenario::MAX_SEED + 1))
                .collect(),
            scenario: base.name.clone(),
            seed: base.seed,
            keys: varies.iter().map(|(k, _)| k.clone()).collect(),
            rows: rows.iter().map(|r| r.0.clone()).collect(),
            values: rows.iter().map(|r| r.1.clone()).collect(),
            offered: servesim_sim::workload::offered::offered(&base.workload, base.seed),
            priced_by: rows.iter().map(|r| crate::output::cost_lines(&r.2)).collect(),
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
            vary(&mut d, key, text, value)?;
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

    let header = CompareHeader::new(&base, &varies, &rows, a.seeds);
    let picked = Shard::before_sweep(a.shard, rows.len(), a.out.as_deref(), a.report.as_deref())?;
    if !a.quiet {
        print_cost_lines(&header);
    }
    let (results, stopped_error, (runs, requests, wall)) = run_rows(&rows, &picked, &header.seeds, a.quiet);
    crate::error::check_cancel()?;
    if !a.quiet {
        errln!("compare: {runs} runs, {} simulated requests in {wall:.2} s", thousands(requests));
    }
    let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&base.name));
    let vary = format!("{:?} seeds {}", a.vary, a.seeds);
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

/// Runs rows `picked` of `rows` on every seed, in parallel; each row's metrics in seed order.
/// What priced the baseline (row 0), and each variant priced otherwise (another engine's
/// kernels, another GPU's), on stderr.
fn print_cost_lines(h: &CompareHeader) {
    let baseline = &h.priced_by[0];
    for l in baseline {
        errln!("cost (baseline): {l}");
    }
    for (label, lines) in h.rows.iter().zip(&h.priced_by).skip(1) {
        if lines != baseline {
            for l in lines {
                errln!("cost ({label}): {l}");
            }
        }
    }
}

/// Sets `key` to `value` (typed as `text`) in a variant's document; a varied `engine` takes
/// its own kernel database ([`ServingEngine::varied_in`]).
fn vary(doc: &mut toml::Table, key: &str, text: &str, value: &toml::Value) -> Result<()> {
    set_path(doc, key, value.clone()).map_err(|m| CliError::input(format!("--vary {key}={text}: {m}")))?;
    if key == "engine" {
        ServingEngine::varied_in(doc);
    }
    Ok(())
}

/// A row whose first seed's run drew no random number (`RunOutput::random_draws`) cannot
/// depend on the seed: that run stands for every seed and the others are not run. Rows of runs
/// cut short (run.max_events, run.max_requests, the time-series bound) are kept, with the error
/// that says so (exit code 3). Once the command is asked to stop, the runs not yet started are
/// skipped (the caller's `check_cancel` reports it).
#[allow(clippy::type_complexity)]
fn run_rows(
    rows: &[(String, Vec<String>, Scenario)],
    picked: &[usize],
    seeds: &[u64],
    quiet: bool,
) -> (Vec<(usize, Vec<Metrics>)>, Option<CliError>, (u64, u64, f64)) {
    let progress = Progress::new(quiet, "compare", picked.len() * seeds.len());
    let run_all = |jobs: Vec<(usize, u64)>| -> Vec<Option<Run>> {
        jobs.par_iter()
            .map(|&(i, seed)| {
                crate::error::cancelled().is_none().then(|| {
                    let mut s = rows[i].2.clone();
                    s.set_seed(seed);
                    let out = engine::run(&s);
                    progress.run_done(out.summary.requests.arrived);
                    progress.item_done();
                    let stopped = out
                        .summary
                        .stopped
                        .as_ref()
                        .map(|st| format!("{} seed {seed} ({} at {:.3} s)", rows[i].0, st.reason, st.at_s));
                    Run { metrics: metrics(&out.summary), stopped, drew: out.random_draws > 0 }
                })
            })
            .collect()
    };
    let (first_seed, other_seeds) = seeds.split_first().expect("at least one seed");
    let first = run_all(picked.iter().map(|&i| (i, *first_seed)).collect());
    let drew: Vec<usize> =
        picked.iter().zip(&first).filter(|(_, r)| r.as_ref().is_none_or(|r| r.drew)).map(|(&i, _)| i).collect();
    let others = run_all(drew.iter().flat_map(|&i| other_seeds.iter().map(move |&sd| (i, sd))).collect());
    // The seeds a deterministic row did not run count as done.
    for _ in 0..(picked.len() - drew.len()) * other_seeds.len() {
        progress.item_done();
    }
    progress.finish();
    let stopped: Vec<String> = first.iter().chain(&others).flatten().filter_map(|r| r.stopped.clone()).collect();
    let stopped_error = (!stopped.is_empty()).then(|| {
        CliError::Stopped(format!(
            "stopped: {} of the runs stopped before their workload ended, so their rows cover only the part \
             simulated: {}; raise the bound named",
            stopped.len(),
            stopped.join(", ")
        ))
    });
    // Each row's runs in seed order; a row missing a seed's run (the command was stopped) is not
    // a row.
    let mut others = drew.iter().zip(others.chunks(other_seeds.len().max(1)));
    let out = picked
        .iter()
        .zip(&first)
        .filter_map(|(&i, run)| {
            let run = run.as_ref()?;
            let rest: Vec<Metrics> = if run.drew && !other_seeds.is_empty() {
                let (_, runs) = others.next().expect("a row that drew ran its other seeds");
                runs.iter().map(|r| r.as_ref().map(|x| x.metrics.clone())).collect::<Option<_>>()?
            } else {
                vec![run.metrics.clone(); other_seeds.len()]
            };
            Some((i, std::iter::once(run.metrics.clone()).chain(rest).collect()))
        })
        .collect();
    (out, stopped_error, progress.totals())
}

/// One run of a row on one seed.
struct Run {
    metrics: Metrics,
    /// Why it stopped before its workload ended.
    stopped: Option<String>,
    /// It drew a random number: another seed may give other figures.
    drew: bool,
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

/// A changed metric's range over the seeds in one row: its values, and its change against the
/// baseline seed by seed (`None` where the baseline's value is 0).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Spread {
    lo: f64,
    hi: f64,
    change: Option<(f64, f64)>,
}

impl Spread {
    /// Whether the change is smaller than the seeds' spread: its range over the seeds includes 0
    /// (never for the baseline, or with one seed).
    fn within(&self) -> bool {
        self.change.is_some_and(|(lo, hi)| lo <= 0.0 && hi >= 0.0 && lo < hi)
    }
}

/// The least and the greatest of `vals`.
fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)))
}

/// Each row's [`Spread`] of each [`CHANGED`] metric; `seeds[i]` is row i's runs in seed order,
/// row 0 the baseline's.
fn spreads(seeds: &[Vec<Metrics>]) -> Vec<Vec<Spread>> {
    seeds
        .iter()
        .enumerate()
        .map(|(i, runs)| {
            CHANGED
                .iter()
                .map(|(_, f)| {
                    let (lo, hi) = range(runs.iter().map(f));
                    let changes: Option<Vec<f64>> = (i > 0)
                        .then(|| runs.iter().zip(&seeds[0]).map(|(m, b)| change_pct(f(m), f(b))).collect())
                        .flatten();
                    Spread { lo, hi, change: changes.map(|c| range(c.into_iter())) }
                })
                .collect()
        })
        .collect()
}

/// Writes compare.csv into `dir` and prints the table (or JSON); shared with `merge`. `seeds[i]`:
/// row i's metrics on each of the header's seeds.
pub(crate) fn finish(
    h: &CompareHeader,
    seeds: &[Vec<Metrics>],
    dir: &Path,
    format: Format,
    digest: String,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let rows: Vec<Metrics> = seeds.iter().map(|r| r[0].clone()).collect();
    let rows = &rows[..];
    let spread = spreads(seeds);
    let path = dir.join("compare.csv");
    crate::atomic::write(&path, csv(h, rows, &spread))?;
    crate::manifest::record(dir, "compare", crate::manifest::Run::new(&h.scenario, h.seed, digest, &["compare.csv"]))?;
    match format {
        Format::Table => {
            out!("{}", table(h, rows, &spread));
            out!("{}", seed_lines(h, seeds, &spread));
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
                    let over: serde_json::Map<String, serde_json::Value> = CHANGED
                        .iter()
                        .zip(&spread[i])
                        .map(|((name, _), sp)| {
                            let v = serde_json::json!({ "min": sp.lo, "max": sp.hi,
                                "change_pct_min": sp.change.map(|c| c.0), "change_pct_max": sp.change.map(|c| c.1),
                                "within_spread": sp.within() });
                            (name.to_string(), v)
                        })
                        .collect();
                    serde_json::json!({ "variant": h.rows[i], "values": h.values[i], "metrics": m, "change": change,
                        "over_seeds": over, "priced_by": h.priced_by.get(i) })
                })
                .collect();
            let doc = serde_json::json!({ "scenario": h.scenario, "seed": h.seed, "seeds": h.seeds, "offered": h.offered,
                "keys": h.keys, "rows": v });
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

fn table(h: &CompareHeader, rows: &[Metrics], spread: &[Vec<Spread>]) -> String {
    let mut o = title(h, rows.len() - 1);
    let width = h.rows.iter().map(|r| r.chars().count()).max().unwrap_or(8).max(8);
    let _ = writeln!(
        o,
        "  {:<width$}  {:>18}  {:>18}  {:>20}  {:>18}  {:>18}  {:>8}  {:>6}  {:>7}",
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
        // The spread of CHANGED metric `k` (its index there) marks a change smaller than it.
        let cell = |v: f64, b: f64, d: usize, k: usize| {
            if i == 0 {
                format!("{v:.d$}")
            } else {
                let mark = if spread[i][k].within() { "~" } else { "" };
                format!("{v:.d$} ({}{mark})", pct(change_pct(v, b)))
            }
        };
        let _ = writeln!(
            o,
            "  {:<width$}  {:>18}  {:>18}  {:>20}  {:>18}  {:>18}  {:>8.2}  {:>6.1}  {:>7}",
            h.rows[i],
            cell(m.ttft_ms_p99, base.ttft_ms_p99, 1, 0),
            cell(m.tpot_ms_p99, base.tpot_ms_p99, 1, 1),
            cell(m.e2e_ms_p99, base.e2e_ms_p99, 0, 2),
            cell(m.throughput_rps, base.throughput_rps, 2, 3),
            cell(m.goodput_rps, base.goodput_rps, 2, 4),
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

/// Under the table: the seeds, each row's range over them, and what `~` means; or, when every
/// seed gave every row the same figures, that the seeds add nothing.
fn seed_lines(h: &CompareHeader, seeds: &[Vec<Metrics>], spread: &[Vec<Spread>]) -> String {
    let [first, .., last] = h.seeds[..] else { return String::new() };
    if seeds.iter().all(|runs| runs.iter().all(|m| m == &runs[0])) {
        return format!(
            "\n  seeds {first}–{last} give every variant the same figures: nothing in this scenario is drawn at random \
             (a trace replayed whole, fixed sizes), so each variant's one run stands for every seed\n"
        );
    }
    let width = h.rows.iter().map(|r| r.chars().count()).max().unwrap_or(8).max(8);
    let mut o = format!(
        "\n  figures of seed {first}; their range over seeds {first}–{last} below. ~: the change's range over the seeds \
         (each seed's variant against its baseline) includes 0, so it is smaller than the seeds' own spread\n"
    );
    for (i, sp) in spread.iter().enumerate() {
        let r = |k: usize, d: usize| format!("{:.d$}–{:.d$}", sp[k].lo, sp[k].hi);
        let _ = writeln!(
            o,
            "  {:<width$}  TTFT p99 {} ms, TPOT p99 {} ms, E2E p99 {} ms, goodput {} req/s",
            h.rows[i],
            r(0, 1),
            r(1, 1),
            r(2, 0),
            r(4, 2)
        );
    }
    o
}

/// A [`Spread`]'s cells in compare.csv: min, max, change % min and max, within the spread.
type SpreadCells =
    (crate::rows::Fixed<6>, crate::rows::Fixed<6>, Option<crate::rows::Fixed<3>>, Option<crate::rows::Fixed<3>>, bool);

fn csv(h: &CompareHeader, rows: &[Metrics], spread: &[Vec<Spread>]) -> String {
    use crate::rows::{header, ClassCells, CompareCells, Fixed, Plain};
    let classes = classes_of(rows);
    let mut head = vec!["variant".to_string()];
    head.extend(h.keys.iter().cloned());
    head.extend(header::<CompareCells>());
    head.extend(CHANGED.iter().map(|(n, _)| format!("{n}_change_pct")));
    for (n, _) in CHANGED {
        head.extend(["min", "max", "change_pct_min", "change_pct_max", "within_spread"].map(|k| format!("{n}_{k}")));
    }
    for c in &classes {
        head.extend(header::<ClassCells>().iter().map(|k| format!("class{c}_{k}")));
    }
    head.push(crate::rows::PRICED_BY.to_string());
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
        let over: Vec<SpreadCells> = spread[i]
            .iter()
            .map(|sp| {
                (Fixed(sp.lo), Fixed(sp.hi), sp.change.map(|c| Fixed(c.0)), sp.change.map(|c| Fixed(c.1)), sp.within())
            })
            .collect();
        let priced_by = h.priced_by.get(i).map(|l| l.join(" | ")).unwrap_or_default();
        w.serialize((&h.rows[i], &h.values[i], cells, changes, over, per_class, priced_by)).expect("writes to memory");
    }
    String::from_utf8(w.into_inner().expect("writes to memory")).expect("UTF-8 cells")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_only_columns_the_writers_write() {
        let cols = crate::rows::header::<crate::rows::CompareCells>();
        for (name, _, _) in crate::report::html::KEY_METRICS {
            assert!(cols.iter().any(|c| c == name), "the key table reads {name}, compare.csv has {cols:?}");
        }
        for (name, _) in CHANGED {
            assert!(cols.iter().any(|c| *c == name), "{name}_change_pct: compare.csv has no {name}");
        }
    }
}
