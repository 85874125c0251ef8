//! `servesim plan`: the fewest instances of each candidate configuration that meet the SLOs,
//! with headroom, GPUs and cost, and the cheapest feasible candidate.

use std::path::{Path, PathBuf};

use anyhow::Context;
use servesim_sim::plan::{self, CandidateResult, PlanHeader, PlanReport, SearchConfig};

use super::Format;
use crate::error::{CliError, Result};
use crate::output::thousands;
use crate::progress::Progress;
use crate::scenario_file;
use crate::shard::{self, Shard};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Scenario TOML file with a [plan] section. Default: the embedded scenarios/peak.toml.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Seeds at each decisive point (overrides [plan] seeds; default 3).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    seeds: Option<u32>,
    /// First seed (overrides the scenario's `seed`); the others follow it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=servesim_sim::scenario::MAX_SEED))]
    seed: Option<u64>,
    /// Re-size each feasible candidate with its iterations 1 − E and 1 + E times as long and give
    /// its count as that range (default: the measured error of what prices it, docs/fidelity.md;
    /// 0: no range).
    #[arg(long, value_name = "E", value_parser = error_band)]
    error_band: Option<f64>,
    /// Output folder for plan.json (or the shard file). Default: outputs/<scenario name>/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write a self-contained HTML report (charts and the table) to this path.
    #[arg(long)]
    report: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Run only shard I of N of the candidates (1-based) and write its results for `servesim merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// No progress bar and no timing line on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// `--error-band E`: a fraction in [0, 0.9].
pub(crate) fn error_band(v: &str) -> std::result::Result<f64, String> {
    match v.parse::<f64>() {
        Ok(e) if (0.0..=0.9).contains(&e) => Ok(e),
        Ok(e) => Err(format!("must be in [0, 0.9] (a fraction: 0.2 is ±20%), got {e}")),
        Err(_) => Err(format!("not a number: {v:?}")),
    }
}

pub(crate) fn run(a: Args) -> Result<()> {
    let src = scenario_file::read_source(a.scenario.as_deref(), "peak")?;
    let mut s = src.scenario()?;
    if let Some(seed) = a.seed {
        s.set_seed(seed);
    }
    let candidates = plan::candidates(&s).map_err(|e| CliError::input(format!("{}: {e}", src.label)))?;
    let section = s.resolved.plan.clone().unwrap_or_default();
    let cfg = SearchConfig::new(&section, s.seed, a.seeds).with_error_band(a.error_band);
    let header = plan::header(&s, &candidates, &cfg);
    let picked = Shard::before_sweep(a.shard, candidates.len(), a.out.as_deref(), a.report.as_deref())?;

    if !a.quiet {
        for &i in &picked {
            if let Some(cs) = &candidates[i].scenario {
                for l in crate::output::cost_lines(cs) {
                    errln!("cost ({}): {l}", candidates[i].name);
                }
            }
        }
    }
    let progress = Progress::new(a.quiet, "plan", picked.len());
    let picked: Vec<(usize, Option<u32>)> = picked.into_iter().map(|i| (i, None)).collect();
    let results = plan::search(&candidates, &picked, &cfg, &progress);
    progress.finish();
    crate::error::check_cancel()?;
    let (runs, requests, wall) = progress.totals();
    let dir = a.out.unwrap_or_else(|| PathBuf::from("outputs").join(&s.name));
    if !a.quiet {
        errln!(
            "plan: {} candidate(s), {} runs, {} simulated requests in {wall:.2} s ({} requests/s)",
            picked.len(),
            thousands(runs),
            thousands(requests),
            thousands((requests as f64 / wall.max(1e-9)) as u64)
        );
    }
    let seeds: Vec<String> = cfg.seeds.iter().map(u64::to_string).collect();
    let settings = format!("{:?} {:?}", a.seeds, a.error_band);
    let digest = shard::digest(&[&s.resolved_toml(), &seeds.join(","), &settings]);
    if let Some(sh) = a.shard {
        let path = shard::write(&dir, sh, "plan", (header, digest), results)?;
        if !a.quiet {
            errln!("wrote shard {}/{} ({} of the candidates) to {}", sh.index, sh.count, picked.len(), path.display());
        }
        return Ok(());
    }
    let report = plan::assemble(header, results.into_iter().map(|(_, r)| r).collect());
    finish(&report, &dir, a.format, digest)?;
    if let Some(path) = &a.report {
        let html = crate::report::plan_report(&dir)?;
        super::report::write(path, &html)?;
    }
    Ok(())
}

/// Writes `plan.json` into `dir` and prints the report: shared by `plan` and `merge`, so that
/// merged shards print exactly what the unsharded run prints.
pub(crate) fn finish(report: &PlanReport, dir: &Path, format: Format, digest: String) -> Result<()> {
    let json = serde_json::to_string_pretty(report).expect("report serialises");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::atomic::write(&dir.join("plan.json"), json.clone() + "\n")?;
    let h = &report.header;
    let recommended = report.recommended.as_deref().and_then(|r| report.candidates.iter().find(|c| c.name == r));
    let made_by = format!(
        "servesim plan of scenario {}, seed {}: the recommended {}",
        h.scenario,
        h.seed,
        report.recommended.as_deref().unwrap_or("")
    );
    let mut files = vec!["plan.json"];
    files.extend(write_manifest(recommended, dir, &made_by)?);
    crate::manifest::record(dir, "plan", crate::manifest::Run::new(&h.scenario, h.seed, digest, &files))?;
    match format {
        Format::Json => outln!("{json}"),
        Format::Table => out!("{}", table(report)),
    }
    Ok(())
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| format!("{x:.decimals$}")).unwrap_or_else(|| "-".into())
}

fn slo_words(h: &PlanHeader) -> String {
    let mut limits = vec![];
    if let Some(v) = h.slo.ttft_ms {
        limits.push(format!("TTFT ≤ {v} ms"));
    }
    if let Some(v) = h.slo.tpot_ms {
        limits.push(format!("TPOT ≤ {v} ms"));
    }
    if let Some(v) = h.slo.e2e_ms {
        limits.push(format!("E2E ≤ {v} ms"));
    }
    if limits.is_empty() {
        limits.push("no latency limits".into());
    }
    format!("{} for {}% of requests", limits.join(", "), h.slo.attainment * 100.0)
}

/// The plan's first lines: the scenario, its load and SLO, and what was simulated.
fn title(h: &PlanHeader) -> String {
    let load = match (h.load_rps_mean, h.load_rps_peak) {
        (Some(m), Some(p)) if p > m * 1.0001 => format!("{m:.1} req/s mean, {p:.1} at peak"),
        (Some(m), _) => format!("{m:.1} req/s"),
        _ => "closed-loop load".into(),
    };
    let mut o = format!("servesim plan: {} — {}, {load}; SLO {}\n", h.scenario, h.model, slo_words(h));
    if let Some(off) = &h.offered {
        o += &format!("  simulated: {}\n", off.line());
    }
    o
}

/// The human-readable plan.
pub(crate) fn table(r: &PlanReport) -> String {
    let h = &r.header;
    let mut o = title(h);
    let seeds: Vec<String> = (0..h.seeds as u64).map(|i| h.seed.wrapping_add(i).to_string()).collect();
    let mut headroom = vec![];
    if h.headroom > 0.0 {
        headroom.push(format!("+{}%", h.headroom * 100.0));
    }
    if h.spare_instances > 0 {
        headroom.push(format!("+{} spare", h.spare_instances));
    }
    let headroom = if headroom.is_empty() { "none".to_string() } else { headroom.join(" ") };
    if h.spare > 0 {
        o += &format!(
            "  N+{}: every count is run with {} down for the whole run (the highest-capacity ones)\n",
            h.spare,
            plan::instances(h.spare)
        );
    }
    o += &format!(
        "  seeds {} at decisive points; headroom {headroom}; up to {} instances per candidate\n\n",
        seeds.join(", "),
        h.max_instances
    );
    o += &format!(
        "  {:<18}{:>5}{:>13}{:>6}{:>10}{:>10}{:>10}{:>9}{:>9}{:>8}  {:<18}{:>11}\n",
        "candidate",
        "min",
        "inst",
        "GPUs",
        "$/h",
        "TTFT p99",
        "TPOT p99",
        "attain",
        "goodput",
        "KV pk",
        "binding",
        "1-inst cap"
    );
    o += &format!(
        "  {:<18}{:>5}{:>13}{:>6}{:>10}{:>10}{:>10}{:>9}{:>9}{:>8}  {:<18}{:>11}\n",
        "", "", "(band)", "", "", "ms", "ms", "%", "req/s", "%", "", "req/s"
    );
    for c in &r.candidates {
        let mark = if r.recommended.as_deref() == Some(c.name.as_str()) { "*" } else { " " };
        let u = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        o += &format!(
            "{mark} {:<18}{:>5}{:>13}{:>6}{:>10}{:>10}{:>10}{:>9}{:>9}{:>8}  {:<18}{:>11}\n",
            c.name,
            u(c.instances_min),
            c.band.as_ref().zip(c.instances).map_or_else(|| u(c.instances), |(b, n)| b.range(n)),
            c.gpus.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            opt(c.cost_per_hour, 2),
            opt(c.ttft_ms_p99, 1),
            opt(c.tpot_ms_p99, 1),
            opt(c.attainment.map(|a| a * 100.0), 2),
            opt(c.goodput_rps, 2),
            opt(c.kv_peak.map(|k| k * 100.0), 1),
            if c.feasible { c.binding.map(|b| b.as_str()).unwrap_or("-") } else { "infeasible" },
            opt(c.single_instance_capacity_rps, 2),
        );
        // The figures above are the minimum's; the count provisioned has its own.
        if let Some(p) = c.provisioned.as_ref().filter(|p| Some(p.instances) != c.instances_min) {
            o += &format!(
                "  {:<18}{:>5}{:>13}{:>6}{:>10}{:>10}{:>10}{:>9}{:>9}{:>8}  {:<18}\n",
                format!("  at {}", p.instances),
                "",
                p.instances,
                "",
                "",
                format!("{:.1}", p.ttft_ms_p99),
                format!("{:.1}", p.tpot_ms_p99),
                format!("{:.2}", p.attainment * 100.0),
                format!("{:.2}", p.goodput_rps),
                format!("{:.1}", p.kv_peak * 100.0),
                "(recommended count)",
            );
        }
    }
    o += &priced_by_text(r);
    if r.candidates.iter().any(|c| c.provisioned.as_ref().is_some_and(|p| Some(p.instances) != c.instances_min)) {
        o += "  latencies, attainment, goodput and KV peak: the worst seed at the minimum count (min); \"at N\" rows: at the\n  count recommended (inst: the minimum with headroom and spares), simulated too\n\n";
    }
    match &r.recommended {
        Some(name) => {
            let c = r.candidates.iter().find(|c| &c.name == name).expect("recommended is a candidate");
            o += &format!(
                "* recommended: {name} — {} instances ({}{} GPUs), the cheapest feasible candidate\n",
                c.instances.unwrap_or(0),
                c.cost_per_hour.map(|x| format!("${x:.2}/h, ")).unwrap_or_default(),
                c.gpus.unwrap_or(0)
            );
            o += &r.tie_break.as_ref().map_or(String::new(), |t| format!("  tie: {t}\n"));
            o += &(band_text(c, r) + &buyer_text(c, &r.header) + &deploy_text(c));
        }
        None => o += "no candidate meets the SLO\n",
    }
    o += "\n";
    o += &crate::report::plan_text::evidence(r);
    o
}

/// The recommended candidate's count over its error band, and whether it stays the cheapest.
fn band_text(c: &CandidateResult, r: &PlanReport) -> String {
    let (Some(b), Some(n)) = (&c.band, c.instances) else { return String::new() };
    format!(
        "  error band: {} instances with iterations ±{:.1}% ({}, docs/fidelity.md); {}\n",
        b.range(n),
        b.error * 100.0,
        b.source,
        r.band_note.as_deref().unwrap_or("")
    )
}

/// A blank line, then what priced each candidate's iterations, a line each (when any says).
fn priced_by_text(r: &PlanReport) -> String {
    let lines: String =
        r.candidates.iter().filter_map(|c| Some(format!("    {:<18}{}\n", c.name, c.priced_by.as_deref()?))).collect();
    if lines.is_empty() {
        "\n".into()
    } else {
        format!("\n  priced by:\n{lines}\n")
    }
}

/// A buyer's figures for `c`, indented under its line: what it costs at the minimum and the
/// recommended counts, per month and per million output tokens, the output per GPU; what one
/// instance serves; what headroom and spares add.
pub(crate) fn buyer_text(c: &CandidateResult, h: &PlanHeader) -> String {
    let Some(e) = &c.economics else { return String::new() };
    let (n_min, n) = (c.instances_min.unwrap_or(0), c.instances.unwrap_or(0));
    let tokens = match (e.output_tokens_per_s, e.output_tokens_per_s_per_gpu) {
        (Some(t), Some(g)) => format!("{} output tokens/s, {} per GPU", thousands(t as u64), thousands(g as u64)),
        _ => "output tokens/s not measured for pools".to_string(),
    };
    let mut o = match (e.cost_per_hour_min, e.cost_per_hour, e.cost_per_month) {
        (Some(lo), Some(hi), Some(month)) => format!(
            "  cost: ${lo:.2}/h at the minimum {n_min} instances, ${hi:.2}/h at the recommended {n} (${}/month at {} h); \
             {}({tokens})\n",
            thousands(month.round() as u64),
            servesim_sim::plan::HOURS_PER_MONTH,
            e.usd_per_million_output_tokens.map_or(String::new(), |x| format!("${x:.3} per million output tokens ")),
        ),
        _ => format!("  cost: no price for {} ([plan] prices); {tokens}\n", c.gpu),
    };
    if let Some(cap) = c.single_instance_capacity_rps {
        o += &format!("  one instance serves {cap:.2} req/s of this traffic within the SLO");
        o += &h.load_rps_mean.map_or(String::new(), |l| {
            format!("; the mean load of {l:.2} req/s is {:.2} instances' worth", l / cap.max(1e-12))
        });
        o += "\n";
    }
    o += &format!(
        "  headroom {:.0}% and {} spare instance(s) take the minimum {n_min} to the recommended {n}\n",
        h.headroom * 100.0,
        h.spare_instances
    );
    o
}

/// What to deploy for `c` at its recommended count, indented under its line: each server's
/// replicas and launch command, the router, the manifest file or why there is none.
pub(crate) fn deploy_text(c: &CandidateResult) -> String {
    let Some(d) = &c.deploy else { return String::new() };
    let mut o = String::new();
    for l in d.lines() {
        o += &format!("  {l}\n");
    }
    let routers = d.router.command.iter().chain(&d.router.dynamo);
    for n in d.servers.iter().flat_map(|v| &v.command.notes).chain(routers.flat_map(|c| &c.notes)) {
        o += &format!("  note: {n}\n");
    }
    o += &match &d.no_manifest {
        None => format!("  Kubernetes manifest: {MANIFEST}\n"),
        Some(why) => format!("  no Kubernetes manifest: {why}\n"),
    };
    if let (Some(l), None) = (&d.router.llm_d, &d.no_manifest) {
        o += &format!("  llm-d Helm values: {LLM_D_VALUES} ({})\n", l.note);
    }
    o
}

/// The recommended configuration's Kubernetes manifest, in the output folder.
pub(crate) const MANIFEST: &str = "deploy.yaml";
/// Its llm-d Helm values, where llm-d's endpoint picker has the simulated router.
pub(crate) const LLM_D_VALUES: &str = "llm-d-values.yaml";

/// Writes the Kubernetes manifest of `recommended` (if any, and if it has one) into `dir`, headed
/// by `made_by`, and its llm-d Helm values where it has them; removes such a file an earlier run
/// left when this one has none. Returns the files it wrote.
pub(crate) fn write_manifest(
    recommended: Option<&CandidateResult>,
    dir: &Path,
    made_by: &str,
) -> Result<Vec<&'static str>> {
    let d = recommended.and_then(|c| c.deploy.as_ref());
    let mut written = vec![];
    for (file, text) in
        [(MANIFEST, d.and_then(|d| d.manifest(made_by))), (LLM_D_VALUES, d.and_then(|d| d.llm_d_values(made_by)))]
    {
        let path = dir.join(file);
        match text {
            Some(m) => {
                crate::atomic::write(&path, m)?;
                written.push(file);
            }
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(CliError::input(format!("removing the stale {}: {e}", path.display())))
                }
                _ => {}
            },
        }
    }
    Ok(written)
}
