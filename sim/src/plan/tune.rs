//! `servesim tune`: every combination of the `[tune]` knobs as a `[plan]` candidate, each sized
//! by the plan's instance search; the cheapest feasible one and the Pareto frontier of cost
//! against the p99 latencies.
//!
//! What can be pruned without changing the answer (the functions below; `prune.rs` runs the
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp: Option<u32>,
    pub max_num_seqs: Option<u32>,
    pub max_num_batched_tokens: Option<u32>,
    pub batching: Option<String>,
    pub router: Option<String>,
    pub prefix_caching: Option<bool>,
    pub weight_dtype: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_gpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_tp: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_gpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tp: Option<u32>,
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
        if let Some(p) = self.pp {
            parts.push(format!("pp{p}"));
        }
        if let Some(d) = &self.weight_dtype {
            parts.push(d.clone());
        }
        if let Some(d) = &self.kv_dtype {
            parts.push(format!("kv-{d}"));
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
        for (pool, gpu, tp) in [("p", &self.prefill_gpu, self.prefill_tp), ("d", &self.decode_gpu, self.decode_tp)] {
            if gpu.is_some() || tp.is_some() {
                let mut part = pool.to_string();
                if let Some(g) = gpu {
                    part += &format!("-{g}");
                }
                if let Some(t) = tp {
                    part += &format!("-tp{t}");
                }
                parts.push(part);
            }
        }
        if parts.is_empty() {
            "as-written".into()
        } else {
            parts.join("-")
        }
    }

    /// The plan candidate; `pools`: the prefill and decode groups' indices in `[cluster]
    /// groups`, which the pool knobs edit.
    fn candidate(&self, pools: Option<(usize, usize)>) -> CandidateSection {
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
        let mut set = toml::Table::new();
        if let Some(d) = &self.weight_dtype {
            set.insert("model.weight_dtype".into(), toml::Value::String(d.clone()));
        }
        if let Some(d) = &self.kv_dtype {
            set.insert("model.kv_dtype".into(), toml::Value::String(d.clone()));
        }
        if let Some((p, d)) = pools {
            for (g, gpu, tp) in [(p, &self.prefill_gpu, self.prefill_tp), (d, &self.decode_gpu, self.decode_tp)] {
                if let Some(gpu) = gpu {
                    set.insert(format!("cluster.groups[{g}].gpu"), toml::Value::String(gpu.clone()));
                }
                if let Some(tp) = tp {
                    set.insert(format!("cluster.groups[{g}].tp"), toml::Value::Integer(tp as i64));
                }
            }
        }
        let set = (!set.is_empty()).then_some(set);
        CandidateSection {
            name: self.name(),
            gpu: self.gpu.as_ref().map(|g| crate::spec::GpuSection::preset(g)),
            tp: self.tp,
            pp: self.pp,
            scheduler: (!scheduler.is_empty()).then_some(scheduler),
            memory: None,
            cost: None,
            router: self.router.as_ref().map(|r| str_table(r)),
            set,
        }
    }
}

/// Every combination of the knobs, in a fixed order (GPU slowest, then TP, batch limits,
/// batching, router, prefix caching, weight dtype, KV dtype, the prefill pool's GPU and TP, the
/// decode pool's, and pipeline stages fastest).
pub fn configurations(t: &TuneSection) -> Vec<Knobs> {
    fn axis<T: Clone>(xs: &[T]) -> Vec<Option<T>> {
        if xs.is_empty() {
            vec![None]
        } else {
            xs.iter().cloned().map(Some).collect()
        }
    }
    let (gpu, tp, seqs, tokens) = (axis(&t.gpu), axis(&t.tp), axis(&t.max_num_seqs), axis(&t.max_num_batched_tokens));
    let (batching, router, prefix, dtype) =
        (axis(&t.batching), axis(&t.router), axis(&t.prefix_caching), axis(&t.weight_dtype));
    let (kv, pp) = (axis(&t.kv_dtype), axis(&t.pp));
    let (pg, ptp, dg, dtp) = (axis(&t.prefill_gpu), axis(&t.prefill_tp), axis(&t.decode_gpu), axis(&t.decode_tp));
    let lens = [
        gpu.len(),
        tp.len(),
        seqs.len(),
        tokens.len(),
        batching.len(),
        router.len(),
        prefix.len(),
        dtype.len(),
        kv.len(),
        pg.len(),
        ptp.len(),
        dg.len(),
        dtp.len(),
        pp.len(),
    ];
    let total: usize = lens.iter().product();
    (0..total)
        .map(|mut k| {
            // Mixed-radix digits of k, the last axis fastest.
            let mut ix = [0usize; 14];
            for (d, &len) in ix.iter_mut().zip(&lens).rev() {
                *d = k % len;
                k /= len;
            }
            Knobs {
                gpu: gpu[ix[0]].clone(),
                tp: tp[ix[1]],
                max_num_seqs: seqs[ix[2]],
                max_num_batched_tokens: tokens[ix[3]],
                batching: batching[ix[4]].clone(),
                router: router[ix[5]].clone(),
                prefix_caching: prefix[ix[6]],
                weight_dtype: dtype[ix[7]].clone(),
                kv_dtype: kv[ix[8]].clone(),
                prefill_gpu: pg[ix[9]].clone(),
                prefill_tp: ptp[ix[10]],
                decode_gpu: dg[ix[11]].clone(),
                decode_tp: dtp[ix[12]],
                pp: pp[ix[13]],
            }
        })
        .collect()
}

