//! Arrival rates that change over the day: a diurnal cycle, or a curve through given points.
//!
//! ```text
//!   diurnal:  rate(t) = trough + (peak − trough) × (1 + cos(2π (t − peak_at_s) / period_s)) / 2
//!   curve:    rate(t) linear between points [t_s, rate], repeating every period_s if given
//! ```
//! Arrivals are a non-homogeneous Poisson process, drawn by thinning (Lewis and Shedler, 1979):
//! candidates at the highest rate, each kept with probability rate(t) / highest rate. The
//! process is exact for any rate curve and uses one random stream.

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};

/// `{ kind = "diurnal", peak_rate, trough_rate, period_s = 86400, peak_at_s = 50400 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diurnal {
    /// Requests per second at the top of the cycle.
    pub(crate) peak_rate: f64,
    /// Requests per second at the bottom of the cycle (half a period from the peak).
    pub(crate) trough_rate: f64,
    /// Length of the cycle, s. Default 86400 (a day).
    #[serde(default = "day_s")]
    pub(crate) period_s: f64,
    /// When the peak comes, s from the start of the run. Default 50400 (14:00 when the run
    /// starts at midnight).
    #[serde(default = "two_pm_s")]
    pub(crate) peak_at_s: f64,
}

fn day_s() -> f64 {
    86_400.0
}

fn two_pm_s() -> f64 {
    50_400.0
}

/// `{ kind = "curve", points = [[0, 5], [21600, 2], [50400, 20], [86400, 5]], period_s = 86400 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Curve {
    /// `[t_s, rate]` pairs, the first at t = 0, times increasing; the rate is linear between
    /// them.
    pub(crate) points: Vec<[f64; 2]>,
    /// Repeat the curve every `period_s` (its last point's time at most; from the last point
    /// back to the first linearly). Default: no repeat, arrivals end at the last point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) period_s: Option<f64>,
}

/// A rate of the curve: 0, or within what every arrival sampler accepts.
fn check_rate(path: &str, key: &str, r: f64) -> Result<(), ConfigError> {
    super::arrival::check_rate(path, key, r, true)
}

impl Diurnal {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check_rate(path, "peak_rate", self.peak_rate)?;
        check(self.peak_rate > 0.0, path, "peak_rate", "must be > 0", self.peak_rate)?;
        check_rate(path, "trough_rate", self.trough_rate)?;
        check(
            self.trough_rate <= self.peak_rate,
            path,
            "trough_rate",
            &format!("must be ≤ peak_rate ({})", self.peak_rate),
            self.trough_rate,
        )?;
        let p = self.period_s;
        // Below a second the phase 2π·t/period_s overflows within a run (the rate becomes NaN
        // and no arrival is ever accepted), and no load cycles that fast.
        check(p.is_finite() && (1.0..=1e9).contains(&p), path, "period_s", "must be in [1, 1e9] s", p)?;
        let a = self.peak_at_s;
        check(a.is_finite() && (0.0..=1e9).contains(&a), path, "peak_at_s", "must be in [0, 1e9]", a)
    }

    pub fn rate_at(&self, t_s: f64) -> f64 {
        let phase = 2.0 * std::f64::consts::PI * (t_s - self.peak_at_s) / self.period_s;
        self.trough_rate + (self.peak_rate - self.trough_rate) * (1.0 + phase.cos()) / 2.0
    }

    /// Mean over whole cycles.
    pub fn mean_rate(&self) -> f64 {
        (self.peak_rate + self.trough_rate) / 2.0
    }

    pub fn scale_rate(&mut self, k: f64) {
        self.peak_rate *= k;
        self.trough_rate *= k;
    }
}

