//! `servesim calibrate run` (sweep real kernels, fit, write a profile) and
//! `servesim calibrate import-vidur` (Vidur's measurements into the same format); `calibrate fit`
//! is `calibrate_fit.rs`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use servesim_calibrate::backend::cpu::CpuBackend;
use servesim_calibrate::backend::cuda::CudaBackend;
use servesim_calibrate::backend::Backend;
use servesim_calibrate::{fit, plan, sweep, vidur};
use servesim_sim::cost::profile::{ModelDims, Profile, ProfileMeta};
use servesim_sim::spec::ModelSpec;

use crate::error::{CliError, Result};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Sweep the ops of a model's decoder layer on a backend, fit tables, write a profile.
    Run(RunArgs),
    /// Import Vidur's profiling CSVs into a profile (keeping Vidur's op names).
    ImportVidur(ImportArgs),
    /// Build a profile from NVIDIA AIConfigurator's measured kernel database (no GPU needed).
    ImportAic(AicArgs),
    /// Fit the scenario's cost model to your deployment's measured runs (benchmark results,
    /// per-request files): correction factors with their ranges, written as a calibration file
    /// that `[cost] calibration` applies.
    Fit(super::calibrate_fit::FitArgs),
}

#[derive(clap::Args)]
pub(crate) struct AicArgs {
    /// The database's system (h100_sxm, h200_sxm, b200_sxm, a100_sxm, l40s, ...), or a servesim
    /// GPU preset (h100-sxm, ...).
    #[arg(long)]
    system: String,
    /// The engine whose kernels were measured: vllm, sglang or trtllm.
    #[arg(long)]
    framework: String,
    /// The engine version (default: the newest the database has for the system).
    #[arg(long)]
    version: Option<String>,
    /// A model preset (llama-3-8b, ...) or a TOML file with a [model] section like a scenario's.
    #[arg(long)]
    model: String,
    /// Tensor-parallel degrees, e.g. 1,2,4,8.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    tp: Vec<u32>,
    /// GEMM weights: bf16, fp8 (per-tensor), fp8-block, fp4 (NVFP4) or mxfp4 (MXFP4 experts, bf16
    /// GEMMs: the gpt-oss checkpoint).
    #[arg(long, default_value = "bf16")]
    weights: String,
    /// KV cache dtype: bf16 or fp8.
    #[arg(long, default_value = "bf16")]
    kv: String,
    /// The GEMM kernel, where the database has several for the dtype (default: the most measured).
    #[arg(long)]
    gemm_kernel: Option<String>,
    /// How tokens spread over the experts of MoE models, as the database measured it: balanced,
    /// power_law_1.01 or power_law_1.2 (AIConfigurator's own default, and servesim's).
    #[arg(long, default_value = servesim_sim::cost::DEFAULT_MOE_DISTRIBUTION)]
    moe_distribution: String,
    /// MoE models: whole experts per GPU (`--enable-expert-parallel`, `--ep`): the experts'
    /// table read at the database's expert-parallel rows (its expert-TP rows where it has none).
    #[arg(long)]
    expert_parallel: bool,
    /// The database: its systems/data folder, the aiconfigurator_core package, or an unpacked
    /// wheel. Default: $SERVESIM_AIC_DATA, else the installed aiconfigurator_core package.
    #[arg(long)]
    database: Option<PathBuf>,
    /// Profile to write (JSON).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendKind {
    /// The real CUDA kernels and cuBLAS on GPU 0 (needs an NVIDIA driver, NVRTC and cuBLAS 13).
    Cuda,
    /// The CPU reference ops (for CI and for trying the pipeline; times describe this CPU).
    Cpu,
}

