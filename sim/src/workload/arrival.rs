//! Arrival processes: when requests arrive.

use crate::rng::SimRng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

use super::daily::{next_thinned, Curve, Diurnal};
use crate::config::{check, ConfigError};
use crate::rng::exponential;
use crate::tagged_enum;

/// How requests arrive. Open-loop processes arrive regardless of how the system keeps up;
/// `closed-loop` models N users who each wait for their answer and think before asking again
/// (the concurrency mode of load generators).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ArrivalSpec {
    Poisson(Poisson),
    Gamma(GammaArrival),
    Constant(Constant),
    Phases(Phases),
    ClosedLoop(ClosedLoop),
    /// A daily cycle of the rate (see `workload::daily`).
    Diurnal(Diurnal),
    /// The rate through given points, optionally repeating (see `workload::daily`).
    Curve(Curve),
}

tagged_enum!(ArrivalSpec {
    "poisson" => Poisson(Poisson),
    "gamma" => Gamma(GammaArrival),
    "constant" => Constant(Constant),
    "phases" => Phases(Phases),
    "closed-loop" => ClosedLoop(ClosedLoop),
    "diurnal" => Diurnal(Diurnal),
    "curve" => Curve(Curve),
});

/// Poisson arrivals at `rate` requests per second (exponential gaps, CV 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Poisson {
    pub rate: f64,
}

/// Gamma-distributed gaps with mean 1/`rate` and coefficient of variation `cv`: cv > 1 is
/// burstier than Poisson, cv < 1 more regular.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GammaArrival {
    pub rate: f64,
    pub cv: f64,
}

/// Evenly spaced arrivals, exactly 1/`rate` seconds apart, the first at time zero.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constant {
    pub rate: f64,
}

/// A piecewise schedule, played in order: e.g. 120 s at 20 req/s, 30 s at 40, 120 s at 10.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    pub(crate) phases: Vec<Phase>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub(crate) duration_s: f64,
    /// Requests per second during the phase; 0 is an idle phase.
    pub(crate) rate: f64,
    /// Gap coefficient of variation within the phase (1 = Poisson, the default).
    #[serde(default = "one")]
    pub(crate) cv: f64,
}

fn one() -> f64 {
    1.0
}

/// `clients` users, each sending a request, waiting for its last token, then thinking for
/// `think_time_s` (exponential with that mean, or fixed) before the next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedLoop {
    pub(crate) clients: u32,
    #[serde(default)]
    pub(crate) think_time_s: f64,
    #[serde(default)]
    pub(crate) think: ThinkKind,
    /// Clients start one by one, evenly over this many seconds (client i at i·ramp_s/clients),
    /// as a load generator ramps up its users; 0 (default): all at time zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) ramp_s: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThinkKind {
    #[default]
    Exponential,
    Fixed,
}

/// The rates and CVs every gap sampler accepts: a gamma gap's shape 1/cv² and scale
/// 1/(rate · shape) stay finite and positive over these ranges (`gaps_at_the_bounds`).
const RATE_RANGE: (f64, f64) = (1e-12, 1e9);
const CV_RANGE: (f64, f64) = (1e-3, 100.0);

pub(super) fn check_rate(path: &str, key: &str, rate: f64, allow_zero: bool) -> Result<(), ConfigError> {
    let (lo, hi) = RATE_RANGE;
    let ok = rate.is_finite() && (rate == 0.0 && allow_zero || (lo..=hi).contains(&rate));
    let why = if allow_zero { "must be 0 or in [1e-12, 1e9] requests/s" } else { "must be in [1e-12, 1e9] requests/s" };
    check(ok, path, key, why, rate)
}

fn check_cv(path: &str, key: &str, cv: f64) -> Result<(), ConfigError> {
    check(cv.is_finite() && (CV_RANGE.0..=CV_RANGE.1).contains(&cv), path, key, "must be in [0.001, 100]", cv)
}

