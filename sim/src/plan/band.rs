//! The model's own error in the answer: a feasible candidate is re-sized with its iterations
//! 1 − e and 1 + e times as long, e the measured error of what priced it, and its count given as
//! the range between ("5 (4–6)").
//!
//! ```text
//!   cost source of the candidate's group ──► e (docs/fidelity.md's median |error| of mean TPOT;
//!                                              a calibration's own held-out runs where it has some)
//!   count at × (1 − e) and × (1 + e): the exploratory search on the first seed, from the count
//!   found, with the same headroom and spares ──► instances_fast, instances_slow
//! ```
//! TPOT is the measure of an iteration's time: a request's TPOT is the mean of the iterations it
//! decodes through. TTFT errors are larger, but they hold the client's share and queueing, which
//! scaling the iterations does not model.

use serde::{Deserialize, Serialize};

use super::search::{first_seed_count, SearchConfig};
use super::{Candidate, CandidateResult};
use crate::cost::CostSpec;
use crate::scenario::Scenario;

/// Median |error| of mean TPOT per cost source (docs/fidelity.md; `tests/it/plan.rs` checks them
/// against its tables): the kernel database by model kind (the scoreboard's dense vLLM + SGLang
/// rows, Qwen3 MoE, gpt-oss windowed, DeepSeek latent attention), a calibration (held-out rows),
/// the roofline (every row of the scoreboard priced by it, `validate --silicon --roofline`).
pub const DATABASE_DENSE: f64 = 0.071;
pub const DATABASE_MOE: f64 = 0.306;
pub const DATABASE_WINDOWED: f64 = 0.079;
pub const DATABASE_MLA: f64 = 0.248;
pub const CALIBRATED: f64 = 0.116;
pub const ROOFLINE: f64 = 0.148;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// e: iterations were priced 1 − e and 1 + e times as long.
    pub error: f64,
    /// Where e comes from, in words.
    pub source: String,
    /// The recommended count (headroom and spares included) with iterations 1 − e as long.
    pub instances_fast: Option<u32>,
    /// ... and 1 + e as long; `None`: no count up to `max_instances` meets the SLO.
    pub instances_slow: Option<u32>,
}

impl Band {
    /// "5 (4–6)", or "5 (4–none)" when the slow end meets the SLO at no count.
    pub fn range(&self, n: u32) -> String {
        let u = |v: Option<u32>| v.map_or("none".to_string(), |x| x.to_string());
        format!("{n} ({}–{})", u(self.instances_fast), u(self.instances_slow))
    }
}

/// The measured error of what prices `s`'s first group, and its name; `None` for a linear cost
/// model (the user's own line, with no measured error).
pub fn source_error(s: &Scenario) -> Option<(f64, String)> {
    let g = s.groups.first()?;
    let CostSpec::Roofline(c) = &g.cost else { return None };
    if let Some(cal) = g.calibrated() {
        return Some(calibration_error(cal).unwrap_or_else(|| {
            (
                CALIBRATED,
                "calibrated, its fit holding no run out: the scoreboard's held-out median |error| of mean TPOT".into(),
            )
        }));
    }
    if g.profile.is_none() {
        return Some((ROOFLINE, "roofline: median |error| of mean TPOT".into()));
    }
    let m = &s.model;
    let (e, kind) = if m.arch.mla.is_some() {
        (DATABASE_MLA, "latent attention")
    } else if m.arch.window.is_some() {
        (DATABASE_WINDOWED, "windowed attention")
    } else if m.experts > 1 {
        (DATABASE_MOE, "MoE")
    } else {
        (DATABASE_DENSE, "dense")
    };
    let what = if c.database.is_some() { "kernel database" } else { "measured profile (the kernel database's figure)" };
    Some((e, format!("{what}, {kind} models: median |error| of mean TPOT")))
}

/// A calibration's own error, from the runs its fit held out (`[fit] held_out` of the file
/// `calibrate fit` wrote): the median over them of |calibrated mean TPOT / measured − 1|, else
/// (no held-out run measured TPOT) their median |error| over every statistic
/// (`held_out_calibrated_pct`). `None` when the fit held no run out or the file was written by
/// hand. At most 0.9, the widest band (`--error-band`'s bound).
pub fn calibration_error(cal: &crate::cost::Calibration) -> Option<(f64, String)> {
    let fit = cal.fit.as_ref()?;
    let runs = fit.get("held_out").and_then(toml::Value::as_array).filter(|r| !r.is_empty())?;
    let mut errors: Vec<f64> = runs
        .iter()
        .filter_map(|r| {
            let v = r.get("stats")?.get("tpot_ms.mean")?.as_array()?;
            let num = |x: &toml::Value| x.as_float().or_else(|| x.as_integer().map(|i| i as f64));
            let (measured, calibrated) = (num(v.first()?)?, num(v.get(2)?)?);
            (measured > 0.0 && calibrated.is_finite()).then(|| (calibrated / measured - 1.0).abs())
        })
        .collect();
    let n = runs.len();
    let (e, what) = if errors.is_empty() {
        let pct = fit.get("held_out_calibrated_pct").and_then(toml::Value::as_float).filter(|p| p.is_finite())?;
        (pct / 100.0, "median |error| of every statistic")
    } else {
        errors.sort_by(f64::total_cmp);
        (crate::cost::profile::median_sorted(&errors), "median |error| of mean TPOT")
    };
    Some((e.min(0.9), format!("calibrated: its own {n} held-out run(s), {what}")))
}

