//! `validate --silicon FILE --calibrate-by KEY[,KEY...]`: the scoreboard with a calibration
//! fitted per group of rows (`servesim_sim::calibration`, as `calibrate fit` fits one) on the
//! group's rows at its two lowest concurrencies, and reported on its other rows only, beside
//! the uncalibrated figures for the same rows: how well a calibration from a light benchmark
//! predicts the same deployment under load.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use servesim_sim::calibration::{self, FitOptions, Measured, Origin, Target};
use servesim_sim::metrics::bench::{BenchRun, Load};

use super::silicon::{median, Bench, Case, Outcome};

/// One held-out row: measured, uncalibrated and calibrated mean TTFT and TPOT.
#[derive(Clone, Debug, Serialize)]
pub(super) struct HeldRow {
    pub line: usize,
    pub id: String,
    pub group: String,
    pub framework: String,
    pub concurrency: u32,
    pub measured_ttft_ms: f64,
    pub uncalibrated_ttft_ms: f64,
    pub calibrated_ttft_ms: f64,
    pub measured_tpot_ms: f64,
    pub uncalibrated_tpot_ms: f64,
    pub calibrated_tpot_ms: f64,
}

/// One group's calibration.
#[derive(Clone, Debug, Serialize)]
pub(super) struct GroupFit {
    pub group: String,
    /// Rows fitted on (the two lowest concurrencies) and held out.
    pub fitted_rows: usize,
    pub held_out_rows: usize,
    /// The factors as fitted (`prefill` ×, ...), with their statuses; empty when the fit
    /// failed or was no better than the model (then the held-out rows are predicted
    /// uncalibrated, and `note` says why).
    pub factors: BTreeMap<String, (f64, String)>,
    pub note: Option<String>,
}

/// What the per-group calibration gives.
#[derive(Clone, Debug, Default, Serialize)]
pub(super) struct Calibrated {
    pub keys: Vec<String>,
    pub groups: Vec<GroupFit>,
    pub rows: Vec<HeldRow>,
}

/// A row as a measured benchmark summary: its concurrency, lengths, request count and measured
/// means.
fn bench_run(o: &Outcome, c: &Case, rounds: u32) -> BenchRun {
    let mut stats = BTreeMap::new();
    stats.insert("ttft_ms.mean".to_string(), c.measured_ttft);
    stats.insert("tpot_ms.mean".to_string(), c.measured_tpot);
    BenchRun {
        label: format!("row {} ({})", o.row.line, o.row.id),
        format: "silicon",
        load: Load { rate: None, burstiness: 1.0, concurrency: Some(c.concurrency) },
        prompt_tokens: c.isl as f64,
        output_tokens: c.osl as f64,
        requests: (rounds * c.concurrency) as u64,
        warmup: 0,
        stats,
        notes: Vec::new(),
        tp: None,
    }
}

/// Fits a calibration per group of the expressed rows and predicts the held-out ones.
pub(super) fn run(
    outs: &[Outcome],
    keys: &[String],
    bench: Bench,
    database: Option<&Path>,
    resources: &Arc<crate::scenario_file::FileResources>,
    quiet: bool,
) -> Calibrated {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, o) in outs.iter().enumerate() {
        if let (Ok(_), Some(Ok(_))) = (&o.case, &o.predicted) {
            let key: Vec<String> =
                keys.iter().map(|k| format!("{k}={}", o.row.fields.get(k).map_or("", |v| v))).collect();
            groups.entry(key.join(",")).or_default().push(i);
        }
    }
    let mut out = Calibrated { keys: keys.to_vec(), ..Calibrated::default() };
    for (name, idx) in groups {
        let mut conc: Vec<u32> = idx.iter().map(|&i| outs[i].case.as_ref().expect("expressed").concurrency).collect();
        conc.sort_unstable();
        conc.dedup();
        if conc.len() < 3 {
            continue; // nothing left to report on after the two lowest
        }
        let (low, high): (Vec<usize>, Vec<usize>) =
            idx.iter().partition(|&&i| outs[i].case.as_ref().expect("expressed").concurrency <= conc[1]);
        let targets = |rows: &[usize]| -> Result<Vec<Target>, String> {
            rows.iter()
                .map(|&i| {
                    let mut c = outs[i].case.clone().expect("expressed");
                    let s = super::silicon::scenario_of(&mut c, bench, database, None, 0.0, resources)?;
                    let m = Measured::Bench(bench_run(&outs[i], &c, bench.rounds));
                    let origin = Origin { file: format!("row {}", outs[i].row.line), sha256: String::new() };
                    Target::new(&calibration::uncalibrated(&s), &m, &origin)
                })
                .collect()
        };
        let fit = targets(&low).and_then(|fit_t| {
            let held_t = targets(&high)?;
            let mut opts = FitOptions::new(calibration::bounds_for(&super::silicon::scenario_of(
                &mut outs[low[0]].case.clone().expect("expressed"),
                bench,
                database,
                None,
                0.0,
                resources,
            )?));
            // The scoreboard needs predictions, not the factors' ranges: no profile scans, and a
            // shorter search.
            opts.scans = false;
            opts.max_iterations = 20;
            let mut progress = |line: String| {
                if !quiet {
                    errln!("calibrate-by: {name}: {line}");
                }
            };
            calibration::fit(&fit_t, &held_t, &opts, &crate::commands::calibrate_fit::Parallel, &mut progress)
        });
        if !quiet {
            errln!("calibrate-by: {name}: {} rows fitted, {} held out", low.len(), high.len());
        }
        let mut g = GroupFit {
            group: name.clone(),
            fitted_rows: low.len(),
            held_out_rows: high.len(),
            factors: BTreeMap::new(),
            note: None,
        };
        let fitted = match fit {
            Ok(f) if f.error_calibrated_pct < f.error_uncalibrated_pct => Some(f),
            Ok(f) => {
                g.note = Some(format!(
                    "the fit ({:.1}%) is no better than the model ({:.1}%) on the fitted rows: held-out rows predicted \
                     uncalibrated",
                    f.error_calibrated_pct, f.error_uncalibrated_pct
                ));
                Some(f)
            }
            Err(e) => {
                g.note = Some(format!("fit failed: {e}"));
                None
            }
        };
        if let Some(f) = &fitted {
            if g.note.is_none() {
                for o in &f.outcomes {
                    g.factors.insert(o.name.to_string(), (o.value, o.status.to_string()));
                }
            }
            for (h, &i) in f.held_out.iter().zip(&high) {
                let c = outs[i].case.as_ref().expect("expressed");
                let stat = |k: &str, which: usize| {
                    h.run.stats.iter().find(|s| s.stat == k).map_or(f64::NAN, |s| match which {
                        0 => s.uncalibrated,
                        _ if g.note.is_some() => s.uncalibrated,
                        _ => s.calibrated,
                    })
                };
                out.rows.push(HeldRow {
                    line: outs[i].row.line,
                    id: outs[i].row.id.clone(),
                    group: name.clone(),
                    framework: c.framework.clone(),
                    concurrency: c.concurrency,
                    measured_ttft_ms: c.measured_ttft,
                    uncalibrated_ttft_ms: stat("ttft_ms.mean", 0),
                    calibrated_ttft_ms: stat("ttft_ms.mean", 1),
                    measured_tpot_ms: c.measured_tpot,
                    uncalibrated_tpot_ms: stat("tpot_ms.mean", 0),
                    calibrated_tpot_ms: stat("tpot_ms.mean", 1),
                });
            }
        }
        out.groups.push(g);
    }
    out
}

