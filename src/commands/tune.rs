//! `servesim tune`: every combination of a scenario's `[tune]` knobs sized by the plan's
//! instance search; the cheapest configuration meeting the SLO on every seed, the Pareto
//! frontier of cost against p99 TTFT and TPOT, the winner as a scenario and a launch command.

use std::path::PathBuf;

use anyhow::Context;
use servesim_sim::plan::{self, tune, Candidate, CandidateResult, PlanHeader, SearchConfig};
use servesim_sim::Scenario;

use super::Format;
use crate::error::{CliError, Result};
use crate::output::thousands;
use crate::progress::Progress;
use crate::scenario_file;
use crate::shard::{self, Shard};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Scenario TOML file with a [tune] section (and, for prices, a [plan] section).
    #[arg(long)]
    scenario: PathBuf,
    /// Seeds at each decisive point (overrides [plan] seeds; default 3).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    seeds: Option<u32>,
    /// Output folder for tune.json and winner.toml. Default: outputs/<scenario name>/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Search every configuration. Without it, configurations are searched in waves by their
    /// cost floor, and one whose floor exceeds the cheapest feasible cost found is skipped
    /// (listed as pruned): it cannot be the cheapest, though it might have been on the frontier.
    #[arg(long)]
    exhaustive: bool,
    /// Run only shard I of N of the configurations (1-based) and write its results for
    /// `servesim merge` (every configuration of the shard is searched: no pruning).
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// What a tune shard carries besides its results: the plan header and the scenario as
/// resolved, from which `merge` rebuilds the configurations (and the winner's scenario).
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
pub(crate) struct TuneHeader {
    pub(crate) plan: PlanHeader,
    pub(crate) scenario_toml: String,
}

#[derive(serde::Serialize)]
struct TuneReport<'a> {
    scenario: &'a str,
    /// Configurations searched (the pruned ones are not).
    configurations: usize,
    /// The cheapest configuration meeting the SLO on every seed.
    recommended: Option<&'a str>,
    /// Feasible configurations no other beats on $/h (or GPUs), p99 TTFT and p99 TPOT at once.
    frontier: &'a [String],
    launch_command: Option<String>,
    knobs: Vec<(&'a str, &'a tune::Knobs)>,
    /// Configurations not searched: their cost floor exceeds the cheapest feasible cost found.
    pruned: &'a [Pruned],
    plan: &'a plan::PlanReport,
}

/// Configurations searched together before the cheapest cost so far prunes the rest.
const PRUNE_WAVE: usize = 4;

#[derive(serde::Serialize)]
struct Pruned {
    name: String,
    /// Its least possible cost ($/h, or GPUs when unpriced).
    cost_floor: f64,
    /// The cheapest feasible cost found when it was skipped.
    cheapest_found: f64,
}

