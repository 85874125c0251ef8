//! The fit: the factors that bring a deployment's simulated runs closest to its measured ones.
//!
//! ```text
//!   error of a statistic   e = ln(predicted / measured)          (a symmetric relative error)
//!   loss                   L = Σ_runs Σ_stats c · huber(e)       c = w² / Σ_run w² (each run
//!                                                                weighs the same; w per stat)
//!   coordinates            ln(scale) for prefill, decode, collective; µs/1000, µs/10 and ms/10
//!                          for the host and frontend terms; each bounded
//!   search                 Levenberg–Marquardt on the errors (finite-difference Jacobian,
//!                          re-weighted for the Huber loss), from the identity
//!   identifiability        a factor no statistic moves with is unidentified from the start;
//!                          after a fit, the range over which L rises by R·s² (R runs; s the
//!                          errors' own RMS, at least 2%: as if every statistic moved by s)
//!                          is read from the loss's curvature (Gauss–Newton: ±√(R·s²·(JᵀCJ)⁻¹ᵢᵢ));
//!                          the factor whose range is widest against its limit (±25% for a
//!                          scale; ±50% of the value, at least 500 µs, 5 µs or 5 ms for the
//!                          added times) is left at its identity and the rest refitted, until
//!                          every fitted factor is within its limit; the factor it was most
//!                          correlated with carries its effect, and is `confounded` when its own
//!                          range with both free exceeded its limit
//!   held out               each --holdout run predicted; else, with two runs or more, each
//!                          run predicted by a fit on the others (leave one out)
//! ```
//! Every evaluation is a deterministic simulation, so the fit is deterministic; the binary's
//! [`Evaluator`] runs a step's simulations in parallel without changing any result.

use serde::Serialize;

use super::linalg;
use super::Target;
use crate::cost::{Factors, FACTORS};

/// Runs simulations: target `t` predicted with factors `f`, for each `(t, f)`, in order.
pub trait Evaluator: Sync {
    fn eval(&self, targets: &[Target], jobs: &[(usize, Factors)]) -> Vec<Result<Vec<f64>, String>>;
}

/// One simulation after another.
pub struct Sequential;

impl Evaluator for Sequential {
    fn eval(&self, targets: &[Target], jobs: &[(usize, Factors)]) -> Vec<Result<Vec<f64>, String>> {
        jobs.iter().map(|(t, f)| targets[*t].predict(f)).collect()
    }
}

/// What the fit may change.
#[derive(Clone, Debug)]
pub struct FitOptions {
    /// Factors the fit may move (the others stay at their identity, `fixed`).
    pub free: [bool; 6],
    /// The search's bounds per factor, in the factor's unit.
    pub bounds: [(f64, f64); 6],
    /// Levenberg–Marquardt iterations at most (per fit; the leave-one-out fits take a third).
    pub max_iterations: usize,
}

impl FitOptions {
    /// Every factor free, within `bounds`.
    pub fn new(bounds: [(f64, f64); 6]) -> FitOptions {
        FitOptions { free: [true; 6], bounds, max_iterations: 40 }
    }
}

/// One factor as the fit left it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FactorOutcome {
    pub name: &'static str,
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// `fitted` (determined by the runs), `confounded` (fitted, but the runs cannot tell it
    /// from an unidentified factor whose effect it carries too), `unidentified` (left at its
    /// identity) or `fixed` (not fitted, on request).
    pub status: &'static str,
    pub note: Option<String>,
}

/// One statistic: measured, and predicted without and with the calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatFit {
    pub stat: String,
    pub measured: f64,
    pub uncalibrated: f64,
    pub calibrated: f64,
}

/// A run the fit saw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunFit {
    pub label: String,
    pub file: String,
    pub sha256: String,
    /// `requests` or `summary`.
    pub kind: String,
    pub format: String,
    pub model: String,
    pub tp: u64,
    pub requests: u64,
    /// Median |error| of its statistics, %.
    pub error_uncalibrated_pct: f64,
    pub error_calibrated_pct: f64,
    /// Each statistic: [measured, uncalibrated, calibrated].
    #[serde(serialize_with = "stats_map")]
    pub stats: Vec<StatFit>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The statistics as a table of `key = [measured, uncalibrated, calibrated]`.
fn stats_map<S: serde::Serializer>(stats: &[StatFit], ser: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = ser.serialize_map(Some(stats.len()))?;
    for s in stats {
        m.serialize_entry(&s.stat, &[s.measured, s.uncalibrated, s.calibrated])?;
    }
    m.end()
}