#[derive(clap::Args)]
struct RunArgs {
    /// cuda or cpu.
    #[arg(long, value_enum)]
    backend: BackendKind,
    /// A model preset (llama-3-8b, ...) or a TOML file with a [model] section like a scenario's.
    #[arg(long)]
    model: String,
    /// Tensor-parallel degrees whose shard shapes to measure, e.g. 1,2.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    tp: Vec<u32>,
    /// Profile to write (JSON).
    #[arg(long)]
    out: PathBuf,
    /// Stop measuring after this long (e.g. 300s, 5m); what was measured is fitted.
    #[arg(long)]
    deadline: Option<String>,
    /// Measurements CSV, streamed as they are taken. Default: the profile's path with .csv.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Largest GEMM token count (default 16384 on cuda, 1024 on cpu).
    #[arg(long)]
    max_tokens: Option<u64>,
    /// Compare every CUDA kernel with its CPU reference first and write the log here (cuda only).
    #[arg(long)]
    check_log: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Measure only these ops, e.g. attn_decode,mlp_up_proj (default: every op of the layer).
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// No progress bar or summary.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
struct ImportArgs {
    /// Vidur's mlp.csv (per-op times by num_tokens and TP).
    #[arg(long)]
    mlp: PathBuf,
    /// Vidur's attention.csv (prefill and decode attention).
    #[arg(long)]
    attention: Option<PathBuf>,
    /// Vidur's all_reduce.csv (by size and GPU count).
    #[arg(long)]
    all_reduce: Option<PathBuf>,
    /// Vidur's cpu_overheads.csv (per-iteration CPU costs by batch size).
    #[arg(long)]
    cpu_overheads: Option<PathBuf>,
    /// GPU name for the metadata. Default: the folder after compute/ in the mlp path.
    #[arg(long)]
    gpu: Option<String>,
    /// Profile to write (JSON).
    #[arg(long)]
    out: PathBuf,
}

/// The notes a measured profile carries: what was measured, what was not, and what to know.
fn run_notes(outcome: &sweep::Outcome, backend: BackendKind) -> Vec<String> {
    let mut notes = vec![format!(
        "{} of {} planned points measured ({} distinct shapes) in {:.1} s: {:.2} points/s{}",
        outcome.measurements.len(),
        outcome.planned,
        outcome.timed,
        outcome.seconds,
        outcome.points_per_second(),
        if outcome.hit_deadline { "; stopped at the deadline" } else { "" }
    )];
    notes.extend(outcome.failed.iter().take(20).map(|f| format!("not measured: {f}")));
    notes.push("all_reduce not measured (one device): the simulator uses the roofline estimate for TP > 1".into());
    notes.push(
        "CPU overheads not measured (they belong to the serving engine): the simulator uses [cost] cpu_overhead_*"
            .into(),
    );
    if backend == BackendKind::Cuda && outcome.measurements.iter().any(|m| m.op.starts_with("attn_")) {
        notes.push(
            "attention timed with servesim's own kernels, slower than the engines' (docs/measurements.md compares \
             them with vLLM's on an H200; its prefill attention most): where your GPU is in AIConfigurator's \
             database, price attention from it (calibrate import-aic)"
                .into(),
        );
    }
    notes
}

/// The planned points of the ops `--ops` names (all when it names none); an op the layer does not
/// have is an error listing those it has.
fn only_ops(points: Vec<plan::Point>, ops: &[String]) -> Result<Vec<plan::Point>> {
    if ops.is_empty() {
        return Ok(points);
    }
    let mut known: Vec<&str> = points.iter().map(|p| p.op()).collect();
    known.sort_unstable();
    known.dedup();
    if let Some(bad) = ops.iter().find(|o| !known.contains(&o.as_str())) {
        return Err(CliError::input(format!(
            "--ops: this model's layer has no op {bad:?}; it has {}",
            known.join(", ")
        )));
    }
    Ok(points.into_iter().filter(|p| ops.iter().any(|o| o == p.op())).collect())
}

pub(crate) fn run(a: Args) -> Result<()> {
    match a.command {
        Sub::Run(r) => calibrate_run(r),
        Sub::ImportVidur(i) => import(i),
        Sub::ImportAic(a) => import_aic(a),
        Sub::Fit(f) => super::calibrate_fit::run(f),
    }
}

/// The `--kv` argument: the KV cache dtypes the database measured.
fn kv_dtype(kv: &str) -> Result<servesim_sim::spec::Dtype> {
    match kv {
        "bf16" => Ok(servesim_sim::spec::Dtype::Bf16),
        "fp8" => Ok(servesim_sim::spec::Dtype::Fp8),
        other => Err(CliError::input(format!("--kv: expected bf16 or fp8, got {other:?}"))),
    }
}

/// The GPU preset and kernel database system of `--system` (a preset's name or a system
/// name): an error naming the flag for a GPU without a preset, or one the database has not
/// measured.
fn database_system(name: &str) -> Result<(&'static servesim_sim::spec::GpuPreset, &'static str)> {
    let systems =
        || servesim_sim::spec::GPU_PRESETS.iter().filter_map(|p| p.database_system).collect::<Vec<_>>().join(", ");
    let preset = servesim_sim::spec::GpuPreset::find(name).ok_or_else(|| {
        CliError::input(format!("--system {name}: no GPU preset for it (servesim knows {})", systems()))
    })?;
    let system = preset.database_system.ok_or_else(|| {
        CliError::input(format!(
            "--system {name}: the kernel database has not measured this GPU (its systems: {})",
            systems()
        ))
    })?;
    Ok((preset, system))
}

fn import_aic(a: AicArgs) -> Result<()> {
    let files = crate::aic::locate(a.database.as_deref(), "--database")?;
    let model = load_model(&a.model)?;
    let weights = servesim_aic::Weights::parse(&a.weights).ok_or_else(|| {
        CliError::input(format!(
            "--weights: expected one of {}, got {:?}",
            servesim_aic::Weights::NAMES.join(", "),
            a.weights
        ))
    })?;
    crate::aic::moe_distribution(&a.moe_distribution)?;
    let kv = kv_dtype(&a.kv)?;
    let (preset, system) = database_system(&a.system)?;
    let command = format!(
        "servesim calibrate import-aic --system {} --framework {}{} --model {} --tp {} --weights {} --kv {} --moe-distribution {}{}",
        system,
        a.framework,
        a.version.as_deref().map_or(String::new(), |v| format!(" --version {v}")),
        a.model,
        a.tp.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","),
        weights.name(),
        a.kv,
        a.moe_distribution,
        if a.expert_parallel { " --expert-parallel" } else { "" }
    );
    let req = servesim_aic::Request {
        system: system.to_string(),
        framework: a.framework.clone(),
        version: a.version.clone(),
        model,
        tp: a.tp.clone(),
        weights,
        kv,
        gemm_kernel: a.gemm_kernel.clone(),
        gpu: preset.spec(),
        moe_distribution: a.moe_distribution.clone(),
        experts: true,
        expert_parallel: a.expert_parallel,
        package: files.package.clone(),
        command,
        date: utc_now(),
        servesim_version: env!("CARGO_PKG_VERSION").into(),
    };
    let db = servesim_aic::Db::new(&files);
    let profile =
        servesim_aic::import(&db, &req).map_err(|e| CliError::input(format!("{}: {e}", files.root.display())))?;
    write_profile(&a.out, &profile)?;
    let d = profile.meta.database.as_ref().expect("imported profiles name their database");
    outln!(
        "profile     {} ({} op tables, TP {:?}) from {} {} {} ({} files)",
        a.out.display(),
        profile.ops.len(),
        profile.meta.tp,
        d.system,
        d.framework,
        d.version,
        d.files.len()
    );
    for t in &profile.ops {
        let h = t.chosen_heldout().map_or("-".into(), |h| format!("{:.1}% / {:.1}%", h.median_pct, h.p90_pct));
        let src = t.source.as_ref();
        let tr = src
            .and_then(|s| s.transfer_error.as_ref())
            .map_or(String::new(), |e| format!("; shape read between sites: {:.1}% / {:.1}%", e.median_pct, e.p90_pct));
        outln!(
            "  {:<15} tp {:<2} {:>4} points  held-out {} ({}){tr}",
            t.name,
            t.tp.map_or("-".into(), |x| x.to_string()),
            t.points.len(),
            h,
            t.interp.name()
        );
    }
    Ok(())
}

