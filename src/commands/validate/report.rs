//! What `validate` reports: the JSON structures (`validate.json`, `--format json`), the CSV
//! (`validate.csv`, `--format csv`) and the tables.

use serde::Serialize;
use servesim_sim::metrics::compare::{abs_error_stats, error_pct, in_flight_by_little, rows, Row, RunMetrics};
use servesim_sim::Scenario;

use super::iterations::OpRow;
use super::runs::CAPACITY_DEFINITION;
use super::ProfileSource;

/// The acceptance target: median absolute error of TTFT, TPOT and E2E (mean and p99).
pub(super) const TARGET_PCT: f64 = 10.0;

/// One compared number with the roofline model's prediction beside it.
#[derive(Clone, Debug, Serialize)]
pub(super) struct ReportRow {
    pub metric: &'static str,
    pub stat: &'static str,
    pub measured: f64,
    pub predicted: f64,
    pub error_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline_error_pct: Option<f64>,
}

impl ReportRow {
    fn headline(&self) -> bool {
        Row { metric: self.metric, stat: self.stat, measured: 0.0, predicted: 0.0, error_pct: None }.is_headline()
    }
}

/// By how much the requests decoding at a time may differ, either way, before
/// [`in_flight_note`] says so.
pub(super) const IN_FLIGHT_RATIO: f64 = 1.5;

/// A note when a run and its simulation disagree on the requests decoding at a time (past
/// their first token, on average) by [`IN_FLIGHT_RATIO`] or more, and the side that decoded
/// fewer kept at least one request waiting for its first token on average: then it admitted
/// fewer at once while others queued, and the latency gap is queueing before it is kernel time.
/// (Without a queue the count follows the decode time instead: a faster engine decodes fewer
/// requests at a time under the same arrivals.) Each side is (before the first token, after).
pub(crate) fn in_flight_note(measured: (f64, f64), predicted: (f64, f64)) -> Option<String> {
    let ((_, m), (_, p)) = (measured, predicted);
    let (fewer, waiting) = if p > m { ("fewer", measured.0) } else { ("more", predicted.0) };
    if !(m > 0.0 && p > 0.0) || (1.0 / IN_FLIGHT_RATIO..=IN_FLIGHT_RATIO).contains(&(p / m)) || waiting < 1.0 {
        return None;
    }
    Some(format!(
        "the measured run kept {m:.1} requests decoding at a time on average, the simulation {p:.1}, while \
         {waiting:.1} waited for their first token: the run held {fewer} requests at once than the scenario lets \
         run, so what bounds them comes before the kernels' times — the engine's max_num_seqs and \
         max_num_batched_tokens, its KV pool (servesim memory), the client's concurrency and connections"
    ))
}

/// The requests in flight before and after their first token of a benchmark summary, by
/// Little's law from its throughput and its mean TTFT and E2E (when it has all three), measured
/// and predicted the same way.
pub(super) fn little_rows(rows: &[ReportRow]) -> Vec<ReportRow> {
    let get = |metric: &str, stat: &str| rows.iter().find(|r| (r.metric, r.stat) == (metric, stat));
    let (Some(x), Some(t), Some(e)) = (get("throughput_rps", "value"), get("ttft_ms", "mean"), get("e2e_ms", "mean"))
    else {
        return Vec::new();
    };
    let row = |metric, m: f64, p: f64| ReportRow {
        metric,
        stat: "value",
        measured: m,
        predicted: p,
        error_pct: error_pct(p, m),
        roofline: None,
        roofline_error_pct: None,
    };
    let m = in_flight_by_little(x.measured, t.measured, e.measured);
    let p = in_flight_by_little(x.predicted, t.predicted, e.predicted);
    vec![row("in_flight_to_first_token", m.0, p.0), row("in_flight_after_first_token", m.1, p.1)]
}

/// Rows of measured vs predicted (and roofline, when given).
pub(super) fn report_rows(
    measured: &RunMetrics,
    predicted: &RunMetrics,
    roofline: Option<&RunMetrics>,
) -> Vec<ReportRow> {
    let p = rows(measured, predicted);
    let r = roofline.map(|r| rows(measured, r));
    p.into_iter()
        .enumerate()
        .map(|(i, x)| ReportRow {
            metric: x.metric,
            stat: x.stat,
            measured: x.measured,
            predicted: x.predicted,
            error_pct: x.error_pct,
            roofline: r.as_ref().map(|r| r[i].predicted),
            roofline_error_pct: r.as_ref().and_then(|r| r[i].error_pct),
        })
        .collect()
}

