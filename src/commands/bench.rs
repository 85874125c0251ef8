//! `servesim bench`: how fast the simulator runs and how much memory a request costs.
//!
//! The scenario is fixed (below) so figures compare across builds and machines: a llama-3-8b
//! instance kept full by 256 closed-loop clients, so most work is decode token-steps. Speed is
//! the median of `--repeat` runs; memory per request is the growth of peak RSS between a run of
//! N requests and one of 2N, divided by N — the cost of one more simulated request, whatever
//! the fixed overheads.

use std::time::Instant;

use servesim_sim::{engine, Scenario};

use super::Format;
use crate::error::Result;

const BENCH_SCENARIO: &str = r#"
name = "bench"
seed = 1
[model]
preset = "llama-3-8b"
[gpu]
preset = "h100-sxm"
[scheduler]
max_num_seqs = 256
[workload]
requests = 1
arrival = { kind = "closed-loop", clients = 256, think_time_s = 0 }
prompt_tokens = { kind = "uniform", min = 64, max = 1024 }
output_tokens = { kind = "uniform", min = 32, max = 512 }
"#;

/// The space `--tune` searches on the shipped peak scenario: 5 GPUs × 3 TP degrees × 5
/// `max_num_seqs` × 4 token budgets × 2 batching policies × prefix caching off/on = 1,200
/// configurations.
const TUNE_SPACE: &str = r#"
[tune]
gpu = ["h100-sxm", "h200", "a100-80g", "l40s", "b200"]
tp = [1, 2, 4]
max_num_seqs = [32, 64, 128, 256, 512]
max_num_batched_tokens = [2048, 4096, 8192, 16384]
batching = ["chunked", "vllm-v1"]
prefix_caching = [false, true]
"#;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Simulated requests in the speed runs.
    #[arg(long, default_value_t = 200_000)]
    requests: u64,
    /// Speed runs; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Instead: `servesim tune` of the shipped peak scenario over 1,200 configurations (GPU, TP,
    /// batch limits, batching policy, prefix caching), pruned as `tune` prunes; prints its
    /// wall time and configurations per second.
    #[arg(long)]
    tune: bool,
}

fn scenario(requests: u64) -> Scenario {
    let mut s = Scenario::from_toml(BENCH_SCENARIO, "bench").expect("the bench scenario is valid");
    s.workload.requests = Some(requests);
    s
}

/// The same scenario priced by measured kernels (the shipped H100 vLLM profile).
fn kernel_scenario(requests: u64) -> Scenario {
    let text = format!("{BENCH_SCENARIO}[cost]\ndatabase = {{ framework = \"vllm\" }}\n");
    let res = crate::scenario_file::FileResources::new(std::path::Path::new(""));
    let mut s = Scenario::from_toml_in(&text, "bench", res).expect("the shipped profile prices the bench scenario");
    s.workload.requests = Some(requests);
    s
}

/// Median speed of `s` over `repeat` runs: (wall s, requests/s, token-steps/s, events/s, steps).
struct Speed {
    wall: Vec<f64>,
    rps: Vec<f64>,
    tps: Vec<f64>,
    eps: Vec<f64>,
    steps: u64,
}

impl Speed {
    fn new() -> Speed {
        Speed { wall: vec![], rps: vec![], tps: vec![], eps: vec![], steps: 0 }
    }

    fn run(&mut self, s: &Scenario) {
        let t0 = Instant::now();
        let out = engine::run(s);
        let dt = t0.elapsed().as_secs_f64();
        self.steps = out.summary.decode_token_steps;
        self.wall.push(dt);
        self.rps.push(out.summary.requests.finished as f64 / dt);
        self.tps.push(out.summary.decode_token_steps as f64 / dt);
        self.eps.push(out.events as f64 / dt);
    }

    fn medians(&mut self) -> (f64, f64, f64, f64) {
        (median(&mut self.wall), median(&mut self.rps), median(&mut self.tps), median(&mut self.eps))
    }
}