/// Parses `300s`, `5m`, `1h` or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration> {
    let bad = || CliError::input(format!("--deadline: expected a duration like 300s or 5m, got {s:?}"));
    let (num, unit) = match s.trim().char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(bad()),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A TOML file holding a `[gpu]` section (a custom GPU), resolved like a scenario's.
pub(crate) fn load_gpu(path: &Path) -> Result<servesim_sim::spec::GpuSpec> {
    let src = crate::input::read_text(path, "--gpu file")?;
    servesim_sim::spec::gpu_from_toml(&src).map_err(|e| CliError::input(format!("--gpu {}: {e}", path.display())))
}

/// A preset name, or a TOML file holding a `[model]` section.
pub(crate) fn load_model(spec: &str) -> Result<ModelSpec> {
    if Path::new(spec).is_file() {
        let src = crate::input::read_text(Path::new(spec), "--model file")?;
        return servesim_sim::spec::model_from_toml(&src).map_err(|e| CliError::input(format!("--model {spec}: {e}")));
    }
    let section = servesim_sim::scenario::ModelSection { preset: Some(spec.to_string()), ..Default::default() };
    section.resolve("model").map_err(|e| CliError::input(format!("--model {spec}: {e}")))
}

/// UTC now as `YYYY-MM-DDTHH:MM:SSZ` (no calendar crate: days to civil date, Hinnant's method).
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

