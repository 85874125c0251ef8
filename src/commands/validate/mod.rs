//! `servesim validate`: how far the simulator's predictions are from executed runs.
//!
//! ```text
//!   runs (default)   capacity, then each load: the same scenario emulated (every iteration's
//!                    batch really executed on --backend, its measured time advancing simulated
//!                    time) vs predicted (profiled cost model, calibrated here) vs roofline
//!   --iterations     seeded mixed batches across the batch space: executed vs predicted
//!   --measured FILE  a real serving run's per-request file vs its requests replayed
//! ```

mod iterations;
mod measured;
mod recipes;
mod report;
mod runs;
mod silicon;
mod silicon_calibrated;

pub(crate) use report::in_flight_note;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use servesim_calibrate::backend::cpu::CpuBackend;
use servesim_calibrate::backend::cuda::CudaBackend;
use servesim_calibrate::backend::inpass::InPassBackend;
use servesim_calibrate::backend::Backend;
use servesim_calibrate::clock::Clock;
use servesim_calibrate::emulate::cpu::CpuExecutor;
use servesim_calibrate::emulate::cuda::CudaExecutor;
use servesim_calibrate::emulate::{Emulator, Executor};
use servesim_calibrate::{fit, plan, sweep};
use servesim_sim::cost::profile::{ModelDims, Profile, ProfileMeta};
use servesim_sim::cost::Profiled;
use servesim_sim::scenario::CostSpec;
use servesim_sim::Scenario;

