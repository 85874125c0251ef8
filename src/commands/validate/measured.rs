//! `servesim validate --measured FILE --scenario S`: a real serving run against its
//! simulation — a per-request file's requests replayed at the same arrival times, or a
//! benchmark summary's benchmark re-created (`servesim_sim::calibration::Target`, as
//! `calibrate fit` sees runs).

use std::path::Path;

use serde::Serialize;
use servesim_sim::calibration::{self, Measured, Origin, Target};
use servesim_sim::engine;
use servesim_sim::metrics::compare::{error_pct, outcomes_of, run_metrics, RunMetrics};
use servesim_sim::metrics::measured::MeasuredRun;
use servesim_sim::Scenario;

use super::report::{self, headline, report_rows, ReportRow};
use super::{with_profile, Args, OutFormat};
use crate::error::{CliError, Result};
use crate::output;

#[derive(Debug, Serialize)]
pub(super) struct MeasuredReport {
    pub scenario: String,
    pub seed: u64,
    pub measured_file: String,
    pub format: &'static str,
    /// Requests replayed (the file's requests less the failed ones).
    pub replayed: u64,
    /// Failed requests in the file (an error, or no output), left out of both sides.
    pub failed: u64,
    /// Requests the simulation rejected (longer than the scenario allows).
    pub rejected_by_simulation: u64,
    pub notes: Vec<String>,
    /// What predicts: the cost source of each group (`the kernel database (...)`, `profile
    /// PATH`, `roofline`, `linear`) and the calibration that corrects it.
    pub predicted_by: String,
    pub rows: Vec<ReportRow>,
    pub headline_median_abs_error_pct: Option<f64>,
    pub roofline_headline_median_abs_error_pct: Option<f64>,
    pub measured: RunMetrics,
    pub predicted: RunMetrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RunMetrics>,
    /// The same model without its calibration (a calibrated scenario only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncalibrated: Option<RunMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncalibrated_headline_median_abs_error_pct: Option<f64>,
}

/// A benchmark summary against its re-created benchmark.
#[derive(Debug, Serialize)]
pub(super) struct SummaryReport {
    pub scenario: String,
    pub seed: u64,
    pub measured_file: String,
    pub predicted_by: String,
    pub runs: Vec<SummaryRun>,
}

#[derive(Debug, Serialize)]
pub(super) struct SummaryRun {
    pub label: String,
    pub format: String,
    pub requests: u64,
    pub notes: Vec<String>,
    pub rows: Vec<ReportRow>,
    /// Median |error| of the TTFT, TPOT, E2E means and p99s the file has.
    pub headline_median_abs_error_pct: Option<f64>,
}

/// What prices the scenario's groups, in words (one entry per distinct description).
pub(crate) fn predicted_by(s: &Scenario) -> String {
    let mut words: Vec<String> = Vec::new();
    for g in &s.groups {
        let w = g.cost_words();
        if !words.contains(&w) {
            words.push(w);
        }
    }
    words.join("; ")
}

/// The predicted run's metrics over the measured file's counted requests (request i of the
/// replay is request i of the file, both in arrival order).
fn predicted_metrics(s: &Scenario, run: &MeasuredRun, label: &str) -> Result<(RunMetrics, engine::RunOutput)> {
    let replay = calibration::replay(s, run, label).map_err(CliError::input)?;
    let out = engine::try_run(&replay).map_err(CliError::input)?;
    let mut o = outcomes_of(&out.recorder);
    let m = run.outcomes();
    if o.len() != m.len() {
        return Err(CliError::Other(anyhow::anyhow!(
            "the replay issued {} requests for the file's {}",
            o.len(),
            m.len()
        )));
    }
    for (p, m) in o.iter_mut().zip(&m) {
        p.counted = m.counted;
    }
    Ok((run_metrics(&o, &s.slo), out))
}

/// The scenario priced by the roofline instead of measured kernels (its groups' profiles,
/// from `cost.profile` or `cost.database`, dropped; no calibration), when it has any.
fn roofline_of(s: &Scenario) -> Option<Scenario> {
    if s.groups.iter().all(|g| g.profile.is_none()) {
        return None;
    }
    let mut r = calibration::uncalibrated(s);
    r.groups.iter_mut().for_each(|g| g.profile = None);
    super::set_profile_path(&mut r.resolved.cost, None);
    Some(r)
}

