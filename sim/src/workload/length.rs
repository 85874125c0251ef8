//! Token-length distributions for prompts and outputs.

use crate::rng::SimRng;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::config::{check, ConfigError};
use crate::rng::{lognormal, normal};
use crate::tagged_enum;

/// Φ⁻¹(0.99): the standard-normal quantile that turns a (median, p99) pair into a lognormal σ.
pub const Z_P99: f64 = 2.326_347_874_040_841;

/// A distribution of token counts. Every kind rounds to an integer and clamps to `[min, max]`
/// (default min 1, so every request has at least one token).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LengthDist {
    Fixed(Fixed),
    Uniform(Uniform),
    Normal(NormalLen),
    Lognormal(Lognormal),
    Mixture(Mixture),
}

tagged_enum!(LengthDist {
    "fixed" => Fixed(Fixed),
    "uniform" => Uniform(Uniform),
    "normal" => Normal(NormalLen),
    "lognormal" => Lognormal(Lognormal),
    "mixture" => Mixture(Mixture),
});

/// Always `value` tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixed {
    pub value: u64,
}

/// Uniform integers in `[min, max]`, both ends included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uniform {
    pub(crate) min: u64,
    pub(crate) max: u64,
}

/// Normal with `mean` and `std`, rounded and clamped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalLen {
    pub(crate) mean: f64,
    pub(crate) std: f64,
    pub(crate) min: Option<u64>,
    pub(crate) max: Option<u64>,
}

/// Lognormal given either `median` and `p99` (the way people describe lengths) or the
/// underlying normal's `mu` and `sigma`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lognormal {
    pub(crate) median: Option<f64>,
    pub(crate) p99: Option<f64>,
    pub(crate) mu: Option<f64>,
    pub(crate) sigma: Option<f64>,
    pub(crate) min: Option<u64>,
    pub(crate) max: Option<u64>,
}

/// A weighted mixture, for example 70% short / 25% medium / 5% long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mixture {
    pub(crate) components: Vec<Component>,
    pub(crate) min: Option<u64>,
    pub(crate) max: Option<u64>,
}

/// One part of a mixture: a weight and any length distribution, written inline:
/// `{ weight = 0.7, kind = "uniform", min = 50, max = 300 }`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Component {
    pub(crate) weight: f64,
    #[serde(flatten)]
    pub(crate) dist: LengthDist,
}

impl<'de> Deserialize<'de> for Component {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(d)?;
        let weight = match table.remove("weight") {
            Some(toml::Value::Float(f)) => f,
            Some(toml::Value::Integer(i)) => i as f64,
            Some(v) => {
                let m = crate::config::de::PATH_MARK;
                return Err(D::Error::custom(format!("{m}weight{m}expected a number, got {v}")));
            }
            None => {
                let m = crate::config::de::PATH_MARK;
                return Err(D::Error::custom(format!("{m}weight{m}missing")));
            }
        };
        let dist = LengthDist::deserialize(toml::Value::Table(table)).map_err(D::Error::custom)?;
        Ok(Component { weight, dist })
    }
}

