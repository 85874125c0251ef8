//! `servesim tune`: every combination of the `[tune]` knobs as a `[plan]` candidate, each sized
//! by the plan's instance search; the cheapest feasible one and the Pareto frontier of cost
//! against the p99 latencies.
//!
//! What can be pruned without changing the answer (the functions below; the CLI runs the
//! search): a configuration whose cost floor exceeds the cheapest feasible cost found, and one
//! whose first seed fails at the most instances it could have within that cost.

use serde::{Deserialize, Serialize};

use super::{CandidateResult, CandidateSection};
use crate::config::ConfigError;
use crate::scenario::{Scenario, TuneSection};

/// The knobs of one configuration, for its name and its launch command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Knobs {
    pub gpu: Option<String>,
    pub tp: Option<u32>,
    pub max_num_seqs: Option<u32>,
    pub max_num_batched_tokens: Option<u32>,
    pub batching: Option<String>,
    pub router: Option<String>,
    pub prefix_caching: Option<bool>,
    pub weight_dtype: Option<String>,
}

impl Knobs {
    /// A name made of the knobs tuned (`h200-tp2-s256-t8192-vllm-v1-rr-pc`).
    fn name(&self) -> String {
        let mut parts = vec![];
        if let Some(g) = &self.gpu {
            parts.push(g.clone());
        }
        if let Some(t) = self.tp {
            parts.push(format!("tp{t}"));
        }
        if let Some(d) = &self.weight_dtype {
            parts.push(d.clone());
        }
        if let Some(s) = self.max_num_seqs {
            parts.push(format!("s{s}"));
        }
        if let Some(t) = self.max_num_batched_tokens {
            parts.push(format!("t{t}"));
        }
        if let Some(b) = &self.batching {
            parts.push(b.clone());
        }
        if let Some(r) = &self.router {
            parts.push(r.clone());
        }
        if let Some(p) = self.prefix_caching {
            parts.push(if p { "prefix".into() } else { "noprefix".into() });
        }
        if parts.is_empty() {
            "as-written".into()
        } else {
            parts.join("-")
        }
    }

    fn candidate(&self) -> CandidateSection {
        let str_table = |kind: &str| {
            let mut t = toml::Table::new();
            t.insert("kind".into(), toml::Value::String(kind.into()));
            t
        };
        let mut scheduler = toml::Table::new();
        if let Some(s) = self.max_num_seqs {
            scheduler.insert("max_num_seqs".into(), toml::Value::Integer(s as i64));
        }
        if let Some(t) = self.max_num_batched_tokens {
            scheduler.insert("max_num_batched_tokens".into(), toml::Value::Integer(t as i64));
        }
        if let Some(b) = &self.batching {
            scheduler.insert("batching".into(), toml::Value::Table(str_table(b)));
        }
        if let Some(p) = self.prefix_caching {
            let mut t = toml::Table::new();
            t.insert("enabled".into(), toml::Value::Boolean(p));
            scheduler.insert("prefix_cache".into(), toml::Value::Table(t));
        }
        let set = self.weight_dtype.as_ref().map(|d| {
            let mut t = toml::Table::new();
            t.insert("model.weight_dtype".into(), toml::Value::String(d.clone()));
            t
        });
        CandidateSection {
            name: self.name(),
            gpu: self.gpu.as_ref().map(|g| crate::spec::GpuSection::preset(g)),
            tp: self.tp,
            scheduler: (!scheduler.is_empty()).then_some(scheduler),
            memory: None,
            cost: None,
            router: self.router.as_ref().map(|r| str_table(r)),
            set,
        }
    }
}

