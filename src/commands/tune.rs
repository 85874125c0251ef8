//! `servesim tune`: every combination of a scenario's `[tune]` knobs sized by the plan's
//! instance search; the cheapest configuration meeting the SLO on every seed, the Pareto
//! frontier of cost against p99 TTFT and TPOT, the winner as a scenario and a launch command.

use std::path::PathBuf;

use anyhow::Context;
use servesim_sim::plan::tune::{Pruned, Skipped, TuneReport};
use servesim_sim::plan::{self, tune, Candidate, CandidateResult, Outcome, PlanHeader, SearchConfig};
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
    /// Re-size each feasible configuration over this error band (as `plan --error-band`).
    #[arg(long, value_name = "E", value_parser = super::plan::error_band)]
    error_band: Option<f64>,
    /// Output folder for tune.json and winner.toml. Default: outputs/<scenario name>/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Also write a self-contained HTML report (the configurations by cost against p99 TTFT and
    /// TPOT with the Pareto frontier, the table, the pruned ones) to this path.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Search every configuration. Without it, configurations are searched in waves by their
    /// cost floor, and one whose floor exceeds the cheapest feasible cost found is skipped
    /// (listed as pruned): it cannot be the cheapest, though it might have been on the frontier.
    #[arg(long)]
    exhaustive: bool,
    /// Run only shard I of N of the configurations (1-based) and write its results for
    /// `servesim merge` (every configuration of the shard is searched: no pruning).
    #[arg(long, value_name = "I/N", conflicts_with = "budget")]
    shard: Option<Shard>,
    /// The most simulation runs to spend: once they are spent (checked between waves, so the
    /// last wave may go over), the configurations not yet reached are listed as unsearched and
    /// the cheapest found is reported as such, not as the cheapest of the space.
    #[arg(long, value_name = "RUNS", conflicts_with = "exhaustive",
          value_parser = clap::value_parser!(u64).range(1..))]
    budget: Option<u64>,
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

pub(crate) fn run(a: Args) -> Result<()> {
    let src = scenario_file::read_source(Some(&a.scenario), "peak")?;
    let base = src.scenario()?;
    let Space { s, knobs, candidates, cfg, priced } = Space::of(&base, a.seeds, &src.label)?;
    let cfg = cfg.with_error_band(a.error_band);
    let header = plan::header(&s, &candidates, &cfg);
    let picked = Shard::before_sweep(a.shard, candidates.len(), a.out.as_deref(), a.report.as_deref())?;
    let progress = Progress::new(a.quiet, "tune", picked.len());
    let prune = a.shard.is_none() && !a.exhaustive;
    let Outcome { results, pruned, unsearched } = if prune {
        plan::prune_search(&candidates, &picked, &cfg, priced, &progress, a.budget)
    } else {
        let all: Vec<(usize, Option<u32>)> = picked.iter().map(|&i| (i, None)).collect();
        Outcome { results: plan::search(&candidates, &all, &cfg, &progress), ..Outcome::default() }
    };
    progress.finish();
    crate::error::check_cancel()?;
    let (runs, requests, wall) = progress.totals();
    if !a.quiet {
        errln!(
            "tune: {} configurations ({} pruned: {} by their cost floor, {} by one run; {} unsearched), {} runs, {} simulated requests in {wall:.2} s ({:.1} configurations/s)",
            picked.len(),
            pruned.len(),
            pruned.len() - by_run(&pruned),
            by_run(&pruned),
            unsearched.len(),
            thousands(runs),
            thousands(requests),
            picked.len() as f64 / wall.max(1e-9)
        );
    }
    let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&s.name));
    let seeds: Vec<String> = cfg.seeds.iter().map(u64::to_string).collect();
    let scenario_toml = base.resolved_toml();
    let digest = shard::digest(&[&scenario_toml, &seeds.join(","), &format!("{:?} {:?}", a.seeds, a.error_band)]);
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
    // Only the candidate names differ from the whole search's header (what was simulated is
    // not drawn again).
    let header = PlanHeader { candidate_names: subset.iter().map(|c| c.name.clone()).collect(), ..header };
    let report = plan::assemble(header, results.into_iter().map(|(_, r)| r).collect());
    let skipped = Skipped { pruned, unsearched, budget_runs: a.budget };
    finish(&s, &subset, &sub_knobs, report, &dir, a.format, digest, skipped)?;
    if let Some(path) = &a.report {
        let html = crate::report::tune_report(&dir)?;
        super::report::write(path, &html)?;
    }
    Ok(())
}

/// What `servesim bench --tune` reports of one pruned search.
pub(crate) struct BenchTune {
    pub(crate) configurations: usize,
    pub(crate) pruned_by_floor: usize,
    pub(crate) pruned_by_run: usize,
    pub(crate) runs: u64,
    pub(crate) requests: u64,
    pub(crate) wall_s: f64,
    pub(crate) recommended: Option<String>,
}