pub(crate) fn write_profile(path: &Path, p: &Profile) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let json = compact_number_arrays(&serde_json::to_string_pretty(p).expect("profile serialises"));
    // Never write a profile that servesim's own reader would refuse (a NaN, an empty table).
    if let Err(e) = Profile::from_json(&json) {
        return Err(CliError::input(format!(
            "{}: the profile built from these inputs would not read back: {e}",
            path.display()
        )));
    }
    crate::atomic::write(path, json + "\n").map_err(CliError::from)
}

/// Puts each innermost array of numbers (a table point) on one line: pretty JSON would give
/// every number its own line.
fn compact_number_arrays(pretty: &str) -> String {
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out = String::with_capacity(pretty.len() / 2);
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.trim_end().ends_with('[') {
            let mut j = i + 1;
            let mut nums = Vec::new();
            while j < lines.len() {
                let t = lines[j].trim().trim_end_matches(',');
                if t.parse::<f64>().is_ok() {
                    nums.push(t);
                    j += 1;
                } else {
                    break;
                }
            }
            if !nums.is_empty() && j < lines.len() && lines[j].trim().starts_with(']') {
                out.push_str(l.trim_end());
                out.push_str(&nums.join(", "));
                out.push_str(lines[j].trim());
                out.push('\n');
                i = j + 1;
                continue;
            }
        }
        out.push_str(l);
        out.push('\n');
        i += 1;
    }
    out.trim_end().to_string()
}

