//! `servesim calibrate fit`: a calibration of the scenario's cost model fitted on the
//! deployment's own measured runs (`servesim_sim::calibration`), written as a TOML file that
//! `[cost] calibration` applies.

use std::path::PathBuf;

use rayon::prelude::*;
use serde::Serialize;
use servesim_sim::calibration::{self, fit::Evaluator, FitOptions, Fitted, Target};
use servesim_sim::cost::{Calibration, FactorEntry, Factors, FACTORS};
use servesim_sim::Scenario;

use super::Format;
use crate::error::{CliError, Result};
use crate::measured::{self, MeasuredKind};

#[derive(clap::Args)]
pub(crate) struct FitArgs {
    /// The deployment the runs measured: model, GPU, TP, engine, scheduler limits, cost source
    /// (its workload is replaced by each run's).
    #[arg(long)]
    scenario: PathBuf,
    /// A measured run to fit on (repeat the flag): a per-request file (vLLM --save-detailed
    /// JSON, SGLang bench_serving output, AIPerf profile_export.jsonl, vLLM's engine-side
    /// request stats, per-request JSONL or CSV) or a benchmark summary (vLLM/SGLang result
    /// JSON, AIPerf's summary export, the printed result, a CSV with a row per rate or
    /// concurrency). FILE@SCENARIO: the run was measured on that scenario's deployment (another
    /// model, TP degree or limits on the same GPU, engine and cost source).
    #[arg(long, required_unless_present = "prometheus")]
    measured: Vec<PathBuf>,
    /// A window of the engine's Prometheus metrics as a measured run: BEFORE,AFTER,SECONDS — two
    /// scrapes of vLLM's or SGLang's /metrics and the seconds between them (repeat the flag).
    /// Its arrivals (Poisson at the window's rate), lengths (their means) and percentiles (read
    /// within the histograms' buckets) are approximations (docs/calibration.md).
    #[arg(long, value_name = "BEFORE,AFTER,SECONDS")]
    prometheus: Vec<String>,
    /// A measured run the fit does not see, to report the calibration on (repeat the flag).
    /// Without one, two runs or more are each predicted by a fit on the others.
    #[arg(long)]
    holdout: Vec<PathBuf>,
    /// Format of the measured files (default: recognised from the content).
    #[arg(long, value_enum, default_value_t = MeasuredKind::Auto)]
    measured_format: MeasuredKind,
    /// Read the files' column (or JSON key) NAME as servesim's KEY, e.g. ttft_ms=first_token_latency (repeat).
    #[arg(long, value_name = "KEY=NAME", value_parser = measured::parse_column)]
    column: Vec<(String, String)>,
    /// Factors left at their identity, not fitted: prefill, decode, collective, host_base_us,
    /// host_per_seq_us, frontend_ms (comma-separated).
    #[arg(long, value_delimiter = ',')]
    fix: Vec<String>,
    /// The calibration file to write (TOML).
    #[arg(long)]
    out: PathBuf,
    /// Output on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// No progress on stderr, no table.
    #[arg(long, short)]
    quiet: bool,
}

/// The simulations of a fitting step, in parallel (results in job order: deterministic).
pub(crate) struct Parallel;

impl Evaluator for Parallel {
    fn eval(&self, targets: &[Target], jobs: &[(usize, Factors)]) -> Vec<std::result::Result<Vec<f64>, String>> {
        jobs.par_iter().map(|(t, f)| targets[*t].predict(f)).collect()
    }
}

/// What the calibration file records of its fit (`[fit]`).
#[derive(Serialize)]
struct FitRecord<'a> {
    servesim: &'static str,
    scenario: String,
    scenario_sha256: String,
    model: String,
    tp: u64,
    pp: u64,
    dp_attention: u64,
    ep: bool,
    instances: u32,
    engine_version: String,
    method: &'static str,
    uncertainty: &'static str,
    #[serde(flatten)]
    fitted: &'a Fitted,
}

const METHOD: &str = "each run simulated as it ran (requests replayed at their times, or the benchmark re-created); \
                      robust least squares (Huber at 15%) on the log errors of its statistics, each run weighing the \
                      same; Levenberg-Marquardt from the identity; servesim calibrate fit";
const UNCERTAINTY: &str = "low and high: the range over which the loss rises by R*s^2 (R runs, s the errors' RMS, at \
                           least 2%: as if every statistic moved by s), from the loss's curvature at the fit \
                           (Gauss-Newton); a factor wider than +-25% (scales) or +-50% (added times) is unidentified \
                           and left at its identity";