pub(super) fn run(a: &Args, s: Scenario, out_dir: &Path) -> Result<()> {
    let path = a.measured.as_ref().expect("checked by the caller");
    let file = crate::measured::read(path, a.measured_format, &a.column)?;
    match file.runs.as_slice() {
        [Measured::Requests(run)] => requests(a, s, out_dir, &file.origin, run),
        _ => summaries(a, &s, out_dir, &file.origin, &file.runs),
    }
}

fn requests(a: &Args, s: Scenario, out_dir: &Path, origin: &Origin, run: &MeasuredRun) -> Result<()> {
    let label = origin.file.clone();
    let (predictor, roofline, by) = match &a.profile {
        Some(p) => {
            let profile = crate::input::load_profile(p).map_err(CliError::input)?;
            let (sp, sr) = with_profile(&s, &profile, p)?;
            (sp, Some(sr), format!("profile {} (--profile)", p.display()))
        }
        None => {
            let by = predicted_by(&s);
            (s.clone(), roofline_of(&s), by)
        }
    };
    let measured = run_metrics(&run.outcomes(), &s.slo);
    let (predicted, out) = predicted_metrics(&predictor, run, &label)?;
    let roof = match &roofline {
        Some(sr) => Some(predicted_metrics(sr, run, &label)?.0),
        None => None,
    };
    let calibrated = predictor.groups.iter().any(|g| g.calibrated().is_some());
    let uncal = match calibrated {
        true => Some(predicted_metrics(&calibration::uncalibrated(&predictor), run, &label)?.0),
        false => None,
    };
    let dir = out_dir.join("measured");
    output::write_run(
        &dir.join("predicted"),
        &calibration::replay(&predictor, run, &label).map_err(CliError::input)?,
        &out.summary,
        &out.recorder,
    )?;
    let rows = report_rows(&measured, &predicted, roof.as_ref());
    let notes = notes_of(run, &measured, &predicted);
    let rep = MeasuredReport {
        scenario: s.name.clone(),
        seed: s.seed,
        measured_file: label,
        format: run.format.name(),
        replayed: run.requests.len() as u64,
        failed: run.failed,
        rejected_by_simulation: out.summary.requests.rejected,
        notes,
        predicted_by: by,
        headline_median_abs_error_pct: headline(&rows, false),
        roofline_headline_median_abs_error_pct: roof.as_ref().and_then(|_| headline(&rows, true)),
        uncalibrated_headline_median_abs_error_pct: uncal
            .as_ref()
            .and_then(|u| headline(&report_rows(&measured, u, None), false)),
        rows,
        measured,
        predicted,
        roofline: roof,
        uncalibrated: uncal,
    };
    let json = serde_json::to_string_pretty(&rep).expect("report serialises");
    let csv = report::rows_csv(&rep.rows);
    emit(a, out_dir, &json, &csv, &|| {
        outln!(
            "servesim validate --measured: {} ({} format) vs scenario {}",
            rep.measured_file,
            rep.format,
            rep.scenario
        );
        outln!(
            "  {} requests replayed at their arrival times; {} failed in the file (left out); {} rejected by the simulation",
            rep.replayed, rep.failed, rep.rejected_by_simulation
        );
        for n in &rep.notes {
            outln!("  note: {n}");
        }
        outln!("  predicted by {}\n", rep.predicted_by);
        out!("{}", report::rows_table(&rep.rows));
        outln!(
            "\nsummary     median |error| of TTFT, TPOT, E2E (mean and p99): {}",
            rep.headline_median_abs_error_pct.map_or("n/a".into(), |v| format!("{v:.1}%"))
        );
        if let Some(u) = rep.uncalibrated_headline_median_abs_error_pct {
            outln!("            without the calibration: {u:.1}%");
        }
        outln!("outputs     {}/", out_dir.display());
    })
}

/// A replayed file's notes: how it was read, whose clock its latencies are, and what the
/// requests in flight on both sides say ([`report::in_flight_note`]).
fn notes_of(run: &MeasuredRun, measured: &RunMetrics, predicted: &RunMetrics) -> Vec<String> {
    let mut notes = run.notes.clone();
    if run.engine_clock {
        notes.push("the simulation's latencies are compared as the engine's (no frontend path)".into());
    }
    let in_flight = |m: &RunMetrics| (m.in_flight_to_first_token, m.in_flight_after_first_token);
    notes.extend(report::in_flight_note(in_flight(measured), in_flight(predicted)));
    notes
}