impl Curve {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let pts = format!("{path}.points");
        if self.points.len() < 2 {
            return Err(ConfigError::at(&pts, "must list at least two [t_s, rate] points".into()));
        }
        check(self.points[0][0] == 0.0, &pts, "[0][0]", "the first point must be at t = 0", self.points[0][0])?;
        for (i, p) in self.points.iter().enumerate() {
            check_rate(&pts, &format!("[{i}][1]"), p[1])?;
            check(p[0].is_finite() && p[0] <= 1e9, &pts, &format!("[{i}][0]"), "must be a time in [0, 1e9] s", p[0])?;
            if i > 0 {
                let prev = self.points[i - 1][0];
                check(
                    p[0] > prev,
                    &pts,
                    &format!("[{i}][0]"),
                    &format!("must be after the previous point ({prev})"),
                    p[0],
                )?;
            }
        }
        if self.max_rate() <= 0.0 {
            return Err(ConfigError::at(&pts, "every rate is 0: no request would arrive".into()));
        }
        if let Some(p) = self.period_s {
            let last = self.points[self.points.len() - 1][0];
            check(
                p.is_finite() && p >= last && p > 0.0 && p <= 1e9,
                path,
                "period_s",
                &format!("must be at least the last point's time ({last})"),
                p,
            )?;
        }
        Ok(())
    }

    /// The last point's time when the curve does not repeat: arrivals end there.
    pub fn end_s(&self) -> Option<f64> {
        match self.period_s {
            Some(_) => None,
            None => Some(self.points[self.points.len() - 1][0]),
        }
    }

    /// The points over one span, with the wrap back to the first point when it repeats.
    fn knots(&self) -> Vec<[f64; 2]> {
        let mut k = self.points.clone();
        if let Some(p) = self.period_s {
            if p > k[k.len() - 1][0] {
                k.push([p, self.points[0][1]]);
            }
        }
        k
    }

    pub fn rate_at(&self, t_s: f64) -> f64 {
        let pts = &self.points;
        let last = pts[pts.len() - 1];
        let t = match self.period_s {
            Some(p) => {
                let t = t_s.rem_euclid(p);
                if t >= last[0] {
                    // From the last point back to the first, over the rest of the period.
                    let span = p - last[0];
                    return if span > 0.0 { last[1] + (pts[0][1] - last[1]) * (t - last[0]) / span } else { last[1] };
                }
                t
            }
            None => t_s,
        };
        let i = pts.partition_point(|p| p[0] <= t);
        if i == 0 {
            return pts[0][1];
        }
        if i >= pts.len() {
            return last[1];
        }
        let (a, b) = (pts[i - 1], pts[i]);
        a[1] + (b[1] - a[1]) * (t - a[0]) / (b[0] - a[0])
    }

    /// What drawing its arrivals needs, worked out once: its knots and the area of a span.
    pub fn draw(&self) -> CurveDraw {
        let knots = self.knots();
        CurveDraw { per_span: area(&knots), knots, period_s: self.period_s }
    }

    pub fn max_rate(&self) -> f64 {
        self.points.iter().map(|p| p[1]).fold(0.0, f64::max)
    }

    /// Mean over one span (trapezoids).
    pub fn mean_rate(&self) -> f64 {
        let k = self.knots();
        area(&k) / k[k.len() - 1][0]
    }

    pub fn scale_rate(&mut self, k: f64) {
        self.points.iter_mut().for_each(|p| p[1] *= k);
    }
}

/// The area under a piecewise-linear rate through `k` (trapezoids): the requests of one span.
fn area(k: &[[f64; 2]]) -> f64 {
    k.windows(2).map(|w| (w[1][0] - w[0][0]) * (w[0][1] + w[1][1]) / 2.0).sum()
}

/// A [`Curve`] ready to draw arrivals from ([`Curve::draw`]).
#[derive(Clone, Debug)]
pub struct CurveDraw {
    /// The points over one span, with the wrap back to the first when it repeats.
    knots: Vec<[f64; 2]>,
    /// Requests per span: the area under the rate.
    per_span: f64,
    period_s: Option<f64>,
}