use crate::error::{CliError, Result};
use crate::measured::MeasuredKind;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Scenario TOML file: its model, scheduler, workload (with `requests`) and SLOs (not with
    /// --silicon, whose rows are the scenarios).
    #[arg(long, required_unless_present = "silicon")]
    scenario: Option<PathBuf>,
    /// The scoreboard: AIConfigurator's silicon_sample.csv (measured end-to-end runs). Every row
    /// servesim can express is simulated as benchmarked; measured vs predicted TTFT and TPOT.
    #[arg(long, conflicts_with_all = ["scenario", "measured", "iterations", "backend"])]
    silicon: Option<PathBuf>,
    /// With --silicon: only rows whose column KEY equals VALUE (repeatable: all must hold).
    #[arg(long = "filter", value_name = "KEY=VALUE", requires = "silicon")]
    filters: Vec<String>,
    /// With --silicon: the kernel database (default: $SERVESIM_AIC_DATA, else the installed
    /// aiconfigurator_core package).
    #[arg(long, requires = "silicon")]
    database: Option<PathBuf>,
    /// With --silicon: rounds of the concurrency measured (requests = rounds × concurrency),
    /// from a start with all clients together; AIConfigurator's benchmark measured 20. Rows run
    /// by a published recipe (`--engine-limits auto`) take its client's count instead (10).
    #[arg(long, default_value_t = 20, requires = "silicon")]
    rounds: u32,
    /// With --silicon: prompts drawn from a pool of N distinct prompts (AIPerf's synthetic
    /// dataset holds 100 by default and picks one at random per request), with the engine's
    /// prefix cache on, so a repeated prompt is a cache hit. Default: every prompt distinct.
    #[arg(long, value_name = "N", requires = "silicon")]
    prompt_pool: Option<u32>,
    /// With --silicon: fit each engine's CPU overhead on the `fit` half of the rows (by a hash of
    /// their id) and report both halves with the fitted constants.
    #[arg(long, requires = "silicon")]
    fit_overhead: bool,
    /// With --silicon: fit a calibration per group of rows with the same values in these
    /// columns (e.g. model_path,system,backend,tp_size) on the group's two lowest concurrencies,
    /// and report it on the group's other rows beside the uncalibrated figures
    /// (silicon-calibrated.csv; `calibrated` in silicon.json).
    #[arg(long, value_delimiter = ',', value_name = "KEY", requires = "silicon", conflicts_with_all = ["prompt_pool", "staggered", "fit_overhead"])]
    calibrate_by: Vec<String>,
    /// With --silicon: start the clients evenly over one request's lifetime (as a first run with
    /// all of them starting together predicts it) instead of all at once as the benchmark does.
    #[arg(long, requires = "silicon")]
    staggered: bool,
    /// With --silicon: put each engine's API server in front of it (`[frontend] engine = ROW'S
    /// ENGINE`: serial tokenization per request, docs/scenario.md) instead of none.
    #[arg(long, requires = "silicon")]
    frontend: bool,
    /// With --silicon: schedule each row with its engine's own scheduler (`kind = "vllm-v1"` for
    /// vLLM rows, `"sglang"` for SGLang rows) instead of chunked batching.
    #[arg(long, requires = "silicon")]
    engine_schedulers: bool,
    /// With --silicon: the engines' launch settings. `generator`: the limits AIConfigurator's
    /// benchmark generator writes (token budget C + ISL + 1500); `defaults`: each engine's own
    /// defaults (8192 tokens on large GPUs); `auto`: a published recipe's flags and client for
    /// the rows whose image, day, model and search space match one (InferenceX's DeepSeek-R1
    /// SGLang and TensorRT-LLM recipes, its gpt-oss vLLM and TensorRT-LLM ones), the
    /// generator's for the other rows of AIConfigurator's benchmark campaigns, the defaults for
    /// the gap-analysis rows (docs/fidelity.md). silicon.csv's `limits` column says which each
    /// row ran.
    #[arg(long, value_enum, default_value = "auto", requires = "silicon")]
    engine_limits: silicon::Limits,
    /// With --silicon: the KV cache's dtype in the measured runs. `auto`: FP8 for vLLM and
    /// TensorRT-LLM rows with FP8 or FP4 weights (as AIConfigurator's quantization profiles and
    /// NVIDIA's ModelOpt checkpoints set it, and both engines follow under their default
    /// `auto`), BF16 for SGLang rows and the rest, a recipe's `--kv-cache-dtype` for the rows
    /// run by one; `bf16` or `fp8`: every row so. A row whose
    /// engine the database measured only with a BF16 cache runs BF16 and says so
    /// (docs/fidelity.md).
    #[arg(long, value_enum, default_value = "auto", requires = "silicon")]
    kv_cache: silicon::KvCache,
    /// With --silicon: how MoE rows' tokens spread over the experts, as the database measured
    /// it (`[cost] database` `moe_distribution`): balanced, power_law_1.01 or power_law_1.2.
    #[arg(long, default_value = servesim_sim::cost::DEFAULT_MOE_DISTRIBUTION, requires = "silicon")]
    moe_distribution: String,
    /// With --silicon: price every row by the roofline instead of the kernel database (the
    /// roofline's own error: the default error band of plans it prices, docs/fidelity.md).
    #[arg(long, requires = "silicon")]
    roofline: bool,
    /// With --silicon: also write the scenario each row ran, as servesim resolved it, into
    /// OUT/scenarios/LINE.toml (LINE: the row's line in the CSV), so that `servesim simulate
    /// --scenario` runs that row again with every output (requests.csv, timeseries.csv, the
    /// report).
    #[arg(long, requires = "silicon")]
    scenarios: bool,
    /// With --silicon: run the TensorRT-LLM rows with DP attention under TensorRT-LLM's
    /// attention-DP balancing as InferenceX's DeepSeek recipes set it (`attention_dp_config`
    /// enable_balance, timeout_iters 60, batching_wait_iters 0) instead of TensorRT-LLM's
    /// default (off): an assumption about how those rows were run (docs/fidelity.md).
    #[arg(long, requires = "silicon")]
    adp_balance: bool,
    /// With --silicon: the clients of the rows whose id and `silicon_concurrency` name another
    /// number than their `batch_size` × attention-DP ranks (30 rows of the sample, 29 of them
    /// of the gap analysis). `batch-size`: that product, AIConfigurator's reading (its
    /// batch_size is each worker's); `source`: the id's count, all on one instance. Each such
    /// row's note names both (docs/fidelity.md).
    #[arg(long, value_enum, default_value = "batch-size", requires = "silicon")]
    clients: silicon::Clients,
    /// What executes the emulated side: cpu (the CPU reference ops) or cuda (the CUDA kernels
    /// on GPU 0). Needed for runs and --iterations; not with --measured.
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Loads to validate, as fractions of the measured capacity.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.8,0.95")]
    loads: Vec<f64>,
    /// Iteration level: predicted vs executed time of seeded mixed batches instead of runs.
    #[arg(long)]
    iterations: bool,
    /// Batches for --iterations.
    #[arg(long, default_value_t = 90)]
    batches: usize,
    /// A measured per-request file of a real serving run (vLLM benchmark_serving JSON, AIPerf
    /// profile_export.jsonl, or a CSV such as servesim's requests.csv): its requests are
    /// replayed at their arrival times and the predictions compared with it.
    #[arg(long)]
    measured: Option<PathBuf>,
    /// Format of --measured (default: recognised from the content; a benchmark summary is
    /// compared with the benchmark re-created).
    #[arg(long, value_enum, default_value_t = MeasuredKind::Auto)]
    measured_format: MeasuredKind,
    /// Read the measured file's column (or JSON key) NAME as servesim's KEY (repeat the flag).
    #[arg(long, value_name = "KEY=NAME", value_parser = crate::measured::parse_column)]
    column: Vec<(String, String)>,
    /// Cost profile to predict with. Default: calibrated now on --backend (written to the
    /// output folder as profile.json); with --measured, the scenario's own cost model.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Requests per second that load 1.0 stands for, instead of measuring the capacity.
    #[arg(long)]
    capacity: Option<f64>,
    /// Executions of each emulated iteration; the median is its time. Default 1 for runs (their
    /// metrics average over hundreds of iterations), 3 for --iterations.
    #[arg(long)]
    repeat: Option<u32>,
    /// Clock of the cpu backend: thread (the emulating thread's CPU time, immune to other
    /// processes on a shared machine) or wall.
    #[arg(long, value_enum, default_value_t = ClockKind::Thread)]
    clock: ClockKind,
    /// How the calibration times each op: in-pass (inside forward passes of the emulator's own
    /// executor, read from its per-op record; the default on cpu) or isolated (each op alone
    /// on rotated data, as `servesim calibrate` does; the only one on cuda).
    #[arg(long, value_enum)]
    op_timing: Option<OpTiming>,
    /// Stop calibrating after this much calibration time in all (e.g. 300s, 10m); what was
    /// measured is fitted.
    #[arg(long, default_value = "600s")]
    calibration_deadline: String,
    /// Seed (overrides the scenario's): the workload, the random weights and batches.
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=servesim_sim::scenario::MAX_SEED))]
    seed: Option<u64>,
    /// Output folder. Default: outputs/<scenario name>-validate/.
    #[arg(long)]
    out: Option<PathBuf>,
    /// What to print on stdout (validate.json and validate.csv are written either way).
    #[arg(long, value_enum, default_value_t = OutFormat::Table)]
    format: OutFormat,
    /// No progress on stderr and nothing on stdout.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendKind {
    Cpu,
    Cuda,
}