/// Median absolute error of the headline rows (TTFT, TPOT, E2E; mean and p99).
pub(super) fn headline(rows: &[ReportRow], roofline: bool) -> Option<f64> {
    let e =
        rows.iter().filter(|r| r.headline()).filter_map(|r| if roofline { r.roofline_error_pct } else { r.error_pct });
    abs_error_stats(e).map(|(m, _)| m)
}

impl PooledErrors {
    /// From the rows of a run compared with its pooled-profile prediction.
    pub(super) fn new(rows: &[ReportRow], iterations: ErrorStats) -> PooledErrors {
        PooledErrors {
            headline_errors_pct: rows.iter().filter(|r| r.headline()).filter_map(|r| r.error_pct).collect(),
            headline_median_abs_error_pct: headline(rows, false),
            iterations,
        }
    }
}

/// Per-iteration errors of a cost model against measured iteration times, in percent.
#[derive(Clone, Debug, Default, Serialize)]
pub(super) struct ErrorStats {
    pub median_abs_pct: Option<f64>,
    pub p90_abs_pct: Option<f64>,
    /// Median signed error: negative means the model predicts too little time.
    pub median_pct: Option<f64>,
}

impl ErrorStats {
    pub(super) fn of(errors: &[f64]) -> ErrorStats {
        let stats = abs_error_stats(errors.iter().copied());
        let mut v: Vec<f64> = errors.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        ErrorStats {
            median_abs_pct: stats.map(|s| s.0),
            p90_abs_pct: stats.map(|s| s.1),
            median_pct: (!v.is_empty()).then(|| servesim_sim::metrics::stats::percentile_sorted(&v, 50.0)),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct IterationErrors {
    pub iterations: u64,
    pub profiled: ErrorStats,
    pub roofline: ErrorStats,
}

impl IterationErrors {
    pub(super) fn new(iterations: u64, profiled: &[f64], roofline: &[f64]) -> IterationErrors {
        IterationErrors { iterations, profiled: ErrorStats::of(profiled), roofline: ErrorStats::of(roofline) }
    }
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct CapacityReport {
    pub definition: &'static str,
    pub requests: u64,
    /// Measured on the emulated system (or given with --capacity).
    pub measured_rps: f64,
    pub given: bool,
    pub predicted_rps: Option<f64>,
    pub error_pct: Option<f64>,
    pub roofline_rps: Option<f64>,
    pub roofline_error_pct: Option<f64>,
}

impl CapacityReport {
    pub(super) fn new(
        measured: f64,
        given: bool,
        predicted: Option<f64>,
        roofline: Option<f64>,
        requests: u64,
    ) -> Self {
        CapacityReport {
            definition: CAPACITY_DEFINITION,
            requests,
            measured_rps: measured,
            given,
            predicted_rps: predicted,
            error_pct: predicted.and_then(|p| error_pct(p, measured)),
            roofline_rps: roofline,
            roofline_error_pct: roofline.and_then(|r| error_pct(r, measured)),
        }
    }
}

/// A run predicted with the pooled profile (every calibration phase's measurements), beside
/// the main prediction with the profile calibrated during that run.
#[derive(Clone, Debug, Serialize)]
pub(super) struct PooledErrors {
    /// Signed errors of TTFT, TPOT, E2E (mean and p99, in that order), percent.
    pub headline_errors_pct: Vec<f64>,
    /// Their median |error|.
    pub headline_median_abs_error_pct: Option<f64>,
    /// Its errors on the run's executed iterations.
    pub iterations: ErrorStats,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct LoadReport {
    pub load: f64,
    pub rate_rps: f64,
    pub rows: Vec<ReportRow>,
    /// Median |error| of TTFT, TPOT, E2E (mean and p99) at this load.
    pub headline_median_abs_error_pct: Option<f64>,
    pub roofline_headline_median_abs_error_pct: Option<f64>,
    pub measured: RunMetrics,
    pub predicted: RunMetrics,
    pub roofline: RunMetrics,
    /// The cost models' errors on the iterations this run executed.
    pub iterations: IterationErrors,
    /// The same run predicted with the pooled profile (when calibrated here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooled: Option<PooledErrors>,
    /// Per op over the run's iterations, and over its decode-only iterations: time inside the
    /// executed passes vs the profiled model (empty when the executor does not time ops).
    pub ops: Vec<OpRow>,
    pub decode_only_ops: Vec<OpRow>,
    pub preemptions: u64,
    /// Wall-clock seconds the emulated run took.
    pub emulation_s: f64,
}

impl LoadReport {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        load: f64,
        rate: f64,
        measured: RunMetrics,
        predicted: RunMetrics,
        roofline: RunMetrics,
        iterations: IterationErrors,
        pooled: Option<PooledErrors>,
        ops: Vec<OpRow>,
        decode_only_ops: Vec<OpRow>,
        preemptions: u64,
        emulation_s: f64,
    ) -> LoadReport {
        let rows = report_rows(&measured, &predicted, Some(&roofline));
        LoadReport {
            load,
            rate_rps: rate,
            headline_median_abs_error_pct: headline(&rows, false),
            roofline_headline_median_abs_error_pct: headline(&rows, true),
            rows,
            measured,
            predicted,
            roofline,
            iterations,
            pooled,
            ops,
            decode_only_ops,
            preemptions,
            emulation_s,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Acceptance {
    pub target_pct: f64,
    /// Median |error| of TTFT, TPOT and E2E (mean and p99) over the loads ≤ 0.8.
    pub up_to_80_pct: Option<f64>,
    /// The same over the loads above 0.8.
    pub above_80_pct: Option<f64>,
    pub met: Option<bool>,
    pub roofline_up_to_80_pct: Option<f64>,
    pub roofline_above_80_pct: Option<f64>,
    /// The same with each run predicted by the pooled profile (when calibrated here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooled_up_to_80_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooled_above_80_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct RunsReport {
    pub scenario: String,
    pub seed: u64,
    pub backend: &'static str,
    pub executor: String,
    pub clock: &'static str,
    /// Executions per emulated iteration (the median is used).
    pub repeat: u32,
    pub profile: String,
    pub calibrated_s: Option<f64>,
    /// How the calibration timed ops (`isolated` or `in-pass`), when it was made here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_timing: Option<&'static str>,
    pub capacity: CapacityReport,
    pub loads: Vec<LoadReport>,
    pub acceptance: Acceptance,
}

impl RunsReport {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        s: &Scenario,
        backend: &'static str,
        executor: String,
        clock: &'static str,
        repeat: u32,
        source: &ProfileSource,
        capacity: CapacityReport,
        loads: Vec<LoadReport>,
    ) -> RunsReport {
        let pool = |low: bool, roofline: bool| {
            let e = loads.iter().filter(|l| (l.load <= 0.8 + 1e-9) == low).flat_map(|l| {
                l.rows.iter().filter(|r| r.headline()).filter_map(move |r| {
                    if roofline {
                        r.roofline_error_pct
                    } else {
                        r.error_pct
                    }
                })
            });
            abs_error_stats(e).map(|(m, _)| m)
        };
        let up = pool(true, false);
        let pooled = |low: bool| {
            let e = loads
                .iter()
                .filter(|l| (l.load <= 0.8 + 1e-9) == low)
                .filter_map(|l| l.pooled.as_ref())
                .flat_map(|p| p.headline_errors_pct.iter().copied());
            abs_error_stats(e).map(|(m, _)| m)
        };
        RunsReport {
            scenario: s.name.clone(),
            seed: s.seed,
            backend,
            executor,
            clock,
            repeat,
            profile: source.path.display().to_string(),
            calibrated_s: source.calibrated_s,
            op_timing: source.op_timing.map(|t| t.name()),
            capacity,
            acceptance: Acceptance {
                target_pct: TARGET_PCT,
                up_to_80_pct: up,
                above_80_pct: pool(false, false),
                met: up.map(|m| m <= TARGET_PCT),
                roofline_up_to_80_pct: pool(true, true),
                roofline_above_80_pct: pool(false, true),
                pooled_up_to_80_pct: pooled(true),
                pooled_above_80_pct: pooled(false),
            },
            loads,
        }
    }
}

fn label(metric: &str, stat: &str) -> String {
    let m = match metric {
        "ttft_ms" => "TTFT ms",
        "tpot_ms" => "TPOT ms",
        "e2e_ms" => "E2E ms",
        "throughput_rps" => "throughput req/s",
        "output_tokens_per_s" => "output tok/s",
        "slo_attainment" => "SLO attainment",
        "in_flight_to_first_token" => "in flight, 1st token",
        "in_flight_after_first_token" => "in flight, decoding",
        m => m,
    };
    if stat == "value" {
        m.to_string()
    } else {
        format!("{m} {stat}")
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{v:+.1}%"))
}

fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

/// The rows as an aligned table.
pub(super) fn rows_table(rows: &[ReportRow]) -> String {
    let roof = rows.iter().any(|r| r.roofline.is_some());
    let mut o = format!("  {:<22}{:>12}{:>12}{:>10}", "", "measured", "predicted", "error");
    if roof {
        o += &format!("{:>12}{:>10}", "roofline", "error");
    }
    o += "\n";
    for r in rows {
        o += &format!(
            "  {:<22}{:>12}{:>12}{:>10}",
            label(r.metric, r.stat),
            num(r.measured),
            num(r.predicted),
            pct(r.error_pct)
        );
        if let Some(x) = r.roofline {
            o += &format!("{:>12}{:>10}", num(x), pct(r.roofline_error_pct));
        }
        o += "\n";
    }
    o
}

pub(super) fn runs_table(r: &RunsReport) -> String {
    let mut o = format!("servesim validate: {} (seed {}), backend {}\n", r.scenario, r.seed, r.backend);
    o += &format!("  emulated: {}; median of {} runs per iteration\n", r.executor, r.repeat);
    o += &match r.calibrated_s {
        Some(t) => format!(
            "  predicted: profiled cost model, each run by the profile calibrated while it ran (<run>/profile.json; \
             ops timed {}; {t:.1} s of calibration in all; pooled: {}); reference: roofline\n",
            r.op_timing.unwrap_or("?"),
            r.profile
        ),
        None => format!("  predicted: profiled cost model ({}); reference: roofline\n", r.profile),
    };
    let c = &r.capacity;
    o += &format!(
        "\ncapacity    {:.3} req/s {} ({} requests queued at once); predicted {} ({}), roofline {} ({})\n",
        c.measured_rps,
        if c.given { "given" } else { "measured" },
        c.requests,
        c.predicted_rps.map_or("n/a".into(), |x| format!("{x:.3}")),
        pct(c.error_pct),
        c.roofline_rps.map_or("n/a".into(), |x| format!("{x:.3}")),
        pct(c.roofline_error_pct)
    );
    for l in &r.loads {
        o += &format!(
            "\nload {:.2}   {:.3} req/s, {} requests ({} finished), {} preemptions; emulated in {:.1} s\n",
            l.load, l.rate_rps, l.measured.requests, l.measured.finished, l.preemptions, l.emulation_s
        );
        o += &rows_table(&l.rows);
        let it = &l.iterations;
        o += &format!(
            "  per iteration ({} executed): profiled median |error| {}, P90 {}, median {}; roofline median |error| {}\n",
            it.iterations,
            abs(it.profiled.median_abs_pct),
            abs(it.profiled.p90_abs_pct),
            pct(it.profiled.median_pct),
            abs(it.roofline.median_abs_pct)
        );
        o += &format!(
            "  median |error| of TTFT, TPOT, E2E (mean, p99): {} (roofline {})\n",
            abs(l.headline_median_abs_error_pct),
            abs(l.roofline_headline_median_abs_error_pct)
        );
        if !l.ops.is_empty() {
            o += &ops_table(&l.ops, &l.decode_only_ops);
        }
        if let Some(p) = &l.pooled {
            o += &format!(
                "  with the pooled profile (every phase's calibration): median |error| {}; per iteration {}, median {}\n",
                abs(p.headline_median_abs_error_pct),
                abs(p.iterations.median_abs_pct),
                pct(p.iterations.median_pct)
            );
        }
    }
    let a = &r.acceptance;
    o += &format!(
        "\nsummary     median |error| of TTFT, TPOT, E2E (mean and p99): {} at loads ≤ 0.8 (target {:.0}%: {}), {} above 0.8; roofline {} / {}\n",
        abs(a.up_to_80_pct),
        a.target_pct,
        match a.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "no load ≤ 0.8",
        },
        abs(a.above_80_pct),
        abs(a.roofline_up_to_80_pct),
        abs(a.roofline_above_80_pct)
    );
    if a.pooled_up_to_80_pct.is_some() || a.pooled_above_80_pct.is_some() {
        o += &format!(
            "            with the pooled profile instead of each run's own: {} at loads ≤ 0.8, {} above\n",
            abs(a.pooled_up_to_80_pct),
            abs(a.pooled_above_80_pct)
        );
    }
    o
}

/// Per op: all iterations, and decode-only ones, side by side (same op order).
fn ops_table(all: &[OpRow], decode: &[OpRow]) -> String {
    let mut o = format!(
        "  {:<26}{:>12}{:>12}{:>9}  {:>12}{:>12}{:>9}\n",
        "op (ms over the run)", "executed", "profiled", "error", "decode-only", "profiled", "error"
    );
    for r in all {
        o += &format!("  {:<26}{:>12.1}{:>12.1}{:>9}", r.op, r.measured_ms, r.profiled_ms, pct(r.error_pct));
        if let Some(d) = decode.iter().find(|d| d.op == r.op) {
            o += &format!("  {:>12.1}{:>12.1}{:>9}", d.measured_ms, d.profiled_ms, pct(d.error_pct));
        }
        o += "\n";
    }
    o
}

fn abs(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{v:.1}%"))
}

fn opt(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| v.to_string())
}

/// `load,rate_rps,metric,stat,measured,predicted,error_pct,roofline,roofline_error_pct`, one
/// row per compared number, the capacity first (load `capacity`).
pub(super) fn runs_csv(r: &RunsReport) -> String {
    let mut o = String::from("load,rate_rps,metric,stat,measured,predicted,error_pct,roofline,roofline_error_pct\n");
    let c = &r.capacity;
    o += &format!(
        "capacity,,capacity_rps,value,{},{},{},{},{}\n",
        c.measured_rps,
        opt(c.predicted_rps),
        opt(c.error_pct),
        opt(c.roofline_rps),
        opt(c.roofline_error_pct)
    );
    for l in &r.loads {
        for x in &l.rows {
            o += &format!(
                "{},{},{},{},{},{},{},{},{}\n",
                l.load,
                l.rate_rps,
                x.metric,
                x.stat,
                x.measured,
                x.predicted,
                opt(x.error_pct),
                opt(x.roofline),
                opt(x.roofline_error_pct)
            );
        }
    }
    o
}

/// The rows of one comparison as CSV (`metric,stat,measured,predicted,error_pct[,roofline,roofline_error_pct]`).
pub(super) fn rows_csv(rows: &[ReportRow]) -> String {
    let mut o = String::from("metric,stat,measured,predicted,error_pct,roofline,roofline_error_pct\n");
    for x in rows {
        o += &format!(
            "{},{},{},{},{},{},{}\n",
            x.metric,
            x.stat,
            x.measured,
            x.predicted,
            opt(x.error_pct),
            opt(x.roofline),
            opt(x.roofline_error_pct)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(metric: &'static str, stat: &'static str, measured: f64, predicted: f64) -> ReportRow {
        let error_pct = error_pct(predicted, measured);
        ReportRow { metric, stat, measured, predicted, error_pct, roofline: None, roofline_error_pct: None }
    }

    #[test]
    fn a_summarys_requests_in_flight_are_littles_law() {
        // 4 req/s at a mean TTFT of 250 ms and E2E of 2 s: 1 request before its first token,
        // 4 × 1.75 = 7 after it; predicted 5 req/s, 100 ms, 1.1 s: 0.5 and 5.
        let rows = [
            row("ttft_ms", "mean", 250.0, 100.0),
            row("e2e_ms", "mean", 2000.0, 1100.0),
            row("throughput_rps", "value", 4.0, 5.0),
        ];
        let l = little_rows(&rows);
        let got: Vec<_> = l.iter().map(|r| (r.metric, r.measured, r.predicted)).collect();
        assert_eq!(got, [("in_flight_to_first_token", 1.0, 0.5), ("in_flight_after_first_token", 7.0, 5.0)]);
        // Without a throughput there is nothing to say.
        assert!(little_rows(&rows[..2]).is_empty());
    }

    #[test]
    fn the_in_flight_note_speaks_from_half_again_either_way_with_a_queue() {
        let note = |m: (f64, f64), p: (f64, f64)| in_flight_note(m, p);
        assert_eq!(note((406.0, 10.0), (1.0, 14.9)), None);
        assert_eq!(note((1.0, 10.0), (406.0, 6.7)), None);
        assert_eq!(note((406.0, 0.0), (1.0, 6.0)), None);
        // Fewer decoding in the run while 406 waited: said.
        let fewer = note((406.0, 100.0), (0.5, 511.0)).unwrap();
        assert!(
            fewer.starts_with(
                "the measured run kept 100.0 requests decoding at a time on average, the simulation 511.0, while \
                 406.0 waited for their first token: the run held fewer"
            ),
            "{fewer}"
        );
        // Fewer decoding in the run without a queue (0.2 waiting): the decode time, not said.
        assert_eq!(note((0.2, 0.16), (0.01, 0.5)), None);
        // More in the run, the simulation queueing 3: said the other way.
        assert!(note((0.1, 10.0), (3.0, 6.6)).unwrap().contains("3.0 waited for their first token: the run held more"));
        assert_eq!(note((0.1, 10.0), (0.9, 6.6)), None);
    }
}
