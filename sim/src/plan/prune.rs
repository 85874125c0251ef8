//! Running the planner's searches: every picked candidate searched ([`search`]), or tune's
//! search pruned by the cheapest cost found ([`prune_search`]).
//!
//! The library runs no threads and keeps no clock: the caller's [`Runner`] maps the searches
//! (the CLI in parallel with rayon, results kept in order) and counts runs for its progress.

use super::search::{plan_candidate, probe};
use super::tune::{cost_at, cost_floor, cost_of, most_within, Pruned};
use super::{Candidate, CandidateResult, SearchConfig};

/// How a search runs its simulations, supplied by the caller.
pub trait Runner: Sync {
    /// `f` applied to every item; the results in the items' order (whatever order they ran in).
    fn map<T: Sync, U: Send>(&self, items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U>;
    /// One simulation run of `requests` requests finished.
    fn run_done(&self, requests: u64);
    /// One candidate finished: searched, pruned or left unsearched.
    fn item_done(&self);
    /// The simulation runs finished so far.
    fn runs(&self) -> u64;
}

/// Whether the caller asked every run to stop ([`crate::engine::CANCEL`]): a search stops
/// starting candidates, and its partial result is the caller's to discard.
fn cancelled() -> bool {
    crate::engine::CANCEL.load(std::sync::atomic::Ordering::Relaxed)
}

/// The picked candidates (index, and the count to search from when one is known) searched,
/// in the order picked; those not started because the run was cancelled are left out.
pub fn search<R: Runner>(
    candidates: &[Candidate],
    picked: &[(usize, Option<u32>)],
    cfg: &SearchConfig,
    runner: &R,
) -> Vec<(usize, CandidateResult)> {
    let results = runner.map(picked, |&(i, start)| {
        (!cancelled()).then(|| {
            let r = plan_candidate(&candidates[i], cfg, start, &|n| runner.run_done(n));
            runner.item_done();
            (i, r)
        })
    });
    results.into_iter().flatten().collect()
}

/// What tune's search found: the results of the configurations searched (by index), the pruned
/// ones and why, and those a budget of runs left unsearched.
#[derive(Default)]
pub struct Outcome {
    pub results: Vec<(usize, CandidateResult)>,
    pub pruned: Vec<Pruned>,
    pub unsearched: Vec<String>,
}

/// Configurations searched together before the cheapest cost so far prunes the rest.
const PRUNE_WAVE: usize = 4;

/// How one configuration fares against the cheapest cost found so far.
enum Verdict {
    /// Searched (from this count, which passed the first seed, when known).
    Search(Option<u32>),
    /// Missed the SLO on the first seed at this count: it costs more than the cheapest.
    Fails(u32),
    /// Missed at the most instances costing less than the cheapest (this count) and passed
    /// at the most costing no more (the second): it costs exactly the cheapest or more, so it
    /// is searched only if the cheapest is still that at the end (a tie to break).
    TieAtBest(u32, u32),
}

/// Tune's pruned search, in the plan's cost unit ($/h when `priced`, else GPUs).
/// Configurations are taken cheapest floor first, in waves of a fixed size (so that what is
/// pruned does not depend on the thread count), each against the best cost of the waves
/// before, `best`:
/// - a floor above `best`: skipped, unrun;
/// - otherwise one run on the first seed at n, the most instances costing no more than
///   `best`: a miss there skips it (the search assumes more instances never hurt, so its
///   minimum is above n); if it passes and a count costing less than `best` exists below n,
///   one more run there: a miss means it can at best tie `best`, and it waits for the end;
/// - the rest are searched, from the count that passed.
///
/// At the end, the configurations that could tie are searched if `best` is still the cost
/// they could tie (the plan breaks ties), and skipped otherwise. The cheapest configuration
/// is therefore the exhaustive search's. With `budget`, once that many runs are spent
/// (checked between waves) the configurations not reached are listed as unsearched.
pub fn prune_search<R: Runner>(
    candidates: &[Candidate],
    picked: &[usize],
    cfg: &SearchConfig,
    priced: bool,
    runner: &R,
    budget: Option<u64>,
) -> Outcome {
    let mut out = Outcome::default();
    let spent = || budget.is_some_and(|b| runner.runs() >= b);
    let floor = |i: usize| cost_floor(&candidates[i], cfg, priced);
    let mut order = picked.to_vec();
    order.sort_by(|&a, &b| floor(a).total_cmp(&floor(b)).then(a.cmp(&b)));
    let mut best = f64::INFINITY;
    let mut ties: Vec<Tie> = vec![];
    let search_all = |run: Vec<(usize, Option<u32>)>, best: &mut f64, out: &mut Outcome| {
        for (i, r) in search(candidates, &run, cfg, runner) {
            if let Some(c) = cost_of(&r, priced) {
                *best = best.min(c);
            }
            out.results.push((i, r));
        }
    };
    for (w, wave) in order.chunks(PRUNE_WAVE).enumerate() {
        if spent() {
            for &i in &order[w * PRUNE_WAVE..] {
                out.unsearched.push(candidates[i].name.clone());
                runner.item_done();
            }
            break;
        }
        let b = best;
        let verdicts = runner.map(wave, |&i| (i, verdict(&candidates[i], cfg, priced, b, runner)));
        let mut run = vec![];
        for (i, v) in verdicts {
            let pruned = |least: Option<f64>, failed: Option<u32>| Pruned {
                name: candidates[i].name.clone(),
                cost_floor: floor(i),
                least_cost: least,
                cheapest_found: b,
                failed_at_instances: failed,
            };
            match v {
                None => out.pruned.push(pruned(Some(floor(i)), None)),
                Some(Verdict::Fails(n)) => {
                    let least = (n < cfg.max_instances()).then(|| cost_at(&candidates[i], cfg, priced, n + 1));
                    out.pruned.push(pruned(least, Some(n)));
                }
                Some(Verdict::TieAtBest(m, n)) => {
                    ties.push((i, m, n, b));
                    continue;
                }
                Some(Verdict::Search(start)) => {
                    run.push((i, start));
                    continue;
                }
            }
            runner.item_done();
        }
        search_all(run, &mut best, &mut out);
    }
    let run = settle_ties(ties, best, spent(), candidates, &floor, &mut out, runner);
    search_all(run, &mut best, &mut out);
    out.results.sort_by_key(|(i, _)| *i);
    out.pruned.sort_by(|a, b| a.name.cmp(&b.name));
    out.unsearched.sort();
    out
}

/// A configuration that could at best tie the cheapest cost found when its wave ran: its
/// index, the count that missed and the count that passed ([`Verdict::TieAtBest`]), and the
/// cost it could tie.
type Tie = (usize, u32, u32, f64);

/// The configurations that could only tie, once every wave has run: searched (returned, from
/// the count that passed) if `best` is still the cost they could tie, pruned otherwise; left
/// unsearched if the budget of runs is spent.
fn settle_ties<R: Runner>(
    ties: Vec<Tie>,
    best: f64,
    out_of_budget: bool,
    candidates: &[Candidate],
    floor: &dyn Fn(usize) -> f64,
    out: &mut Outcome,
    runner: &R,
) -> Vec<(usize, Option<u32>)> {
    let mut run = vec![];
    for (i, m, n, tie) in ties {
        if tie <= best && !out_of_budget {
            run.push((i, Some(n)));
            continue;
        }
        if tie <= best {
            out.unsearched.push(candidates[i].name.clone());
        } else {
            out.pruned.push(Pruned {
                name: candidates[i].name.clone(),
                cost_floor: floor(i),
                least_cost: Some(tie),
                cheapest_found: best,
                failed_at_instances: (m < n).then_some(m),
            });
        }
        runner.item_done();
    }
    run
}

/// A configuration's verdict against `best`, the cheapest feasible cost of the waves before
/// (`None`: its floor costs more, unrun).
fn verdict<R: Runner>(c: &Candidate, cfg: &SearchConfig, priced: bool, best: f64, runner: &R) -> Option<Verdict> {
    if best.is_infinite() {
        return Some(Verdict::Search(None));
    }
    let n = most_within(c, cfg, priced, best)?;
    if cancelled() {
        return Some(Verdict::Search(None));
    }
    let probe = |m: u32| probe(c, cfg, m, &|r| runner.run_done(r));
    Some(match probe(n) {
        Some(false) => Verdict::Fails(n),
        None => Verdict::Search(None),
        Some(true) => match most_within(c, cfg, priced, best.next_down()) {
            Some(m) if m == n => Verdict::Search(Some(n)),
            Some(m) => match probe(m) {
                Some(false) => Verdict::TieAtBest(m, n),
                Some(true) => Verdict::Search(Some(m)),
                None => Verdict::Search(Some(n)),
            },
            None => Verdict::TieAtBest(n, n),
        },
    })
}

/// A [`Runner`] on the calling thread, counting runs: for tests and callers without threads.
#[derive(Default)]
pub struct Serial {
    runs: std::sync::atomic::AtomicU64,
}

impl Runner for Serial {
    fn map<T: Sync, U: Send>(&self, items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
        items.iter().map(f).collect()
    }
    fn run_done(&self, _requests: u64) {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn item_done(&self) {}
    fn runs(&self) -> u64 {
        self.runs.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{candidates, tune, SearchConfig};
    use crate::Scenario;

    /// The library's pruned search on the calling thread finds the cheapest configuration the
    /// search of every configuration finds, in fewer runs: the known-answer plan (5 ms + 50 µs
    /// per token, 180 req/s, TPOT ≤ 10 ms binds) on two priced GPUs at three batch limits (two waves), where
    /// the linear cost makes the GPU change only the price: a100 at $1.80 wins at 256 sequences.
    #[test]
    fn the_pruned_search_finds_the_exhaustive_answer_on_the_calling_thread() {
        let text = include_str!("../../../tests/plan/known-answer.toml").replace("duration_s = 60", "duration_s = 20")
            + "[plan.price_per_gpu_hour]\na100-80g = 1.80\nh100-sxm = 3.00\n[tune]\n\
               gpu = [\"h100-sxm\", \"a100-80g\"]\nmax_num_seqs = [8, 16, 256]\n";
        let (s, _) = tune::plan_scenario(&Scenario::from_toml(&text, "t").unwrap()).unwrap();
        let cs = candidates(&s).unwrap();
        let cfg = SearchConfig::new(&s.resolved.plan.clone().unwrap(), s.seed, None).without_capacity();
        let cheapest = |results: &[(usize, CandidateResult)]| {
            let feasible = results.iter().filter(|(_, r)| r.feasible);
            let best = feasible.min_by(|a, b| a.1.cost_per_hour.unwrap().total_cmp(&b.1.cost_per_hour.unwrap()));
            best.map(|(i, r)| (cs[*i].name.clone(), r.cost_per_hour.unwrap()))
        };
        let every = Serial::default();
        let picked: Vec<(usize, Option<u32>)> = (0..cs.len()).map(|i| (i, None)).collect();
        let all = search(&cs, &picked, &cfg, &every);
        assert_eq!(all.len(), 6);
        let pruning = Serial::default();
        let out = prune_search(&cs, &[0, 1, 2, 3, 4, 5], &cfg, true, &pruning, None);
        assert_eq!(cheapest(&out.results), cheapest(&all));
        let (name, _) = cheapest(&all).unwrap();
        assert!(name.starts_with("a100-80g") && name.contains("s256"), "{name}");
        assert_eq!(out.results.len() + out.pruned.len(), 6);
        assert!(!out.pruned.is_empty() && pruning.runs() < every.runs(), "{} vs {} runs", pruning.runs(), every.runs());
    }
}