/// A run the fit did not see, predicted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeldOut {
    /// `holdout` (given with --holdout) or `leave-one-out` (predicted by a fit on the others).
    pub how: &'static str,
    #[serde(flatten)]
    pub run: RunFit,
}

/// The fit's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fitted {
    #[serde(skip)]
    pub factors: Factors,
    /// In the order of [`FACTORS`] (the calibration file's `[factors]` holds them).
    #[serde(skip)]
    pub outcomes: Vec<FactorOutcome>,
    pub runs: Vec<RunFit>,
    pub held_out: Vec<HeldOut>,
    pub loss_uncalibrated: f64,
    pub loss_calibrated: f64,
    /// Median |error| over every statistic of the fitted runs, %.
    pub error_uncalibrated_pct: f64,
    pub error_calibrated_pct: f64,
    /// The same over the held-out runs' statistics (none without held-out runs).
    pub held_out_uncalibrated_pct: Option<f64>,
    pub held_out_calibrated_pct: Option<f64>,
    /// The scatter `s` the ranges assume (see the module's text).
    pub scatter: f64,
    pub simulations: u64,
    pub iterations: u64,
}

/// The natural unit of each factor's coordinate (scales: ln).
const UNIT: [f64; 6] = [1.0, 1.0, 1.0, 1000.0, 10.0, 10.0];
/// Finite-difference steps in coordinates.
const STEP: [f64; 6] = [0.08, 0.08, 0.08, 0.5, 0.5, 0.5];
/// The curvature's steps, in multiples of [`STEP`]: wide enough to see the valley's shape over
/// the range, not the simulation's small jumps.
const CURVATURE_STEP: f64 = 2.5;
/// A range wider than this (in coordinates) leaves a scale unidentified: ±25%.
const SCALE_LIMIT: f64 = 0.223;
/// The least scatter ranges assume: repeated benchmark runs differ by about this much.
const MIN_SCATTER: f64 = 0.02;
/// Huber's threshold on a log error.
const HUBER: f64 = 0.14;

fn to_x(i: usize, v: f64) -> f64 {
    if FACTORS[i].scale {
        v.ln()
    } else {
        v / UNIT[i]
    }
}

fn to_v(i: usize, x: f64) -> f64 {
    if FACTORS[i].scale {
        x.exp()
    } else {
        x * UNIT[i]
    }
}

/// A value as the calibration file keeps it: scales to 4 decimals, µs to 0.1, ms to 0.001.
fn rounded(i: usize, v: f64) -> f64 {
    let q = if FACTORS[i].scale {
        1e4
    } else if i == 5 {
        1e3
    } else {
        10.0
    };
    (v * q).round() / q
}

/// Median of |e| as a relative error in %.
fn median_pct(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let mut v: Vec<f64> = pairs.map(|(p, m)| (p / m - 1.0).abs() * 100.0).filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn huber(e: f64) -> f64 {
    let a = e.abs();
    if a <= HUBER {
        e * e
    } else {
        HUBER * (2.0 * a - HUBER)
    }
}

/// The fitting problem over a subset of the targets.
struct Problem<'a> {
    targets: &'a [Target],
    which: Vec<usize>,
    eval: &'a dyn Evaluator,
    lo: [f64; 6],
    hi: [f64; 6],
    /// Per error: its weight c (see the module's text).
    c: Vec<f64>,
    simulations: u64,
}