impl BackendKind {
    fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ClockKind {
    Thread,
    Wall,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OpTiming {
    Isolated,
    InPass,
}

impl OpTiming {
    pub(crate) fn name(self) -> &'static str {
        match self {
            OpTiming::Isolated => "isolated",
            OpTiming::InPass => "in-pass",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutFormat {
    Table,
    Json,
    Csv,
}

/// `validate --silicon FILE`: the scoreboard.
fn run_silicon(a: &Args, file: &Path) -> Result<()> {
    if a.rounds == 0 {
        return Err(CliError::input("--rounds: must be ≥ 1, got 0"));
    }
    if a.prompt_pool == Some(0) {
        return Err(CliError::input("--prompt-pool: must be ≥ 1 prompts, got 0"));
    }
    let moe_distribution = crate::aic::moe_distribution(&a.moe_distribution)?;
    let database = a.database.as_ref().map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()));
    silicon::run(silicon::Options {
        file,
        filters: &a.filters,
        database: database.as_deref(),
        bench: silicon::Bench {
            rounds: a.rounds,
            prompt_pool: a.prompt_pool,
            staggered: a.staggered,
            frontend: a.frontend,
            engine_schedulers: a.engine_schedulers,
            engine_limits: a.engine_limits,
            kv_cache: a.kv_cache,
            moe_distribution,
            roofline: a.roofline,
            adp_balance: a.adp_balance,
            clients: a.clients,
        },
        fit_overhead: a.fit_overhead,
        calibrate_by: &a.calibrate_by,
        out: a.out.clone().unwrap_or_else(|| PathBuf::from("outputs").join("silicon-validate")),
        quiet: a.quiet,
        scenarios: a.scenarios,
    })
}

pub(crate) fn run(a: Args) -> Result<()> {
    if a.iterations && a.measured.is_some() {
        return Err(CliError::input("--iterations and --measured are different validations: give one"));
    }
    if a.repeat == Some(0) {
        return Err(CliError::input("--repeat: must be ≥ 1, got 0"));
    }
    if let Some(c) = a.capacity {
        if !(c.is_finite() && c > 0.0) {
            return Err(CliError::input(format!("--capacity: must be > 0 requests/s, got {c}")));
        }
    }
    if let Some(file) = &a.silicon {
        return run_silicon(&a, file);
    }
    let scenario = a.scenario.clone().expect("clap requires --scenario without --silicon");
    let mut s = crate::scenario_file::load(&scenario)?;
    if let Some(seed) = a.seed {
        s.set_seed(seed);
    }
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("outputs").join(format!("{}-validate", s.name)));
    if a.measured.is_some() {
        if a.backend.is_some() {
            return Err(CliError::input(
                "--backend: --measured compares the prediction with the file; nothing is executed",
            ));
        }
        return measured::run(&a, s, &out);
    }
    if s.groups.len() != 1 || s.groups[0].count != 1 {
        return Err(CliError::input(format!(
            "{}: cluster.instances: validate emulates one instance, got {}",
            scenario.display(),
            s.instances()
        )));
    }
    let Some(backend) = a.backend else {
        return Err(CliError::input("--backend: give cpu or cuda (what executes the batches)"));
    };
    if backend == BackendKind::Cuda && a.op_timing == Some(OpTiming::InPass) {
        return Err(CliError::input(
            "--op-timing in-pass: needs --backend cpu (the CUDA executor does not time its ops one by one)",
        ));
    }
    if a.iterations {
        iterations::run(&a, backend, s, &out)
    } else {
        runs::run(&a, backend, s, &out)
    }
}

impl Args {
    fn repeat(&self) -> u32 {
        self.repeat.unwrap_or(if self.iterations { 3 } else { 1 })
    }