pub(crate) fn run(a: FitArgs) -> Result<()> {
    let s = crate::scenario_file::load(&a.scenario)?;
    let mut fixed = [false; 6];
    for name in &a.fix {
        let i = FACTORS.iter().position(|f| f.name == name.trim()).ok_or_else(|| {
            let names: Vec<&str> = FACTORS.iter().map(|f| f.name).collect();
            CliError::input(format!("--fix {name}: not a factor (one of {})", names.join(", ")))
        })?;
        fixed[i] = true;
    }
    let (gpu, engine, source) = deployment(&s)?;
    let mut targets = targets(&s, &a.measured, &a)?;
    for p in &a.prometheus {
        targets.push(prometheus_target(&s, p)?);
    }
    let notes = fit_notes(&s, &targets, a.quiet)?;
    let holdouts = targets_of(&s, &a.holdout, &a)?;
    let mut opts = FitOptions::new(calibration::bounds_for(&s));
    for (i, f) in fixed.iter().enumerate() {
        opts.free[i] = !f;
    }
    let quiet = a.quiet;
    let mut progress = |line: String| {
        if !quiet {
            errln!("calibrate fit: {line}");
        }
    };
    let fitted = calibration::fit(&targets, &holdouts, &opts, &Parallel, &mut progress).map_err(|e| {
        match crate::error::cancelled() {
            Some(stop) => stop,
            None => CliError::input(e),
        }
    })?;
    crate::error::check_cancel()?;
    let record = FitRecord {
        servesim: env!("CARGO_PKG_VERSION"),
        scenario: a.scenario.display().to_string(),
        scenario_sha256: measured::sha256_hex(crate::input::read_text(&a.scenario, "scenario")?.as_bytes()),
        model: s.model.name.clone(),
        tp: s.groups[0].tp,
        pp: s.groups[0].layout.pp,
        dp_attention: s.groups[0].layout.dp_attention,
        ep: s.groups[0].layout.ep,
        instances: s.instances(),
        engine_version: database_version(&s),
        method: METHOD,
        uncertainty: UNCERTAINTY,
        fitted: &fitted,
    };
    let cal = calibration_of(&s, [&gpu, &engine, &source], &fitted, &record, &a.out)?;
    let better = fitted.error_calibrated_pct < fitted.error_uncalibrated_pct;
    if !a.quiet {
        match a.format {
            Format::Json => outln!("{}", serde_json::to_string_pretty(&record).expect("serialises")),
            Format::Table => print_table(&s, &gpu, &engine, &source, &fitted, &notes, &targets),
        }
    }
    if !better {
        return Err(CliError::Other(anyhow::anyhow!(
            "{} not written: the calibrated fit (median |error| {:.1}%) is no better than the uncalibrated model's \
             ({:.1}%) on these runs",
            a.out.display(),
            fitted.error_calibrated_pct,
            fitted.error_uncalibrated_pct
        )));
    }
    let mut text = String::from(
        "# servesim calibration: correction factors of the cost model, fitted on measured runs of one deployment\n\
         # (servesim calibrate fit). `[cost] calibration = \"this file\"` applies it; docs/calibration.md.\n",
    );
    text += &toml::to_string(&cal).map_err(|e| CliError::Other(anyhow::anyhow!("{e}")))?;
    crate::atomic::write(&a.out, text)?;
    if !a.quiet && a.format == Format::Table {
        outln!("wrote {}", a.out.display());
    }
    Ok(())
}

/// The calibration file's contents for `fitted` on the deployment `[gpu, engine, source]`,
/// with its fit record; an error (`out` not written) when its factors price an iteration of
/// the scenario's groups faster than their GPU can run it.
fn calibration_of(
    s: &servesim_sim::Scenario,
    [gpu, engine, source]: [&str; 3],
    fitted: &calibration::Fitted,
    record: &FitRecord,
    out: &std::path::Path,
) -> Result<Calibration> {
    let mut cal = Calibration::of(gpu, engine, source, &fitted.factors);
    for (i, o) in fitted.outcomes.iter().enumerate() {
        let info = &FACTORS[i];
        cal.factors.set(
            i,
            FactorEntry {
                value: o.value,
                low: o.low,
                high: o.high,
                status: o.status.to_string(),
                note: o.note.clone(),
                meaning: Some(info.meaning.to_string()),
            },
        );
    }
    cal.fit = Some(toml::Table::try_from(record).map_err(|e| CliError::Other(anyhow::anyhow!("{e}")))?);
    // A fit that prices an iteration faster than the GPU can run it is not written.
    let mut applied = s.clone();
    for g in &mut applied.groups {
        g.calibration = Some(Ok(std::sync::Arc::new(cal.clone())));
    }
    if let Err(e) = servesim_sim::engine::check_calibrations(&applied) {
        return Err(CliError::Other(anyhow::anyhow!("{} not written: {}", out.display(), e.message())));
    }
    Ok(cal)
}

