//! Sizing both pools of a disaggregated cluster: the (prefill, decode) instance counts.
//!
//! ```text
//!   SLO split: prefill part = the TTFT limit; decode part = the TPOT and E2E limits
//!   (np, nd) ← the scenario's counts
//!   repeat (first seed) until neither changes, at most 8 rounds:
//!       np ← fewest prefill instances meeting the prefill part, decode pool at nd
//!       nd ← fewest decode instances meeting the decode part, prefill pool at np
//!   every seed: while (np, nd) misses the whole SLO on some seed, add an instance to the
//!       pool whose part misses more on the worst seed
//!   locally minimal: while (np − 1, nd) or (np, nd − 1) meets the SLO on every seed, take it
//! ```
//! The answer meets the SLO on every seed and neither pool can lose an instance:
//! `(np − 1, nd)` and `(np, nd − 1)` each fail on at least one seed (when ≥ 1). The parts are
//! nearly independent — TTFT is made on the prefill pool, TPOT on the decode pool — and couple
//! only through decode KV back-pressure (a full decode pool keeps prefill KV pinned), which the
//! joint checks on every seed catch. Like the single-pool search it assumes more instances in a
//! pool never hurt (up to noise, which the seeds measure).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::evidence::{classify, Point, SeedResult};
use super::search::{CandidateResult, SearchConfig};
use super::Candidate;
use super::Infeasible;
use crate::engine;
use crate::metrics::meets_slo;
use crate::metrics::SloSection;

/// The pools of a disaggregated candidate: its two groups and their prices.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolCandidate {
    /// Indices of the prefill and decode groups in the candidate's scenario.
    pub(crate) prefill_group: usize,
    pub(crate) decode_group: usize,
    pub(crate) prefill: PoolSpec,
    pub(crate) decode: PoolSpec,
}

/// One pool's GPU, TP degree and price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolSpec {
    pub gpu: String,
    pub tp: u64,
    pub(crate) price_per_gpu_hour: Option<f64>,
}

/// A (prefill, decode) pair run on every seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairPoint {
    pub prefill: u32,
    pub decode: u32,
    pub seeds: Vec<SeedResult>,
}

/// One step of the search on the first seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairStep {
    pub(crate) prefill: u32,
    pub(crate) decode: u32,
    /// What was checked: "prefill" (the TTFT part), "decode" (the TPOT and E2E part), or
    /// "slo" (the whole SLO).
    pub(crate) part: String,
    pub(crate) met: bool,
    pub(crate) attainment: f64,
}

/// The plan's answer for a disaggregated candidate (the `pools` key of its result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolsResult {
    pub prefill: PoolSpec,
    pub decode: PoolSpec,
    /// The fewest instances per pool meeting the SLO on every seed (locally minimal).
    pub prefill_instances_min: Option<u32>,
    pub decode_instances_min: Option<u32>,
    /// With headroom and spares, per pool.
    pub prefill_instances: Option<u32>,
    pub decode_instances: Option<u32>,
    pub prefill_gpus: Option<u64>,
    pub decode_gpus: Option<u64>,
    /// The answer, one fewer prefill instance, one fewer decode instance: on every seed.
    pub points: Vec<PairPoint>,
    pub(crate) trail: Vec<PairStep>,
}

/// What one run says under the whole SLO and under each part.
#[derive(Clone)]
struct Eval {
    full: SeedResult,
    prefill: f64,
    decode: f64,
}

struct PairSearch<'a> {
    c: &'a Candidate,
    pools: &'a PoolCandidate,
    cfg: &'a SearchConfig,
    progress: &'a (dyn Fn(u64) + Sync),
    prefill_slo: SloSection,
    decode_slo: SloSection,
    cache: BTreeMap<(u32, u32, usize), Eval>,
    trail: Vec<PairStep>,
    runs: u64,
    requests: u64,
}

/// Fraction of the run's measured requests meeting `slo`.
fn attainment(out: &engine::RunOutput, slo: &SloSection) -> f64 {
    let rec = &out.recorder;
    let (mut n, mut met) = (0u64, 0u64);
    for r in rec.records.iter().filter(|r| rec.counts(r.arrival)) {
        n += 1;
        met += meets_slo(r, slo) as u64;
    }
    if n == 0 {
        0.0
    } else {
        met as f64 / n as f64
    }
}