    /// How the calibration times ops on `backend` (see `--op-timing`).
    fn op_timing(&self, backend: BackendKind) -> OpTiming {
        self.op_timing.unwrap_or(match backend {
            BackendKind::Cpu => OpTiming::InPass,
            BackendKind::Cuda => OpTiming::Isolated,
        })
    }

    fn clock(&self) -> Clock {
        match self.clock {
            ClockKind::Thread => Clock::Thread,
            ClockKind::Wall => Clock::Wall,
        }
    }

    fn progress(&self, msg: &str) {
        if !self.quiet {
            errln!("{msg}");
        }
    }
}

/// The executor of `backend` for the scenario's model, and what it is, for the report.
fn executor(a: &Args, backend: BackendKind, s: &Scenario) -> Result<Box<dyn Executor>> {
    let g = &s.groups[0];
    match backend {
        BackendKind::Cpu => {
            // The thread clock sees only this thread: the GEMM must not spread to others. Set
            // before the first GEMM, which reads it once.
            std::env::set_var("MATMUL_NUM_THREADS", "1");
            servesim_calibrate::clock::keep_heap_mapped();
            let dims = servesim_calibrate::emulate::Dims::of(&s.model, g.tp);
            let weights = 4 * dims.layers as u64 * dims.layer_weights() as u64;
            // Above 4 GiB of f32 weights one layer's weights serve every layer.
            let share = weights > 4 << 30;
            Ok(Box::new(CpuExecutor::new(&s.model, g.tp, share, a.clock(), s.seed)))
        }
        BackendKind::Cuda => {
            let e = CudaExecutor::open(&s.model, g.tp, s.seed)
                .map_err(|e| CliError::Other(anyhow::anyhow!("--backend cuda: {e}")))?;
            Ok(Box::new(e))
        }
    }
}

/// The emulator, warmed up on the scenario's largest batches.
fn emulator(a: &Args, backend: BackendKind, s: &Scenario) -> Result<Arc<Emulator>> {
    let exec = executor(a, backend, s)?;
    let emu = Arc::new(Emulator::new(exec, a.repeat()));
    let g = &s.groups[0];
    a.progress(&format!("emulator   {}", emu.describe()));
    emu.warm_up(g.scheduler.max_num_batched_tokens as u64, g.scheduler.max_num_seqs as u64, g.max_model_len.min(4096))
        .map_err(|e| CliError::Other(anyhow::anyhow!("emulator warm-up: {e}")))?;
    Ok(emu)
}

/// The calibration limits that cover the scenario's batches.
fn limits(s: &Scenario) -> plan::Limits {
    let g = &s.groups[0];
    let tokens = g.scheduler.max_num_batched_tokens as u64;
    let seqs = g.scheduler.max_num_seqs as u64;
    plan::Limits {
        max_tokens: tokens,
        max_context: g.max_model_len,
        max_batch: seqs,
        max_chunk: tokens.min(g.max_model_len),
        max_kv_tokens: seqs * g.max_model_len,
    }
}

/// Bytes streamed through before each timed calibration run: 8× this machine's private L2, so
/// an op starts with cold private caches, as it does inside a forward pass (the previous op
/// streamed its own weights through them).
const EVICT_BYTES: usize = 4 << 20;

/// Where a prediction's profile came from.
pub(crate) struct ProfileSource {
    pub path: PathBuf,
    /// How the calibration timed ops, when it was made here.
    pub op_timing: Option<OpTiming>,
    /// Seconds spent calibrating here, when it was.
    pub calibrated_s: Option<f64>,
}

/// The profile to predict with: `--profile`, or a calibration on the backend made here while
/// the emulation runs. On a shared machine the speed of the same code drifts by 5–15% over
/// minutes with the other processes' memory traffic, which the thread clock does not remove; so
/// the calibration walks its plan a few points at a time between emulated iterations, keeping
/// its time at [`CALIBRATION_SHARE`] of the emulation's, and each point's time is the median of
/// its passes. Both sides then see the machine in the same states.
///
/// A command that emulates several runs (capacity, then each load) calibrates in phases, one
/// per run: [`Predictor::phase`] completes the phase's passes (at least [`MIN_PASSES`]) and fits
/// a profile of that phase's measurements alone, so each run is predicted from the machine as
/// it was during that run; [`Predictor::finish`] fits one profile of every phase's measurements
/// (the pooled profile, what a single calibration over the whole command gives).
pub(crate) enum Predictor {
    Given(Box<Profile>, PathBuf),
    Calibrating(Box<Calibration>),
}

/// Calibration time per unit of emulated execution time while they interleave (a phase
/// needs [`MIN_PASSES`] passes whatever its length: as much of them as possible interleaved).
const CALIBRATION_SHARE: f64 = 1.0;
/// Passes over the plan a calibration makes at least (completed at the end if need be).
const MIN_PASSES: usize = 3;
/// Points measured per step between emulated iterations.
const STEP_POINTS: usize = 4;

/// A calibration point: op, TP degree, the bits of its axis values.
type PointKey = (String, u32, Vec<u64>);
/// Its axis values, and each pass's time (ms) with the phase it was measured in and the
/// samples behind it.
type PointTimes = (Vec<f64>, Vec<(usize, f64, u32)>);

pub(crate) struct Calibration {
    backend: Box<dyn Backend + Send>,
    device: servesim_calibrate::backend::Device,
    points: Vec<plan::Point>,
    /// The clock the deadline and the share are counted on (the emulation's).
    clock: Clock,
    deadline_ns: u64,
    spent_ns: u64,
    by_point: BTreeMap<PointKey, PointTimes>,
    /// Next point of the plan, complete passes so far, the current phase and its complete passes.
    cursor: usize,
    passes: usize,
    phase: usize,
    phase_passes: usize,
    /// Calibration time spent before the current phase, the emulator's execution time at its
    /// start and the latest one seen, ns.
    phase_start_ns: u64,
    phase_emulated_ns: u64,
    emulated_ns: u64,
    timed: usize,
    hit_deadline: bool,
    failed: Vec<String>,
    quiet: bool,
}

impl Calibration {
    /// A calibration of `points` on `backend` that has measured nothing yet; its time is read on
    /// `clock` and stops at `deadline_ns` in all.
    fn new(
        backend: Box<dyn Backend + Send>,
        device: servesim_calibrate::backend::Device,
        points: Vec<plan::Point>,
        clock: Clock,
        deadline_ns: u64,
        quiet: bool,
    ) -> Calibration {
        Calibration {
            backend,
            device,
            points,
            clock,
            deadline_ns,
            spent_ns: 0,
            by_point: BTreeMap::new(),
            cursor: 0,
            passes: 0,
            phase: 0,
            phase_passes: 0,
            phase_start_ns: 0,
            phase_emulated_ns: 0,
            emulated_ns: 0,
            timed: 0,
            hit_deadline: false,
            failed: Vec::new(),
            quiet,
        }
    }