/// The scenario with `[plan] candidates` replaced by every `[tune]` configuration, and the
/// knobs of each (in the candidates' order).
pub fn plan_scenario(s: &Scenario) -> Result<(Scenario, Vec<Knobs>), ConfigError> {
    let tune =
        s.resolved.tune.clone().ok_or_else(|| {
            ConfigError::at("tune", "missing section: list the knobs to search, e.g. tp = [1, 2]".into())
        })?;
    let pools = match (&s.disaggregation, s.groups.len()) {
        (Some(_), _) => {
            use crate::instance::Role;
            let one = |r: Role| {
                let ix: Vec<usize> = (0..s.groups.len()).filter(|&i| s.groups[i].role == r).collect();
                (ix.len() == 1).then(|| ix[0])
            };
            match (one(Role::Prefill), one(Role::Decode)) {
                (Some(p), Some(d)) if s.groups.len() == 2 => Some((p, d)),
                _ => {
                    return Err(ConfigError::at(
                        "tune",
                        "tunes a disaggregated cluster of exactly one prefill and one decode group".into(),
                    ))
                }
            }
        }
        (None, 1) => None,
        (None, _) => {
            return Err(ConfigError::at(
                "tune",
                "tunes one homogeneous group or one prefill and one decode pool; a heterogeneous cluster is not searched yet"
                    .into(),
            ))
        }
    };
    if pools.is_none() && tune.tunes_pools() {
        return Err(ConfigError::at(
            "tune",
            "prefill_gpu, prefill_tp, decode_gpu and decode_tp tune the pools of a disaggregated scenario; \
             this one has no [cluster.disaggregation]"
                .into(),
        ));
    }
    let knobs = configurations(&tune);
    let mut out = s.clone();
    let mut plan = out.resolved.plan.clone().unwrap_or_default();
    plan.candidates = knobs.iter().map(|k| k.candidate(pools)).collect();
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
/// For a disaggregated configuration: `n` instances in each pool.
pub fn cost_at(c: &super::Candidate, cfg: &super::SearchConfig, priced: bool, n: u32) -> f64 {
    let per_instance = match &c.pools {
        Some(p) => {
            let pool = |s: &super::PoolSpec| {
                s.tp as f64 * if priced { s.price_per_gpu_hour.unwrap_or(f64::INFINITY) } else { 1.0 }
            };
            pool(&p.prefill) + pool(&p.decode)
        }
        None => (c.tp * c.pp) as f64 * if priced { c.price_per_gpu_hour.unwrap_or(f64::INFINITY) } else { 1.0 },
    };
    cfg.provisioned(n) as f64 * per_instance
}

/// The least a configuration can cost: [`cost_at`] the fewest instances the plan can answer
/// (one more than `[plan] spare`). No run can recommend less, so a configuration whose floor
/// exceeds a feasible configuration's cost cannot be cheapest.
pub fn cost_floor(c: &super::Candidate, cfg: &super::SearchConfig, priced: bool) -> f64 {
    // The pools' search sizes each pool from one instance, with nothing down.
    let n = if c.pools.is_some() { 1 } else { cfg.min_instances() };
    cost_at(c, cfg, priced, n)
}

/// The most instances at which a configuration costs no more than `budget` (up to `[plan]
/// max_instances`); `None` when even its floor costs more. If the plan's first seed fails at
/// that count, the configuration's minimum is above it (the search assumes more instances never
/// hurt), so it cannot cost `budget` or less.
/// A disaggregated configuration has no one count to run (its pools are sized together): it
/// gets `[plan] max_instances` within its floor, so it is searched, never probed.
pub fn most_within(c: &super::Candidate, cfg: &super::SearchConfig, priced: bool, budget: f64) -> Option<u32> {
    if c.pools.is_some() {
        return (cost_floor(c, cfg, priced) <= budget).then_some(cfg.max_instances());
    }
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

/// `tune.json`: what `tune` found, written by `tune` and `merge` and read back by the HTML report.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TuneReport {
    pub scenario: String,
    /// Configurations searched (the pruned ones are not).
    pub configurations: usize,
    /// The cheapest configuration meeting the SLO on every seed.
    pub recommended: Option<String>,
    /// Feasible configurations no other beats on $/h (or GPUs), p99 TTFT and p99 TPOT at once.
    pub frontier: Vec<String>,
    pub launch_command: Option<String>,
    pub knobs: Vec<(String, Knobs)>,
    /// Configurations not searched, and why they cannot be the cheapest.
    pub pruned: Vec<Pruned>,
    /// With `--budget`: the runs allowed, and the configurations not reached when they were
    /// spent (then `recommended` is the cheapest of those searched, not proven the cheapest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_runs: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsearched: Vec<String>,
    pub plan: super::PlanReport,
}

impl TuneReport {
    /// The report of a search over `candidates` (their `knobs` in the same order), which
    /// `plan` assembled from the results of those searched; the frontier and the winner's
    /// launch command computed from it.
    pub fn new(
        scenario: &str,
        candidates: &[super::Candidate],
        knobs: &[Knobs],
        plan: super::PlanReport,
        skipped: Skipped,
    ) -> TuneReport {
        let Skipped { pruned, unsearched, budget_runs } = skipped;
        let mut report = TuneReport {
            scenario: scenario.to_string(),
            configurations: candidates.len(),
            recommended: plan.recommended.clone(),
            frontier: frontier(&plan.candidates),
            launch_command: None,
            knobs: candidates.iter().map(|c| c.name.clone()).zip(knobs.iter().cloned()).collect(),
            pruned,
            budget_runs,
            unsearched,
            plan,
        };
        report.launch_command = report.winner().and_then(|r| r.deploy.as_ref()).map(launch_command);
        report
    }

    /// The recommended configuration's result.
    pub fn winner(&self) -> Option<&CandidateResult> {
        let name = self.recommended.as_deref()?;
        self.plan.candidates.iter().find(|c| c.name == name)
    }

    /// `winner.toml`: the recommended configuration's scenario as resolved, at its recommended
    /// instance count (a disaggregated one's, each pool's), without `[plan]` and `[tune]`;
    /// `None` when nothing is recommended or `candidates` (those of [`TuneReport::new`]) lacks it.
    pub fn winner_toml(&self, candidates: &[super::Candidate]) -> Option<String> {
        let r = self.winner()?;
        let s = candidates.iter().find(|c| c.name == r.name)?.scenario.as_ref()?;
        let instances = r.instances?;
        let mut doc: toml::Table = s.resolved_toml().parse().expect("a resolved scenario is TOML");
        doc.remove("plan");
        doc.remove("tune");
        if let Some(toml::Value::Table(c)) = doc.get_mut("cluster") {
            match &r.pools {
                Some(p) => {
                    if let Some(toml::Value::Array(groups)) = c.get_mut("groups") {
                        for g in groups.iter_mut().filter_map(toml::Value::as_table_mut) {
                            let n = match g.get("role").and_then(toml::Value::as_str) {
                                Some("prefill") => p.prefill_instances,
                                Some("decode") => p.decode_instances,
                                _ => None,
                            };
                            if let Some(n) = n {
                                g.insert("count".into(), toml::Value::Integer(n as i64));
                            }
                        }
                    }
                }
                None => {
                    c.insert("instances".into(), toml::Value::Integer(instances as i64));
                }
            }
        }
        Some(format!("# The cheapest configuration `servesim tune` found, at its recommended instance count.\n{doc}"))
    }
}

/// The configurations of a search that were not searched: pruned (with why), and those a
/// budget of runs left unreached.
#[derive(Default)]
pub struct Skipped {
    pub pruned: Vec<Pruned>,
    pub unsearched: Vec<String>,
    pub budget_runs: Option<u64>,
}

/// The winner's launch command as one line: the server's, or each pool's with its count.
fn launch_command(d: &crate::scenario::Deployment) -> String {
    match d.servers.as_slice() {
        [one] => one.command.line(),
        pools => pools
            .iter()
            .map(|v| {
                format!("{} ({} instances): {}", v.role.as_deref().unwrap_or("server"), v.replicas, v.command.line())
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct Pruned {
    pub name: String,
    /// Its least possible cost ($/h, or GPUs when unpriced).
    pub cost_floor: f64,
    /// The least it can cost, as shown by its runs (the floor when it was not run); absent
    /// when it misses the SLO even at `[plan] max_instances`.
    pub least_cost: Option<f64>,
    /// The cheapest feasible cost found when it was skipped (for one that could only have
    /// tied, at the end of the search).
    pub cheapest_found: f64,
    /// The count at which one run missed the SLO on the first seed: the most instances
    /// costing no more than the cheapest cost found (or, for one that could only have tied,
    /// costing less). Absent: skipped by its cost floor, unrun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at_instances: Option<u32>,
}