impl LengthDist {
    /// Checks values; `path` names this distribution's key for error messages.
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        match self {
            LengthDist::Fixed(f) => check(f.value >= 1, path, "value", "must be ≥ 1", f.value),
            LengthDist::Uniform(u) => {
                check(u.min >= 1, path, "min", "must be ≥ 1", u.min)?;
                check(u.max >= u.min, path, "max", &format!("must be ≥ min ({})", u.min), u.max)
            }
            LengthDist::Normal(n) => {
                check(n.mean.is_finite() && n.mean > 0.0, path, "mean", "must be > 0", n.mean)?;
                check(n.std.is_finite() && n.std >= 0.0, path, "std", "must be ≥ 0", n.std)?;
                check_clamps(path, n.min, n.max)
            }
            LengthDist::Lognormal(l) => {
                match (l.median, l.p99, l.mu, l.sigma) {
                    (Some(med), Some(p99), None, None) => {
                        check(med.is_finite() && med >= 1.0, path, "median", "must be ≥ 1", med)?;
                        check(p99.is_finite() && p99 >= med, path, "p99", &format!("must be ≥ median ({med})"), p99)?;
                    }
                    (None, None, Some(mu), Some(sigma)) => {
                        check(
                            mu.is_finite() && mu.abs() < 50.0,
                            path,
                            "mu",
                            "must be a finite log-length below 50",
                            mu,
                        )?;
                        check(
                            sigma.is_finite() && (0.0..=10.0).contains(&sigma),
                            path,
                            "sigma",
                            "must be in [0, 10]",
                            sigma,
                        )?;
                    }
                    _ => {
                        return Err(ConfigError::at(path, "give either median and p99, or mu and sigma".to_string()));
                    }
                }
                check_clamps(path, l.min, l.max)
            }
            LengthDist::Mixture(m) => {
                if m.components.is_empty() {
                    return Err(ConfigError::at(
                        &format!("{path}.components"),
                        "must list at least one component".into(),
                    ));
                }
                for (i, c) in m.components.iter().enumerate() {
                    let p = format!("{path}.components[{i}]");
                    check(c.weight.is_finite() && c.weight > 0.0, &p, "weight", "must be > 0", c.weight)?;
                    c.dist.validate(&p)?;
                }
                check_clamps(path, m.min, m.max)
            }
        }
    }

    /// Draws one length (for a few draws; a stream of draws builds its [`Sampler`] once).
    pub fn sample(&self, rng: &mut SimRng) -> u64 {
        self.sampler().sample(rng)
    }

    /// The distribution built for drawing: parameters derived once (a lognormal's μ and σ from
    /// its median and p99, a mixture's total weight), not on every draw.
    pub fn sampler(&self) -> Sampler {
        match self {
            LengthDist::Fixed(f) => Sampler::Fixed(f.value),
            LengthDist::Uniform(u) => Sampler::Uniform(u.min, u.max),
            LengthDist::Normal(n) => Sampler::Normal { mean: n.mean, std: n.std, min: n.min, max: n.max },
            LengthDist::Lognormal(l) => {
                let (mu, sigma) = l.mu_sigma();
                Sampler::Lognormal { mu, sigma, min: l.min, max: l.max }
            }
            LengthDist::Mixture(m) => Sampler::Mixture {
                total: m.components.iter().map(|c| c.weight).sum(),
                components: m.components.iter().map(|c| (c.weight, c.dist.sampler())).collect(),
                min: m.min,
                max: m.max,
            },
        }
    }

    /// The mean before clamping and rounding, where it has a closed form (used for docs and
    /// for sizing checks).
    pub fn mean(&self) -> f64 {
        match self {
            LengthDist::Fixed(f) => f.value as f64,
            LengthDist::Uniform(u) => (u.min + u.max) as f64 / 2.0,
            LengthDist::Normal(n) => n.mean,
            LengthDist::Lognormal(l) => {
                let (mu, sigma) = l.mu_sigma();
                (mu + sigma * sigma / 2.0).exp()
            }
            LengthDist::Mixture(m) => {
                let total: f64 = m.components.iter().map(|c| c.weight).sum();
                m.components.iter().map(|c| c.weight / total * c.dist.mean()).sum()
            }
        }
    }

    /// The largest value this distribution can produce, if bounded.
    pub fn max(&self) -> Option<u64> {
        match self {
            LengthDist::Fixed(f) => Some(f.value),
            LengthDist::Uniform(u) => Some(u.max),
            LengthDist::Normal(n) => n.max,
            LengthDist::Lognormal(l) => l.max,
            LengthDist::Mixture(m) => {
                m.max.or_else(|| m.components.iter().map(|c| c.dist.max()).try_fold(0, |acc, x| x.map(|x| acc.max(x))))
            }
        }
    }
}

/// A length distribution ready to draw from ([`LengthDist::sampler`]); the same draws as the
/// distribution itself, from the same random stream.
#[derive(Clone, Debug)]
pub enum Sampler {
    Fixed(u64),
    Uniform(u64, u64),
    Normal { mean: f64, std: f64, min: Option<u64>, max: Option<u64> },
    Lognormal { mu: f64, sigma: f64, min: Option<u64>, max: Option<u64> },
    Mixture { total: f64, components: Vec<(f64, Sampler)>, min: Option<u64>, max: Option<u64> },
}