    /// Measures the next `n` points of the plan (at most to the end of the pass).
    fn step(&mut self, n: usize) {
        if self.spent_ns >= self.deadline_ns {
            self.hit_deadline = true;
            return;
        }
        if self.cursor == 0 {
            // A new pass measures afresh.
            self.backend.forget();
        }
        let (i, j) = (self.cursor, (self.cursor + n).min(self.points.len()));
        let t0 = self.clock.now_ns();
        let o = sweep::run(self.backend.as_mut(), &self.points[i..j], None, &mut |_, _, _| {});
        self.spent_ns += self.clock.now_ns() - t0;
        self.timed += o.timed;
        self.failed.extend(o.failed);
        for m in o.measurements {
            let key = (m.op.clone(), m.tp, m.x.iter().map(|v| v.to_bits()).collect());
            let e = self.by_point.entry(key).or_insert_with(|| (m.x.clone(), Vec::new()));
            e.1.push((self.phase, m.ms, m.samples));
        }
        self.cursor = j % self.points.len();
        if self.cursor == 0 {
            self.passes += 1;
            self.phase_passes += 1;
            if !self.quiet {
                errln!(
                    "calibrate  pass {} of the {}-point plan done ({:.1} s of calibration so far)",
                    self.passes,
                    self.points.len(),
                    self.spent_ns as f64 * 1e-9
                );
            }
        }
    }

    /// Measures points until the phase's calibration time reaches its share of the phase's
    /// emulation time (`emulated_ns`: the emulator's total so far).
    fn keep_up(&mut self, emulated_ns: u64) {
        self.emulated_ns = emulated_ns;
        let phase_emulated = emulated_ns.saturating_sub(self.phase_emulated_ns);
        let target = self.phase_start_ns + (phase_emulated as f64 * CALIBRATION_SHARE) as u64;
        while self.spent_ns < target && !self.hit_deadline {
            self.step(STEP_POINTS);
        }
    }
}

impl Predictor {
    pub(crate) fn new(a: &Args, backend: BackendKind, s: &Scenario, emu: &Emulator) -> Result<Predictor> {
        if let Some(p) = &a.profile {
            let profile = crate::input::load_profile(p).map_err(CliError::input)?;
            return Ok(Predictor::Given(Box::new(profile), p.clone()));
        }
        let deadline = super::calibrate::parse_duration(&a.calibration_deadline).map_err(|_| {
            CliError::input(format!(
                "--calibration-deadline: expected a duration like 300s or 5m, got {:?}",
                a.calibration_deadline
            ))
        })?;
        let (b, clock): (Box<dyn Backend + Send>, Clock) = match backend {
            BackendKind::Cpu if a.op_timing(backend) == OpTiming::InPass => {
                let mut device = CpuBackend::new(s.seed).device();
                device.name += ", ops timed inside forward passes";
                // The emulator's own executor: the same weights and buffers. (A second executor
                // of the same model timed some ops 3–15% faster than the emulated one, which op
                // changing from run to run; why is not established.)
                let mut b = InPassBackend::new(emu.executor(), device, s.model.layers);
                b.reps = 1;
                (Box::new(b), a.clock())
            }
            BackendKind::Cpu => {
                let mut b = CpuBackend::new(s.seed);
                b.clock = a.clock();
                b.reps = 3;
                b.evict_bytes = EVICT_BYTES;
                (Box::new(b), a.clock())
            }
            BackendKind::Cuda => (
                Box::new(
                    CudaBackend::open(s.model.head_dim as usize, s.seed)
                        .map_err(|e| CliError::Other(anyhow::anyhow!("--backend cuda: {e}")))?,
                ),
                Clock::Wall,
            ),
        };
        let device = b.device();
        let points = plan::plan(&s.model, &[s.groups[0].tp as u32], &limits(s));
        a.progress(&format!(
            "calibrate  {} points per pass on {}, between the emulated iterations",
            points.len(),
            device.name
        ));
        Ok(Predictor::Calibrating(Box::new(Calibration::new(
            b,
            device,
            points,
            clock,
            deadline.as_nanos() as u64,
            a.quiet,
        ))))
    }