impl PairSearch<'_> {
    fn at(&mut self, np: u32, nd: u32, ix: usize) -> Eval {
        if let Some(e) = self.cache.get(&(np, nd, ix)) {
            return e.clone();
        }
        let mut s = self.c.scenario.clone().expect("a runnable candidate");
        s.groups[self.pools.prefill_group].count = np;
        s.groups[self.pools.decode_group].count = nd;
        let seed = self.cfg.seeds[ix];
        s.set_seed(seed);
        let out = engine::run(&s);
        let e = Eval {
            full: SeedResult::from_run(seed, &out, &s.slo),
            prefill: attainment(&out, &self.prefill_slo),
            decode: attainment(&out, &self.decode_slo),
        };
        self.runs += 1;
        self.requests += e.full.requests;
        (self.progress)(e.full.requests);
        self.cache.insert((np, nd, ix), e.clone());
        e
    }

    fn target(&self) -> f64 {
        self.c.scenario.as_ref().expect("runnable").slo.attainment
    }

    /// Whether the pair meets `part` on the first seed (recorded in the trail).
    fn pass(&mut self, np: u32, nd: u32, part: &str) -> bool {
        let e = self.at(np, nd, 0);
        let attainment = match part {
            "prefill" => e.prefill,
            "decode" => e.decode,
            _ => e.full.attainment,
        };
        let met = attainment >= self.target();
        if !self.trail.iter().any(|s| (s.prefill, s.decode, s.part.as_str()) == (np, nd, part)) {
            self.trail.push(PairStep { prefill: np, decode: nd, part: part.into(), met, attainment });
        }
        met
    }

    fn point(&mut self, np: u32, nd: u32) -> PairPoint {
        let seeds = (0..self.cfg.seeds.len()).map(|ix| self.at(np, nd, ix).full).collect();
        PairPoint { prefill: np, decode: nd, seeds }
    }

    fn all_pass(&mut self, np: u32, nd: u32) -> bool {
        (0..self.cfg.seeds.len()).all(|ix| self.at(np, nd, ix).full.met)
    }

    /// The fewest `n` in [1, max] for which `pass(n)` holds, from `start`: exponential steps to
    /// a bracket, then bisection. `None` when `max` fails.
    fn minimum(&mut self, start: u32, mut pass: impl FnMut(&mut Self, u32) -> bool) -> Option<u32> {
        let max = self.cfg.max_instances;
        let start = start.clamp(1, max);
        let (mut lo, mut hi);
        if pass(self, start) {
            (lo, hi) = (0, start);
            let mut step = 1;
            while hi > 1 {
                let m = hi.saturating_sub(step).max(1);
                if pass(self, m) {
                    hi = m;
                    step *= 2;
                } else {
                    lo = m;
                    break;
                }
            }
        } else {
            lo = start;
            let mut step = 1u32;
            loop {
                if lo >= max {
                    return None;
                }
                let m = lo.saturating_add(step).min(max);
                if pass(self, m) {
                    hi = m;
                    break;
                }
                lo = m;
                step = step.saturating_mul(2);
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if pass(self, mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }

    /// Steps 1–3 of the module docs; `Err` with the reason when no pair up to the maximum does.
    fn solve(&mut self, start: (u32, u32)) -> Result<(u32, u32), Infeasible> {
        let max = self.cfg.max_instances;
        let too_many = |pool: &'static str| Infeasible::Pool { max, pool };
        let (mut np, mut nd) = (start.0.clamp(1, max), start.1.clamp(1, max));
        // Requests no count can serve (too long for an instance of either pool).
        let first = self.at(np, nd, 0).full;
        if first.misses.rejected as f64 > (1.0 - self.target()) * first.measured as f64 {
            return Err(Infeasible::Rejected {
                rejected: first.misses.rejected,
                measured: first.measured,
                pools: true,
            });
        }
        for _ in 0..8 {
            let p = self.minimum(np, |s, n| s.pass(n, nd, "prefill")).ok_or_else(|| too_many("prefill"))?;
            let d = self.minimum(nd, |s, n| s.pass(p, n, "decode")).ok_or_else(|| too_many("decode"))?;
            let settled = (p, d) == (np, nd);
            (np, nd) = (p, d);
            if settled {
                break;
            }
        }
        // Every seed, the whole SLO: grow the pool whose part misses more.
        while !self.all_pass(np, nd) {
            let worst = (0..self.cfg.seeds.len())
                .map(|ix| self.at(np, nd, ix))
                .min_by(|a, b| a.full.attainment.total_cmp(&b.full.attainment))
                .expect("at least one seed");
            if worst.prefill <= worst.decode {
                np += 1;
            } else {
                nd += 1;
            }
            if np > max || nd > max {
                return Err(Infeasible::NoPair { max });
            }
            self.pass(np, nd, "slo");
        }
        // Locally minimal: neither pool can lose an instance.
        loop {
            if np > 1 && self.all_pass(np - 1, nd) {
                np -= 1;
            } else if nd > 1 && self.all_pass(np, nd - 1) {
                nd -= 1;
            } else {
                return Ok((np, nd));
            }
        }
    }
}

/// Sizes both pools of a disaggregated candidate; fills `out` (whose single-pool fields then
/// describe the whole cluster: instances and GPUs are the sums of both pools).
pub(super) fn plan_pools(
    c: &Candidate,
    pools: &PoolCandidate,
    cfg: &SearchConfig,
    progress: &(dyn Fn(u64) + Sync),
    out: &mut CandidateResult,
) {
    let Some(scenario) = &c.scenario else { return };
    let slo = &scenario.slo;
    let mut s = PairSearch {
        c,
        pools,
        cfg,
        progress,
        prefill_slo: SloSection { tpot_ms: None, e2e_ms: None, ..slo.clone() },
        decode_slo: SloSection { ttft_ms: None, ..slo.clone() },
        cache: BTreeMap::new(),
        trail: Vec::new(),
        runs: 0,
        requests: 0,
    };
    let (pg, dg) = (&scenario.groups[pools.prefill_group], &scenario.groups[pools.decode_group]);
    let mut result = PoolsResult {
        prefill: pools.prefill.clone(),
        decode: pools.decode.clone(),
        prefill_instances_min: None,
        decode_instances_min: None,
        prefill_instances: None,
        decode_instances: None,
        prefill_gpus: None,
        decode_gpus: None,
        points: Vec::new(),
        trail: Vec::new(),
    };
    out.kv_blocks_per_instance = Some(dg.memory.kv_blocks);
    out.gpu_memory_gib = Some(dg.gpu.memory_bytes as f64 / crate::memory::GIB);
    match s.solve((pg.count, dg.count)) {
        Ok((np, nd)) => {
            let top = s.point(np, nd);
            let below: Vec<PairPoint> = [(np - 1, nd), (np, nd - 1)]
                .into_iter()
                .filter(|&(p, d)| p >= 1 && d >= 1)
                .map(|(p, d)| s.point(p, d))
                .collect();
            let (ip, id) = (cfg.provisioned(np), cfg.provisioned(nd));
            let (gp, gd) = (ip as u64 * pools.prefill.tp, id as u64 * pools.decode.tp);
            result.prefill_instances_min = Some(np);
            result.decode_instances_min = Some(nd);
            result.prefill_instances = Some(ip);
            result.decode_instances = Some(id);
            result.prefill_gpus = Some(gp);
            result.decode_gpus = Some(gd);
            out.feasible = true;
            out.instances_min = Some(np + nd);
            out.instances = Some(ip + id);
            out.gpus = Some(gp + gd);
            out.cost_per_hour = match (pools.prefill.price_per_gpu_hour, pools.decode.price_per_gpu_hour) {
                (Some(a), Some(b)) => Some(a * gp as f64 + b * gd as f64),
                _ => None,
            };
            let worst = |f: fn(&SeedResult) -> f64, max: bool| {
                top.seeds.iter().map(f).reduce(|a, b| if (b > a) == max { b } else { a })
            };
            out.ttft_ms_p99 = worst(|r| r.ttft_ms_p99, true);
            out.tpot_ms_p99 = worst(|r| r.tpot_ms_p99, true);
            out.attainment = worst(|r| r.attainment, false);
            out.goodput_rps = worst(|r| r.goodput_rps, false);
            out.kv_peak = worst(|r| r.kv_peak, true);
            // The binding constraint from the worse of the two one-fewer pairs.
            let evidence = below
                .iter()
                .map(|p| (p, worst_seed(&p.seeds)))
                .min_by(|a, b| a.1.attainment.total_cmp(&b.1.attainment));
            let (ev_point, ev) = evidence.unwrap_or((&top, worst_seed(&top.seeds)));
            out.binding = Some(classify(ev, slo));
            out.binding_evidence = Some(format!(
                "at {} prefill + {} decode instances (seed {}): attainment {:.2}%, TTFT p99 {:.0} ms, TPOT p99 {:.1} ms, KV peak {:.0}%",
                ev_point.prefill,
                ev_point.decode,
                ev.seed,
                ev.attainment * 100.0,
                ev.ttft_ms_p99,
                ev.tpot_ms_p99,
                ev.kv_peak * 100.0
            ));
            out.points = below
                .iter()
                .chain(std::iter::once(&top))
                .map(|p| Point { instances: p.prefill + p.decode, seeds: p.seeds.clone() })
                .collect();
            result.points = below.into_iter().chain(std::iter::once(top)).collect();
        }
        Err(why) => out.infeasible_reason = Some(why.to_string()),
    }
    result.trail = std::mem::take(&mut s.trail);
    out.runs = s.runs;
    out.simulated_requests = s.requests;
    out.pools = Some(result);
}

fn worst_seed(seeds: &[SeedResult]) -> &SeedResult {
    seeds.iter().fold(&seeds[0], |w, r| if r.attainment < w.attainment { r } else { w })
}