impl Sampler {
    /// Draws one length.
    pub fn sample(&self, rng: &mut SimRng) -> u64 {
        match self {
            Sampler::Fixed(v) => *v,
            Sampler::Uniform(min, max) => rng.random_range(*min..=*max),
            Sampler::Normal { mean, std, min, max } => clamp(normal(rng, *mean, *std), *min, *max),
            Sampler::Lognormal { mu, sigma, min, max } => clamp(lognormal(rng, *mu, *sigma), *min, *max),
            Sampler::Mixture { total, components, min, max } => {
                let mut u = rng.random::<f64>() * total;
                let mut chosen = &components[components.len() - 1].1;
                for (w, c) in components {
                    if u < *w {
                        chosen = c;
                        break;
                    }
                    u -= w;
                }
                let x = chosen.sample(rng);
                clamp(x as f64, *min, *max)
            }
        }
    }
}

impl Lognormal {
    pub fn mu_sigma(&self) -> (f64, f64) {
        match (self.median, self.p99, self.mu, self.sigma) {
            (Some(med), Some(p99), _, _) => (med.ln(), (p99 / med).ln() / Z_P99),
            (_, _, Some(mu), Some(sigma)) => (mu, sigma),
            _ => unreachable!("validated"),
        }
    }
}

fn check_clamps(path: &str, min: Option<u64>, max: Option<u64>) -> Result<(), ConfigError> {
    if let Some(lo) = min {
        check(lo >= 1, path, "min", "must be ≥ 1", lo)?;
    }
    if let Some(hi) = max {
        let lo = min.unwrap_or(1);
        check(hi >= lo, path, "max", &format!("must be ≥ min ({lo})"), hi)?;
    }
    Ok(())
}

fn clamp(x: f64, min: Option<u64>, max: Option<u64>) -> u64 {
    let lo = min.unwrap_or(1).max(1) as f64;
    let hi = max.map(|m| m as f64).unwrap_or(u32::MAX as f64);
    let r = x.round();
    let r = if r.is_nan() { lo } else { r.clamp(lo, hi.max(lo)) };
    r as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{substream, Stream};

    fn parse(s: &str) -> LengthDist {
        toml::from_str::<toml::Table>(s).unwrap()["d"].clone().try_into().unwrap()
    }

    fn samples(d: &LengthDist, n: usize) -> Vec<u64> {
        let mut rng = substream(1, Stream::PromptTokens, 0);
        let mut v: Vec<u64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn lognormal_median_and_p99_are_reproduced() {
        let d = parse("d = { kind = 'lognormal', median = 500, p99 = 4000 }");
        let v = samples(&d, 200_000);
        let median = v[v.len() / 2] as f64;
        let p99 = v[v.len() * 99 / 100] as f64;
        assert!((median / 500.0 - 1.0).abs() < 0.02, "median {median}");
        assert!((p99 / 4000.0 - 1.0).abs() < 0.04, "p99 {p99}");
    }

    #[test]
    fn mixture_weights_are_respected_and_clamps_apply() {
        let d = parse(
            "d = { kind = 'mixture', max = 5000, components = [ \
               { weight = 0.7, kind = 'fixed', value = 100 }, \
               { weight = 0.25, kind = 'fixed', value = 1000 }, \
               { weight = 0.05, kind = 'fixed', value = 9000 } ] }",
        );
        let v = samples(&d, 100_000);
        let frac = |x: u64| v.iter().filter(|&&y| y == x).count() as f64 / v.len() as f64;
        assert!((frac(100) - 0.70).abs() < 0.01);
        assert!((frac(1000) - 0.25).abs() < 0.01);
        assert!((frac(5000) - 0.05).abs() < 0.005, "long ones clamp to max");
        assert!((d.mean() - (70.0 + 250.0 + 450.0)).abs() < 1e-9);
    }

    #[test]
    fn uniform_and_normal_bounds() {
        let u = samples(&parse("d = { kind = 'uniform', min = 10, max = 20 }"), 10_000);
        assert_eq!((u[0], u[u.len() - 1]), (10, 20));
        let n = samples(&parse("d = { kind = 'normal', mean = 5, std = 100, min = 2, max = 50 }"), 10_000);
        assert_eq!((n[0], n[n.len() - 1]), (2, 50));
    }

    #[test]
    fn bad_values_name_the_key() {
        let e = parse("d = { kind = 'uniform', min = 10, max = 5 }").validate("workload.prompt_tokens").unwrap_err();
        assert_eq!(e.to_string(), "workload.prompt_tokens.max: must be ≥ min (10), got 5");
        let e = parse("d = { kind = 'lognormal', median = 10 }").validate("x").unwrap_err();
        assert!(e.to_string().starts_with("x: give either median and p99"), "{e}");
    }
}