fn calibrate_run(a: RunArgs) -> Result<()> {
    let model = load_model(&a.model)?;
    if let Some(what) = model.unprofiled_layers() {
        return Err(CliError::input(format!(
            "--model {}: {} has {what}, which calibration does not measure yet (its kernels run plain \
             decoder layers); the roofline prices it",
            a.model, model.name
        )));
    }
    if a.tp.is_empty() || a.tp.iter().any(|&t| t == 0 || model.heads % t as u64 != 0) {
        return Err(CliError::input(format!(
            "--tp: every degree must divide the model's {} heads, got {:?}",
            model.heads, a.tp
        )));
    }
    let deadline = a.deadline.as_deref().map(parse_duration).transpose()?;
    let mut limits = match a.backend {
        BackendKind::Cuda => plan::Limits::gpu(&model),
        BackendKind::Cpu => plan::Limits::cpu(&model),
    };
    if let Some(t) = a.max_tokens {
        if t == 0 {
            return Err(CliError::input("--max-tokens: must be ≥ 1, got 0"));
        }
        limits.max_tokens = t;
    }
    let points = only_ops(plan::plan(&model, &a.tp, &limits), &a.ops)?;
    let mut backend: Box<dyn Backend> = match a.backend {
        BackendKind::Cpu => Box::new(CpuBackend::new(a.seed)),
        BackendKind::Cuda => {
            let b = CudaBackend::open(model.head_dim as usize, a.seed)
                .map_err(|e| CliError::Other(anyhow::anyhow!("--backend cuda: {e}")))?;
            if let Some(log) = &a.check_log {
                check_kernels(&b, &model, &a.tp, log, a.seed)?;
            }
            Box::new(b)
        }
    };
    let device = backend.device();
    let csv_path = a.csv.clone().unwrap_or_else(|| a.out.with_extension("csv"));
    if let Some(dir) = csv_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut csv = std::io::BufWriter::new(
        std::fs::File::create(&csv_path)
            .map_err(|e| CliError::Other(anyhow::anyhow!("cannot write {}: {e}", csv_path.display())))?,
    );
    writeln!(csv, "op,tp,x1,x2,time_ms,samples")?;
    let bar = !a.quiet && std::io::stderr().is_terminal();
    let mut io_err = None;
    let outcome = sweep::run(backend.as_mut(), &points, deadline, &mut |m, done, total| {
        let x2 = m.x.get(1).map_or(String::new(), |v| v.to_string());
        // Flushed per point, so an interrupted run keeps every measurement so far.
        if let Err(e) =
            writeln!(csv, "{},{},{},{},{:.6},{}", m.op, m.tp, m.x[0], x2, m.ms, m.samples).and_then(|_| csv.flush())
        {
            io_err.get_or_insert(e);
        }
        if bar {
            let width = 30;
            let filled = done * width / total.max(1);
            err!("\r[{}{}] {done}/{total} {:<26} tp {}", "#".repeat(filled), ".".repeat(width - filled), m.op, m.tp);
        }
    });
    if bar {
        errln!();
    }
    if let Some(e) = io_err {
        return Err(CliError::Other(anyhow::anyhow!("writing {}: {e}", csv_path.display())));
    }
    if outcome.measurements.is_empty() {
        return Err(CliError::Other(anyhow::anyhow!(
            "no point was measured: {}",
            outcome.failed.first().cloned().unwrap_or_default()
        )));
    }
    let notes = run_notes(&outcome, a.backend);
    let meta = ProfileMeta {
        source: format!("servesim calibrate run --backend {} --model {} --tp {:?}", device.backend, a.model, a.tp),
        backend: device.backend.clone(),
        gpu: device.name.clone(),
        driver: device.driver.clone(),
        clocks: device.clocks.clone(),
        dtype: device.dtype.clone(),
        model: ModelDims::from_spec(&model),
        tp: a.tp.clone(),
        date: utc_now(),
        servesim_version: env!("CARGO_PKG_VERSION").into(),
        notes,
        database: None,
    };
    let profile = fit::profile(meta, &outcome.measurements);
    write_profile(&a.out, &profile)?;
    if !a.quiet {
        outln!(
            "measured {} points ({} shapes) in {:.1} s on {}: {:.2} points/s{}",
            outcome.measurements.len(),
            outcome.timed,
            outcome.seconds,
            device.name,
            outcome.points_per_second(),
            if outcome.hit_deadline { " (deadline reached)" } else { "" }
        );
        outln!("profile     {} ({} op tables)", a.out.display(), profile.ops.len());
        outln!("csv         {}", csv_path.display());
    }
    Ok(())
}