/// Every combination of the knobs, in a fixed order (GPU slowest, weight dtype fastest).
pub fn configurations(t: &TuneSection) -> Vec<Knobs> {
    fn axis<T: Clone>(xs: &[T]) -> Vec<Option<T>> {
        if xs.is_empty() {
            vec![None]
        } else {
            xs.iter().cloned().map(Some).collect()
        }
    }
    let mut out = vec![];
    for gpu in axis(&t.gpu) {
        for tp in axis(&t.tp) {
            for seqs in axis(&t.max_num_seqs) {
                for tokens in axis(&t.max_num_batched_tokens) {
                    for batching in axis(&t.batching) {
                        for router in axis(&t.router) {
                            for prefix in axis(&t.prefix_caching) {
                                for dtype in axis(&t.weight_dtype) {
                                    out.push(Knobs {
                                        gpu: gpu.clone(),
                                        tp,
                                        max_num_seqs: seqs,
                                        max_num_batched_tokens: tokens,
                                        batching: batching.clone(),
                                        router: router.clone(),
                                        prefix_caching: prefix,
                                        weight_dtype: dtype.clone(),
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The scenario with `[plan] candidates` replaced by every `[tune]` configuration, and the
/// knobs of each (in the candidates' order).
pub fn plan_scenario(s: &Scenario) -> Result<(Scenario, Vec<Knobs>), ConfigError> {
    let tune =
        s.resolved.tune.clone().ok_or_else(|| {
            ConfigError::at("tune", "missing section: list the knobs to search, e.g. tp = [1, 2]".into())
        })?;
    if s.groups.len() > 1 || s.disaggregation.is_some() {
        return Err(ConfigError::at(
            "tune",
            "tunes one homogeneous group; a heterogeneous or disaggregated cluster is not searched yet".into(),
        ));
    }
    let knobs = configurations(&tune);
    let mut out = s.clone();
    let mut plan = out.resolved.plan.clone().unwrap_or_default();
    plan.candidates = knobs.iter().map(Knobs::candidate).collect();
    out.resolved.plan = Some(plan);
    Ok((out, knobs))
}

/// The feasible results no other feasible one beats on cost, p99 TTFT and p99 TPOT at once
/// (at least as good on all three, better on one), cheapest first.
pub fn frontier(results: &[CandidateResult]) -> Vec<String> {
    let cost = |c: &CandidateResult| c.cost_per_hour.unwrap_or(c.gpus.unwrap_or(u64::MAX) as f64);
    let point =
        |c: &CandidateResult| (cost(c), c.ttft_ms_p99.unwrap_or(f64::INFINITY), c.tpot_ms_p99.unwrap_or(f64::INFINITY));
    let feasible: Vec<&CandidateResult> = results.iter().filter(|c| c.feasible).collect();
    let dominates = |a: (f64, f64, f64), b: (f64, f64, f64)| {
        a.0 <= b.0 && a.1 <= b.1 && a.2 <= b.2 && (a.0 < b.0 || a.1 < b.1 || a.2 < b.2)
    };
    let mut out: Vec<&CandidateResult> =
        feasible.iter().copied().filter(|c| !feasible.iter().any(|o| dominates(point(o), point(c)))).collect();
    out.sort_by(|a, b| {
        point(a).partial_cmp(&point(b)).expect("finite or infinite, never NaN").then(a.name.cmp(&b.name))
    });
    out.into_iter().map(|c| c.name.clone()).collect()
}

/// A configuration's cost in the plan's unit ($/h when `priced`, else GPUs) at a minimum count
/// of `n` instances: its GPUs at the count the plan would recommend for that minimum (headroom
/// and spare instances added).
pub fn cost_at(c: &super::Candidate, cfg: &super::SearchConfig, priced: bool, n: u32) -> f64 {
    let gpus = cfg.provisioned(n) as f64 * c.tp as f64;
    if priced {
        gpus * c.price_per_gpu_hour.unwrap_or(f64::INFINITY)
    } else {
        gpus
    }
}

/// The least a configuration can cost: [`cost_at`] the fewest instances the plan can answer
/// (one more than `[plan] spare`). No run can recommend less, so a configuration whose floor
/// exceeds a feasible configuration's cost cannot be cheapest.
pub fn cost_floor(c: &super::Candidate, cfg: &super::SearchConfig, priced: bool) -> f64 {
    cost_at(c, cfg, priced, cfg.min_instances())
}

/// The most instances at which a configuration costs no more than `budget` (up to `[plan]
/// max_instances`); `None` when even its floor costs more. If the plan's first seed fails at
/// that count, the configuration's minimum is above it (the search assumes more instances never
/// hurt), so it cannot cost `budget` or less.
pub fn most_within(c: &super::Candidate, cfg: &super::SearchConfig, priced: bool, budget: f64) -> Option<u32> {
    let mut n = cfg.min_instances();
    if cost_at(c, cfg, priced, n) > budget {
        return None;
    }
    while n < cfg.max_instances() && cost_at(c, cfg, priced, n + 1) <= budget {
        n += 1;
    }
    Some(n)
}

/// A configuration's cost in the same unit as [`cost_floor`], if it is feasible.
pub fn cost_of(r: &CandidateResult, priced: bool) -> Option<f64> {
    if !r.feasible {
        return None;
    }
    if priced {
        r.cost_per_hour
    } else {
        r.gpus.map(|g| g as f64)
    }
}