/// The pruned search of `text`'s `[tune]` space, as `tune` runs it, with nothing written.
pub(crate) fn bench(text: &str, name: &str) -> Result<BenchTune> {
    let base = Scenario::from_toml(text, name).map_err(|e| CliError::input(format!("{name}: {e}")))?;
    let Space { s, candidates, cfg, priced, .. } = Space::of(&base, None, name)?;
    let progress = Progress::new(true, "tune", candidates.len());
    let all: Vec<usize> = (0..candidates.len()).collect();
    let Outcome { results, pruned, .. } = plan::prune_search(&candidates, &all, &cfg, priced, &progress, None);
    crate::error::check_cancel()?;
    let (runs, requests, wall_s) = progress.totals();
    let header = plan::header(&s, &candidates, &cfg);
    let report = plan::assemble(header, results.into_iter().map(|(_, r)| r).collect());
    Ok(BenchTune {
        configurations: candidates.len(),
        pruned_by_floor: pruned.len() - by_run(&pruned),
        pruned_by_run: by_run(&pruned),
        runs,
        requests,
        wall_s,
        recommended: report.recommended,
    })
}

/// The configurations of a scenario's `[tune]` space as plan candidates, and how they are
/// searched (`seeds` overriding `[plan] seeds`; no capacity search); `label` names the
/// scenario in errors.
struct Space {
    s: Scenario,
    knobs: Vec<tune::Knobs>,
    candidates: Vec<Candidate>,
    cfg: SearchConfig,
    /// Every candidate has a price: costs in $/h, else in GPUs.
    priced: bool,
}

impl Space {
    fn of(base: &Scenario, seeds: Option<u32>, label: &str) -> Result<Space> {
        let (s, knobs) = tune::plan_scenario(base).map_err(|e| CliError::input(format!("{label}: {e}")))?;
        let candidates = plan::candidates(&s).map_err(|e| CliError::input(format!("{label}: {e}")))?;
        let cfg = SearchConfig::new(&s.resolved.plan.clone().unwrap_or_default(), s.seed, seeds).without_capacity();
        let priced = candidates.iter().all(|c| c.price_per_gpu_hour.is_some());
        Ok(Space { s, knobs, candidates, cfg, priced })
    }
}

/// How many were pruned by a run (the others by their floor, unrun).
fn by_run(pruned: &[Pruned]) -> usize {
    pruned.iter().filter(|p| p.failed_at_instances.is_some()).count()
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
    finish(&s, &candidates, &knobs, report, &dir, format, digest, Skipped::default())
}

/// Writes tune.json and winner.toml into `dir` and prints the report (shared by `tune` and
/// `merge`, so that merged shards print what the unsharded run prints).
#[allow(clippy::too_many_arguments)]
fn finish(
    s: &Scenario,
    candidates: &[Candidate],
    knobs: &[tune::Knobs],
    report: plan::PlanReport,
    dir: &std::path::Path,
    format: Format,
    digest: String,
    skipped: Skipped,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = TuneReport::new(&s.name, candidates, knobs, report, skipped);
    let json = serde_json::to_string_pretty(&out).expect("report serialises");
    crate::atomic::write(&dir.join("tune.json"), json.clone() + "\n")?;
    let mut files = vec!["tune.json"];
    if let Some(text) = out.winner_toml(candidates) {
        crate::atomic::write(&dir.join("winner.toml"), text)?;
        files.push("winner.toml");
    }
    let made_by = format!(
        "servesim tune of scenario {}, seed {}: the cheapest, {}",
        s.name,
        s.seed,
        out.recommended.as_deref().unwrap_or("")
    );
    files.extend(super::plan::write_manifest(out.winner(), dir, &made_by)?);
    crate::manifest::record(dir, "tune", crate::manifest::Run::new(&s.name, s.seed, digest, &files))?;
    match format {
        Format::Json => outln!("{json}"),
        Format::Table => out!("{}", table(&out, dir)),
    }
    Ok(())
}