impl ArrivalSpec {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        match self {
            ArrivalSpec::Poisson(p) => check_rate(path, "rate", p.rate, false),
            ArrivalSpec::Gamma(g) => {
                check_rate(path, "rate", g.rate, false)?;
                check_cv(path, "cv", g.cv)
            }
            ArrivalSpec::Constant(c) => check_rate(path, "rate", c.rate, false),
            ArrivalSpec::Phases(p) => {
                if p.phases.is_empty() {
                    return Err(ConfigError::at(&format!("{path}.phases"), "must list at least one phase".into()));
                }
                for (i, ph) in p.phases.iter().enumerate() {
                    let pp = format!("{path}.phases[{i}]");
                    check(
                        ph.duration_s.is_finite() && ph.duration_s > 0.0,
                        &pp,
                        "duration_s",
                        "must be > 0",
                        ph.duration_s,
                    )?;
                    check_rate(&pp, "rate", ph.rate, true)?;
                    check_cv(&pp, "cv", ph.cv)?;
                }
                if p.phases.iter().all(|ph| ph.rate == 0.0) {
                    return Err(ConfigError::at(
                        &format!("{path}.phases"),
                        "every phase has rate 0: no request would arrive".into(),
                    ));
                }
                Ok(())
            }
            ArrivalSpec::ClosedLoop(c) => {
                check(c.clients >= 1, path, "clients", "must be ≥ 1", c.clients)?;
                check(
                    c.think_time_s.is_finite() && c.think_time_s >= 0.0,
                    path,
                    "think_time_s",
                    "must be ≥ 0",
                    c.think_time_s,
                )?;
                check(c.ramp_s.is_finite() && (0.0..1e9).contains(&c.ramp_s), path, "ramp_s", "must be ≥ 0", c.ramp_s)
            }
            ArrivalSpec::Diurnal(d) => d.validate(path),
            ArrivalSpec::Curve(c) => c.validate(path),
        }
    }

    /// The end of the schedule, for processes that have one.
    pub fn natural_duration_s(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Phases(p) => Some(p.phases.iter().map(|ph| ph.duration_s).sum()),
            ArrivalSpec::Curve(c) => c.end_s(),
            _ => None,
        }
    }

    /// Long-run mean offered rate in requests per second (open-loop processes).
    pub fn mean_rate(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Poisson(p) => Some(p.rate),
            ArrivalSpec::Gamma(g) => Some(g.rate),
            ArrivalSpec::Constant(c) => Some(c.rate),
            ArrivalSpec::Phases(p) => {
                let d: f64 = p.phases.iter().map(|ph| ph.duration_s).sum();
                Some(p.phases.iter().map(|ph| ph.rate * ph.duration_s).sum::<f64>() / d)
            }
            ArrivalSpec::ClosedLoop(_) => None,
            ArrivalSpec::Diurnal(d) => Some(d.mean_rate()),
            ArrivalSpec::Curve(c) => Some(c.mean_rate()),
        }
    }

    /// The highest rate of a schedule or curve (the mean rate of a steady process).
    pub fn peak_rate(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Phases(p) => p.phases.iter().map(|ph| ph.rate).reduce(f64::max),
            ArrivalSpec::Diurnal(d) => Some(d.peak_rate),
            ArrivalSpec::Curve(c) => Some(c.max_rate()),
            _ => self.mean_rate(),
        }
    }

    /// Multiplies every rate by `k` (used to sweep load).
    pub fn scale_rate(&mut self, k: f64) {
        match self {
            ArrivalSpec::Poisson(p) => p.rate *= k,
            ArrivalSpec::Gamma(g) => g.rate *= k,
            ArrivalSpec::Constant(c) => c.rate *= k,
            ArrivalSpec::Phases(p) => p.phases.iter_mut().for_each(|ph| ph.rate *= k),
            ArrivalSpec::ClosedLoop(_) => {}
            ArrivalSpec::Diurnal(d) => d.scale_rate(k),
            ArrivalSpec::Curve(c) => c.scale_rate(k),
        }
    }
}

/// The distribution of the gap between arrivals: mean 1/rate and the given CV (exponential
/// when cv = 1), built once per rate, not per draw.
#[derive(Clone, Debug)]
enum Gap {
    Exp(f64),
    Gamma(Gamma<f64>),
}