impl<'a> Problem<'a> {
    fn new(targets: &'a [Target], which: Vec<usize>, eval: &'a dyn Evaluator, bounds: &[(f64, f64); 6]) -> Problem<'a> {
        let c = which.iter().flat_map(|&t| targets[t].fit_weights()).collect();
        let lo = std::array::from_fn(|i| to_x(i, bounds[i].0.max(if FACTORS[i].scale { 1e-9 } else { f64::MIN })));
        let hi = std::array::from_fn(|i| to_x(i, bounds[i].1));
        Problem { targets, which, eval, lo, hi, c, simulations: 0 }
    }

    fn factors(x: &[f64; 6]) -> Factors {
        let mut f = Factors::IDENTITY;
        for (i, &xi) in x.iter().enumerate() {
            f.set(i, to_v(i, xi));
        }
        f
    }

    /// The predictions of every target of the problem at each point.
    fn predict(&mut self, points: &[[f64; 6]]) -> Result<Vec<Vec<Vec<f64>>>, String> {
        let jobs: Vec<(usize, Factors)> =
            points.iter().flat_map(|x| self.which.iter().map(move |&t| (t, Problem::factors(x)))).collect();
        self.simulations += jobs.len() as u64;
        let mut out = self.eval.eval(self.targets, &jobs).into_iter();
        let mut all = Vec::with_capacity(points.len());
        for _ in points {
            let mut per = Vec::with_capacity(self.which.len());
            for _ in &self.which {
                per.push(out.next().expect("one result per job")?);
            }
            all.push(per);
        }
        Ok(all)
    }

    /// The log errors of predictions, in the order of `c`.
    fn errors(&self, preds: &[Vec<f64>]) -> Vec<f64> {
        let mut e = Vec::with_capacity(self.c.len());
        for (p, &t) in preds.iter().zip(&self.which) {
            e.extend(self.targets[t].fit_errors(p));
        }
        debug_assert_eq!(e.len(), self.c.len());
        e
    }

    fn loss(&self, e: &[f64]) -> f64 {
        e.iter().zip(&self.c).map(|(e, c)| c * huber(*e)).sum()
    }

    fn errors_at(&mut self, points: &[[f64; 6]]) -> Result<Vec<Vec<f64>>, String> {
        let preds = self.predict(points)?;
        Ok(preds.iter().map(|p| self.errors(p)).collect())
    }

    /// The Jacobian of the errors over the coordinates `free` at `x` (errors `e` there), by
    /// forward differences stepping into the bounds.
    fn jacobian(&mut self, x: &[f64; 6], e: &[f64], free: &[usize], scale: f64) -> Result<Vec<Vec<f64>>, String> {
        let mut points = Vec::new();
        let mut steps = Vec::new();
        for &i in free {
            let mut p = *x;
            let step = STEP[i] * scale;
            let h = if x[i] + step <= self.hi[i] { step } else { -step };
            p[i] += h;
            points.push(p);
            steps.push(h);
        }
        let es = self.errors_at(&points)?;
        // J[k][j]: error k over coordinate free[j].
        let mut j = vec![vec![0.0; free.len()]; e.len()];
        for (col, (ep, h)) in es.iter().zip(&steps).enumerate() {
            for k in 0..e.len() {
                j[k][col] = (ep[k] - e[k]) / h;
            }
        }
        Ok(j)
    }

    /// JᵀWJ and JᵀWe for per-error weights `w`.
    fn normal(j: &[Vec<f64>], e: &[f64], w: &[f64]) -> (Vec<Vec<f64>>, Vec<f64>) {
        let p = j.first().map_or(0, |r| r.len());
        let mut a = vec![vec![0.0; p]; p];
        let mut g = vec![0.0; p];
        for k in 0..e.len() {
            for r in 0..p {
                g[r] += j[k][r] * w[k] * e[k];
                for s in 0..p {
                    a[r][s] += j[k][r] * w[k] * j[k][s];
                }
            }
        }
        (a, g)
    }

    /// Levenberg–Marquardt over `free` from `x`: the point, its errors and the iterations run.
    fn lm(
        &mut self,
        mut x: [f64; 6],
        free: &[usize],
        max_iterations: usize,
        progress: &mut dyn FnMut(String),
    ) -> Result<([f64; 6], Vec<f64>, u64), String> {
        let mut e = self.errors_at(&[x])?.remove(0);
        let mut loss = self.loss(&e);
        if free.is_empty() {
            return Ok((x, e, 0));
        }
        let mut lambda = 1e-2;
        let mut iterations = 0;
        for it in 0..max_iterations {
            iterations = it as u64 + 1;
            let j = self.jacobian(&x, &e, free, 1.0)?;
            let w: Vec<f64> =
                e.iter().zip(&self.c).map(|(e, c)| if e.abs() <= HUBER { *c } else { c * HUBER / e.abs() }).collect();
            let (a, g) = Problem::normal(&j, &e, &w);
            let mut accepted = false;
            for _ in 0..5 {
                // Three damping levels at once: the simulations of a step run together.
                let tries: Vec<f64> = [0.3, 1.0, 10.0].iter().map(|m| lambda * m).collect();
                let mut points = Vec::new();
                for &l in &tries {
                    let mut m = a.clone();
                    let top = (0..m.len()).map(|r| m[r][r]).fold(0.0f64, f64::max).max(1e-12);
                    for r in 0..m.len() {
                        m[r][r] += l * m[r][r] + 1e-9 * top;
                    }
                    let neg: Vec<f64> = g.iter().map(|v| -v).collect();
                    let d = linalg::solve(&m, &neg);
                    let mut p = x;
                    for (col, &i) in free.iter().enumerate() {
                        p[i] = (x[i] + d[col]).clamp(self.lo[i], self.hi[i]);
                    }
                    points.push(p);
                }
                let es = self.errors_at(&points)?;
                let best = (0..points.len())
                    .map(|k| (self.loss(&es[k]), k))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .expect("three tries");
                if best.0 < loss {
                    let gain = loss - best.0;
                    let moved = free.iter().map(|&i| (points[best.1][i] - x[i]).abs()).fold(0.0, f64::max);
                    x = points[best.1];
                    e = es[best.1].clone();
                    loss = best.0;
                    lambda = (tries[best.1] / 3.0).max(1e-7);
                    accepted = true;
                    progress(format!("iteration {}: loss {loss:.6} ({})", it + 1, describe(&x)));
                    if gain <= 1e-5 * loss + 1e-12 || moved < 1e-5 {
                        return Ok((x, e, iterations));
                    }
                    break;
                }
                lambda *= 30.0;
                if lambda > 1e8 {
                    break;
                }
            }
            if !accepted {
                break;
            }
        }
        Ok((x, e, iterations))
    }

    /// (JᵀCJ)⁻¹ over `free` at `x`, and the scatter s of the errors there.
    fn curvature(&mut self, x: &[f64; 6], e: &[f64], free: &[usize]) -> Result<(Vec<Vec<f64>>, f64), String> {
        let j = self.jacobian(x, e, free, CURVATURE_STEP)?;
        let (a, _) = Problem::normal(&j, e, &self.c);
        let runs = self.which.len() as f64;
        let rms = (e.iter().zip(&self.c).map(|(e, c)| c * e * e).sum::<f64>() / runs).sqrt();
        Ok((linalg::pinv(&a), rms.max(MIN_SCATTER)))
    }
}