impl CurveDraw {
    /// The next arrival after `now_s`, or `None` past the curve's end. Drawn exactly by
    /// inverting the integrated rate (piecewise quadratic): a unit exponential `e` is spent
    /// along the segments, whole periods at once, so the work per arrival is bounded by the
    /// number of points whatever the ratio between the highest and lowest rates (thinning at
    /// the highest rate would draw 10⁹ candidates per arrival where the curve is 10⁻⁹ of it).
    pub fn next_after(&self, rng: &mut SimRng, now_s: f64) -> Option<f64> {
        let (k, per_span) = (&self.knots, self.per_span);
        let span = k[k.len() - 1][0];
        let mut e = crate::rng::exponential(rng, 1.0);
        // The span `now_s` is in, and its segment.
        let (mut base, local) = match self.period_s {
            Some(p) => (now_s - now_s.rem_euclid(p), now_s.rem_euclid(p)),
            None if now_s >= span => return None,
            None => (0.0, now_s),
        };
        let mut i = k.partition_point(|q| q[0] <= local).clamp(1, k.len() - 1) - 1;
        let mut t = local;
        loop {
            let ([t0, r0], [t1, r1]) = (k[i], k[i + 1]);
            let slope = if t1 > t0 { (r1 - r0) / (t1 - t0) } else { 0.0 };
            let rt = (r0 + slope * (t - t0)).max(0.0);
            let area = (t1 - t) * (rt + r1) / 2.0;
            if e <= area && area > 0.0 {
                // rt·s + slope·s²/2 = e, in the form that stays exact for slope → 0.
                let root = (rt * rt + 2.0 * slope * e).max(0.0).sqrt();
                let ds = if rt + root > 0.0 { 2.0 * e / (rt + root) } else { t1 - t };
                return Some(base + (t + ds).min(t1));
            }
            e -= area.max(0.0);
            t = t1;
            i += 1;
            if i + 1 == k.len() {
                let p = self.period_s?;
                base += p;
                (i, t) = (0, 0.0);
                if per_span > 0.0 && e > per_span {
                    // Whole periods without an arrival.
                    let n = (e / per_span).floor();
                    base += n * p;
                    e -= n * per_span;
                }
            }
        }
    }
}

