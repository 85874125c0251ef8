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
//!                          after a fit, each factor's range at the runs' own noise (2%) is read
//!                          from the loss's curvature (Gauss–Newton: ±√(R·0.02²·(JᵀCJ)⁻¹ᵢᵢ),
//!                          R runs: the loss rise as if every statistic moved by 2%);
//!                          the factor whose range is widest against its limit (±25% for a
//!                          scale; ±50% of the value, at least 500 µs, 5 µs or 5 ms for the
//!                          added times), among those whose range holds their identity (the
//!                          runs cannot tell them from no correction), is left at its identity
//!                          and the rest refitted, until none is left; a factor that then moves
//!                          beyond its range carries the dropped one's effect (`confounded`)
//!   ranges                 profile scans: each factor stepped away from the fit on each side,
//!                          every other refitted, until L rises by R·s² (s the errors' own RMS,
//!                          at least 2%: a model that misfits the runs reports wider ranges);
//!                          a factor's range spans every point within that rise; a fitted
//!                          factor whose range is wider than its limit, or twice its range with
//!                          the unidentified ones left at their identity, is `confounded`; the factor it was most
//!                          correlated with carries its effect, and is `confounded` when the two
//!                          were correlated 0.9 or more, or its own range with both free
//!                          exceeded its limit
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
    /// Ranges from profile scans (else from the loss's curvature at the fit alone: cheaper,
    /// and narrower where the runs leave a curved valley).
    pub scans: bool,
}