impl Calibrated {
    /// The held-out rows' median |error| of TTFT and TPOT, uncalibrated and calibrated, over the
    /// rows `keep` picks: (rows, TTFT, TPOT) each.
    pub(super) fn medians(&self, keep: &dyn Fn(&HeldRow) -> bool) -> (usize, [Option<f64>; 4]) {
        let rows: Vec<&HeldRow> = self.rows.iter().filter(|r| keep(r)).collect();
        let e = |p: f64, m: f64| (p - m) / m * 100.0;
        let pick = |f: &dyn Fn(&HeldRow) -> f64| median(rows.iter().map(|r| f(r).abs()).collect());
        (
            rows.len(),
            [
                pick(&|r| e(r.uncalibrated_ttft_ms, r.measured_ttft_ms)),
                pick(&|r| e(r.calibrated_ttft_ms, r.measured_ttft_ms)),
                pick(&|r| e(r.uncalibrated_tpot_ms, r.measured_tpot_ms)),
                pick(&|r| e(r.calibrated_tpot_ms, r.measured_tpot_ms)),
            ],
        )
    }

    /// The table printed after the scoreboard's.
    pub(super) fn table(&self) -> String {
        let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.1}%"));
        let mut o = format!(
            "\ncalibrated per {} on each group's two lowest concurrencies, reported on its other rows only ({} groups):\n",
            self.keys.join(", "),
            self.groups.len()
        );
        o += &format!(
            "{:<28} {:>5} {:>22} {:>22}\n",
            "held-out rows", "rows", "TTFT |err| model → cal", "TPOT |err| model → cal"
        );
        let mut line = |label: &str, keep: &dyn Fn(&HeldRow) -> bool| {
            let (n, [t0, t1, p0, p1]) = self.medians(keep);
            if n > 0 {
                o += &format!(
                    "{label:<28} {n:>5} {:>22} {:>22}\n",
                    format!("{} → {}", pct(t0), pct(t1)),
                    format!("{} → {}", pct(p0), pct(p1))
                );
            }
        };
        line("all", &|_| true);
        for fw in ["vllm", "sglang", "trtllm"] {
            line(fw, &|r: &HeldRow| r.framework == fw);
        }
        let failed = self.groups.iter().filter(|g| g.note.is_some()).count();
        if failed > 0 {
            o += &format!("{failed} groups predicted uncalibrated (fit failed or no better; silicon.json says why)\n");
        }
        o
    }

    /// `silicon-calibrated.csv`.
    pub(super) fn csv(&self) -> String {
        let mut o = String::from(
            "line,id,group,framework,concurrency,measured_ttft_ms,uncalibrated_ttft_ms,calibrated_ttft_ms,\
             measured_tpot_ms,uncalibrated_tpot_ms,calibrated_tpot_ms\n",
        );
        for r in &self.rows {
            o += &format!(
                "{},{},\"{}\",{},{},{:.3},{:.3},{:.3},{:.4},{:.4},{:.4}\n",
                r.line,
                r.id,
                r.group.replace('"', "'"),
                r.framework,
                r.concurrency,
                r.measured_ttft_ms,
                r.uncalibrated_ttft_ms,
                r.calibrated_ttft_ms,
                r.measured_tpot_ms,
                r.uncalibrated_tpot_ms,
                r.calibrated_tpot_ms
            );
        }
        o
    }
}