/// The band of a feasible, colocated candidate (`None` otherwise, or with `cfg`'s error band 0),
/// and the runs and requests it took.
pub(crate) fn band(
    c: &Candidate,
    out: &CandidateResult,
    cfg: &SearchConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Option<(Band, u64, u64)> {
    let (Some(s), true, None, Some(n)) = (&c.scenario, out.feasible, &c.pools, out.instances_min) else { return None };
    let (error, source) = match cfg.error_band {
        Some(e) if e <= 0.0 => return None,
        Some(e) => (e, "--error-band".to_string()),
        None => source_error(s)?,
    };
    let (mut runs, mut requests) = (0, 0);
    let mut at = |factor: f64| {
        let mut scaled = s.clone();
        scaled.set_cost_scale(factor);
        let (count, r, q) = first_seed_count(&scaled, cfg, n, progress);
        (runs, requests) = (runs + r, requests + q);
        count.map(|m| cfg.provisioned(m))
    };
    let (instances_fast, instances_slow) = (at((1.0 - error).max(0.01)), at(1.0 + error));
    Some((Band { error, source, instances_fast, instances_slow }, runs, requests))
}

/// Whether `best` stays the cheapest feasible candidate when every candidate takes its count at
/// the fast end of its band, and at the slow end ($/h when `priced`, else GPUs), in words; `None`
/// when `best` has no band. A candidate without a band keeps its count at both ends.
pub(crate) fn cheapest_across(all: &[CandidateResult], best: &CandidateResult, priced: bool) -> Option<String> {
    let b = best.band.as_ref()?;
    let cost = |c: &CandidateResult, n: u32| {
        let per_instance = c.gpus.zip(c.instances).map(|(g, i)| g as f64 / i.max(1) as f64)?;
        let gpus = per_instance * n as f64;
        if priced {
            c.price_per_gpu_hour.map(|p| p * gpus)
        } else {
            Some(gpus)
        }
    };
    let unit = |x: f64| if priced { format!("${x:.2}/h") } else { format!("{x:.0} GPUs") };
    let mut words = vec![];
    for (end, pick) in
        [("faster", (|b: &Band| b.instances_fast) as fn(&Band) -> Option<u32>), ("slower", |b: &Band| b.instances_slow)]
    {
        let at = |c: &CandidateResult| match &c.band {
            Some(cb) => pick(cb).and_then(|n| cost(c, n)),
            None => c.instances.and_then(|n| cost(c, n)),
        };
        let mine = at(best);
        let cheaper = all
            .iter()
            .filter(|c| c.feasible && c.name != best.name)
            .filter_map(|c| Some((c, at(c)?)))
            .filter(|(_, x)| mine.is_none_or(|m| *x < m))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match (cheaper, mine) {
            (None, _) => {}
            (Some((c, x)), Some(m)) => words.push(format!(
                "with iterations {:.1}% {end}, {} would be cheaper ({} against {})",
                b.error * 100.0,
                c.name,
                unit(x),
                unit(m)
            )),
            (Some((c, x)), None) => words.push(format!(
                "with iterations {:.1}% {end}, {} meets the SLO at no count and {} would be the cheapest ({})",
                b.error * 100.0,
                best.name,
                c.name,
                unit(x)
            )),
        }
    }
    Some(if words.is_empty() {
        format!("{} stays the cheapest at both ends of the error band (iterations ±{:.1}%)", best.name, b.error * 100.0)
    } else {
        words.join("; ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priced(name: &str, price: f64, n: u32, band: Option<(Option<u32>, Option<u32>)>) -> CandidateResult {
        CandidateResult {
            feasible: true,
            instances: Some(n),
            gpus: Some(n as u64),
            price_per_gpu_hour: Some(price),
            cost_per_hour: Some(price * n as f64),
            band: band.map(|(f, s)| Band { error: 0.2, source: "t".into(), instances_fast: f, instances_slow: s }),
            ..CandidateResult::named(name)
        }
    }

    #[test]
    fn the_cheapest_across_the_band_by_hand() {
        // a: 3 × $3 = $9/h, 2 at the fast end ($6), 5 at the slow end ($15); b: 3 × $3.50 =
        // $10.50 at both ends. Fast: a stays cheapest; slow: b is cheaper.
        let a = priced("a", 3.0, 3, Some((Some(2), Some(5))));
        let b = priced("b", 3.5, 3, Some((Some(3), Some(3))));
        let all = [a.clone(), b.clone()];
        assert_eq!(
            cheapest_across(&all, &a, true).unwrap(),
            "with iterations 20.0% slower, b would be cheaper ($10.50/h against $15.00/h)"
        );
        // b without a band keeps its count at both ends; a at the slow end meeting the SLO at
        // no count.
        let a_none = priced("a", 3.0, 3, Some((Some(3), None)));
        let all = [a_none.clone(), priced("b", 3.5, 3, None)];
        assert_eq!(
            cheapest_across(&all, &a_none, true).unwrap(),
            "with iterations 20.0% slower, a meets the SLO at no count and b would be the cheapest ($10.50/h)"
        );
        let all = [a.clone(), priced("b", 3.5, 4, Some((Some(4), Some(6))))];
        assert_eq!(
            cheapest_across(&all, &a, true).unwrap(),
            "a stays the cheapest at both ends of the error band (iterations ±20.0%)"
        );
        // Unpriced: GPUs.
        assert!(cheapest_across(&[a.clone(), b.clone()], &a, false).unwrap().contains("(3 GPUs against 5 GPUs)"));
        assert!(cheapest_across(std::slice::from_ref(&b), &priced("c", 1.0, 1, None), true).is_none());
        assert_eq!(a.band.as_ref().unwrap().range(3), "3 (2–5)");
        assert_eq!(a_none.band.as_ref().unwrap().range(3), "3 (3–none)");
    }

    #[test]
    fn each_cost_source_has_its_error() {
        let src = |cost: &str| {
            let s = format!(
                "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n{cost}\n[workload]\nduration_s = 10\n\
                 arrival = {{ kind = \"poisson\", rate = 2 }}\nprompt_tokens = {{ kind = \"fixed\", value = 100 }}\n\
                 output_tokens = {{ kind = \"fixed\", value = 10 }}\n"
            );
            source_error(&Scenario::from_toml(&s, "t").unwrap()).map(|(e, _)| e)
        };
        assert_eq!(src(""), Some(ROOFLINE));
        assert_eq!(src("[cost]\nkind = \"linear\"\nbase_us = 5000\nper_token_us = 50\nper_seq_us = 0"), None);
    }

    /// A calibration's band is its own fit's held-out error: the median of |calibrated /
    /// measured − 1| of mean TPOT (runs of 10 → 11 and 20 → 17 ms: 10% and 15%, median 12.5%);
    /// without a TPOT statistic, the fit's median over every held-out statistic; without
    /// held-out runs, none (the scoreboard's figure stands in).
    #[test]
    fn a_calibration_is_banded_by_its_own_held_out_runs() {
        let cal = |fit: &str| {
            let mut c = crate::cost::Calibration::of("h100-sxm", "vllm", "database", &Default::default());
            c.fit = Some(fit.parse().unwrap());
            c
        };
        let run = |key: &str, m: f64, c: f64| {
            format!("[[held_out]]\nhow = \"holdout\"\nstats = {{ \"{key}\" = [{m}, 1.0, {c}] }}\n")
        };
        let two = format!(
            "held_out_calibrated_pct = 40.0\n{}{}",
            run("tpot_ms.mean", 10.0, 11.0),
            run("tpot_ms.mean", 20.0, 17.0)
        );
        let (e, why) = calibration_error(&cal(&two)).unwrap();
        assert!((e - 0.125).abs() < 1e-12, "{e}");
        assert_eq!(why, "calibrated: its own 2 held-out run(s), median |error| of mean TPOT");
        let ttft_only = format!("held_out_calibrated_pct = 40.0\n{}", run("ttft_ms.mean", 100.0, 130.0));
        let (e, why) = calibration_error(&cal(&ttft_only)).unwrap();
        assert!((e - 0.4).abs() < 1e-12 && why.ends_with("every statistic"), "{e} {why}");
        assert_eq!(calibration_error(&cal("error_calibrated_pct = 3.0")), None);
        let mut by_hand = cal("");
        by_hand.fit = None;
        assert_eq!(calibration_error(&by_hand), None);
        // An error past 90% is held to the widest band.
        let wild = run("tpot_ms.mean", 10.0, 25.0);
        assert_eq!(calibration_error(&cal(&wild)).unwrap().0, 0.9);
    }
}