/// The factors at `x`, in words.
fn describe(x: &[f64; 6]) -> String {
    let f = Problem::factors(x);
    format!(
        "prefill ×{:.3}, decode ×{:.3}, collective ×{:.3}, host {:+.0} µs {:+.1} µs/seq, frontend {:+.1} ms",
        f.prefill, f.decode, f.collective, f.host_base_us, f.host_per_seq_us, f.frontend_ms
    )
}

/// The largest half-range coordinate `i` may have and still count as identified, at value `v`.
fn limit(i: usize, v: f64) -> f64 {
    if FACTORS[i].scale {
        SCALE_LIMIT
    } else {
        (0.5 * v.abs() / UNIT[i]).max(0.5)
    }
}

/// Fits the factors on `targets`, reports them on `holdouts` (or, with none and two targets or
/// more, on each target left out of a fit of the others); `progress` gets a line per step.
pub fn fit(
    targets: &[Target],
    holdouts: &[Target],
    opts: &FitOptions,
    eval: &dyn Evaluator,
    progress: &mut dyn FnMut(String),
) -> Result<Fitted, String> {
    if targets.is_empty() {
        return Err("no measured run to fit on".into());
    }
    let mut p = Problem::new(targets, (0..targets.len()).collect(), eval, &opts.bounds);
    let x0: [f64; 6] = std::array::from_fn(|i| to_x(i, FACTORS[i].identity));
    let e0 = p.errors_at(&[x0])?.remove(0);
    let loss0 = p.loss(&e0);
    progress(format!("{} runs, {} statistics; uncalibrated loss {loss0:.6}", targets.len(), e0.len()));
    let mut status: [&'static str; 6] = std::array::from_fn(|i| if opts.free[i] { "fitted" } else { "fixed" });
    let mut notes: [Option<String>; 6] = Default::default();
    for i in 0..6 {
        if !opts.free[i] {
            notes[i] = Some("not fitted (left out with --fix)".into());
        }
    }
    // Factors no statistic moves with.
    let free0: Vec<usize> = (0..6).filter(|&i| opts.free[i]).collect();
    let j0 = p.jacobian(&x0, &e0, &free0, 1.0)?;
    for (col, &i) in free0.iter().enumerate() {
        let moves = j0.iter().map(|r| r[col].abs()).fold(0.0, f64::max);
        if moves < 1e-3 {
            status[i] = "unidentified";
            notes[i] = Some(match i {
                2 => {
                    "no statistic of these runs moves with it (no collective: one GPU per instance, or collectives too \
                      short to see)"
                        .into()
                }
                5 => "no statistic of these runs moves with it (their latencies are the engine's own, without the \
                      client's path)"
                    .into(),
                3 | 4 => "no statistic of these runs moves with it (the engine overlaps its CPU work with the GPU, \
                          and the GPU is the longer)"
                    .into(),
                _ => "no statistic of these runs moves with it".into(),
            });
        }
    }
    let mut x = x0;
    let mut iterations = 0;
    let mut partner_notes: [Vec<String>; 6] = Default::default();
    let (e, cov, scatter, free) = loop {
        let free: Vec<usize> = (0..6).filter(|&i| matches!(status[i], "fitted" | "confounded")).collect();
        progress(format!(
            "fitting {}",
            if free.is_empty() {
                "nothing".to_string()
            } else {
                free.iter().map(|&i| FACTORS[i].name).collect::<Vec<_>>().join(", ")
            }
        ));
        let (xf, e, its) = p.lm(x, &free, opts.max_iterations, progress)?;
        iterations += its;
        x = xf;
        if free.is_empty() {
            break (e, Vec::new(), MIN_SCATTER, free);
        }
        let (cov, s) = p.curvature(&x, &e, &free)?;
        let runs = p.which.len() as f64;
        let worst = free
            .iter()
            .enumerate()
            .map(|(col, &i)| {
                let half = (runs * s * s * cov[col][col]).sqrt();
                (half / limit(i, to_v(i, x[i])), col, i, half)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .expect("free factors");
        if worst.0 <= 1.0 {
            break (e, cov, s, free);
        }
        let (_, col, i, half) = worst;
        let runs = p.which.len() as f64;
        // The factor it is most confused with.
        let partner = free
            .iter()
            .enumerate()
            .filter(|&(c, _)| c != col)
            .map(|(c, &k)| (cov[col][c].abs() / (cov[col][col] * cov[c][c]).sqrt().max(f64::MIN_POSITIVE), k))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .filter(|(r, _)| *r > 0.5);
        let range = if FACTORS[i].scale {
            format!("×/÷ {:.2}", half.min(50.0).exp())
        } else {
            format!("± {:.0} {}", half * UNIT[i], FACTORS[i].unit)
        };
        status[i] = "unidentified";
        notes[i] = Some(match partner {
            Some((r, k)) => format!(
                "these runs determine it only to {range} (correlated {r:.2} with {}): left at its identity; measure \
                 runs that tell them apart",
                FACTORS[k].name
            ),
            None => format!("these runs determine it only to {range}: left at its identity"),
        });
        if let Some((r, k)) = partner {
            // Its partner now carries its effect too: say so, with the partner's range while
            // both were free.
            let pc = free.iter().position(|&f| f == k).expect("a free factor");
            let ph = (runs * s * s * cov[pc][pc]).sqrt();
            let show = |v: f64| {
                if FACTORS[k].scale {
                    format!("×{v:.3}")
                } else {
                    format!("{v:+.1} {}", FACTORS[k].unit)
                }
            };
            let (lo, hi) = (to_v(k, (x[k] - ph).max(p.lo[k])), to_v(k, (x[k] + ph).min(p.hi[k])));
            let note = format!(
                "these runs cannot tell it from {} (correlated {r:.2}): its value carries {}'s effect too; with both \
                 free its range was {} – {}",
                FACTORS[i].name,
                FACTORS[i].name,
                show(lo),
                show(hi)
            );
            partner_notes[k].push(note);
            if ph > limit(k, to_v(k, x[k])) {
                // Not determined on its own either: its value is the pair's, not its own.
                status[k] = "confounded";
            }
        }
        progress(format!("{} unidentified ({range}); refitting the others", FACTORS[i].name));
        x[i] = x0[i];
    };
    // The factors as the file keeps them, and the figures at exactly those values.
    let mut f = Factors::IDENTITY;
    for i in 0..6 {
        let kept = matches!(status[i], "fitted" | "confounded");
        f.set(i, if kept { rounded(i, to_v(i, x[i])) } else { FACTORS[i].identity });
    }
    let xr: [f64; 6] = std::array::from_fn(|i| to_x(i, f.get(i)));
    let preds = p.predict(&[x0, xr])?;
    let loss1 = p.loss(&p.errors(&preds[1]));
    let _ = e;
    let runs = p.which.len() as f64;
    let outcomes: Vec<FactorOutcome> = (0..6)
        .map(|i| {
            let (low, high, mut note) = match free.iter().position(|&k| k == i) {
                Some(col) => {
                    let half = (runs * scatter * scatter * cov[col][col]).sqrt();
                    let (l, h) = (to_v(i, (xr[i] - half).max(p.lo[i])), to_v(i, (xr[i] + half).min(p.hi[i])));
                    (Some(rounded(i, l.min(f.get(i)))), Some(rounded(i, h.max(f.get(i)))), notes[i].clone())
                }
                None => (None, None, notes[i].clone()),
            };
            if status[i] != "unidentified" && !partner_notes[i].is_empty() {
                note = Some(partner_notes[i].join("; "));
            }
            if matches!(status[i], "fitted" | "confounded") && (xr[i] <= p.lo[i] + 1e-9 || xr[i] >= p.hi[i] - 1e-9) {
                note = Some(format!(
                    "at the bound of its search range [{}, {}] {}: the runs ask for more than the model can correct",
                    opts.bounds[i].0, opts.bounds[i].1, FACTORS[i].unit
                ));
            }
            FactorOutcome { name: FACTORS[i].name, value: f.get(i), low, high, status: status[i], note }
        })
        .collect();
    let run_fits: Vec<RunFit> = (0..targets.len()).map(|t| run_fit(&targets[t], &preds[0][t], &preds[1][t])).collect();
    let all = |k: usize| {
        run_fits.iter().flat_map(move |r| {
            r.stats.iter().map(move |s| (if k == 0 { s.uncalibrated } else { s.calibrated }, s.measured))
        })
    };
    let (err0, err1) = (median_pct(all(0)), median_pct(all(1)));
    // Held out.
    let mut held_out = Vec::new();
    if !holdouts.is_empty() {
        let mut h = Problem::new(holdouts, (0..holdouts.len()).collect(), eval, &opts.bounds);
        let hp = h.predict(&[x0, xr])?;
        p.simulations += h.simulations;
        for (t, tg) in holdouts.iter().enumerate() {
            held_out.push(HeldOut { how: "holdout", run: run_fit(tg, &hp[0][t], &hp[1][t]) });
        }
    } else if targets.len() >= 2 {
        for left in 0..targets.len() {
            progress(format!("leave one out: fitting without {}", targets[left].label));
            let others: Vec<usize> = (0..targets.len()).filter(|&t| t != left).collect();
            let mut q = Problem::new(targets, others, eval, &opts.bounds);
            let (xl, _, _) = q.lm(xr, &free, (opts.max_iterations / 3).max(5), &mut |_| {})?;
            let mut r = Problem::new(targets, vec![left], eval, &opts.bounds);
            let lp = r.predict(&[xl])?;
            p.simulations += q.simulations + r.simulations;
            held_out.push(HeldOut { how: "leave-one-out", run: run_fit(&targets[left], &preds[0][left], &lp[0][0]) });
        }
    }
    let held = |k: usize| {
        held_out.iter().flat_map(move |h| {
            h.run.stats.iter().map(move |s| (if k == 0 { s.uncalibrated } else { s.calibrated }, s.measured))
        })
    };
    let (h0, h1) =
        if held_out.is_empty() { (None, None) } else { (Some(median_pct(held(0))), Some(median_pct(held(1)))) };
    Ok(Fitted {
        factors: f,
        outcomes,
        runs: run_fits,
        held_out,
        loss_uncalibrated: loss0,
        loss_calibrated: loss1,
        error_uncalibrated_pct: err0,
        error_calibrated_pct: err1,
        held_out_uncalibrated_pct: h0,
        held_out_calibrated_pct: h1,
        scatter,
        simulations: p.simulations,
        iterations,
    })
}

fn run_fit(t: &Target, uncal: &[f64], cal: &[f64]) -> RunFit {
    let (uncal, cal) = (t.stats_of(uncal), t.stats_of(cal));
    let stats: Vec<StatFit> = t
        .stats
        .iter()
        .zip(uncal.iter().zip(cal))
        .map(|(s, (&u, &c))| StatFit { stat: s.key.clone(), measured: s.measured, uncalibrated: u, calibrated: c })
        .collect();
    RunFit {
        label: t.label.clone(),
        file: t.origin.file.clone(),
        sha256: t.origin.sha256.clone(),
        kind: t.kind.to_string(),
        format: t.format.clone(),
        model: t.model.clone(),
        tp: t.tp,
        requests: t.requests,
        error_uncalibrated_pct: median_pct(stats.iter().map(|s| (s.uncalibrated, s.measured))),
        error_calibrated_pct: median_pct(stats.iter().map(|s| (s.calibrated, s.measured))),
        stats,
        notes: t.notes.clone(),
    }
}