/// Peak resident set size of this process in bytes (Linux), if known.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `--tune`: one pruned search of [`TUNE_SPACE`] on the embedded peak scenario.
fn tune(format: Format) -> Result<()> {
    let (_, peak) = crate::scenario_file::EMBEDDED.iter().find(|(n, _)| *n == "peak").expect("peak is embedded");
    let b = super::tune::bench(&format!("{peak}{TUNE_SPACE}"), "peak")?;
    let rate = b.configurations as f64 / b.wall_s.max(1e-9);
    match format {
        Format::Json => {
            let v = serde_json::json!({
                "configurations": b.configurations, "pruned_by_floor": b.pruned_by_floor,
                "pruned_by_run": b.pruned_by_run, "searched": b.configurations - b.pruned_by_floor - b.pruned_by_run,
                "runs": b.runs, "simulated_requests": b.requests, "wall_s": b.wall_s,
                "configurations_per_s": rate, "recommended": b.recommended,
                "threads": rayon::current_num_threads(),
            });
            outln!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
        }
        Format::Table => {
            outln!(
                "servesim bench --tune: the shipped peak scenario over {} configurations ({} threads)",
                b.configurations,
                rayon::current_num_threads()
            );
            outln!("  wall time               {:>12.2} s", b.wall_s);
            outln!("  configurations/s        {rate:>12.1}");
            outln!(
                "  searched                {:>12}   (pruned: {} by cost floor, {} by one run)",
                b.configurations - b.pruned_by_floor - b.pruned_by_run,
                b.pruned_by_floor,
                b.pruned_by_run
            );
            outln!("  simulation runs         {:>12}   ({} simulated requests)", b.runs, b.requests);
            outln!("  cheapest                {:>12}", b.recommended.as_deref().unwrap_or("none"));
        }
    }
    Ok(())
}

pub(crate) fn run(a: Args) -> Result<()> {
    if a.tune {
        return tune(a.format);
    }
    let n = a.requests.max(1000);
    // Memory first, while the process is small: N then 2N requests.
    let rss0 = peak_rss_bytes();
    let small = engine::run(&scenario(n));
    let rss1 = peak_rss_bytes();
    drop(small);
    let big = engine::run(&scenario(2 * n));
    let rss2 = peak_rss_bytes();
    drop(big);
    let per_request = match (rss1, rss2) {
        (Some(a1), Some(a2)) => Some(a2.saturating_sub(a1) as f64 / n as f64),
        _ => None,
    };

    // Roofline and kernel-backed runs alternate, so a busy machine slows both alike.
    let (s, k) = (scenario(n), kernel_scenario(n));
    let (mut roof, mut kern) = (Speed::new(), Speed::new());
    for _ in 0..a.repeat.max(1) {
        roof.run(&s);
        kern.run(&k);
    }
    let steps = roof.steps;
    let (wall, rps, tps, eps) = roof.medians();
    let (kwall, krps, ktps, keps) = kern.medians();
    match a.format {
        Format::Json => {
            let v = serde_json::json!({
                "requests": n, "decode_token_steps": steps, "runs": a.repeat.max(1),
                "wall_s_median": wall, "requests_per_s": rps, "decode_token_steps_per_s": tps, "events_per_s": eps,
                "peak_rss_bytes": rss2, "rss_start_bytes": rss0, "bytes_per_request": per_request,
                "kernel_backed": {"decode_token_steps": kern.steps, "wall_s_median": kwall, "requests_per_s": krps,
                    "decode_token_steps_per_s": ktps, "events_per_s": keps, "slowdown_vs_roofline": kwall / wall},
            });
            outln!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
        }
        Format::Table => {
            outln!(
                "servesim bench: {n} requests, {steps} decode token-steps per run, median of {} runs (one thread)",
                a.repeat.max(1)
            );
            outln!("                              roofline   kernel-backed (shipped H100 vLLM profile)");
            outln!(
                "  wall time               {wall:>12.3} s {kwall:>12.3} s   ({:+.1}%)",
                (kwall / wall - 1.0) * 100.0
            );
            outln!("  simulated requests/s    {rps:>12.0}   {krps:>12.0}");
            outln!("  decode token-steps/s    {tps:>12.0}   {ktps:>12.0}");
            outln!("  events/s                {eps:>12.0}   {keps:>12.0}");
            if let (Some(p), Some(b)) = (rss2, per_request) {
                outln!("  peak RSS                {:>12.1} MiB", p as f64 / 1048576.0);
                outln!("  memory per request      {b:>12.1} bytes (peak RSS growth from {n} to {} requests)", 2 * n);
            }
        }
    }
    Ok(())
}