    /// Calibrates until its time is its share of `emulated_ns` of emulation (nothing with a
    /// given profile).
    pub(crate) fn keep_up(&mut self, emulated_ns: u64) {
        if let Predictor::Calibrating(c) = self {
            c.keep_up(emulated_ns);
        }
    }

    /// The profile of the phase that ends now (see [`Predictor`]): the given one, or the
    /// phase's passes completed (at least [`MIN_PASSES`]) and its measurements fitted, written to
    /// `out/profile.json` and `out/calibration.csv`. The next phase starts afresh.
    pub(crate) fn phase(
        &mut self,
        a: &Args,
        backend: BackendKind,
        s: &Scenario,
        out: &Path,
    ) -> Result<(Profile, ProfileSource)> {
        let c = match self {
            Predictor::Given(p, path) => {
                return Ok(((**p).clone(), ProfileSource { path: path.clone(), op_timing: None, calibrated_s: None }))
            }
            Predictor::Calibrating(c) => c,
        };
        if c.cursor != 0 && !c.hit_deadline {
            // Finish the pass under way first: a pass is what the phase's passes count.
            let left = c.points.len() - c.cursor;
            c.step(left);
        }
        while c.phase_passes < MIN_PASSES && !c.hit_deadline {
            c.step(c.points.len());
        }
        let phase = c.phase;
        let own = c.by_point.values().filter(|v| v.1.iter().any(|t| t.0 == phase)).count();
        let seconds = (c.spent_ns - c.phase_start_ns) as f64 * 1e-9;
        let note = format!(
            "phase {phase} of the command (one emulated run): {own} of {} planned points measured in it \
             ({} passes interleaved with that run's iterations, each point the median of its passes) in \
             {seconds:.1} s{}",
            c.points.len(),
            c.phase_passes,
            if own < c.by_point.len() {
                "; points it did not reach: the median of the other phases' passes"
            } else {
                ""
            }
        );
        let result = c.fit(a, backend, s, out, Some(phase), note, seconds);
        c.phase += 1;
        c.phase_passes = 0;
        c.phase_start_ns = c.spent_ns;
        c.phase_emulated_ns = c.emulated_ns;
        c.cursor = 0;
        result
    }

