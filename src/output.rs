//! Writing run outputs: the stdout table, `summary.json`, `requests.csv`, `timeseries.csv`,
//! and the resolved scenario.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use servesim_sim::metrics::{Dist, Recorder, Status, StopReason, Summary};
use servesim_sim::{Scenario, SimTime};

use crate::rows::{Fixed, Ms, RequestRow, WindowRow};

/// Milliseconds with exactly six decimals, from integer nanoseconds (exact, so outputs are
/// byte-identical across runs and platforms).
pub(crate) fn ms(t: SimTime) -> String {
    Ms(t).to_string()
}

/// Writes every output file of a run into `dir`: all are written to temporaries first and put
/// in place together at the end ([`crate::atomic::commit_all`]), so a run killed while writing
/// (even by SIGKILL) leaves the previous run's files or this one's.
pub(crate) fn write_run(dir: &Path, scenario: &Scenario, summary: &Summary, rec: &Recorder) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating output folder {}", dir.display()))?;
    let requests = write_requests(&dir.join("requests.csv"), rec).context("writing requests.csv")?;
    let series = write_timeseries(&dir.join("timeseries.csv"), rec).context("writing timeseries.csv")?;
    let mut resolved = crate::atomic::AtomicFile::create(&dir.join("scenario.toml"))?;
    resolved.write_all(scenario.resolved_toml().as_bytes()).context("writing scenario.toml")?;
    let mut json = crate::atomic::AtomicFile::create(&dir.join("summary.json"))?;
    writeln!(json, "{}", serde_json::to_string_pretty(summary).expect("summary serialises"))
        .context("writing summary.json")?;
    let resolved_text = scenario.resolved_toml();
    let run = crate::manifest::Run::new(
        &scenario.name,
        scenario.seed,
        crate::shard::digest(&[&resolved_text, &scenario.seed.to_string()]),
        &["summary.json", "requests.csv", "timeseries.csv", "scenario.toml"],
    );
    let mut manifest = crate::atomic::AtomicFile::create(&dir.join(crate::manifest::FILE))?;
    manifest
        .write_all(crate::manifest::with_entry(dir, "simulate", run).as_bytes())
        .context("writing manifest.json")?;
    crate::atomic::commit_all([requests, series, resolved, json, manifest])
}

/// One row per request, in id order, with a stable column order (written, not yet committed).
fn write_requests(path: &Path, rec: &Recorder) -> anyhow::Result<crate::atomic::AtomicFile> {
    let some = |t: SimTime| (t != SimTime::MAX).then_some(Ms(t));
    let rows = rec.records.iter().enumerate().map(|(id, r)| RequestRow {
        id: id as u64,
        arrival_ms: Ms(r.arrival),
        scheduled_ms: some(r.scheduled),
        first_token_ms: some(r.first_token),
        finish_ms: match r.status {
            Status::Finished | Status::Rejected(_) | Status::TimedOut | Status::Lost => some(r.finish),
            _ => None,
        },
        prompt_tokens: r.prompt_tokens,
        output_tokens: r.output_tokens,
        status: r.status.as_str(),
        reject_reason: match r.status {
            Status::Rejected(why) => why.as_str(),
            _ => "",
        },
        preemptions: r.preemptions,
        instance: (r.instance != u32::MAX).then_some(r.instance),
        measured: rec.counts(r.arrival) as u8,
        ttft_ms: r.ttft().map(Ms),
        tpot_ms: r.tpot_ms().map(Fixed),
        e2e_ms: r.e2e().map(Ms),
        queue_ms: r.queue().map(Ms),
        class: r.class,
    });
    Ok(crate::rows::write_request_rows(crate::atomic::AtomicFile::create(path)?, rows)?)
}

fn write_timeseries(path: &Path, rec: &Recorder) -> anyhow::Result<crate::atomic::AtomicFile> {
    let total = rec.kv_total().max(1) as f64;
    let rows = rec.series.iter().map(|row| WindowRow {
        t_s: Fixed(row.start.as_secs_f64()),
        arrivals: row.arrivals,
        rejections: row.rejections,
        completions: row.completions,
        first_tokens: row.first_tokens,
        waiting_mean: Fixed(row.waiting_mean),
        running_mean: Fixed(row.running_mean),
        kv_used_blocks_mean: Fixed(row.kv_used_blocks_mean),
        kv_utilization_mean: Fixed(
            row.kv_used_blocks_mean / if row.kv_blocks_mean > 0.0 { row.kv_blocks_mean } else { total },
        ),
        ttft_ms_p99: row.ttft_ms_p99.map(Fixed),
        instances_mean: Fixed(row.instances_mean),
        instances_ready_mean: Fixed(row.instances_ready_mean),
        failures: row.failures,
        restarts: row.restarts,
        slo_attainment: row.slo_attainment.map(Fixed),
    });
    Ok(crate::rows::write_rows(crate::atomic::AtomicFile::create(path)?, rows)?)
}

