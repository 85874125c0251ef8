//! Fitting a synthetic `[workload]` to a profiled request stream (`servesim workload fit`).
//!
//! - Arrivals: `gamma` with the stream's mean rate and inter-arrival CV (one rate to scale to
//!   next quarter's load), or `phases`, one phase per rate window with the window's rate, whose
//!   common within-phase CV is calibrated so the whole schedule's inter-arrival CV matches.
//! - Lengths: the empirical distribution as a mixture of uniform pieces between quantiles
//!   (finer in the tail), so the percentiles are reproduced, clamped to the observed range.
//! - Prefix reuse and sessions are reported in comments: the synthetic generators of shared
//!   prefixes live with the prefix-caching work.

use super::arrival::{ArrivalSpec, GammaArrival, OpenArrivals, Phase, Phases};
use super::length::{Component, LengthDist, Mixture, Uniform};
use super::profile::{percentile_u32, ProfileData};
use super::WorkloadSpec;
use crate::rng::{substream, Stream};

/// Cumulative probabilities at which the length mixture's pieces meet.
pub const LENGTH_KNOTS: [f64; 18] =
    [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999, 1.0];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalFit {
    Gamma,
    Phases,
}

/// Fits a synthetic workload to a profile of at least two requests over a positive duration.
/// `seed` is the seed the phases' CV is calibrated with.
pub fn fit(d: &ProfileData, arrival: ArrivalFit, seed: u64) -> WorkloadSpec {
    let p = &d.profile;
    let arrival = match arrival {
        // The CV is kept within what a gamma arrival accepts.
        ArrivalFit::Gamma => {
            ArrivalSpec::Gamma(GammaArrival { rate: p.rate_mean_rps, cv: p.interarrival_cv.clamp(0.01, 100.0) })
        }
        ArrivalFit::Phases => ArrivalSpec::Phases(fit_phases(d, seed)),
    };
    WorkloadSpec {
        duration_s: Some(p.duration_s),
        requests: None,
        arrival: Some(arrival),
        prompt_tokens: Some(fit_lengths(&d.prompt_sorted)),
        output_tokens: Some(fit_lengths(&d.output_sorted)),
        trace: None,
        prefix: None,
        class_weights: None,
    }
}

/// The empirical length distribution: uniform pieces between consecutive knots' quantiles.
pub fn fit_lengths(sorted: &[u32]) -> LengthDist {
    let q: Vec<u64> = LENGTH_KNOTS.iter().map(|&k| percentile_u32(sorted, k * 100.0).round().max(1.0) as u64).collect();
    let mut components: Vec<Component> = Vec::new();
    for i in 0..LENGTH_KNOTS.len() - 1 {
        let weight = LENGTH_KNOTS[i + 1] - LENGTH_KNOTS[i];
        let (lo, hi) = (q[i], q[i + 1]);
        // Neighbouring pieces with the same range merge (common for tied lengths).
        if let Some(last) = components.last_mut() {
            if let LengthDist::Uniform(u) = &last.dist {
                if (u.min, u.max) == (lo, hi) {
                    last.weight += weight;
                    continue;
                }
            }
        }
        components.push(Component { weight, dist: LengthDist::Uniform(Uniform { min: lo, max: hi }) });
    }
    for c in &mut components {
        c.weight = (c.weight * 1e6).round() / 1e6;
    }
    LengthDist::Mixture(Mixture { components, min: Some(q[0]), max: Some(q[q.len() - 1]) })
}

/// Inter-arrival CV of an open-loop schedule, measured on its first `n` arrivals.
fn schedule_cv(spec: &ArrivalSpec, seed: u64, n: u64) -> f64 {
    let mut a = OpenArrivals::new(spec.clone(), substream(seed, Stream::Arrivals, 0));
    let (mut prev, mut k, mut mean, mut m2) = (None::<f64>, 0u64, 0.0, 0.0);
    for _ in 0..n {
        let Some(t) = a.next_s() else { break };
        if let Some(p) = prev {
            let g = t - p;
            k += 1;
            let d = g - mean;
            mean += d / k as f64;
            m2 += d * (g - mean);
        }
        prev = Some(t);
    }
    if k == 0 || mean <= 0.0 {
        0.0
    } else {
        (m2 / k as f64).sqrt() / mean
    }
}

