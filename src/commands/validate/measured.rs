//! `servesim validate --measured FILE --scenario S`: a real serving run's per-request file
//! against the simulation of the same requests, replayed at the same arrival times.

use std::path::Path;

use serde::Serialize;
use servesim_sim::engine;
use servesim_sim::metrics::compare::{outcomes_of, run_metrics, RunMetrics};
use servesim_sim::metrics::measured::{self, MeasuredFormat, MeasuredRun};
use servesim_sim::workload::trace::{self, Columns, TimeUnit, TraceFormat, TraceSource, TraceSpec};
use servesim_sim::workload::WorkloadSpec;
use servesim_sim::Scenario;

use super::report::{self, headline, report_rows, ReportRow};
use super::{with_profile, Args, MeasuredKind, OutFormat};
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
    /// What predicts: `profiled (PATH)` or `roofline`.
    pub predicted_by: String,
    pub rows: Vec<ReportRow>,
    pub headline_median_abs_error_pct: Option<f64>,
    pub roofline_headline_median_abs_error_pct: Option<f64>,
    pub measured: RunMetrics,
    pub predicted: RunMetrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RunMetrics>,
}

/// `s` replaying the measured requests (arrivals in ns after the first) from memory.
pub(super) fn replay_scenario(s: &Scenario, run: &MeasuredRun, label: &str) -> Result<Scenario> {
    let mut spec = TraceSpec::plain(TraceFormat::Csv, label);
    spec.columns = Some(Columns {
        arrival: Some("arrival_ns".into()),
        prompt_tokens: Some("prompt_tokens".into()),
        output_tokens: Some("output_tokens".into()),
        ..Columns::default()
    });
    spec.arrival_unit = Some(TimeUnit::Ns);
    spec.source = Some(TraceSource::from_bytes(label, run.replay_csv().into_bytes()));
    let scan = trace::scan(&spec).map_err(CliError::input)?;
    if let Some(src) = spec.source.as_mut() {
        src.scan = Some(scan);
    }
    let mut s = s.clone();
    s.workload = WorkloadSpec {
        duration_s: None,
        requests: None,
        arrival: None,
        prompt_tokens: None,
        output_tokens: None,
        trace: Some(spec),
        prefix: None,
        class_weights: None,
    };
    s.resolved.workload = s.workload.clone();
    Ok(s)
}

/// The predicted run's metrics over the measured file's counted requests (request i of the
/// replay is request i of the file, both in arrival order).
fn predicted_metrics(s: &Scenario, run: &MeasuredRun, label: &str) -> Result<(RunMetrics, engine::RunOutput)> {
    let replay = replay_scenario(s, run, label)?;
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

pub(super) fn run(a: &Args, s: Scenario, out_dir: &Path) -> Result<()> {
    let path = a.measured.as_ref().expect("checked by the caller");
    let label = path.display().to_string();
    let text = crate::input::read_text(path, "measured run")?;
    let format = match a.measured_format {
        MeasuredKind::Auto => None,
        MeasuredKind::Vllm => Some(MeasuredFormat::Vllm),
        MeasuredKind::Aiperf => Some(MeasuredFormat::Aiperf),
        MeasuredKind::Jsonl => Some(MeasuredFormat::Jsonl),
        MeasuredKind::Csv => Some(MeasuredFormat::Csv),
    };
    let run = measured::parse(&text, &label, format).map_err(CliError::input)?;
    let (predictor, roofline, by) = match &a.profile {
        Some(p) => {
            let profile = super::super::profile::load(p).map_err(CliError::input)?;
            let (sp, sr) = with_profile(&s, &profile, p)?;
            (sp, Some(sr), format!("profiled ({})", p.display()))
        }
        None => match super::profile_path(&s.resolved.cost) {
            Some(p) => {
                let mut sr = s.clone();
                sr.groups.iter_mut().for_each(|g| g.profile = None);
                super::set_profile_path(&mut sr.resolved.cost, None);
                (s.clone(), Some(sr), format!("profiled ({p}, the scenario's)"))
            }
            None => (s.clone(), None, "roofline (the scenario has no cost.profile)".into()),
        },
    };
    let measured = run_metrics(&run.outcomes(), &s.slo);
    let (predicted, out) = predicted_metrics(&predictor, &run, &label)?;
    let roof = match &roofline {
        Some(sr) => Some(predicted_metrics(sr, &run, &label)?.0),
        None => None,
    };
    let dir = out_dir.join("measured");
    output::write_run(
        &dir.join("predicted"),
        &replay_scenario(&predictor, &run, &label)?,
        &out.summary,
        &out.recorder,
    )?;
    let rows = report_rows(&measured, &predicted, roof.as_ref());
    let rep = MeasuredReport {
        scenario: s.name.clone(),
        seed: s.seed,
        measured_file: label,
        format: run.format.name(),
        replayed: run.requests.len() as u64,
        failed: run.failed,
        rejected_by_simulation: out.summary.requests.rejected,
        notes: run.notes.clone(),
        predicted_by: by,
        headline_median_abs_error_pct: headline(&rows, false),
        roofline_headline_median_abs_error_pct: roof.as_ref().and_then(|_| headline(&rows, true)),
        rows,
        measured,
        predicted,
        roofline: roof,
    };
    let json = serde_json::to_string_pretty(&rep).expect("report serialises");
    let csv = report::rows_csv(&rep.rows);
    crate::atomic::write(&out_dir.join("validate.json"), json.clone() + "\n")?;
    crate::atomic::write(&out_dir.join("validate.csv"), &csv)?;
    if !a.quiet {
        match a.format {
            OutFormat::Json => outln!("{json}"),
            OutFormat::Csv => out!("{csv}"),
            OutFormat::Table => {
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
                outln!("outputs     {}/", out_dir.display());
            }
        }
    }
    Ok(())
}