/// Thousands separators for counts in tables.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn dist_row(name: &str, d: &Dist) -> String {
    format!("  {name:<8}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}", d.mean, d.p50, d.p90, d.p95, d.p99, d.max)
}

/// The human-readable report of one run.
pub(crate) fn summary_table(s: &Scenario, sum: &Summary) -> String {
    let mut o = String::new();
    let groups: Vec<String> = s
        .groups
        .iter()
        .map(|g| match g.role {
            servesim_sim::disagg::Role::Mixed => {
                format!("{} × {} (tp {}{})", g.count, g.gpu.name, g.tp, g.layout.words())
            }
            role => format!("{} × {} (tp {}{}, {})", g.count, g.gpu.name, g.tp, g.layout.words(), role.as_str()),
        })
        .collect();
    if let Some(st) = &sum.stopped {
        o += &format!(
            "STOPPED EARLY ({}) after {} events, at simulated time {:.3} s: partial results; the figures \
             below cover only the part simulated and the SLO verdict is not a verdict on the workload\n",
            match st.reason {
                StopReason::EventBudget => "run.max_events reached",
                StopReason::TimeLimit => "--time-limit passed",
                StopReason::RequestBudget => "run.max_requests reached",
                StopReason::SeriesBudget => "time-series bound of metrics.window_s windows reached",
                r @ (StopReason::Cancelled | StopReason::Sigint | StopReason::Sigterm) => r.as_str(),
            },
            thousands(st.events),
            st.at_s
        );
    }
    o += &format!("servesim simulate: {} (seed {})\n", s.name, s.seed);
    o += &format!(
        "  model {} ({} weights, {} KV) on {}\n",
        s.model.name,
        s.model.weight_dtype.name(),
        s.model.kv_dtype.name(),
        groups.join(" + ")
    );
    o += &kv_lines(s);
    o += "\n";
    let r = &sum.requests;
    o += &format!(
        "requests  arrived {}  finished {}  rejected {}  in flight {}  (measured {})\n",
        thousands(r.arrived),
        thousands(r.finished),
        thousands(r.rejected),
        thousands(r.in_flight),
        thousands(r.measured)
    );
    let reasons: Vec<String> =
        r.rejected_by_reason.iter().filter(|(_, &n)| n > 0).map(|(k, n)| format!("{k} {n}")).collect();
    if !reasons.is_empty() {
        o += &format!("  rejected: {}\n", reasons.join(", "));
    }
    if r.timed_out > 0 {
        o += &format!("  timed out in the queue: {}\n", thousands(r.timed_out));
    }
    if r.lost > 0 {
        o += &format!("  lost to instance failures: {}\n", thousands(r.lost));
    }
    o += &format!("\n  {:<8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "ms", "mean", "p50", "p90", "p95", "p99", "max");
    for (name, d) in [
        ("TTFT", &sum.ttft_ms),
        ("TPOT", &sum.tpot_ms),
        ("ITL", &sum.itl_ms),
        ("E2E", &sum.e2e_ms),
        ("queue", &sum.queue_ms),
    ] {
        o += &dist_row(name, d);
        o += "\n";
    }
    let t = &sum.throughput;
    o += &format!(
        "\nthroughput  {:.2} req/s, {:.0} input tok/s, {:.0} output tok/s over {:.1} s\n",
        t.requests_per_s, t.input_tokens_per_s, t.output_tokens_per_s, sum.duration_s
    );
    let mut limits = vec![];
    if let Some(v) = sum.slo.ttft_ms {
        limits.push(format!("TTFT ≤ {v} ms"));
    }
    if let Some(v) = sum.slo.tpot_ms {
        limits.push(format!("TPOT ≤ {v} ms"));
    }
    if let Some(v) = sum.slo.e2e_ms {
        limits.push(format!("E2E ≤ {v} ms"));
    }
    let limits = if limits.is_empty() { "no thresholds set".to_string() } else { limits.join(", ") };
    o += &format!(
        "SLO         {limits}: attainment {:.2}% (target {:.2}%: {}), goodput {:.2} req/s of the offered window ({:.2} over the whole run, as vllm bench counts it)\n",
        sum.slo.attainment * 100.0,
        sum.slo.target * 100.0,
        match (sum.stopped.is_some(), sum.slo.met) {
            (true, true) => "met so far, run stopped early",
            (true, false) => "MISSED so far, run stopped early",
            (false, true) => "met",
            (false, false) => "MISSED",
        },
        sum.slo.goodput_rps,
        sum.slo.goodput_vllm_bench_rps
    );
    o += &format!(
        "KV          utilisation mean {:.1}%, max {:.1}% of {} blocks; preemptions {}\n",
        sum.kv.utilization_mean * 100.0,
        sum.kv.utilization_max * 100.0,
        thousands(sum.kv.blocks_total),
        thousands(sum.preemptions)
    );
    o += &format!(
        "batch       mean {:.1} sequences, max {}; {} iterations; {:.2} requests in system on average\n",
        sum.batch.mean,
        sum.batch.max,
        thousands(sum.iterations),
        sum.requests_in_system_mean
    );
    o += &class_lines(sum);
    o += &policy_lines(s, sum);
    o += &fleet_lines(s, sum);
    if let Some(d) = &sum.disaggregation {
        o += &disagg_lines(d);
    }
    o
}

/// Each group's KV pool: blocks, tokens, GiB per GPU, and where vLLM's hybrid manager draws the
/// sliding windows' blocks from them, the token count its log gives.
fn kv_lines(s: &Scenario) -> String {
    let mut o = String::new();
    for g in &s.groups {
        let label = if s.groups.len() > 1 { format!(" ({})", g.name) } else { String::new() };
        // vLLM's hybrid manager: the sliding-window groups draw on the same blocks, and its log
        // counts the blocks over all its groups.
        let pooled = g.memory.window.map_or(String::new(), |w| {
            format!(
                "; the sliding windows draw on these blocks too: vLLM 0.11 logs {} tokens",
                thousands(g.memory.kv_blocks / (1 + w.groups) * g.memory.block_tokens)
            )
        });
        o += &format!(
            "  KV per instance{label}: {} blocks × {} tokens = {} tokens ({:.1} GiB per GPU{pooled})\n",
            thousands(g.memory.kv_blocks),
            g.memory.block_tokens,
            thousands(g.memory.kv_tokens()),
            g.memory.kv_bytes as f64 / servesim_sim::memory::GIB
        );
    }
    o
}

/// Each priority class on its own, when the workload has several.
fn class_lines(sum: &Summary) -> String {
    if sum.classes.is_empty() {
        return String::new();
    }
    let mut o = format!(
        "classes     {:>5}{:>10}{:>10}{:>12}{:>12}{:>12}{:>10}\n",
        "class", "measured", "finished", "TTFT p99", "queue p99", "queue max", "attain"
    );
    o += &format!("            {:>5}{:>10}{:>10}{:>12}{:>12}{:>12}{:>10}\n", "", "", "", "ms", "ms", "ms", "%");
    for c in &sum.classes {
        o += &format!(
            "            {:>5}{:>10}{:>10}{:>12.1}{:>12.1}{:>12.1}{:>10.2}\n",
            c.class,
            thousands(c.measured),
            thousands(c.finished),
            c.ttft_ms.p99,
            c.queue_ms.p99,
            c.queue_ms.max,
            c.attainment * 100.0
        );
    }
    o
}

/// Instances over time, failures and autoscaling, for runs with a `[fleet]` section.
fn fleet_lines(s: &Scenario, sum: &Summary) -> String {
    let Some(cfg) = &s.fleet else { return String::new() };
    let f = &sum.fleet;
    let mut o = String::new();
    let cost = match (f.cost, f.cost_per_day) {
        (Some(c), Some(d)) => format!(", ${c:.2} (${d:.2} per day)"),
        _ => String::new(),
    };
    o += &format!(
        "fleet       instances {:.2} mean ({:.2} serving), {}–{}; {:.2} instance-hours, {:.2} GPU-hours{cost}\n",
        f.instances_mean, f.instances_ready_mean, f.instances_min, f.instances_max, f.instance_hours, f.gpu_hours
    );
    let startup: Vec<String> = f.startup_s.iter().map(|s| format!("{s:.1} s")).collect();
    o += &format!(
        "            start-up {} (weights ÷ {} GB/s + {} s init)\n",
        startup.join(", "),
        cfg.load_gb_per_s,
        cfg.init_s
    );
    if cfg.failures.is_some() {
        o += &format!(
            "failures    {} ({} crashes, {} hangs), {} restarts; {} requests retried, {} lost\n",
            f.failures,
            f.crashes,
            f.hangs,
            f.restarts,
            thousands(f.retries),
            thousands(f.lost)
        );
    }
    if cfg.autoscale.is_some() {
        o += &format!("autoscale   {} instances added, {} removed\n", f.scale_ups, f.scale_downs);
    }
    o
}

/// The pools of a disaggregated cluster and their KV transfers.
fn disagg_lines(d: &servesim_sim::disagg::DisaggSummary) -> String {
    let pool = |name: &str, p: &servesim_sim::disagg::PoolSummary| {
        format!(
            "{name:<12}{} instances ({} GPUs): batch mean {:.1}, max {}; {} iterations; busy {:.1}%\n",
            p.instances,
            p.gpus,
            p.batch_mean,
            p.batch_max,
            thousands(p.iterations),
            p.busy_fraction * 100.0
        )
    };
    let mut o = pool("prefill", &d.prefill);
    o += &pool("decode", &d.decode);
    o += &format!(
        "KV transfer {} transfers, {:.1} GB; link time mean {:.2} ms, p99 {:.2} ms; wait for decode KV p99 {:.1} ms\n",
        thousands(d.transfers),
        d.transfer_bytes as f64 * 1e-9,
        d.transfer_ms.mean,
        d.transfer_ms.p99,
        d.transfer_wait_ms.p99
    );
    o += &format!(
        "            decode-pool TPOT (KV arrival to last token) mean {:.1} ms, p99 {:.1} ms\n",
        d.decode_tpot_ms.mean, d.decode_tpot_ms.p99
    );
    o
}

/// What the serving policies did, for those that are on.
fn policy_lines(s: &Scenario, sum: &Summary) -> String {
    let mut o = String::new();
    let sch = &s.groups[0].scheduler;
    let p = &sum.prefix_cache;
    if sch.prefix_cache.enabled {
        o += &format!(
            "prefix      hit rate {:.1}% of prompt tokens, {:.1}% of requests; {} prefill tokens saved; {} evictions{}\n",
            p.hit_rate_tokens * 100.0,
            p.hit_rate_requests * 100.0,
            thousands(p.prefill_tokens_saved),
            thousands(p.evictions),
            if p.cpu_hit_tokens > 0 { format!("; {} tokens from the CPU tier", thousands(p.cpu_hit_tokens)) } else { String::new() }
        );
    }
    let w = &sum.swap;
    if w.swapped_out_blocks > 0 || w.recompute_fallbacks > 0 {
        o += &format!(
            "swap        {} blocks swapped out, {} preemptions recomputed (swap space full), {:.2} s of PCIe transfers\n",
            thousands(w.swapped_out_blocks),
            thousands(w.recompute_fallbacks),
            w.transfer_s
        );
    }
    let sp = &sum.speculative;
    if sp.steps > 0 {
        o += &format!(
            "speculative {} steps, {:.2} tokens per step, {:.1}% of drafts accepted\n",
            thousands(sp.steps),
            sp.tokens_per_step,
            sp.acceptance_rate * 100.0
        );
    }
    if sum.admission.circuit_breaker_trips > 0 {
        o += &format!("breaker     opened {} times\n", sum.admission.circuit_breaker_trips);
    }
    // What a queue order's settings know that no engine does (an oracle predictor): say so.
    for g in &s.groups {
        if let Some(c) = g.scheduler.queue.spec().caveat() {
            let label = if s.groups.len() > 1 { format!(" ({})", g.name) } else { String::new() };
            o += &format!("queue{label}       {c}\n");
        }
    }
    o += &format!(
        "CPU         overhead {:.1}% of busy time; GPU idle (waiting for the CPU or the host link) {:.1}%\n",
        sum.cpu.overhead_fraction * 100.0,
        sum.cpu.gpu_wait_fraction * 100.0
    );
    for g in &s.groups {
        let label = if s.groups.len() > 1 { format!(" ({})", g.name) } else { String::new() };
        o += &format!("cost{label}        {}\n", cost_source(g));
    }
    for p in &sum.cost.pipelines {
        let label = if s.groups.len() > 1 { format!(" ({})", p.group) } else { String::new() };
        o += &format!(
            "pipeline{label}    {} stages busy {:.1}% of the iterations' GPU time (bubbles {:.1}%)\n",
            p.stages,
            p.busy_share * 100.0,
            (1.0 - p.busy_share) * 100.0
        );
    }
    if let Some(n) = fallback_note(sum) {
        o += &format!("fallbacks   {n}\n");
    }
    o
}

/// Where a group's iteration times come from, in words.
pub(crate) fn cost_source(g: &servesim_sim::scenario::InstanceGroup) -> String {
    use servesim_sim::scenario::CostSpec;
    match (&g.cost, &g.profile) {
        (CostSpec::Linear(_), _) => "a linear cost (cost.kind = \"linear\")".into(),
        (CostSpec::Roofline(c), p) => {
            let o = c.engine_overhead();
            let p0 = c.params();
            let overhead = format!(
                "engine overhead {} ({} µs + {} µs per sequence{})",
                o.name,
                p0.cpu_overhead_base_us,
                p0.cpu_overhead_per_seq_us,
                if g.scheduler.cpu.overlap.unwrap_or(o.overlap) { ", overlapped" } else { "" }
            );
            match p {
                None => format!("roofline ({}); {overhead}", g.gpu.name),
                Some(p) => match &p.meta.database {
                    Some(d) => format!(
                        "measured kernels: {} {} {} ({} weights, {} KV), AIConfigurator database; {overhead}",
                        d.system, d.framework, d.version, d.weights, d.kv
                    ),
                    None => format!("profile {} ({}); {overhead}", c.profile.as_deref().unwrap_or("?"), p.meta.gpu),
                },
            }
        }
    }
}

/// What the cost model priced without measurements over a run, in one line (None: nothing).
pub(crate) fn fallback_note(sum: &Summary) -> Option<String> {
    if sum.cost.fallbacks.is_empty() {
        return None;
    }
    let parts: Vec<String> = sum
        .cost
        .fallbacks
        .iter()
        .map(|f| {
            format!("{} {:.1}% of iteration time in {} iterations: {}", f.op, f.share * 100.0, f.iterations, f.reason)
        })
        .collect();
    Some(parts.join("; "))
}

/// Under `cost.strict`, a table read beyond its measured range is an error (ops the profile
/// lacks are refused when the scenario is validated).
pub(crate) fn check_strict(s: &Scenario, sum: &Summary) -> crate::error::Result<()> {
    let strict = s.groups.iter().any(|g| matches!(&g.cost, servesim_sim::scenario::CostSpec::Roofline(c) if c.strict));
    if !strict {
        return Ok(());
    }
    match sum.cost.fallbacks.first() {
        Some(f) => Err(crate::error::CliError::input(format!(
            "cost.strict: {} ({}) {} in {} iterations ({:.2}% of iteration time)",
            f.op,
            f.group,
            f.reason,
            f.iterations,
            f.share * 100.0
        ))),
        None => Ok(()),
    }
}

/// One line per group of what prices its iterations and what the roofline stands in for (known
/// before any run: a profile's missing ops).
pub(crate) fn cost_lines(s: &Scenario) -> Vec<String> {
    (0..s.groups.len())
        .map(|gi| {
            let g = &s.groups[gi];
            let fb = servesim_sim::engine::cost_model(s, gi).fallbacks();
            let tail = if fb.is_empty() {
                String::new()
            } else {
                let l: Vec<String> = fb.iter().map(|f| format!("{} ({})", f.op, f.reason)).collect();
                format!("; the roofline prices {}", l.join(", "))
            };
            format!("{}: {}{tail}", g.name, cost_source(g))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pinned pool of 1,000 blocks under vLLM's rule for a model whose sliding windows draw on
    /// it: vLLM 0.11 logs 1,000 ÷ 2 groups × 16 = 8,000 tokens. Under servesim's own rule, no
    /// such clause.
    #[test]
    fn the_kv_line_says_when_the_windows_draw_on_the_blocks() {
        let src = |memory: &str| {
            format!(
                "[model]\nname = \"w\"\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n\
                 intermediate = 1024\nvocab = 1000\nmax_context = 4096\nwindow = {{ tokens = 32, layers = 2 }}\n\
                 [gpu]\nname = \"small\"\nbf16_tflops = 50\nhbm_gb_per_s = 200\nmemory_gib = 1\n\
                 interconnect_gb_per_s = 50\npcie_gb_per_s = 16\n[memory]\n{memory}kv_blocks = 1000\n\
                 [workload]\nrequests = 1\narrival = {{ kind = \"constant\", rate = 1 }}\n\
                 prompt_tokens = {{ kind = \"fixed\", value = 8 }}\noutput_tokens = {{ kind = \"fixed\", value = 8 }}\n"
            )
        };
        let vllm = Scenario::from_toml(&src("engine = \"vllm\"\n"), "t").unwrap();
        let line = kv_lines(&vllm);
        assert!(
            line.contains("1,000 blocks × 16 tokens = 16,000 tokens")
                && line.contains("the sliding windows draw on these blocks too: vLLM 0.11 logs 8,000 tokens"),
            "{line}"
        );
        let own = Scenario::from_toml(&src(""), "t").unwrap();
        assert!(!kv_lines(&own).contains("sliding windows"), "{}", kv_lines(&own));
    }
}