fn fit_phases(d: &ProfileData, seed: u64) -> Phases {
    let p = &d.profile;
    let w = p.rate_window_s;
    let mut shape: Vec<(f64, f64)> = d.window_counts.iter().map(|&c| (w, c as f64 / w)).collect();
    if d.tail.1 > 0.0 {
        shape.push((d.tail.1, d.tail.0 as f64 / d.tail.1));
    }
    if shape.is_empty() || shape.iter().all(|s| s.1 == 0.0) {
        shape = vec![(p.duration_s.max(1e-3), p.rate_mean_rps.max(1e-9))];
    }
    let phases = |cv: f64| {
        ArrivalSpec::Phases(Phases {
            phases: shape
                .iter()
                .map(|&(duration_s, rate)| Phase { duration_s, rate: (rate * 1e6).round() / 1e6, cv })
                .collect(),
        })
    };
    // The schedule's CV grows with the within-phase CV; bisect on a log scale.
    let n = p.requests.max(2);
    let target = p.interarrival_cv;
    let (mut lo, mut hi) = (0.05f64.ln(), 100f64.ln());
    for _ in 0..40 {
        let mid = (lo + hi) / 2.0;
        if schedule_cv(&phases(mid.exp()), seed, n) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let cv = ((lo + hi) / 2.0).exp();
    let cv = (cv * 1e4).round() / 1e4;
    match phases(cv) {
        ArrivalSpec::Phases(ph) => ph,
        _ => unreachable!(),
    }
}

/// The fitted workload as a TOML `[workload]` section, readable and valid.
pub fn to_toml(w: &WorkloadSpec) -> String {
    let mut o = String::from("[workload]\n");
    if let Some(d) = w.duration_s {
        o += &format!("duration_s = {}\n", fmt_f(d));
    }
    if let Some(n) = w.requests {
        o += &format!("requests = {n}\n");
    }
    match &w.arrival {
        Some(ArrivalSpec::Gamma(g)) => {
            o += &format!("arrival = {{ kind = \"gamma\", rate = {}, cv = {} }}\n", fmt_f(g.rate), fmt_f(g.cv))
        }
        Some(ArrivalSpec::Phases(p)) => {
            o += "arrival = { kind = \"phases\", phases = [\n";
            for ph in &p.phases {
                o += &format!(
                    "  {{ duration_s = {}, rate = {}, cv = {} }},\n",
                    fmt_f(ph.duration_s),
                    fmt_f(ph.rate),
                    fmt_f(ph.cv)
                );
            }
            o += "] }\n";
        }
        Some(other) => o += &format!("arrival = {}\n", toml::Value::try_from(other).expect("serialises")),
        None => {}
    }
    for (key, dist) in [("prompt_tokens", &w.prompt_tokens), ("output_tokens", &w.output_tokens)] {
        let Some(dist) = dist else { continue };
        match dist {
            LengthDist::Mixture(m) => {
                o += &format!("\n[workload.{key}]\nkind = \"mixture\"\n");
                if let Some(v) = m.min {
                    o += &format!("min = {v}\n");
                }
                if let Some(v) = m.max {
                    o += &format!("max = {v}\n");
                }
                o += "components = [\n";
                for c in &m.components {
                    match &c.dist {
                        LengthDist::Uniform(u) => {
                            o += &format!(
                                "  {{ weight = {}, kind = \"uniform\", min = {}, max = {} }},\n",
                                fmt_f(c.weight),
                                u.min,
                                u.max
                            )
                        }
                        other => {
                            o += &format!("  {{ weight = {}, {} }},\n", fmt_f(c.weight), inline_fields(other));
                        }
                    }
                }
                o += "]\n";
            }
            other => o += &format!("{key} = {{ {} }}\n", inline_fields(other)),
        }
    }
    o
}

/// `k = v, ...` of a flat value (a length distribution other than a mixture).
fn inline_fields<T: serde::Serialize>(v: &T) -> String {
    match toml::Value::try_from(v).expect("serialises") {
        toml::Value::Table(t) => t.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A float written so TOML reads it back as a float, without noise digits.
fn fmt_f(x: f64) -> String {
    let s = format!("{}", (x * 1e6).round() / 1e6);
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}