impl FitOptions {
    /// Every factor free, within `bounds`.
    pub fn new(bounds: [(f64, f64); 6]) -> FitOptions {
        FitOptions { free: [true; 6], bounds, max_iterations: 40, scans: true }
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
/// The steps of the search's last iterations, in multiples of [`STEP`].
const POLISH_STEP: f64 = 0.4;
/// Steps of a profile scan on each side of the fit at most (each twice the last).
const SCAN_STEPS: usize = 3;
/// Iterations refitting the other factors at each point of a scan.
const SCAN_REFIT: usize = 2;
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
        step: f64,
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
            let j = self.jacobian(&x, &e, free, step)?;
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
                    for (r, row) in m.iter_mut().enumerate() {
                        row[r] += l * row[r] + 1e-9 * top;
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

    /// The search: Levenberg–Marquardt from `x` over `free` with coarse finite differences,
    /// then finer ones near the minimum (the coarse ones average over the simulation's small
    /// jumps on the way there). The point and the iterations run.
    fn search(
        &mut self,
        x: [f64; 6],
        free: &[usize],
        max_iterations: usize,
        progress: &mut dyn FnMut(String),
    ) -> Result<([f64; 6], u64), String> {
        let (x, _, a) = self.lm(x, free, max_iterations, 1.0, progress)?;
        let (x, _, b) = self.lm(x, free, max_iterations / 2, POLISH_STEP, progress)?;
        Ok((x, a + b))
    }

    /// Profile scans from the fit `x` (loss `loss`): each factor of `free` stepped away on
    /// each side, the others refitted (briefly), until the loss rises by `rise` or the bound is
    /// met. Returns each factor's own range, each factor's range over every point within the
    /// rise (the union), and a point better than `x`, if one was met.
    fn scan(
        &mut self,
        x: &[f64; 6],
        loss: f64,
        rise: f64,
        free: &[usize],
        cov: &[Vec<f64>],
        s: f64,
    ) -> Result<Scan, String> {
        let runs = self.which.len() as f64;
        let own = x.map(|v| (v, v));
        let mut out = Scan { own, union: own, better: None, scatter: s };
        let mut best = loss;
        for (col, &i) in free.iter().enumerate() {
            let others: Vec<usize> = free.iter().copied().filter(|&k| k != i).collect();
            let quad = (runs * s * s * cov[col][col]).sqrt();
            for side in [-1.0, 1.0] {
                let bound = if side < 0.0 { self.lo[i] } else { self.hi[i] };
                let mut h = quad.max(STEP[i]).min(4.0);
                let mut last = (*x, loss, 0.0);
                for _ in 0..SCAN_STEPS {
                    let mut at = last.0;
                    at[i] = (x[i] + side * h).clamp(self.lo[i], self.hi[i]);
                    let (xp, ep, _) = self.lm(at, &others, SCAN_REFIT, 1.0, &mut |_| {})?;
                    let lp = self.loss(&ep);
                    if lp < best {
                        best = lp;
                        out.better = Some((xp, lp));
                    }
                    if lp - loss > rise {
                        // The range ends between the last point within and this one.
                        let frac = ((loss + rise - last.1) / (lp - last.1).max(1e-12)).clamp(0.0, 1.0);
                        let end = x[i] + side * (last.2 + frac * (h - last.2));
                        widen(&mut out.own[i], end);
                        break;
                    }
                    for (r, &v) in out.union.iter_mut().zip(&xp) {
                        widen(r, v);
                    }
                    widen(&mut out.own[i], xp[i]);
                    last = (xp, lp, h);
                    if (xp[i] - bound).abs() < 1e-12 {
                        break;
                    }
                    h *= 2.0;
                }
            }
            widen(&mut out.union[i], out.own[i].0);
            widen(&mut out.union[i], out.own[i].1);
        }
        Ok(out)
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

/// A factor's value with its unit: `×1.500`, `+3000.0 µs`.
fn show(i: usize, v: f64) -> String {
    if FACTORS[i].scale {
        format!("×{v:.3}")
    } else {
        format!("{v:+.1} {}", FACTORS[i].unit)
    }
}

/// What the profile scans found (coordinates).
#[derive(Clone, Debug, Default)]
struct Scan {
    /// Each factor's range from its own scan.
    own: [(f64, f64); 6],
    /// Each factor's range over every point the scans met within the loss rise.
    union: [(f64, f64); 6],
    /// A point with a lower loss than the fit's, if one was met.
    better: Option<([f64; 6], f64)>,
    scatter: f64,
}

impl Scan {
    /// The ranges the loss's curvature at `x` gives alone (±√(R·s²·(JᵀCJ)⁻¹ᵢᵢ)).
    fn quadratic(x: &[f64; 6], free: &[usize], cov: &[Vec<f64>], s: f64, runs: f64) -> Scan {
        let mut out = Scan { own: x.map(|v| (v, v)), union: [(0.0, 0.0); 6], better: None, scatter: s };
        for (col, &i) in free.iter().enumerate() {
            let h = (runs * s * s * cov[col][col]).sqrt();
            out.own[i] = (x[i] - h, x[i] + h);
        }
        out.union = out.own;
        out
    }
}

fn widen(r: &mut (f64, f64), v: f64) {
    r.0 = r.0.min(v);
    r.1 = r.1.max(v);
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

/// Where the fit stands: each factor's status and notes, the point, and what the scans found.
struct State {
    x0: [f64; 6],
    x: [f64; 6],
    status: [&'static str; 6],
    notes: [Option<String>; 6],
    /// Why a kept factor's value is not its own (it carries another's effect).
    partner_notes: [Vec<String>; 6],
    /// Factors no statistic moves with.
    unmoved: [bool; 6],
    /// The free factors some statistic moves with.
    moved: Vec<usize>,
    iterations: u64,
    scan: Scan,
}

impl State {
    fn kept(&self, i: usize) -> bool {
        matches!(self.status[i], "fitted" | "confounded")
    }

    fn kept_factors(&self) -> Vec<usize> {
        (0..6).filter(|&i| self.kept(i)).collect()
    }
}

fn describe_free(free: &[usize]) -> String {
    if free.is_empty() {
        "nothing".to_string()
    } else {
        free.iter().map(|&i| FACTORS[i].name).collect::<Vec<_>>().join(", ")
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
    let mut st = initial_state(&mut p, x0, &e0, opts)?;
    progress(format!("fitting {}", describe_free(&st.moved)));
    let (x, iterations) = p.search(x0, &st.moved, opts.max_iterations, progress)?;
    (st.x, st.iterations) = (x, iterations);
    for restart in 0..3 {
        drop_unidentified(&mut p, &mut st, opts, progress)?;
        if st.moved.is_empty() || !rescan(&mut p, &mut st, opts, restart, progress)? {
            break;
        }
    }
    note_ranges(&mut p, &mut st)?;
    let f = kept_factors(&st);
    let xr: [f64; 6] = std::array::from_fn(|i| to_x(i, f.get(i)));
    let preds = p.predict(&[x0, xr])?;
    let loss1 = p.loss(&p.errors(&preds[1]));
    let outcomes = outcomes(&p, &st, &f, &xr, opts);
    let run_fits: Vec<RunFit> = (0..targets.len()).map(|t| run_fit(&targets[t], &preds[0][t], &preds[1][t])).collect();
    let held_out = held_out(&mut p, holdouts, &st, xr, &preds[0], opts, progress)?;
    let (err0, err1) = (median_pct(pairs(run_fits.iter(), false)), median_pct(pairs(run_fits.iter(), true)));
    let held = |cal| median_pct(pairs(held_out.iter().map(|h| &h.run), cal));
    let (h0, h1) = if held_out.is_empty() { (None, None) } else { (Some(held(false)), Some(held(true))) };
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
        scatter: st.scan.scatter,
        simulations: p.simulations,
        iterations: st.iterations,
    })
}

/// (predicted, measured) of every statistic of `runs`, calibrated or not.
fn pairs<'r>(runs: impl Iterator<Item = &'r RunFit> + 'r, calibrated: bool) -> impl Iterator<Item = (f64, f64)> + 'r {
    runs.flat_map(move |r| {
        r.stats.iter().map(move |s| (if calibrated { s.calibrated } else { s.uncalibrated }, s.measured))
    })
}

/// The state before the search: fixed factors, and the free ones no statistic moves with
/// (unidentified, with the reason).
fn initial_state(p: &mut Problem, x0: [f64; 6], e0: &[f64], opts: &FitOptions) -> Result<State, String> {
    let mut status: [&'static str; 6] = std::array::from_fn(|i| if opts.free[i] { "fitted" } else { "fixed" });
    let mut notes: [Option<String>; 6] =
        std::array::from_fn(|i| (!opts.free[i]).then(|| "not fitted (left out with --fix)".to_string()));
    let mut unmoved = [false; 6];
    let free0: Vec<usize> = (0..6).filter(|&i| opts.free[i]).collect();
    let j0 = p.jacobian(&x0, e0, &free0, 1.0)?;
    for (col, &i) in free0.iter().enumerate() {
        let moves = j0.iter().map(|r| r[col].abs()).fold(0.0, f64::max);
        if moves < 1e-3 {
            unmoved[i] = true;
            status[i] = "unidentified";
            notes[i] = Some(unmoved_note(i).into());
        }
    }
    let moved: Vec<usize> = (0..6).filter(|&i| opts.free[i] && !unmoved[i]).collect();
    Ok(State {
        x0,
        x: x0,
        status,
        notes,
        partner_notes: Default::default(),
        unmoved,
        moved,
        iterations: 0,
        scan: Scan::default(),
    })
}

fn unmoved_note(i: usize) -> &'static str {
    match i {
        2 => {
            "no statistic of these runs moves with it (no collective: one GPU per instance, or collectives too short \
             to see)"
        }
        5 => {
            "no statistic of these runs moves with it (their latencies are the engine's own, without the client's path)"
        }
        3 | 4 => {
            "no statistic of these runs moves with it (the engine overlaps its CPU work with the GPU, and the GPU is \
             the longer)"
        }
        _ => "no statistic of these runs moves with it",
    }
}

/// Leaves unidentified factors at their identity, one at a time (the widest first), the others
/// refitted each time: what one leaves is often carried by another.
fn drop_unidentified(
    p: &mut Problem,
    st: &mut State,
    opts: &FitOptions,
    progress: &mut dyn FnMut(String),
) -> Result<(), String> {
    for k in 0..6 {
        if opts.free[k] && !st.unmoved[k] {
            st.status[k] = "fitted";
            st.notes[k] = None;
        }
        st.partner_notes[k].clear();
    }
    let mut dropped: Option<(usize, [f64; 6], [f64; 6])> = None;
    loop {
        let free = st.kept_factors();
        if let Some((d, before, half)) = dropped.take() {
            progress(format!("fitting {}", describe_free(&free)));
            let (xs, its) = p.search(st.x, &free, opts.max_iterations, progress)?;
            st.x = xs;
            st.iterations += its;
            note_partners(st, &free, d, &before, &half);
        }
        if free.is_empty() {
            return Ok(());
        }
        let Some((i, halves, partner)) = least_identified(p, st, &free)? else { return Ok(()) };
        st.status[i] = "unidentified";
        st.notes[i] = Some(match partner {
            Some((r, k)) => format!("correlated {r:.2} with {} in these runs", FACTORS[k].name),
            None => String::new(),
        });
        progress(format!("{} unidentified; refitting the others", FACTORS[i].name));
        dropped = Some((i, st.x, halves));
        st.x[i] = st.x0[i];
    }
}

/// A factor that moved beyond its own range when `d` was left at its identity carries `d`'s
/// effect: its value is theirs together, not its own.
fn note_partners(st: &mut State, free: &[usize], d: usize, before: &[f64; 6], half: &[f64; 6]) {
    for &k in free {
        if (st.x[k] - before[k]).abs() > half[k] {
            st.partner_notes[k].push(format!(
                "its value moved from {} to {} when {} was left at its identity: it carries {}'s effect too (these \
                 runs cannot tell the two apart)",
                show(k, to_v(k, before[k])),
                show(k, to_v(k, st.x[k])),
                FACTORS[d].name,
                FACTORS[d].name
            ));
            st.status[k] = "confounded";
        }
    }
}

/// The free factor the runs pin least, if it is unidentified: wider than its limit with its
/// identity within the range (the runs cannot tell it from no correction). With it, every free
/// factor's half-range and its most correlated partner. Whether the runs pin a factor is judged
/// at the least scatter, the runs' own noise: a model that cannot fit them everywhere widens the
/// ranges it reports, but should not make it drop corrections the runs ask for. A wide range
/// that excludes the identity still says something: the factor stays, with its range.
#[allow(clippy::type_complexity)]
fn least_identified(
    p: &mut Problem,
    st: &State,
    free: &[usize],
) -> Result<Option<(usize, [f64; 6], Option<(f64, usize)>)>, String> {
    let e = p.errors_at(&[st.x])?.remove(0);
    let (cov, _) = p.curvature(&st.x, &e, free)?;
    let runs = p.which.len() as f64;
    let halves: Vec<f64> =
        (0..free.len()).map(|col| (runs * MIN_SCATTER * MIN_SCATTER * cov[col][col]).sqrt()).collect();
    let (ratio, col, i) = free
        .iter()
        .enumerate()
        .map(|(col, &i)| {
            let holds_identity = (st.x[i] - st.x0[i]).abs() <= halves[col];
            let ratio = if holds_identity { halves[col] / limit(i, to_v(i, st.x[i])) } else { 0.0 };
            (ratio, col, i)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .expect("free factors");
    if ratio <= 1.0 {
        return Ok(None);
    }
    let partner = free
        .iter()
        .enumerate()
        .filter(|&(c, _)| c != col)
        .map(|(c, &k)| (cov[col][c].abs() / (cov[col][col] * cov[c][c]).sqrt().max(f64::MIN_POSITIVE), k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(r, _)| *r > 0.5);
    let mut h = [0.0; 6];
    for (col, &k) in free.iter().enumerate() {
        h[k] = halves[col];
    }
    Ok(Some((i, h, partner)))
}

/// What the runs allow of each factor: profile scans, each factor stepped away from the fit
/// with every other one refitted (those left at their identity too), until the loss rises by
/// R·s² (see the module's text). True when a scan met a better fit and the search ran again from
/// it (the caller then judges identification again).
fn rescan(
    p: &mut Problem,
    st: &mut State,
    opts: &FitOptions,
    restart: usize,
    progress: &mut dyn FnMut(String),
) -> Result<bool, String> {
    let e = p.errors_at(&[st.x])?.remove(0);
    let (cov, s) = p.curvature(&st.x, &e, &st.moved)?;
    let loss = p.loss(&e);
    let rise = p.which.len() as f64 * s * s;
    if !opts.scans {
        st.scan = Scan::quadratic(&st.x, &st.moved, &cov, s, p.which.len() as f64);
        return Ok(false);
    }
    progress(format!("ranges: profile scans of {} (loss rise {rise:.6})", describe_free(&st.moved)));
    st.scan = p.scan(&st.x, loss, rise, &st.moved, &cov, s)?;
    match st.scan.better {
        Some((xb, lb)) if lb < loss - 0.1 * rise && restart < 2 => {
            progress(format!("a scan met a better fit (loss {lb:.6}); searching again from it"));
            let (xs, its) = p.search(xb, &st.moved, opts.max_iterations, progress)?;
            st.x = xs;
            st.iterations += its;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The notes ranges give: what an unidentified factor's runs allow, and a fitted factor whose
/// allowed range is wider than its limit depending on the unidentified ones (its value assumes
/// them at their identity).
fn note_ranges(p: &mut Problem, st: &mut State) -> Result<(), String> {
    let free = st.kept_factors();
    for &i in &st.moved {
        if st.status[i] != "unidentified" || st.unmoved[i] {
            continue;
        }
        let (lo, hi) = st.scan.union[i];
        let with = st.notes[i].take().filter(|n| !n.is_empty()).map_or(String::new(), |n| format!(" ({n})"));
        st.notes[i] = Some(format!(
            "these runs allow anything from {} to {}{with}, no correction included: left at its identity; runs that \
             move it apart from the others would identify it",
            show(i, to_v(i, lo.max(p.lo[i]))),
            show(i, to_v(i, hi.min(p.hi[i])))
        ));
    }
    let unidentified: Vec<&str> =
        st.moved.iter().filter(|&&k| st.status[k] == "unidentified").map(|&k| FACTORS[k].name).collect();
    // Each kept factor's range with the unidentified ones left at their identity, to compare.
    let conditional: Vec<f64> = if free.is_empty() || unidentified.is_empty() {
        Vec::new()
    } else {
        let e = p.errors_at(&[st.x])?.remove(0);
        let (cov, s) = p.curvature(&st.x, &e, &free)?;
        let runs = p.which.len() as f64;
        (0..free.len()).map(|col| (runs * s * s * cov[col][col]).sqrt()).collect()
    };
    for (col, &i) in free.iter().enumerate() {
        let (lo, hi) = st.scan.union[i];
        let half = (hi - lo) / 2.0;
        let wider = conditional.get(col).is_some_and(|&c| half > 2.0 * c);
        if !unidentified.is_empty() && (half > limit(i, to_v(i, st.x[i])) || wider) && st.status[i] == "fitted" {
            st.status[i] = "confounded";
            st.partner_notes[i].push(format!(
                "these runs cannot tell it from {}: its value assumes {} at {} identity, its range allows any",
                unidentified.join(" and "),
                if unidentified.len() == 1 { "it" } else { "them" },
                if unidentified.len() == 1 { "its" } else { "their" }
            ));
        }
    }
    Ok(())
}

/// The factors as the file keeps them (rounded; the others at their identity).
fn kept_factors(st: &State) -> Factors {
    let mut f = Factors::IDENTITY;
    for (i, info) in FACTORS.iter().enumerate() {
        f.set(i, if st.kept(i) { rounded(i, to_v(i, st.x[i])) } else { info.identity });
    }
    f
}

/// Each factor as reported: value, range, status and note.
fn outcomes(p: &Problem, st: &State, f: &Factors, xr: &[f64; 6], opts: &FitOptions) -> Vec<FactorOutcome> {
    (0..6)
        .map(|i| {
            let kept = st.kept(i);
            let (low, high) = if kept {
                let (lo, hi) = st.scan.union[i];
                let (l, h) = (to_v(i, lo.max(p.lo[i])), to_v(i, hi.min(p.hi[i])));
                (Some(rounded(i, l.min(f.get(i)))), Some(rounded(i, h.max(f.get(i)))))
            } else {
                (None, None)
            };
            let mut note = st.notes[i].clone();
            if kept && !st.partner_notes[i].is_empty() {
                note = Some(st.partner_notes[i].join("; "));
            }
            if kept && (xr[i] <= p.lo[i] + 1e-9 || xr[i] >= p.hi[i] - 1e-9) {
                note = Some(format!(
                    "at the bound of its search range [{}, {}] {}: the runs ask for more than the model can correct",
                    opts.bounds[i].0, opts.bounds[i].1, FACTORS[i].unit
                ));
            }
            FactorOutcome { name: FACTORS[i].name, value: f.get(i), low, high, status: st.status[i], note }
        })
        .collect()
}

/// The held-out runs: `holdouts` predicted at the fit, or with none and two targets or more,
/// each target predicted by a fit of the others.
fn held_out(
    p: &mut Problem,
    holdouts: &[Target],
    st: &State,
    xr: [f64; 6],
    uncalibrated: &[Vec<f64>],
    opts: &FitOptions,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<HeldOut>, String> {
    let mut out = Vec::new();
    let targets = p.targets;
    if !holdouts.is_empty() {
        let mut h = Problem::new(holdouts, (0..holdouts.len()).collect(), p.eval, &opts.bounds);
        let hp = h.predict(&[st.x0, xr])?;
        p.simulations += h.simulations;
        for (t, tg) in holdouts.iter().enumerate() {
            out.push(HeldOut { how: "holdout", run: run_fit(tg, &hp[0][t], &hp[1][t]) });
        }
    } else if targets.len() >= 2 {
        let free = st.kept_factors();
        for left in 0..targets.len() {
            progress(format!("leave one out: fitting without {}", targets[left].label));
            let others: Vec<usize> = (0..targets.len()).filter(|&t| t != left).collect();
            let mut q = Problem::new(targets, others, p.eval, &opts.bounds);
            let (xl, _, _) = q.lm(xr, &free, (opts.max_iterations / 3).max(5), 1.0, &mut |_| {})?;
            let mut r = Problem::new(targets, vec![left], p.eval, &opts.bounds);
            let lp = r.predict(&[xl])?;
            p.simulations += q.simulations + r.simulations;
            out.push(HeldOut { how: "leave-one-out", run: run_fit(&targets[left], &uncalibrated[left], &lp[0][0]) });
        }
    }
    Ok(out)
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