/// The next arrival after `now_s` of a Poisson process whose rate is `rate(t)` ≤ `max_rate`,
/// or `None` past `end_s`.
pub(crate) fn next_thinned(
    rng: &mut SimRng,
    now_s: f64,
    max_rate: f64,
    end_s: Option<f64>,
    rate: impl Fn(f64) -> f64,
) -> Option<f64> {
    let mut t = now_s;
    loop {
        t += crate::rng::exponential(rng, max_rate);
        if end_s.is_some_and(|e| t > e) {
            return None;
        }
        if rng.random::<f64>() * max_rate < rate(t) {
            return Some(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Stream};

    #[test]
    fn a_period_under_a_second_is_refused() {
        let d = Diurnal { peak_rate: 10.0, trough_rate: 0.0, period_s: 1e-307, peak_at_s: 0.0 };
        let err = d.validate("workload.arrival").unwrap_err().to_string();
        assert!(err.contains("workload.arrival.period_s: must be in [1, 1e9] s"), "{err}");
        // At the bound the rate stays a number over a long run.
        let d = Diurnal { period_s: 1.0, ..d };
        assert!(d.validate("workload.arrival").is_ok());
        assert!([0.0, 0.25, 1e6 + 0.5, 1e9].iter().all(|&t| d.rate_at(t).is_finite()));
    }

    #[test]
    fn diurnal_shape() {
        let d = Diurnal { peak_rate: 10.0, trough_rate: 2.0, period_s: 100.0, peak_at_s: 30.0 };
        assert!((d.rate_at(30.0) - 10.0).abs() < 1e-12);
        assert!((d.rate_at(80.0) - 2.0).abs() < 1e-12);
        assert!((d.rate_at(130.0) - 10.0).abs() < 1e-9);
        assert!((d.rate_at(55.0) - 6.0).abs() < 1e-9);
        assert_eq!(d.mean_rate(), 6.0);
    }

    /// A ramp 0 → 100 req/s over 100 s holds 5,000 arrivals (σ ≈ 71), a quarter of them in its
    /// first half (∫₀⁵⁰ t dt = 1,250); repeated every 100 s, the second span holds as many.
    /// A curve of 10⁻¹² req/s repeating every second draws its arrivals at once (whole periods
    /// skipped), about 10¹² s apart.
    #[test]
    fn curve_arrivals_follow_the_integrated_rate() {
        let count = |c: &Curve, from: f64, to: f64, seed: u64| {
            let mut rng = substream(seed, Stream::Arrivals, 0);
            let (mut t, mut n, mut first_half) = (from, 0u32, 0u32);
            let d = c.draw();
            while let Some(x) = d.next_after(&mut rng, t) {
                assert!(x >= t, "{x} after {t}");
                if x > to {
                    break;
                }
                n += 1;
                first_half += u32::from(x - from < 50.0);
                t = x;
            }
            (n, first_half)
        };
        let once = Curve { points: vec![[0.0, 0.0], [100.0, 100.0]], period_s: None };
        let (n, half) = count(&once, 0.0, f64::INFINITY, 3);
        assert!((n as f64 - 5000.0).abs() < 300.0, "{n}");
        assert!((half as f64 / n as f64 - 0.25).abs() < 0.03, "{half} of {n}");
        let repeating = Curve { period_s: Some(100.0), ..once };
        let (n, half) = count(&repeating, 100.0, 200.0, 4);
        assert!((n as f64 - 5000.0).abs() < 300.0, "{n}");
        assert!((half as f64 / n as f64 - 0.25).abs() < 0.03, "{half} of {n}");
        let sparse = Curve { points: vec![[0.0, 1e-12], [1.0, 1e-12]], period_s: Some(1.0) };
        let mut rng = substream(5, Stream::Arrivals, 0);
        let sparse = sparse.draw();
        let gaps: Vec<f64> = (0..200).map(|_| sparse.next_after(&mut rng, 0.0).unwrap()).collect();
        let mean = gaps.iter().sum::<f64>() / 200.0;
        assert!((mean / 1e12 - 1.0).abs() < 0.25, "{mean}");
    }

    #[test]
    fn curve_interpolates_and_wraps() {
        let c = Curve { points: vec![[0.0, 4.0], [10.0, 8.0], [20.0, 0.0]], period_s: Some(40.0) };
        assert_eq!(c.rate_at(5.0), 6.0);
        assert_eq!(c.rate_at(15.0), 4.0);
        // From (20, 0) back to (40, 4): at 30 → 2; the next cycle starts again.
        assert_eq!(c.rate_at(30.0), 2.0);
        assert_eq!(c.rate_at(45.0), 6.0);
        // Area: 60 + 40 + 40 = 140 over 40 s.
        assert!((c.mean_rate() - 3.5).abs() < 1e-12);
        let once = Curve { points: vec![[0.0, 4.0], [10.0, 8.0]], period_s: None };
        assert_eq!(once.end_s(), Some(10.0));
        assert_eq!(once.rate_at(99.0), 8.0);
    }

    #[test]
    fn thinning_follows_the_rate() {
        let d = Diurnal { peak_rate: 40.0, trough_rate: 4.0, period_s: 1000.0, peak_at_s: 250.0 };
        let mut rng = substream(5, Stream::Arrivals, 0);
        let mut t = 0.0;
        let mut times = vec![];
        while let Some(x) = next_thinned(&mut rng, t, d.peak_rate, Some(10_000.0), |t| d.rate_at(t)) {
            times.push(x);
            t = x;
        }
        // Expected count in [a, b) = ∫ rate: over whole cycles, mean × length.
        let total = times.len() as f64;
        assert!((total / (22.0 * 10_000.0) - 1.0).abs() < 0.02, "{total}");
        // Near the peaks (±50 s around 250 + 1000k) versus near the troughs (750 + 1000k).
        let near =
            |c: f64| times.iter().filter(|&&x| ((x - c).rem_euclid(1000.0) + 50.0).rem_euclid(1000.0) < 100.0).count();
        let (peak, trough) = (near(250.0) as f64, near(750.0) as f64);
        // ∫ over ±50 s: 4 × 100 + 36 × (100 + 1000/π × sin(π/10)) / 2 ≈ 3948 per... ×10 cycles.
        let expect = |sign: f64| {
            10.0 * (4.0 * 100.0
                + 36.0 * (100.0 + sign * 1000.0 / std::f64::consts::PI * (std::f64::consts::PI / 10.0).sin()) / 2.0)
        };
        assert!((peak / expect(1.0) - 1.0).abs() < 0.05, "{peak} vs {}", expect(1.0));
        assert!((trough / expect(-1.0) - 1.0).abs() < 0.15, "{trough} vs {}", expect(-1.0));
    }
}