impl Gap {
    /// `None` for a zero rate (no arrivals) and for parameters the gamma sampler refuses
    /// (outside the validated ranges, which [`Gap::new`]'s test draws at their corners): no
    /// arrivals rather than a panic.
    fn new(rate: f64, cv: f64) -> Option<Gap> {
        if rate.is_nan() || rate <= 0.0 {
            return None;
        }
        if cv == 1.0 {
            return Some(Gap::Exp(rate));
        }
        let shape = 1.0 / (cv * cv);
        Gamma::new(shape, 1.0 / (rate * shape)).ok().map(Gap::Gamma)
    }

    fn sample(&self, rng: &mut SimRng) -> f64 {
        match self {
            Gap::Exp(rate) => exponential(rng, *rate),
            Gap::Gamma(d) => d.sample(rng),
        }
    }
}

/// Generates the arrival times of an open-loop process, in seconds, one at a time.
#[derive(Clone, Debug)]
pub struct OpenArrivals {
    spec: ArrivalSpec,
    rng: SimRng,
    now_s: f64,
    count: u64,
    phase: usize,
    phase_end_s: f64,
    /// The gap of a Poisson or gamma process, or of each phase.
    gaps: Vec<Option<Gap>>,
    /// A curve's knots and area, worked out once.
    curve: Option<super::daily::CurveDraw>,
}

impl OpenArrivals {
    pub fn new(spec: ArrivalSpec, rng: SimRng) -> OpenArrivals {
        let phase_end_s = match &spec {
            ArrivalSpec::Phases(p) => p.phases[0].duration_s,
            _ => f64::INFINITY,
        };
        let gaps = match &spec {
            ArrivalSpec::Poisson(p) => vec![Gap::new(p.rate, 1.0)],
            ArrivalSpec::Gamma(g) => vec![Gap::new(g.rate, g.cv)],
            ArrivalSpec::Phases(p) => p.phases.iter().map(|ph| Gap::new(ph.rate, ph.cv)).collect(),
            _ => Vec::new(),
        };
        let curve = match &spec {
            ArrivalSpec::Curve(c) => Some(c.draw()),
            _ => None,
        };
        OpenArrivals { spec, rng, now_s: 0.0, count: 0, phase: 0, phase_end_s, gaps, curve }
    }

    /// The next arrival time in seconds, or `None` when the schedule has ended.
    pub fn next_s(&mut self) -> Option<f64> {
        let t = match &self.spec {
            ArrivalSpec::Poisson(_) | ArrivalSpec::Gamma(_) => {
                self.now_s + self.gaps[0].as_ref()?.sample(&mut self.rng)
            }
            // The first arrival is at time zero; each next one 1/rate later. Computed from the
            // count, not accumulated, so there is no drift.
            ArrivalSpec::Constant(c) => self.count as f64 / c.rate,
            ArrivalSpec::Phases(p) => loop {
                p.phases.get(self.phase)?;
                let candidate = match &self.gaps[self.phase] {
                    Some(gap) => self.now_s + gap.sample(&mut self.rng),
                    None => f64::INFINITY,
                };
                if candidate <= self.phase_end_s {
                    break candidate;
                }
                // The phase ended first. For Poisson, restarting at the boundary with the next
                // rate is exact (memoryless); for gamma gaps it restarts the renewal process.
                self.now_s = self.phase_end_s;
                self.phase += 1;
                match p.phases.get(self.phase) {
                    Some(next) => self.phase_end_s += next.duration_s,
                    None => return None,
                }
            },
            ArrivalSpec::Diurnal(d) => next_thinned(&mut self.rng, self.now_s, d.peak_rate, None, |t| d.rate_at(t))?,
            ArrivalSpec::Curve(_) => self.curve.as_ref()?.next_after(&mut self.rng, self.now_s)?,
            ArrivalSpec::ClosedLoop(_) => {
                unreachable!("closed-loop arrivals are driven by completions")
            }
        };
        self.now_s = t;
        self.count += 1;
        Some(t)
    }
}