pub(crate) fn run(a: Args) -> Result<()> {
    let src = scenario_file::read_source(Some(&a.scenario), "peak")?;
    let base = src.scenario()?;
    let (s, knobs) = tune::plan_scenario(&base).map_err(|e| CliError::input(format!("{}: {e}", src.label)))?;
    let candidates = plan::candidates(&s).map_err(|e| CliError::input(format!("{}: {e}", src.label)))?;
    let section = s.resolved.plan.clone().unwrap_or_default();
    let cfg = SearchConfig::new(&section, s.seed, a.seeds);
    let header = plan::header(&s, &candidates, &cfg);
    let picked = match a.shard {
        Some(sh) => sh.select(candidates.len()),
        None => (0..candidates.len()).collect(),
    };
    let progress = Progress::new(a.quiet, "tune", picked.len());
    let prune = a.shard.is_none() && !a.exhaustive;
    let priced = candidates.iter().all(|c| c.price_per_gpu_hour.is_some());
    let mut results: Vec<(usize, CandidateResult)> = Vec::new();
    let mut pruned: Vec<Pruned> = Vec::new();
    if prune {
        // Cheapest floors first, in waves of a fixed size (so that what is pruned does not
        // depend on the thread count); the floor is compared with the best cost of the waves
        // before.
        let mut order = picked.clone();
        let floor = |i: usize| tune::cost_floor(&candidates[i], &cfg, priced);
        order.sort_by(|&a, &b| floor(a).total_cmp(&floor(b)).then(a.cmp(&b)));
        let mut best = f64::INFINITY;
        for wave in order.chunks(PRUNE_WAVE) {
            let (run, skip): (Vec<usize>, Vec<usize>) = wave.iter().partition(|&&i| floor(i) <= best);
            for i in skip {
                pruned.push(Pruned { name: candidates[i].name.clone(), cost_floor: floor(i), cheapest_found: best });
                progress.item_done();
            }
            for (i, r) in super::plan::search(&candidates, &run, &cfg, &progress) {
                if let Some(c) = tune::cost_of(&r, priced) {
                    best = best.min(c);
                }
                results.push((i, r));
            }
        }
        results.sort_by_key(|(i, _)| *i);
    } else {
        results = super::plan::search(&candidates, &picked, &cfg, &progress);
    }
    progress.finish();
    crate::error::check_cancel()?;
    let (runs, requests, wall) = progress.totals();
    if !a.quiet {
        errln!(
            "tune: {} configurations ({} pruned by their cost floor), {} runs, {} simulated requests in {wall:.2} s ({:.1} configurations/s)",
            picked.len(),
            pruned.len(),
            thousands(runs),
            thousands(requests),
            picked.len() as f64 / wall.max(1e-9)
        );
    }
    let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&s.name));
    let seeds: Vec<String> = cfg.seeds.iter().map(u64::to_string).collect();
    let scenario_toml = base.resolved_toml();
    let digest = shard::digest(&[&scenario_toml, &seeds.join(","), &format!("{:?}", a.seeds)]);
    if let Some(sh) = a.shard {
        let path = shard::write(&dir, sh, "tune", (TuneHeader { plan: header, scenario_toml }, digest), results)?;
        if !a.quiet {
            errln!(
                "wrote shard {}/{} ({} of the configurations) to {}",
                sh.index,
                sh.count,
                picked.len(),
                path.display()
            );
        }
        return Ok(());
    }
    // The report covers the configurations searched; the pruned ones are listed apart.
    let searched: Vec<usize> = results.iter().map(|(i, _)| *i).collect();
    let subset: Vec<Candidate> = searched.iter().map(|&i| candidates[i].clone()).collect();
    let sub_knobs: Vec<tune::Knobs> = searched.iter().map(|&i| knobs[i].clone()).collect();
    let header = if pruned.is_empty() { header } else { plan::header(&s, &subset, &cfg) };
    let report = plan::assemble(header, results.into_iter().map(|(_, r)| r).collect());
    finish(&s, &subset, &sub_knobs, &report, &dir, a.format, digest, &pruned)
}

/// `merge` of tune shards: the configurations rebuilt from the shards' scenario, then what
/// the unsharded run writes and prints.
pub(crate) fn merge(
    header: TuneHeader,
    results: Vec<CandidateResult>,
    dir: Option<PathBuf>,
    format: Format,
    digest: String,
) -> Result<()> {
    let base = Scenario::from_toml(&header.scenario_toml, &header.plan.scenario)
        .map_err(|e| CliError::input(format!("the shards' scenario no longer loads: {e}")))?;
    let (s, knobs) = tune::plan_scenario(&base).map_err(|e| CliError::input(e.to_string()))?;
    let candidates = plan::candidates(&s).map_err(|e| CliError::input(e.to_string()))?;
    let dir = dir.unwrap_or_else(|| PathBuf::from("outputs").join(&header.plan.scenario));
    let report = plan::assemble(header.plan, results);
    finish(&s, &candidates, &knobs, &report, &dir, format, digest, &[])
}