/// The GPU, engine and cost source every group of the scenario shares (a calibration corrects
/// one of each).
fn deployment(s: &Scenario) -> Result<(String, String, String)> {
    let engines = s.serving_engine_of_groups();
    let first = (s.groups[0].gpu.name.clone(), engines[0].clone(), s.groups[0].cost_source().to_string());
    for (g, e) in s.groups.iter().zip(&engines).skip(1) {
        let this = (g.gpu.name.clone(), e.clone(), g.cost_source().to_string());
        if this != first {
            return Err(CliError::input(format!(
                "{}: group {} runs {} under {} priced by {}, group {} {} under {} priced by {}: fit one deployment \
                 (one GPU, engine and cost source) at a time",
                s.name, s.groups[0].name, first.0, first.1, first.2, g.name, this.0, this.1, this.2
            )));
        }
    }
    Ok(first)
}

fn database_version(s: &Scenario) -> String {
    match &s.groups[0].cost {
        servesim_sim::cost::CostSpec::Roofline(c) => match c.database_version() {
            Some(v) => v,
            None if c.database_framework().is_some() => "newest in the database".into(),
            None => "not recorded".into(),
        },
        _ => "not recorded".into(),
    }
}

fn targets_of(s: &Scenario, files: &[PathBuf], a: &FitArgs) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let ours = deployment(s)?;
    for arg in files {
        let (file, scenario) = split_measured(arg);
        let own;
        let on = match scenario {
            Some(p) => {
                own = crate::scenario_file::load(&p)?;
                let theirs = deployment(&own)?;
                if theirs != ours {
                    return Err(CliError::input(format!(
                        "{}: {} runs {} under {} priced by {}, the fit's scenario {} under {} priced by {}: a \
                         calibration corrects one GPU, engine and cost source",
                        arg.display(),
                        p.display(),
                        theirs.0,
                        theirs.1,
                        theirs.2,
                        ours.0,
                        ours.1,
                        ours.2
                    )));
                }
                &own
            }
            None => s,
        };
        let m = measured::read(&file, a.measured_format, &a.column)?;
        let on = calibration::uncalibrated(on);
        for run in &m.runs {
            out.push(Target::new(&on, run, &m.origin).map_err(CliError::input)?);
        }
    }
    Ok(out)
}

/// `--prometheus BEFORE,AFTER,SECONDS` as a target on `s`.
fn prometheus_target(s: &Scenario, arg: &str) -> Result<Target> {
    let parts: Vec<&str> = arg.rsplitn(3, ',').collect();
    let [secs, after, before] = parts.as_slice() else {
        return Err(CliError::input(format!("--prometheus {arg}: expected BEFORE,AFTER,SECONDS")));
    };
    let window: f64 = secs
        .trim()
        .parse()
        .map_err(|_| CliError::input(format!("--prometheus {arg}: {secs:?} is not a number of seconds")))?;
    let (b, a) = (std::path::Path::new(before), std::path::Path::new(after));
    let (tb, ta) = (crate::input::read_text(b, "metrics scrape")?, crate::input::read_text(a, "metrics scrape")?);
    let label = format!("{before} → {after}");
    let run = servesim_sim::metrics::prometheus::window(&tb, &ta, window, &label).map_err(CliError::input)?;
    let origin = servesim_sim::calibration::Origin {
        file: label,
        sha256: measured::sha256_hex(format!("{tb}\n{ta}").as_bytes()),
    };
    Target::new(&calibration::uncalibrated(s), &servesim_sim::calibration::Measured::Bench(run), &origin)
        .map_err(CliError::input)
}