/// Runs the GPU-vs-CPU checks at each TP's per-GPU head counts and writes the log; fails if any
/// kernel is off.
fn check_kernels(b: &CudaBackend, model: &ModelSpec, tps: &[u32], log: &Path, seed: u64) -> Result<()> {
    let mut text = format!("device: {} ({:?})\n", b.gpu.info.name, b.gpu.info);
    let mut failed = 0;
    for &tp in tps {
        let (q, kv) = ((model.heads / tp as u64) as usize, (model.kv_heads.div_ceil(tp as u64)) as usize);
        let checks =
            servesim_kernels::cuda::check_all(&b.gpu, q, kv, model.head_dim as usize, model.hidden as usize, seed)
                .map_err(|e| CliError::Other(anyhow::anyhow!("kernel check at tp {tp}: {e}")))?;
        for c in checks {
            let ok = c.passed();
            failed += !ok as usize;
            text += &format!(
                "{} tp {tp} {:<18} {:<50} error {:.3e} tolerance {:.1e}\n",
                if ok { "PASS" } else { "FAIL" },
                c.op,
                c.shape,
                c.error,
                c.tolerance
            );
        }
    }
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(log, &text)?;
    err!("{text}");
    if failed > 0 {
        return Err(CliError::Other(anyhow::anyhow!("{failed} kernel checks failed; see {}", log.display())));
    }
    Ok(())
}

fn read(p: &Path) -> Result<String> {
    crate::input::read_text(p, "input")
}

fn import(a: ImportArgs) -> Result<()> {
    let name = |p: &Path| p.display().to_string();
    let texts = [Some(&a.mlp), a.attention.as_ref(), a.all_reduce.as_ref(), a.cpu_overheads.as_ref()]
        .map(|p| p.map(|p| read(p)));
    let [mlp, attention, all_reduce, cpu] = texts.map(|t| t.transpose());
    let (mlp, attention, all_reduce, cpu) = (mlp?.expect("mlp is required"), attention?, all_reduce?, cpu?);
    // Vidur's layout: .../compute/<gpu>/<org>/<model>/mlp.csv.
    let parts: Vec<String> = a.mlp.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let gpu = a.gpu.clone().unwrap_or_else(|| match parts.iter().position(|c| c == "compute") {
        Some(i) if i + 1 < parts.len() => format!("{} (Vidur)", parts[i + 1]),
        _ => "unknown GPU (Vidur)".into(),
    });
    let model_name =
        a.mlp.parent().and_then(|p| p.file_name()).map_or("vidur model".into(), |n| n.to_string_lossy().into_owned());
    let (mlp_name, att_name, ar_name, cpu_name) = (
        name(&a.mlp),
        a.attention.as_deref().map(name),
        a.all_reduce.as_deref().map(name),
        a.cpu_overheads.as_deref().map(name),
    );
    let inputs = vidur::Inputs {
        mlp: vidur::Csv { name: &mlp_name, text: &mlp },
        attention: attention.as_deref().map(|t| vidur::Csv { name: att_name.as_deref().unwrap_or(""), text: t }),
        all_reduce: all_reduce.as_deref().map(|t| vidur::Csv { name: ar_name.as_deref().unwrap_or(""), text: t }),
        cpu_overheads: cpu.as_deref().map(|t| vidur::Csv { name: cpu_name.as_deref().unwrap_or(""), text: t }),
        model_name,
        gpu,
        date: utc_now(),
        servesim_version: env!("CARGO_PKG_VERSION").into(),
    };
    let profile = vidur::import(inputs).map_err(CliError::input)?;
    write_profile(&a.out, &profile)?;
    outln!("profile     {} ({} op tables, TP {:?})", a.out.display(), profile.ops.len(), profile.meta.tp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_arrays_go_on_one_line() {
        let v = serde_json::json!({"points": [[1.0, 2.5], [3.0, 4.0]], "name": "x", "e": []});
        let s = compact_number_arrays(&serde_json::to_string_pretty(&v).unwrap());
        assert!(s.contains("[1.0, 2.5],") && s.contains("[3.0, 4.0]\n"), "{s}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
    }

    #[test]
    fn durations_and_dates() {
        assert_eq!(parse_duration("300s").ok(), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("5m").ok(), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("90").ok(), Some(Duration::from_secs(90)));
        assert!(parse_duration("-1s").is_err() && parse_duration("5x").is_err() && parse_duration("s").is_err());
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'));
    }
}