/// Writes tune.json and winner.toml into `dir` and prints the report (shared by `tune` and
/// `merge`, so that merged shards print what the unsharded run prints).
fn finish(
    s: &Scenario,
    candidates: &[Candidate],
    knobs: &[tune::Knobs],
    report: &plan::PlanReport,
    dir: &std::path::Path,
    format: Format,
    digest: String,
    pruned: &[Pruned],
) -> Result<()> {
    let frontier = tune::frontier(&report.candidates);
    let winner = report.recommended.as_deref().and_then(|name| {
        let i = candidates.iter().position(|c| c.name == name)?;
        let r = report.candidates.iter().find(|c| c.name == name)?;
        Some((i, r))
    });
    let launch = winner.map(|(i, r)| launch_command(s.serving_engine(), &knobs[i], s, r));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = TuneReport {
        scenario: &s.name,
        configurations: candidates.len(),
        recommended: report.recommended.as_deref(),
        frontier: &frontier,
        launch_command: launch.clone(),
        knobs: candidates.iter().map(|c| c.name.as_str()).zip(knobs.iter()).collect(),
        pruned,
        plan: report,
    };
    let json = serde_json::to_string_pretty(&out).expect("report serialises");
    crate::atomic::write(&dir.join("tune.json"), json.clone() + "\n")?;
    let mut files = vec!["tune.json"];
    if let Some((i, r)) = winner {
        if let (Some(cs), Some(n)) = (&candidates[i].scenario, r.instances) {
            crate::atomic::write(&dir.join("winner.toml"), winner_toml(cs, n))?;
            files.push("winner.toml");
        }
    }
    crate::manifest::record(dir, "tune", crate::manifest::Run::new(&s.name, s.seed, digest, &files))?;
    match format {
        Format::Json => outln!("{json}"),
        Format::Table => {
            outln!(
                "{:<48} {:>9} {:>5} {:>9} {:>10} {:>10}  frontier",
                "configuration",
                "instances",
                "GPUs",
                "$/h",
                "TTFT p99",
                "TPOT p99"
            );
            let mut rows: Vec<&CandidateResult> = report.candidates.iter().collect();
            let key = |c: &CandidateResult| {
                (!c.feasible, c.cost_per_hour.unwrap_or(f64::INFINITY), c.gpus.unwrap_or(u64::MAX))
            };
            rows.sort_by(|a, b| key(a).partial_cmp(&key(b)).expect("not NaN").then(a.name.cmp(&b.name)));
            let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
            for c in rows {
                let n = if c.feasible { c.instances.map_or("-".into(), |n| n.to_string()) } else { "none".into() };
                outln!(
                    "{:<48} {:>9} {:>5} {:>9} {:>10} {:>10}  {}",
                    c.name,
                    n,
                    c.gpus.map_or("-".into(), |g| g.to_string()),
                    f(c.cost_per_hour, 2),
                    f(c.ttft_ms_p99, 1),
                    f(c.tpot_ms_p99, 2),
                    if frontier.contains(&c.name) { "*" } else { "" }
                );
            }
            if !pruned.is_empty() {
                outln!(
                    "\npruned {} configuration(s) whose least possible cost exceeds the cheapest found ({}): \
                     not searched (--exhaustive searches them)",
                    pruned.len(),
                    pruned.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
                );
            }
            match (&report.recommended, &launch) {
                (Some(r), Some(l)) => {
                    outln!("\ncheapest meeting the SLO on every seed: {r}");
                    outln!("launch: {l}");
                    outln!("wrote {} and winner.toml", dir.join("tune.json").display());
                }
                _ => {
                    outln!("\nno configuration meets the SLO on every seed; wrote {}", dir.join("tune.json").display())
                }
            }
        }
    }
    Ok(())
}

/// The winner's scenario: the candidate as resolved, at its recommended instance count.
fn winner_toml(s: &Scenario, instances: u32) -> String {
    let mut doc: toml::Table = s.resolved_toml().parse().expect("a resolved scenario is TOML");
    doc.remove("plan");
    doc.remove("tune");
    if let Some(toml::Value::Table(c)) = doc.get_mut("cluster") {
        c.insert("instances".into(), toml::Value::Integer(instances as i64));
    }
    format!("# The cheapest configuration `servesim tune` found, at its recommended instance count.\n{}", doc)
}

/// The engine's launch command for one instance of the winner (`engine` at the scenario's top
/// level; vLLM when it names none). The model is servesim's preset name: put your checkpoint.
fn launch_command(engine: Option<&str>, k: &tune::Knobs, s: &Scenario, r: &CandidateResult) -> String {
    let model = &s.model.name;
    let tp = r.tp;
    let mut args = vec![];
    match engine {
        Some("sglang") => {
            args.push(format!("python -m sglang.launch_server --model-path {model} --tp {tp}"));
            if let Some(n) = k.max_num_seqs {
                args.push(format!("--max-running-requests {n}"));
            }
            if let Some(n) = k.max_num_batched_tokens {
                args.push(format!("--chunked-prefill-size {n}"));
            }
            if k.prefix_caching == Some(false) {
                args.push("--disable-radix-cache".into());
            }
        }
        _ => {
            args.push(format!("vllm serve {model} --tensor-parallel-size {tp}"));
            if let Some(n) = k.max_num_seqs {
                args.push(format!("--max-num-seqs {n}"));
            }
            if let Some(n) = k.max_num_batched_tokens {
                args.push(format!("--max-num-batched-tokens {n}"));
            }
            match k.prefix_caching {
                Some(true) => args.push("--enable-prefix-caching".into()),
                Some(false) => args.push("--no-enable-prefix-caching".into()),
                None => {}
            }
        }
    }
    if let Some(d) = &k.weight_dtype {
        if d != "bf16" {
            args.push(format!("--quantization {d}"));
        }
    }
    args.join(" ")
}