/// `FILE` or `FILE@SCENARIO` (a path that exists as given is a file, whatever it holds).
fn split_measured(arg: &std::path::Path) -> (PathBuf, Option<PathBuf>) {
    if arg.exists() {
        return (arg.to_path_buf(), None);
    }
    let text = arg.to_string_lossy();
    match text.rsplit_once('@') {
        Some((f, sc)) if !f.is_empty() && !sc.is_empty() => (PathBuf::from(f), Some(PathBuf::from(sc))),
        _ => (arg.to_path_buf(), None),
    }
}

fn targets(s: &Scenario, files: &[PathBuf], a: &FitArgs) -> Result<Vec<Target>> {
    let t = targets_of(s, files, a)?;
    for h in &a.holdout {
        if files.iter().any(|f| split_measured(f).0 == split_measured(h).0) {
            return Err(CliError::input(format!("--holdout {}: also given with --measured", h.display())));
        }
    }
    Ok(t)
}

/// The notes of the fit's table: a calibration the scenario had, and [`in_flight_notes`] (also
/// said on stderr before the fit, which may fail on such a run).
fn fit_notes(s: &Scenario, targets: &[Target], quiet: bool) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    if s.groups.iter().any(|g| g.calibration.is_some()) {
        notes.push("fitted on the scenario without its cost.calibration".to_string());
    }
    for n in in_flight_notes(targets)? {
        if !quiet {
            errln!("calibrate fit: note: {n}");
        }
        notes.push(n);
    }
    Ok(notes)
}

/// For each run whose measured requests decoding at a time differ from the scenario's by half
/// again or more while requests queued ([`crate::commands::validate::in_flight_note`]), a note
/// naming the run: its latency gap is a bound on requests at once, which no factor of the cost
/// model should absorb.
fn in_flight_notes(targets: &[Target]) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for t in targets {
        if let Some([m, p]) = t.in_flight().map_err(CliError::input)? {
            if let Some(n) = crate::commands::validate::in_flight_note(m, p) {
                notes.push(format!("{}: {n}; fix the scenario's limits before fitting on this run", t.label));
            }
        }
    }
    Ok(notes)
}

fn print_table(s: &Scenario, gpu: &str, engine: &str, source: &str, f: &Fitted, notes: &[String], targets: &[Target]) {
    outln!(
        "servesim calibrate fit: {} run{} of {} on {gpu} (tp {}, engine {engine}, priced by {source}); {} simulations",
        targets.len(),
        if targets.len() == 1 { "" } else { "s" },
        s.model.name,
        s.groups[0].tp,
        f.simulations
    );
    for n in notes {
        outln!("  note: {n}");
    }
    outln!("\n{:<16} {:>10} {:>22}  status", "factor", "value", "range");
    for o in &f.outcomes {
        let info = FACTORS.iter().find(|i| i.name == o.name).expect("a factor");
        let show = |v: f64| if info.scale { format!("×{v:.3}") } else { format!("{v:+.1} {}", info.unit) };
        let range = match (o.low, o.high) {
            (Some(l), Some(h)) => format!("{} – {}", show(l), show(h)),
            _ => "—".into(),
        };
        outln!("{:<16} {:>10} {:>22}  {}", o.name, show(o.value), range, o.status);
        if let Some(n) = &o.note {
            outln!("{:<16} {n}", "");
        }
    }
    outln!("\nmedian |error| of each run's statistics (uncalibrated → calibrated):");
    for r in &f.runs {
        outln!(
            "  {:<40} {:>6.1}% → {:>5.1}%   ({} requests)",
            r.label,
            r.error_uncalibrated_pct,
            r.error_calibrated_pct,
            r.requests
        );
    }
    outln!("  {:<40} {:>6.1}% → {:>5.1}%", "all fitted statistics", f.error_uncalibrated_pct, f.error_calibrated_pct);
    if !f.held_out.is_empty() {
        outln!("held out (runs the fit did not see):");
        for h in &f.held_out {
            outln!(
                "  {:<40} {:>6.1}% → {:>5.1}%   ({})",
                h.run.label,
                h.run.error_uncalibrated_pct,
                h.run.error_calibrated_pct,
                h.how
            );
        }
        if let (Some(u), Some(c)) = (f.held_out_uncalibrated_pct, f.held_out_calibrated_pct) {
            outln!("  {:<40} {:>6.1}% → {:>5.1}%", "all held-out statistics", u, c);
            if c >= u {
                outln!(
                    "  warning: the calibration does not predict the held-out runs better than the uncalibrated model"
                );
            }
        }
    }
}