/// Writes `validate.json` and `validate.csv` into `out_dir` and prints the report in `a.format`
/// (the table by `table`).
fn emit(a: &Args, out_dir: &Path, json: &str, csv: &str, table: &dyn Fn()) -> Result<()> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| CliError::Other(anyhow::anyhow!("cannot create {}: {e}", out_dir.display())))?;
    crate::atomic::write(&out_dir.join("validate.json"), json.to_string() + "\n")?;
    crate::atomic::write(&out_dir.join("validate.csv"), csv)?;
    if a.quiet {
        return Ok(());
    }
    match a.format {
        OutFormat::Json => outln!("{json}"),
        OutFormat::Csv => out!("{csv}"),
        OutFormat::Table => table(),
    }
    Ok(())
}

/// The metric and statistic of a summary's key (`ttft_ms.p99`) as the report names them.
fn row_names(key: &str) -> Option<(&'static str, &'static str)> {
    let (m, st) = key.split_once('.')?;
    let metric = ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"].into_iter().find(|x| *x == m);
    match (metric, st) {
        (Some(m), st) => ["mean", "p50", "p90", "p95", "p99"].into_iter().find(|x| *x == st).map(|s| (m, s)),
        (None, "requests_per_s") => Some(("throughput_rps", "value")),
        (None, "output_tokens_per_s") => Some(("output_tokens_per_s", "value")),
        _ => None,
    }
}

/// One run of a benchmark summary against its re-created benchmark.
fn summary_run(s: &Scenario, m: &Measured, origin: &Origin) -> Result<SummaryRun> {
    let t = Target::new(s, m, origin).map_err(CliError::input)?;
    let pred = t.predict_as_is().map_err(CliError::input)?;
    let mut rows: Vec<ReportRow> = t
        .stats
        .iter()
        .zip(&pred)
        .filter_map(|(st, p)| {
            let (metric, stat) = row_names(&st.key)?;
            Some(ReportRow {
                metric,
                stat,
                measured: st.measured,
                predicted: *p,
                error_pct: error_pct(*p, st.measured),
                roofline: None,
                roofline_error_pct: None,
            })
        })
        .collect();
    let mut notes = t.notes.clone();
    let little = report::little_rows(&rows);
    if let [before, after] = &little[..] {
        notes.extend(report::in_flight_note((before.measured, after.measured), (before.predicted, after.predicted)));
    }
    rows.extend(little);
    let heads = rows
        .iter()
        .filter(|r| ["ttft_ms", "tpot_ms", "e2e_ms"].contains(&r.metric) && ["mean", "p99"].contains(&r.stat))
        .filter_map(|r| r.error_pct);
    let headline = servesim_sim::metrics::compare::abs_error_stats(heads).map(|(m, _)| m);
    Ok(SummaryRun {
        label: t.label.clone(),
        format: t.format.clone(),
        requests: t.requests,
        notes,
        rows,
        headline_median_abs_error_pct: headline,
    })
}

fn summaries(a: &Args, s: &Scenario, out_dir: &Path, origin: &Origin, runs: &[Measured]) -> Result<()> {
    let out = runs.iter().map(|m| summary_run(s, m, origin)).collect::<Result<Vec<_>>>()?;
    let rep = SummaryReport {
        scenario: s.name.clone(),
        seed: s.seed,
        measured_file: origin.file.clone(),
        predicted_by: predicted_by(s),
        runs: out,
    };
    let json = serde_json::to_string_pretty(&rep).expect("report serialises");
    let mut csv = String::from("run,");
    csv += report::rows_csv(&[]).trim_end();
    csv.push('\n');
    for r in &rep.runs {
        for line in report::rows_csv(&r.rows).lines().skip(1) {
            csv += &format!("{},{line}\n", csv_quote(&r.label));
        }
    }
    emit(a, out_dir, &json, &csv, &|| {
        outln!("servesim validate --measured: {} vs scenario {}", rep.measured_file, rep.scenario);
        outln!("  predicted by {}", rep.predicted_by);
        for r in &rep.runs {
            outln!("\n{} ({}, {} requests)", r.label, r.format, r.requests);
            for n in &r.notes {
                outln!("  note: {n}");
            }
            out!("{}", report::rows_table(&r.rows));
            outln!(
                "  median |error| of the TTFT, TPOT, E2E means and p99s: {}",
                r.headline_median_abs_error_pct.map_or("n/a".into(), |v| format!("{v:.1}%"))
            );
        }
        outln!("outputs     {}/", out_dir.display());
    })
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