    /// The profile of the whole command: the given one, or every measurement fitted (written
    /// to `out/profile.json`, its points to `out/calibration.csv`).
    pub(crate) fn finish(
        self,
        a: &Args,
        backend: BackendKind,
        s: &Scenario,
        out: &Path,
    ) -> Result<(Profile, ProfileSource)> {
        let mut c = match self {
            Predictor::Given(p, path) => return Ok((*p, ProfileSource { path, op_timing: None, calibrated_s: None })),
            Predictor::Calibrating(c) => c,
        };
        while c.passes < MIN_PASSES && !c.hit_deadline {
            let left = c.points.len() - c.cursor;
            c.step(left);
        }
        let seconds = c.spent_ns as f64 * 1e-9;
        let note = format!(
            "{} of {} planned points measured ({} shape timings in {} passes interleaved with the emulated \
             iterations{}, each point the median of its passes) in {seconds:.1} s{}",
            c.by_point.len(),
            c.points.len(),
            c.timed,
            c.passes,
            if c.phase > 0 { format!(", over {} phases", c.phase) } else { String::new() },
            if c.hit_deadline { "; the deadline stopped it" } else { "" }
        );
        c.fit(a, backend, s, out, None, note, seconds)
    }
}

impl Calibration {
    /// Fits the measurements of `phase` (a point it did not measure: all of its measurements),
    /// or all of them, and writes the profile and its points to `out`.
    #[allow(clippy::too_many_arguments)]
    fn fit(
        &self,
        a: &Args,
        backend: BackendKind,
        s: &Scenario,
        out: &Path,
        phase: Option<usize>,
        note: String,
        seconds: f64,
    ) -> Result<(Profile, ProfileSource)> {
        let measurements: Vec<sweep::Measurement> = self
            .by_point
            .iter()
            .map(|((op, tp, _), (x, times))| {
                let of = |p: Option<usize>| -> Vec<&(usize, f64, u32)> {
                    times.iter().filter(|t| p.is_none_or(|p| t.0 == p)).collect()
                };
                let mut used = of(phase);
                if used.is_empty() {
                    used = of(None);
                }
                sweep::Measurement {
                    op: op.clone(),
                    tp: *tp,
                    x: x.clone(),
                    ms: servesim_calibrate::backend::median(used.iter().map(|t| t.1).collect()),
                    samples: used.iter().map(|t| t.2).sum(),
                }
            })
            .collect();
        if measurements.is_empty() {
            return Err(CliError::Other(anyhow::anyhow!(
                "calibration measured nothing: {}",
                self.failed.first().cloned().unwrap_or_else(|| "the deadline ended it first".into())
            )));
        }
        let mut csv = String::from("op,tp,x1,x2,time_ms,samples\n");
        for m in &measurements {
            let x2 = m.x.get(1).map_or(String::new(), |v| v.to_string());
            csv += &format!("{},{},{},{},{:.6},{}\n", m.op, m.tp, m.x[0], x2, m.ms, m.samples);
        }
        let meta = ProfileMeta {
            source: format!(
                "servesim validate --backend {} (clock {}, one thread{}) for scenario {}",
                backend.name(),
                if backend == BackendKind::Cpu { a.clock().name() } else { "cuda events" },
                match (backend, a.op_timing(backend)) {
                    (BackendKind::Cpu, OpTiming::InPass) => ", each op timed inside forward passes",
                    (BackendKind::Cpu, OpTiming::Isolated) => ", private caches evicted before each run",
                    _ => "",
                },
                s.name
            ),
            backend: self.device.backend.clone(),
            gpu: self.device.name.clone(),
            driver: self.device.driver.clone(),
            clocks: self.device.clocks.clone(),
            dtype: self.device.dtype.clone(),
            model: ModelDims::from_spec(&s.model),
            tp: vec![s.groups[0].tp as u32],
            date: super::calibrate::utc_now(),
            servesim_version: env!("CARGO_PKG_VERSION").into(),
            notes: vec![note],
            database: None,
        };
        let profile = fit::profile(meta, &measurements);
        std::fs::create_dir_all(out)?;
        let path = out.join("profile.json");
        super::calibrate::write_profile(&path, &profile)?;
        crate::atomic::write(&out.join("calibration.csv"), csv)?;
        Ok((profile, ProfileSource { path, op_timing: Some(a.op_timing(backend)), calibrated_s: Some(seconds) }))
    }
}

/// Installs `predictor` in the emulator: it calibrates between the emulated iterations.
fn interleave(emu: &Emulator, predictor: Predictor) -> Arc<Mutex<Predictor>> {
    let shared = Arc::new(Mutex::new(predictor));
    let p = shared.clone();
    emu.set_hook(Some(Box::new(move |ns| p.lock().expect("predictor lock").keep_up(ns))));
    shared
}

/// Takes the predictor back from the emulator.
fn take_back(emu: &Emulator, shared: Arc<Mutex<Predictor>>) -> Predictor {
    emu.set_hook(None);
    match Arc::try_unwrap(shared) {
        Ok(m) => m.into_inner().expect("predictor lock"),
        Err(_) => unreachable!("the emulator's hook held the only other reference"),
    }
}

/// The scenario priced by `profile` (checked against its model), and by the roofline model.
fn with_profile(s: &Scenario, profile: &Profile, path: &Path) -> Result<(Scenario, Scenario)> {
    let (mut p, mut r) = (s.clone(), s.clone());
    let shared = Arc::new(profile.clone());
    for (i, (gp, gr)) in p.groups.iter_mut().zip(r.groups.iter_mut()).enumerate() {
        profiled(s, i, profile, path)?;
        gp.profile = Some(shared.clone());
        gr.profile = None;
    }
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    set_profile_path(&mut p.resolved.cost, Some(abs.display().to_string()));
    set_profile_path(&mut r.resolved.cost, None);
    Ok((p, r))
}

/// Group `i`'s cost model priced by `profile` (checked against its model and TP degree).
pub(super) fn profiled(s: &Scenario, i: usize, profile: &Profile, path: &Path) -> Result<Profiled> {
    let g = &s.groups[i];
    let params = match &g.cost {
        CostSpec::Roofline(c) => g.scheduler.cpu.apply(&c.params()),
        CostSpec::Linear(_) => {
            return Err(CliError::input(format!(
                "--profile {}: group {} uses cost.kind = \"linear\"; a profile replaces the roofline model",
                path.display(),
                g.name
            )))
        }
    };
    Profiled::new(g.scheduler.kv_cache.model(&s.model), g.gpu.clone(), g.tp, params, profile)
        .map_err(|e| CliError::input(format!("--profile {}: {e}", path.display())))
}

/// Sets or clears the `[cost] profile` path of a resolved scenario's roofline model.
pub(super) fn set_profile_path(cost: &mut CostSpec, path: Option<String>) {
    if let CostSpec::Roofline(c) = cost {
        c.profile = path;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use clap::Parser;
    use servesim_calibrate::backend::{Device, Timing};

    use super::*;

    /// A backend whose every op takes the same time: the shared value, in µs.
    struct Fixed(Arc<AtomicU64>);

    impl Backend for Fixed {
        fn device(&self) -> Device {
            Device { backend: "fixed".into(), name: "fixed".into(), dtype: "f32".into(), ..Device::default() }
        }
        fn measure(&mut self, _: &plan::Shape) -> std::result::Result<Timing, servesim_calibrate::Error> {
            Ok(Timing { ms: self.0.load(Ordering::Relaxed) as f64 * 1e-3, samples: 1 })
        }
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    /// Column `i` of a phase's calibration.csv (each point once): 4 the time, 5 the samples.
    fn column(dir: &Path, i: usize) -> Vec<f64> {
        let csv = std::fs::read_to_string(dir.join("calibration.csv")).unwrap();
        csv.lines().skip(1).map(|l| l.split(',').nth(i).unwrap().parse().unwrap()).collect()
    }

    fn times(dir: &Path) -> Vec<f64> {
        column(dir, 4)
    }

    #[test]
    fn each_phase_is_fitted_from_its_own_passes_and_the_pool_from_all() {
        let s = Scenario::from_toml(
            "[model]\nname = \"t\"\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nhead_dim = 16\n\
             intermediate = 128\nvocab = 256\nmax_context = 256\n[gpu]\npreset = \"h100-sxm\"\n\
             [scheduler]\nmax_num_seqs = 4\nmax_num_batched_tokens = 64\nmax_model_len = 256\n[workload]\nrequests = 10\narrival = { kind = \"poisson\", rate = 1 }\n\
             prompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 10 }\n",
            "t",
        )
        .unwrap();
        let a = Cli::try_parse_from(["x", "--scenario", "t.toml", "--quiet"]).unwrap().args;
        let us = Arc::new(AtomicU64::new(1000));
        let points = plan::plan(&s.model, &[1], &limits(&s));
        let n = points.len();
        let c = Calibration::new(
            Box::new(Fixed(us.clone())),
            Fixed(us.clone()).device(),
            points,
            Clock::Wall,
            u64::MAX,
            true,
        );
        let mut p = Predictor::Calibrating(Box::new(c));
        let dir = std::env::temp_dir().join(format!("servesim-phases-{}", std::process::id()));
        let cpu = BackendKind::Cpu;

        // Phase 0 at 1 ms: three passes of its own.
        p.phase(&a, cpu, &s, &dir.join("p0")).expect("phase fitted");
        assert_eq!(times(&dir.join("p0")), vec![1.0; n]);
        // One sample per pass (the backend says so), three passes.
        assert_eq!(column(&dir.join("p0"), 5), vec![3.0; n]);
        // Phase 1 at 3 ms, half a pass interleaved, the rest completed when it ends: its profile
        // knows nothing of phase 0.
        us.store(3000, Ordering::Relaxed);
        if let Predictor::Calibrating(c) = &mut p {
            c.step(n / 2);
            assert_eq!(c.cursor, n / 2);
        }
        p.phase(&a, cpu, &s, &dir.join("p1")).expect("phase fitted");
        assert_eq!(times(&dir.join("p1")), vec![3.0; n]);
        // Phase 2 measures nothing (the deadline passed): each point falls back to the median
        // of all its passes, 1, 1, 1, 3, 3, 3 → 2.
        us.store(9000, Ordering::Relaxed);
        if let Predictor::Calibrating(c) = &mut p {
            c.deadline_ns = c.spent_ns;
            // Three passes in phase 1, the first begun by the half pass.
            assert_eq!((c.passes, c.phase, c.cursor), (6, 2, 0));
        }
        p.phase(&a, cpu, &s, &dir.join("p2")).expect("phase fitted");
        assert_eq!(times(&dir.join("p2")), vec![2.0; n]);
        // The pool: every measurement of every phase.
        let (_, pooled) = p.finish(&a, cpu, &s, &dir.join("all")).expect("pool fitted");
        assert_eq!(times(&dir.join("all")), vec![2.0; n]);
        assert_eq!(column(&dir.join("all"), 5), vec![6.0; n]);
        assert_eq!(pooled.path, dir.join("all").join("profile.json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