/// Tune's table and what follows it, as printed (`dir`: where tune.json was written).
fn table(out: &TuneReport, dir: &std::path::Path) -> String {
    let TuneReport { plan: report, frontier, pruned, unsearched, budget_runs, .. } = out;
    let mut o = table_head(&report.header) + "\n";
    let mut rows: Vec<&CandidateResult> = report.candidates.iter().collect();
    let key = |c: &CandidateResult| (!c.feasible, c.cost_per_hour.unwrap_or(f64::INFINITY), c.gpus.unwrap_or(u64::MAX));
    rows.sort_by(|a, b| key(a).partial_cmp(&key(b)).expect("not NaN").then(a.name.cmp(&b.name)));
    let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
    for c in rows {
        let n = if c.feasible { c.instances.map_or("-".into(), |n| n.to_string()) } else { "none".into() };
        o += &format!(
            "{:<48} {:>9} {:>5} {:>9} {:>10} {:>10}  {}\n",
            c.name,
            n,
            c.gpus.map_or("-".into(), |g| g.to_string()),
            f(c.cost_per_hour, 2),
            f(c.ttft_ms_p99, 1),
            f(c.tpot_ms_p99, 2),
            if frontier.contains(&c.name) { "*" } else { "" }
        );
    }
    o += &priced_by_lines(report);
    o += &calibration_lines(report);
    o += &pruned_lines(pruned);
    if !unsearched.is_empty() {
        o += &format!(
            "\nthe budget of {} runs was spent: {} configuration(s) not searched{}; the cheapest below is the \
             cheapest of those searched, not proven the cheapest of the space\n",
            budget_runs.unwrap_or(0),
            unsearched.len(),
            names(&unsearched.iter().map(String::as_str).collect::<Vec<_>>())
        );
    }
    let json = dir.join("tune.json");
    match out.winner() {
        Some(r) => {
            o += &format!("\ncheapest meeting the SLO on every seed: {}\n", r.name);
            o += &super::plan::buyer_text(r, &report.header);
            o += &super::plan::deploy_text(r);
            o += &format!("wrote {} and winner.toml\n", json.display());
        }
        None => o += &format!("\nno configuration meets the SLO on every seed; wrote {}\n", json.display()),
    }
    o
}

/// The pruned configurations, by why (nothing when none were).
fn pruned_lines(pruned: &[Pruned]) -> String {
    if pruned.is_empty() {
        return String::new();
    }
    let (by_floor, by_run): (Vec<&Pruned>, Vec<&Pruned>) = pruned.iter().partition(|p| p.failed_at_instances.is_none());
    let mut o = format!(
        "\npruned {} configuration(s), not searched (listed in tune.json; --exhaustive searches them):\n",
        pruned.len()
    );
    if !by_floor.is_empty() {
        o += &format!(
            "  {} whose least possible cost exceeds the cheapest found{}\n",
            by_floor.len(),
            pruned_names(&by_floor)
        );
    }
    if !by_run.is_empty() {
        o += &format!(
            "  {} that missed the SLO on the first seed at a count which leaves them costing more than the cheapest found{}\n",
            by_run.len(),
            pruned_names(&by_run)
        );
    }
    o
}

/// Which configurations a calibration corrects, in lines (only when the scenario names one).
/// What priced the configurations' iterations: each cost source, in words, with how many
/// configurations it priced (named when four or fewer).
fn priced_by_lines(report: &plan::PlanReport) -> String {
    let mut by: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for c in &report.candidates {
        if let Some(p) = &c.priced_by {
            by.entry(p).or_default().push(&c.name);
        }
    }
    let mut o = String::new();
    for (source, names) in &by {
        let which = if names.len() <= 4 { format!(": {}", names.join(", ")) } else { String::new() };
        o += &format!("  {source}: {} configuration(s){which}\n", names.len());
    }
    if o.is_empty() {
        o
    } else {
        format!("\npriced by:\n{o}")
    }
}

fn calibration_lines(report: &plan::PlanReport) -> String {
    let mut o = String::new();
    let named: Vec<&CandidateResult> = report.candidates.iter().filter(|c| c.calibration.is_some()).collect();
    if !named.is_empty() {
        let calibrated: Vec<&str> = named
            .iter()
            .filter(|c| c.calibration.as_deref().is_some_and(|w| w.starts_with("calibrated")))
            .map(|c| c.name.as_str())
            .collect();
        let first = named[0].calibration.as_deref().unwrap_or("");
        o += &format!(
            "\ncost model: {} of {} searched configurations calibrated{}\n",
            calibrated.len(),
            named.len(),
            if calibrated.len() == named.len() { format!(" ({first})") } else { names(&calibrated) }
        );
        if let Some(u) = named.iter().find(|c| c.calibration.as_deref().is_some_and(|w| w.starts_with("uncalibrated")))
        {
            o += &format!("  the others {}\n", u.calibration.as_deref().unwrap_or(""));
        }
    }
    o
}

/// Up to eight names, as ": a, b, … (and N more)".
fn names(all: &[&str]) -> String {
    let shown = &all[..all.len().min(8)];
    let more = if all.len() > shown.len() { format!(" (and {} more)", all.len() - shown.len()) } else { String::new() };
    format!(": {}{more}", shown.join(", "))
}

fn pruned_names(ps: &[&Pruned]) -> String {
    names(&ps.iter().map(|p| p.name.as_str()).collect::<Vec<_>>())
}

/// What was simulated, then the column names of tune's table.
fn table_head(h: &PlanHeader) -> String {
    let simulated = h.offered.as_ref().map(|o| format!("simulated: {}\n", o.line())).unwrap_or_default();
    format!(
        "{simulated}{:<48} {:>9} {:>5} {:>9} {:>10} {:>10}  frontier",
        "configuration", "instances", "GPUs", "$/h", "TTFT p99", "TPOT p99"
    )
}