/// Draws think times for closed-loop clients.
pub fn think_time_s(c: &ClosedLoop, rng: &mut SimRng) -> f64 {
    match c.think {
        _ if c.think_time_s == 0.0 => 0.0,
        ThinkKind::Fixed => c.think_time_s,
        ThinkKind::Exponential => exponential(rng, 1.0 / c.think_time_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Stream};

    fn times(spec: ArrivalSpec, until_s: f64) -> Vec<f64> {
        let mut a = OpenArrivals::new(spec, substream(3, Stream::Arrivals, 0));
        let mut v = vec![];
        while let Some(t) = a.next_s() {
            if t > until_s {
                break;
            }
            v.push(t);
        }
        v
    }

    fn cv(gaps: &[f64]) -> f64 {
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64;
        var.sqrt() / m
    }

    #[test]
    fn poisson_rate_and_cv() {
        let t = times(ArrivalSpec::Poisson(Poisson { rate: 50.0 }), 2000.0);
        assert!((t.len() as f64 / 2000.0 / 50.0 - 1.0).abs() < 0.01, "{}", t.len());
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!((cv(&gaps) - 1.0).abs() < 0.02);
    }

    #[test]
    fn gaps_at_the_bounds() {
        // Every corner of the accepted rates and CVs builds its sampler and draws finite,
        // non-negative gaps (a shape or scale out of the sampler's range would panic here).
        let mut rng = substream(1, Stream::Arrivals, 0);
        for rate in [RATE_RANGE.0, 1.0, RATE_RANGE.1] {
            for cv in [CV_RANGE.0, 1.0, CV_RANGE.1] {
                let gap = Gap::new(rate, cv).expect("a positive rate");
                for _ in 0..1000 {
                    let g = gap.sample(&mut rng);
                    assert!(g.is_finite() && g >= 0.0, "rate {rate}, cv {cv}: gap {g}");
                }
            }
        }
        let path = "workload.arrival";
        let err = ArrivalSpec::Gamma(GammaArrival { rate: 1.0, cv: 1e-154 }).validate(path).unwrap_err();
        assert!(err.to_string().contains("workload.arrival.cv: must be in [0.001, 100]"), "{err}");
        let err = ArrivalSpec::Poisson(Poisson { rate: 1e300 }).validate(path).unwrap_err();
        assert!(err.to_string().contains("workload.arrival.rate: must be in [1e-12, 1e9] requests/s"), "{err}");
    }

    #[test]
    fn gamma_reaches_its_cv() {
        let t = times(ArrivalSpec::Gamma(GammaArrival { rate: 20.0, cv: 3.0 }), 20_000.0);
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!((t.len() as f64 / 20_000.0 / 20.0 - 1.0).abs() < 0.03, "{}", t.len());
        assert!((cv(&gaps) - 3.0).abs() < 0.15, "{}", cv(&gaps));
    }

    #[test]
    fn phases_follow_the_schedule_and_end() {
        let spec = ArrivalSpec::Phases(Phases {
            phases: vec![
                Phase { duration_s: 100.0, rate: 10.0, cv: 1.0 },
                Phase { duration_s: 50.0, rate: 0.0, cv: 1.0 },
                Phase { duration_s: 100.0, rate: 40.0, cv: 1.0 },
            ],
        });
        let t = times(spec, f64::INFINITY);
        let in_range = |a: f64, b: f64| t.iter().filter(|&&x| x >= a && x < b).count() as f64;
        assert!((in_range(0.0, 100.0) / 1000.0 - 1.0).abs() < 0.1);
        assert_eq!(in_range(100.0, 150.0), 0.0);
        assert!((in_range(150.0, 250.0) / 4000.0 - 1.0).abs() < 0.05);
        assert!(*t.last().unwrap() <= 250.0);
    }

    #[test]
    fn constant_is_exact() {
        let t = times(ArrivalSpec::Constant(Constant { rate: 4.0 }), 1.0);
        assert_eq!(t, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }
}
