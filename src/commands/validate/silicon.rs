//! `servesim validate --silicon FILE`: the public scoreboard. Every row of AIConfigurator's
//! `silicon_sample.csv` (measured end-to-end runs: model, system, engine and version, ISL/OSL,
//! concurrency, TP) that servesim can express is simulated as the benchmark ran it, and the
//! measured and predicted mean TTFT and TPOT are compared.
//!
//! ```text
//!   the benchmark (aiconfigurator generator/config/backend_templates/benchmark/bench_run.sh.j2):
//!     aiperf --concurrency C --num-requests 20·C --warmup-request-count 2·C,
//!     ISL and OSL fixed (stddev 0, ignore_eos)
//!   AIPerf (ai-dynamo/aiperf db4f639, aiperf/timing/credit_issuing_strategy.py, _execute_phases)
//!     runs the warm-up as its own phase and waits for every warm-up request to return before
//!     the profiling phase starts: that phase begins on an idle engine with all C clients
//!     sending at once (a semaphore of C, no delay between credits: request_rate_strategy.py)
//!   here: C closed-loop clients starting together, no think time, fixed ISL and OSL,
//!     rounds·C requests (the benchmark's 20·C), all of them measured; the warm-up leaves
//!     nothing behind in an engine without a prefix cache, so it is not simulated; mean TTFT
//!     and mean TPOT of the requests
//!   --prompt-pool N: AIPerf's synthetic dataset is 100 prompts (config_defaults.py,
//!     NUM_DATASET_ENTRIES), each request one of them at random (dataset_manager.py,
//!     _return_any_conversation); with the engine's prefix cache on (vLLM's and SGLang's
//!     default) a repeated prompt hits. Whether the measured runs had it on is not recorded,
//!     so both are reported; the pool starts cold (the warm-up's 2·C prompts are not cached)
//!   the engine: its default scheduler settings on the row's GPU (below), one instance at the
//!     row's TP, kernels from the database's newest version of the row's framework on its system
//! ```
//! Rows are split in two halves by a hash of their `id`: `--fit-overhead` fits the engine
//! overhead constants on the `fit` half and reports both halves, so a constant fitted on the
//! scoreboard is judged on rows it never saw.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use servesim_sim::memory::{sglang_chunked_prefill_size, sglang_mem_fraction_static, SglangServer};
use servesim_sim::metrics::Status;
use servesim_sim::scenario::{EngineLimits, EngineVersion, Resources, ServingEngine, VLLM_RESERVES_FULL_ISL_FROM};
use servesim_sim::spec::{Dtype, GpuPreset, GpuSpec, ModelPreset, ModelSpec};
use servesim_sim::Scenario;

use super::recipes::{recipe_of, speculative_note, Launch, Recipe, RowRun};
use crate::error::{CliError, Result};

/// One measured row.
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub line: usize,
    pub id: String,
    pub fields: BTreeMap<String, String>,
}

impl Row {
    fn get(&self, k: &str) -> &str {
        self.fields.get(k).map_or("", |s| s.as_str())
    }

    fn num(&self, k: &str) -> Option<f64> {
        self.get(k).trim().parse::<f64>().ok().filter(|v| v.is_finite())
    }

    /// Which half: `fit` or `report`.
    pub(super) fn half(&self) -> &'static str {
        // FNV-1a of the id: stable across runs, machines and row order.
        let mut h: u64 = 0xcbf29ce484222325;
        for b in self.id.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        if h.is_multiple_of(2) {
            "fit"
        } else {
            "report"
        }
    }
}

/// What a row becomes: a scenario, or why not.
#[derive(Clone, Debug, Default)]
pub(super) struct Case {
    pub model: &'static str,
    /// A MoE model (its experts split over the TP ranks).
    pub moe: bool,
    pub gpu: &'static str,
    pub system: String,
    pub framework: String,
    pub weights: &'static str,
    pub tp: u32,
    pub isl: u64,
    pub osl: u64,
    pub concurrency: u32,
    pub measured_ttft: f64,
    pub measured_tpot: f64,
    /// What servesim approximates for this row, in words (empty: nothing).
    pub note: String,
    /// Priced by the roofline: a row whose kernels the database lacks.
    pub roofline: bool,
    /// A model with windowed attention layers (gpt-oss), reported apart.
    pub windowed: bool,
    /// A model with latent attention (DeepSeek), reported apart.
    pub mla: bool,
    /// The row's note should the database lack its kernels and the roofline price it.
    pub roofline_note: String,
    /// The model's weight dtype for a roofline row (the database's GEMM name otherwise).
    pub weight_dtype: &'static str,
    /// The attention projections' dtype where it is not the model's rule
    /// (`model.attention_dtype`).
    pub attention_dtype: Option<&'static str>,
    /// Attention data-parallel ranks and expert parallelism over the `tp` GPUs.
    pub dp: u32,
    pub ep: bool,
    /// The row is from the gap analysis (`silicon_data_source` names a file of
    /// `aic-auto-gap-analysis`), not from AIConfigurator's benchmark campaigns.
    pub gap_analysis: bool,
    /// The KV cache's dtype when the database lacked the assumed one's kernels (None: as
    /// `--kv-cache` assumes, [`KvCache::dtype`]).
    pub kv_dtype: Option<&'static str>,
    /// The clients the row's id and `silicon_concurrency` name where they differ from
    /// `batch_size` × ranks (the `concurrency` run under `--clients batch-size`).
    pub source_clients: Option<u32>,
    /// The engine ran with its CPU work overlapping the GPU's (vLLM's asynchronous scheduling,
    /// its default from 0.14: [`async_scheduling`]).
    pub async_scheduling: bool,
    /// The engine's release, as the row's `backend_version` says (`None`: none readable).
    pub engine_version: Option<EngineVersion>,
    /// The published recipe whose image, days, model and search space the row's run matches
    /// ([`super::recipes`]), its settings under `--engine-limits auto`.
    pub recipe: Option<&'static Recipe>,
}

/// The settings a row's engine runs with under `--engine-limits`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum RowLimits {
    /// AIConfigurator's benchmark generator's ([`generator_settings`]).
    Generator,
    /// The engine's defaults ([`engine_settings`]).
    Defaults,
    /// A published recipe's launch flags ([`recipe_settings`]).
    Recipe(&'static Recipe),
}

impl RowLimits {
    /// As silicon.csv's `limits` column says it.
    pub(super) fn name(self) -> &'static str {
        match self {
            RowLimits::Generator => "generator",
            RowLimits::Defaults => "defaults",
            RowLimits::Recipe(_) => "recipe",
        }
    }
}

impl Case {
    /// The settings the row's engine runs with.
    pub(super) fn limits(&self, limits: Limits) -> RowLimits {
        match (limits, self.recipe) {
            (Limits::Auto, Some(r)) => RowLimits::Recipe(r),
            (Limits::Auto, _) if !self.gap_analysis => RowLimits::Generator,
            (Limits::Generator, _) => RowLimits::Generator,
            _ => RowLimits::Defaults,
        }
    }

    /// Requests decoding at a time (past their first token, on average) in the row's closed
    /// loop of C clients without think time, by Little's law: C × D / (TTFT + D), where D =
    /// (mean OSL − 1) × TPOT is a request's time after its first token and the mean OSL that of
    /// the row's client (its recipe's range of lengths, else the row's OSL). The same formula
    /// reads the measured and the predicted TTFT and TPOT (ms).
    pub(super) fn decoding(&self, bench: Bench, ttft_ms: f64, tpot_ms: f64) -> f64 {
        let mean_osl = match self.range_ratio(bench) {
            Some(ratio) => (shortest(self.osl, ratio) + self.osl) as f64 / 2.0,
            None => self.osl as f64,
        };
        let d = (mean_osl - 1.0).max(0.0) * tpot_ms;
        if ttft_ms + d > 0.0 {
            self.concurrency as f64 * d / (ttft_ms + d)
        } else {
            0.0
        }
    }

    /// The `--random-range-ratio` of the row's client: its recipe's, else none (fixed lengths).
    fn range_ratio(&self, bench: Bench) -> Option<f64> {
        match self.limits(bench.engine_limits) {
            RowLimits::Recipe(r) => Some(r.flags.range_ratio),
            _ => None,
        }
    }

    /// The KV cache's dtype the row runs with: the BF16 it fell back to; else under `--kv-cache
    /// auto` its recipe's `--kv-cache-dtype` where it runs a recipe that sets one; else as
    /// `--kv-cache` assumes (`bf16` or `fp8`: every row so, recipe rows too).
    pub(super) fn kv(&self, bench: Bench) -> &'static str {
        let recipe = match (bench.kv_cache, self.limits(bench.engine_limits)) {
            (KvCache::Auto, RowLimits::Recipe(r)) => r.flags.kv_dtype,
            _ => None,
        };
        self.kv_dtype.or(recipe).unwrap_or_else(|| bench.kv_cache.dtype(self))
    }
}

/// The model of a row's `model_path` (the shared checkpoint-name rule).
fn model_of(path: &str) -> Option<&'static str> {
    servesim_sim::spec::ModelPreset::for_checkpoint(path).map(|p| p.name())
}

/// A row's system, its GPU preset and its engine.
fn engine_of(r: &Row) -> std::result::Result<(String, &'static str, String), String> {
    let system = r.get("system").to_string();
    let gpu = GpuPreset::find(&system).ok_or_else(|| format!("system {system}: no servesim GPU preset"))?;
    let framework = r.get("backend").to_string();
    if !["vllm", "sglang", "trtllm"].contains(&framework.as_str()) {
        return Err(format!("backend {framework}: not an engine servesim models"));
    }
    Ok((system, gpu.name, framework))
}

/// The note of a row whose id gives no concurrency (`..._agg_4000x1000_c_tp8_...`, where the
/// other ids say `_c16_`): its `batch_size` is read as the concurrency, which nothing else in the
/// row confirms.
fn concurrency_note(r: &Row) -> Option<String> {
    r.id.contains("_c_").then(|| {
        format!(
            "the id gives no concurrency (\"_c_\"): batch_size {} read as the concurrency, unconfirmed",
            r.get("batch_size")
        )
    })
}

/// The clients a row's source names: `silicon_concurrency=N` in its `silicon_data_source`,
/// else the id's `_cN_`.
fn source_clients(r: &Row) -> Option<u32> {
    let source = r.get("silicon_data_source").split(';').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == "silicon_concurrency").then(|| v.trim().parse().ok()).flatten()
    });
    source
        .or_else(|| r.id.split('_').find_map(|part| part.strip_prefix('c').filter(|n| !n.is_empty())?.parse().ok()))
        .filter(|&n| n >= 1)
}

/// A row's benchmark (ISL, OSL, concurrency) and its measured mean TTFT and TPOT. A DP row's
/// batch_size is each rank's: the run's concurrency is batch_size × its ranks (AIConfigurator's
/// `global_bs = bs * attention_dp_size; concurrency = global_bs`, aic-core/src/aiconfigurator_core/
/// sdk/backends/base_backend.py at 095f58a51; the sample's ids agree: "…_c256_tp8_0_ep8_0…" has
/// batch_size 32 on 8 ranks).
fn measured_of(r: &Row) -> std::result::Result<(u64, u64, u32, f64, f64), String> {
    let int = |k: &str| r.num(k).filter(|v| *v >= 1.0 && v.fract() == 0.0).map(|v| v as u64);
    let (isl, osl) = (int("isl").ok_or("isl")?, int("osl").ok_or("osl")?);
    let ranks = int("attention_dp_size").unwrap_or(1);
    let concurrency = (int("batch_size").ok_or("batch_size (the concurrency)")? * ranks) as u32;
    let (Some(ttft), Some(tpot)) = (r.num("silicon_ttft_ms"), r.num("silicon_tpot_ms")) else {
        return Err("no measured TTFT or TPOT".into());
    };
    for (key, v) in [("silicon_ttft_ms", ttft), ("silicon_tpot_ms", tpot)] {
        if v <= 0.0 {
            return Err(format!("{key} {v}: a measured time must be > 0"));
        }
    }
    Ok((isl, osl, concurrency, ttft, tpot))
}

/// A row as a case, or the reason servesim cannot express it.
pub(super) fn case_of(r: &Row) -> std::result::Result<Case, String> {
    case_as(r, Clients::BatchSize)
}

/// A row's case with its clients counted as `clients` says where its sources disagree.
pub(super) fn case_as(r: &Row, clients: Clients) -> std::result::Result<Case, String> {
    let mut c = row_case(r)?;
    c.source_clients = source_clients(r).filter(|&n| n != c.concurrency);
    let (runs, other) = match (clients, c.source_clients) {
        (Clients::Source, Some(n)) => (n, c.concurrency),
        (_, n) => (c.concurrency, n.unwrap_or(c.concurrency)),
    };
    let clients_note = c.source_clients.map(|n| {
        let ranks = if c.dp > 1 { " × its attention-DP ranks" } else { "" };
        format!(
            "silicon_concurrency (else the id) names {n} clients, batch_size{ranks} {}: {runs} run (`--clients {}`), \
             {other} the other reading",
            c.concurrency,
            if runs == n { "source" } else { "batch-size" }
        )
    });
    c.concurrency = runs;
    c.engine_version = ServingEngine::version(r.get("backend_version"));
    c.async_scheduling = async_scheduling(&c);
    let run = RowRun {
        model: c.model,
        system: &c.system,
        framework: &c.framework,
        weights: c.weights,
        tp: c.tp,
        layout: (c.ep, c.dp > 1),
        lengths: (c.isl, c.osl),
        concurrency: c.concurrency,
        source: r.get("silicon_data_source"),
    };
    c.recipe = recipe_of(&run);
    for n in speculative_note(&run, c.dp > 1).into_iter().chain(concurrency_note(r)).chain(clients_note) {
        for notes in [&mut c.note, &mut c.roofline_note] {
            *notes = join_notes(notes, &n);
        }
    }
    Ok(c)
}

/// The release a vLLM row without a readable `backend_version` (none, or a nightly build's
/// hash) is taken as, an assumption: one before 0.14 — its CPU work in series with the GPU's,
/// the default limits of 0.9–0.27 ([`servesim_sim::scenario::vllm_limits`]). The database's
/// versioned vLLM rows name 0.11.2 to 0.19.0. Other engines' unversioned rows get their newest
/// rules read (SGLang's limits differ by release only below 60 GiB).
const UNVERSIONED_VLLM: EngineVersion = (0, 13, 0);

/// A row's engine release as its limits and CPU overlap follow it: its `backend_version`, else
/// for vLLM [`UNVERSIONED_VLLM`].
fn row_version(engine: ServingEngine, version: Option<EngineVersion>) -> Option<EngineVersion> {
    version.or((engine == ServingEngine::Vllm).then_some(UNVERSIONED_VLLM))
}

/// Whether a row's engine ran with its CPU work overlapping the GPU's by its version's default
/// ([`ServingEngine::schedules_async_by_default`]: vLLM from 0.14; the rows run have no
/// pipeline stages).
fn async_scheduling(c: &Case) -> bool {
    ServingEngine::from_name(&c.framework)
        .is_some_and(|e| row_version(e, c.engine_version).is_some_and(|v| e.schedules_async_by_default(v, 1)))
}

/// Whether a checkpoint's FP8 is block-scaled: Qwen's and MiniMax's own FP8 releases
/// (`quantization_config.weight_block_size` [128, 128] in their config.json, as shipped in
/// ai-dynamo/aiconfigurator 095f58a51 model_configs/): a row saying "fp8" for them ran
/// block-scaled kernels.
fn block_scaled(model_path: &str) -> bool {
    matches!(
        model_path,
        "Qwen/Qwen3-32B-FP8" | "Qwen/Qwen3-235B-A22B-FP8" | "Qwen/Qwen3-30B-A3B-FP8" | "MiniMaxAI/MiniMax-M2.5"
    )
}

/// A row as a case, as its columns say.
fn row_case(r: &Row) -> std::result::Result<Case, String> {
    if r.get("mode") != "agg" {
        return Err(format!("mode {}: disaggregated rows (prefill and decode workers) are not run", r.get("mode")));
    }
    let model =
        model_of(r.get("model_path")).ok_or_else(|| format!("model {}: no servesim preset", r.get("model_path")))?;
    let preset = ModelPreset::find(model).expect("mapped to a preset");
    let spec = ModelSpec::from_preset(preset, Dtype::Bf16, Dtype::Bf16);
    let dp_attention = r.num("attention_dp_size").is_some_and(|d| d > 1.0);
    if spec.arch.mla.is_some() || spec.arch.window.is_some() || (spec.experts > 1 && dp_attention) {
        return layout_case_of(r, model, &spec);
    }
    let (system, gpu, framework) = engine_of(r)?;
    let block_fp8 = block_scaled(r.get("model_path"));
    let weights = match r.get("gemm_quant_mode") {
        "fp8" if block_fp8 => "fp8-block",
        "fp8" => "fp8",
        "fp8_block" => "fp8-block",
        "nvfp4" => "fp4",
        "bfloat16" | "bf16" if r.get("precision") == "bf16" || r.get("precision").is_empty() => "bf16",
        // Neither given: the checkpoint's own dtype, bf16 for the models mapped above.
        "" if r.get("precision") == "bf16" || r.get("precision").is_empty() => "bf16",
        q => {
            return Err(format!(
                "GEMM quantization {q:?} (precision {}): not in servesim's weights (bf16, fp8, fp8-block, fp4)",
                r.get("precision")
            ))
        }
    };
    let int = |k: &str| r.num(k).filter(|v| *v >= 1.0 && v.fract() == 0.0).map(|v| v as u64);
    let tp = int("tp_size").ok_or_else(|| format!("tp_size {:?}", r.get("tp_size")))?;
    if int("pp_size") != Some(1) {
        return Err(format!("pp_size {}: pipeline-parallel rows are not run (the sample has none)", r.get("pp_size")));
    }
    if int("attention_dp_size").is_some_and(|d| d > 1) {
        return Err("attention data parallelism on a dense model: not run (DP attention ranks share MoE layers)".into());
    }
    if tp > 8 {
        return Err(format!("tp_size {tp}: more than one node"));
    }
    // MoE layers: the experts span the TP GPUs, by expert TP, expert parallelism or both; the
    // database's rows of the same split over as many GPUs price them (or of the other where the
    // engine measured only that: the same bytes and FLOPs per GPU under balanced routing).
    // Dense models' rows carry moe_tp 1 and mean nothing by it.
    let moe = spec.experts > 1;
    let ep = int("moe_ep_size").filter(|&e| moe && e > 1);
    let mut ep_note = None;
    if let Some(e) = ep {
        let t = int("moe_tp_size").unwrap_or(1);
        if t * e != tp {
            return Err(format!(
                "moe_tp_size {t} × moe_ep_size {e} ≠ tp_size {tp}: the experts do not span the attention's GPUs"
            ));
        }
        ep_note = Some(format!(
            "MoE TP {t} × EP {e} read from the database's expert-parallel rows over {tp} GPUs (its expert-TP rows \
             where it has none: the same bytes and FLOPs per GPU under balanced routing)"
        ));
    }
    if moe && ep.is_none() && int("moe_tp_size").is_some_and(|m| m != tp) {
        return Err(format!(
            "moe_tp_size {} ≠ tp_size {tp}: MoE TP apart from attention TP is not modelled",
            r.get("moe_tp_size")
        ));
    }
    let (isl, osl, concurrency, ttft, tpot) = measured_of(r)?;
    let mut note = Vec::new();
    if r.get("gemm_quant_mode").is_empty() {
        note.push("no precision given: bf16, the checkpoint's dtype");
    }
    let (weight_dtype, attention_dtype, dtype_note) = dense_weight_dtypes(weights);
    note.extend(dtype_note);
    if block_fp8 && r.get("gemm_quant_mode") == "fp8" {
        note.push("fp8 read as fp8-block: the checkpoint is block-scaled (weight_block_size 128×128)");
    }
    let mut note: Vec<String> = note.into_iter().map(str::to_string).collect();
    note.extend(ep_note);
    Ok(Case {
        model,
        moe,
        gpu,
        system,
        framework,
        weights,
        tp: tp as u32,
        isl,
        osl,
        concurrency,
        measured_ttft: ttft,
        measured_tpot: tpot,
        note: note.join("; "),
        weight_dtype,
        attention_dtype,
        dp: 1,
        ep: ep.is_some(),
        gap_analysis: gap_analysis(r),
        ..Default::default()
    })
}

/// A dense row's `model.weight_dtype` and `model.attention_dtype` for its GEMM weights
/// (`weights`), and the row's note on them. AIConfigurator's dense model (sdk/models/llama.py, 095f58a51) runs the QKV and
/// output GEMMs in the row's GEMM quantization as well as the FFN's, the LM head in bf16: an
/// NVFP4 row's attention projections are 4-bit too, unlike the gpt-oss and DeepSeek checkpoints
/// servesim's 4-bit rule follows.
fn dense_weight_dtypes(weights: &str) -> (&'static str, Option<&'static str>, Option<&'static str>) {
    match weights {
        "bf16" => ("bf16", None, None),
        "fp4" => (
            "nvfp4",
            Some("nvfp4"),
            Some("nvfp4 weights: every projection in 4 bits, as AIConfigurator's dense model prices them"),
        ),
        _ => ("fp8", None, None),
    }
}

/// Whether a row comes from the gap analysis rather than AIConfigurator's benchmark campaigns
/// (`db-dump/…` with a workflow run, or a dated campaign file): its runs' engine settings are
/// not the generator's (see [`Limits::Auto`]).
fn gap_analysis(r: &Row) -> bool {
    r.get("silicon_data_source").contains("aic-auto-gap-analysis")
}

/// A row of a model with MoE layouts of its own (MLA, windowed layers), with the row's attention
/// DP and expert parallelism. AIConfigurator's columns: `tp_size` is attention TP per DP rank,
/// `attention_dp_size` the ranks, `moe_tp_size` × `moe_ep_size` the GPUs the experts span.
/// Priced by the kernel database: under DP attention each rank's attention from the slice at its
/// own TP degree, the experts from the slice over all the row's GPUs.
fn layout_case_of(
    r: &Row,
    model: &'static str,
    spec: &servesim_sim::spec::ModelSpec,
) -> std::result::Result<Case, String> {
    let (system, gpu, framework) = engine_of(r)?;
    let int = |k: &str| r.num(k).filter(|v| *v >= 1.0 && v.fract() == 0.0).map(|v| v as u64);
    let tp_attn = int("tp_size").ok_or_else(|| format!("tp_size {:?}", r.get("tp_size")))?;
    let dp = int("attention_dp_size").unwrap_or(1);
    if int("pp_size") != Some(1) {
        return Err(format!("pp_size {}: pipeline-parallel rows are not run (the sample has none)", r.get("pp_size")));
    }
    let gpus = tp_attn * dp;
    if gpus > 8 {
        return Err(format!("tp_size × attention_dp_size {gpus}: more than one node"));
    }
    let (moe_tp, moe_ep) = (int("moe_tp_size").unwrap_or(1), int("moe_ep_size").unwrap_or(1));
    let mut hybrid = None;
    let ep = match (moe_tp, moe_ep) {
        (t, 1) if t == gpus => false,
        (1, e) if e == gpus => true,
        // Experts split over e groups and each sliced over t GPUs: under uniform routing each
        // GPU reads and multiplies what it would with whole experts on each of the t × e GPUs.
        (t, e) if t * e == gpus => {
            hybrid = Some(format!(
                "MoE TP {t} × EP {e} priced as EP over its {gpus} GPUs (the same bytes and FLOPs per GPU under uniform routing)"
            ));
            true
        }
        _ => {
            return Err(format!(
                "moe_tp_size {moe_tp} × moe_ep_size {moe_ep} on {gpus} GPUs: the experts do not span the GPUs"
            ))
        }
    };
    let mla = spec.arch.mla.is_some();
    let (weights, weight_dtype, mut note) = layout_weights(r, model, mla)?;
    let (isl, osl, concurrency, ttft, tpot) = measured_of(r)?;
    // From the database the experts are read as the engine's table has them (expert TP, or
    // expert parallel where only that was measured): the same per GPU under balanced routing
    // (`ep` stays the row's, for the roofline's layout).
    let mut roofline_note = note.clone();
    roofline_note.extend(hybrid.clone());
    if moe_ep > 1 {
        note.push(format!(
            "MoE TP {moe_tp} × EP {moe_ep} read from the database's expert-parallel rows over {gpus} GPUs (its \
             expert-TP rows where it has none: the same bytes and FLOPs per GPU under balanced routing)"
        ));
    } else {
        note.extend(hybrid);
    }
    Ok(Case {
        model,
        moe: true,
        gpu,
        system,
        framework,
        weights,
        tp: gpus as u32,
        isl,
        osl,
        concurrency,
        measured_ttft: ttft,
        measured_tpot: tpot,
        note: note.join("; "),
        roofline: false,
        windowed: spec.arch.window.is_some(),
        mla,
        roofline_note: roofline_note.join("; "),
        weight_dtype,
        dp: dp as u32,
        ep,
        gap_analysis: gap_analysis(r),
        ..Default::default()
    })
}

/// A latent-attention, windowed or DP-attention row's weights (the database's GEMM name and the
/// model's dtype), with what its checkpoint reading notes.
fn layout_weights(
    r: &Row,
    model: &'static str,
    mla: bool,
) -> std::result::Result<(&'static str, &'static str, Vec<String>), String> {
    let gpt_oss = model.starts_with("gpt-oss");
    let (weights, weight_dtype) = match r.get("gemm_quant_mode") {
        // DeepSeek's, Kimi's and MiniMax's FP8 checkpoints are block-scaled (weight_block_size
        // [128, 128] in their config.json): their GEMMs are the database's fp8_block ones.
        "fp8" | "fp8_block" if mla || block_scaled(r.get("model_path")) => ("fp8-block", "fp8"),
        "fp8" | "fp8_block" => ("fp8", "fp8"),
        // The gpt-oss checkpoint is MXFP4 (its config.json quantization_config); the rows say
        // nvfp4 for its 4-bit experts.
        "nvfp4" if gpt_oss => ("mxfp4", "mxfp4"),
        "nvfp4" => ("fp4", "nvfp4"),
        q => return Err(format!("GEMM quantization {q:?}: not a weight dtype servesim prices for {model}")),
    };
    let mut note: Vec<String> = Vec::new();
    if gpt_oss && r.get("gemm_quant_mode") == "nvfp4" {
        note.push("nvfp4 read as mxfp4: the published checkpoint".to_string());
    }
    if let Some(n) = ModelPreset::checkpoint_note(r.get("model_path")) {
        note.push(format!("{} as {model}: {n}", r.get("model_path")));
    }
    Ok((weights, weight_dtype, note))
}

/// A scenario document under construction, keys set by their dotted paths (servesim's own
/// keys: a path always sets).
#[derive(Default)]
pub(super) struct Doc(toml::Table);

impl Doc {
    fn set(&mut self, path: &str, value: impl Into<toml::Value>) -> &mut Doc {
        servesim_sim::scenario::edit::set_path(&mut self.0, path, value.into()).expect("a path of tables");
        self
    }

    /// The scheduler's limits and its batching kind, with the key-value pairs of the kind.
    fn scheduler(&mut self, seqs: u64, tokens: u64, batching: &[(&str, toml::Value)]) -> &mut Doc {
        self.set("scheduler.max_num_seqs", seqs as i64).set("scheduler.max_num_batched_tokens", tokens as i64);
        for (k, v) in batching {
            self.set(&format!("scheduler.batching.{k}"), v.clone());
        }
        self
    }

    /// The value at a dotted path, if set.
    #[cfg(test)]
    pub(super) fn at(&self, path: &str) -> Option<&toml::Value> {
        let (first, rest) = path.split_once('.').map_or((path, None), |(a, b)| (a, Some(b)));
        let v = self.0.get(first)?;
        match rest {
            None => Some(v),
            Some(r) => r.split('.').try_fold(v, |v, k| v.get(k)),
        }
    }
}

/// A batching kind and its settings, as [`Doc::scheduler`] takes them.
fn kind<'a>(kind: &str, more: &[(&'a str, toml::Value)]) -> Vec<(&'a str, toml::Value)> {
    let mut v = vec![("kind", toml::Value::from(kind))];
    v.extend_from_slice(more);
    v
}

/// vLLM V1's batching: its own kind with `own` — a request admitted only when its whole
/// prompt fits from the row's release 0.19.0 on (`reserve_full_isl`, as vLLM's default then) —
/// else servesim's chunked prefill with decodes first.
fn vllm_v1(own: bool, version: Option<EngineVersion>) -> Vec<(&'static str, toml::Value)> {
    if own {
        let gate = row_version(ServingEngine::Vllm, version).is_some_and(|v| v >= VLLM_RESERVES_FULL_ISL_FROM);
        kind("vllm-v1", &[("reserve_full_isl", gate.into())])
    } else {
        chunked("decode")
    }
}

/// vLLM's chunked prefill with decodes first, or SGLang's prefill first, as servesim's
/// `chunked` batching.
fn chunked(priority: &str) -> Vec<(&'static str, toml::Value)> {
    kind("chunked", &[("priority", priority.into())])
}

/// The engine's default scheduler settings on a GPU, as servesim keys: its own limits there at
/// `version` ([`ServingEngine::default_limits`]); vLLM V1 always chunks prefills, decodes first; SGLang
/// runs prefill batches first; TensorRT-LLM does not chunk ([`trtllm_settings`]; `osl`: the
/// row's output length, reserved at admission). With `own`, vLLM rows run `kind = "vllm-v1"`
/// and SGLang rows `kind = "sglang"`.
pub(super) fn engine_settings(
    doc: &mut Doc,
    framework: &str,
    (gpu, version): (&GpuSpec, Option<EngineVersion>),
    osl: u64,
    own: bool,
) {
    let engine = ServingEngine::from_name(framework).unwrap_or(ServingEngine::Trtllm);
    let EngineLimits { max_num_seqs: seqs, max_num_batched_tokens: tokens } =
        engine.default_limits(gpu, row_version(engine, version));
    let batching = match (engine, own) {
        (ServingEngine::Vllm, _) => vllm_v1(own, version),
        (ServingEngine::Sglang, true) => kind("sglang", &[]),
        (ServingEngine::Sglang, false) => chunked("prefill"),
        (ServingEngine::Trtllm, _) => return trtllm_settings(doc, seqs as u64, tokens as u64, osl),
    };
    doc.scheduler(seqs as u64, tokens as u64, &batching);
}

/// TensorRT-LLM's scheduler (PyTorch executor, `enable_chunked_prefill: false` by default):
/// `PyMicroBatchScheduler` (`tensorrt_llm/_torch/pyexecutor/scheduler/scheduler.py`) gives
/// generation requests their token, then whole prompts in order while they fit `tokens`,
/// stopping at the first that does not — servesim's continuous batching, mixed; its default
/// `GUARANTEED_NO_EVICT` capacity policy admits a request only with blocks for its whole
/// output (`reserve-max` with the row's output length).
fn trtllm_settings(doc: &mut Doc, seqs: u64, tokens: u64, osl: u64) {
    doc.scheduler(seqs, tokens, &kind("continuous", &[("priority", "mixed".into())]))
        .set("scheduler.kv_cache.allocation", "reserve-max")
        .set("scheduler.kv_cache.reserve_output_tokens", osl as i64);
}

/// The engine limits AIConfigurator's benchmark generator writes for an aggregated run at
/// concurrency `c` (its `max_batch_size`), as servesim keys: the rules of
/// `src/aiconfigurator/generator/rule_plugin/benchmark/{vllm,sglang,trtllm}.rule` and
/// `rule_plugin/vllm.rule`, and the TensorRT-LLM template `extra_engine_args.*.yaml.j2`
/// (ai-dynamo/aiconfigurator 095f58a51). Prefix caching stays off, as the generator leaves it
/// unless the workload has a shared prefix.
/// - vLLM: `max_num_batched_tokens` = C + ISL + 1500; `max_num_seqs` 512, or 2·C from C = 512;
///   V1 chunks prefills, decodes first.
/// - SGLang: `max_prefill_tokens` = ISL + 1500 under its chunked prefill size (SGLang's default
///   for the GPU at the row's release, [`ServingEngine::default_limits`]),
///   `enable_mixed_chunk`: the running requests decode in every prefill batch and their tokens
///   come off both budgets first
///   (`PrefillAdder`'s `mixed_with_decode_tokens`, python/sglang/srt/managers/schedule_policy.py,
///   sgl-project/sglang ad0119fd), which is servesim's chunked batching with decodes first.
/// - TensorRT-LLM: `max_num_tokens` = C + ISL + 1500 rounded up to 32, `max_batch_size` C,
///   `enable_chunked_prefill: false` ([`trtllm_settings`]).
///
/// With `own`, vLLM rows run `kind = "vllm-v1"` and SGLang rows `kind = "sglang"` with
/// `mixed_chunk`.
pub(super) fn generator_settings(
    doc: &mut Doc,
    framework: &str,
    (gpu, version): (&GpuSpec, Option<EngineVersion>),
    row: (u64, u64, u32),
    own: bool,
) {
    let (isl, osl, c) = row;
    let c64 = c as u64;
    match framework {
        "vllm" => {
            let seqs = if c < 512 { 512 } else { 2 * c64 };
            doc.scheduler(seqs, c64 + isl + 1500, &vllm_v1(own, version));
        }
        "sglang" => {
            let prefill = isl + 1500;
            let chunk = ServingEngine::Sglang.default_limits(gpu, version).max_num_batched_tokens as u64;
            let batching = if own {
                kind("sglang", &[("max_prefill_tokens", (prefill as i64).into()), ("mixed_chunk", true.into())])
            } else {
                chunked("decode")
            };
            doc.scheduler(1024, if own { chunk } else { prefill.min(chunk) }, &batching);
        }
        _ => trtllm_settings(doc, c64, (c64 + isl + 1500).div_ceil(32) * 32, osl),
    }
}

/// A recipe's launch flags ([`super::recipes`]) for a case's run. With `own`, the engine's own
/// scheduler kind.
/// - SGLang: `--max-running-requests` and `--chunked-prefill-size` as the scheduler's limits,
///   prefill batches first (SGLang's default without `--enable-mixed-chunk`; with `own`,
///   `kind = "sglang"` with `--max-prefill-tokens`), `--mem-fraction-static` under SGLang's
///   memory rule, `--scheduler-recv-interval` at the row's concurrency
///   ([`super::recipes::Sglang::recv_interval_at`]).
/// - vLLM: `--max-num-seqs` and `max-num-batched-tokens` as the scheduler's limits, V1's
///   chunked prefill with decodes first, `--gpu-memory-utilization` under vLLM's memory rule, and
///   `max_model_len = "auto"` for the scripts' `max-model-len`, which the rows do not record.
/// - TensorRT-LLM: the script's `--max_batch_size` (else TensorRT-LLM's default) and
///   `--max_num_tokens` without chunking ([`trtllm_settings`]), its `free_gpu_memory_fraction`
///   under TensorRT-LLM's memory rule, its batch waiting, and with DP attention its
///   `attention_dp_config` ([`super::recipes::Trtllm::at`]).
fn recipe_settings(doc: &mut Doc, r: &Recipe, c: &Case, gpu: &GpuSpec, own: bool) {
    match r.flags.launch {
        Launch::Sglang(f) => {
            let batching = if own {
                kind("sglang", &[("max_prefill_tokens", (f.max_prefill.unwrap_or(16384) as i64).into())])
            } else {
                chunked("prefill")
            };
            doc.scheduler(f.max_running, f.chunk, &batching)
                .set("memory.engine", "sglang")
                .set("memory.mem_fraction_static", f.mem_fraction_static);
            let interval = f.recv_interval_at(c.concurrency);
            if interval > 1 {
                doc.set("scheduler.recv_interval", interval as i64);
            }
        }
        Launch::Vllm(f) => {
            // The scripts' max-model-len (above ISL + OSL) is not kept: "auto", the longest the
            // pool holds, stands in, so that vLLM's start-up check passes as it did for the run.
            doc.scheduler(f.max_num_seqs_at(c.concurrency), f.max_num_batched_tokens, &vllm_v1(own, c.engine_version))
                .set("scheduler.max_model_len", "auto")
                .set("memory.engine", "vllm")
                .set("memory.gpu_memory_utilization", f.gpu_memory_utilization);
        }
        Launch::Trtllm(t) => {
            let at = t.at(c.isl, c.osl, c.concurrency, c.tp);
            let seqs = at.max_batch_size.unwrap_or(ServingEngine::Trtllm.default_limits(gpu, None).max_num_seqs as u64);
            trtllm_settings(doc, seqs, at.max_num_tokens, c.osl);
            // Under TensorRT-LLM's memory rule, as every TensorRT-LLM row (scenario_doc).
            doc.set("memory.gpu_memory_utilization", at.free_gpu_memory_fraction);
            if let Some((iters, ratio)) = at.batch_wait {
                doc.set("scheduler.batch_wait.timeout_iters", iters as i64)
                    .set("scheduler.batch_wait.max_tokens_ratio", ratio);
            }
            if c.dp > 1 {
                adp_balance(doc, at.adp_balance);
            }
        }
    }
}

/// Overrides of the engine overhead for fitting: (base µs, per-sequence µs, overlap).
pub(super) type Overhead = Option<(f64, f64, bool)>;

/// How the benchmark is simulated.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bench {
    /// Rounds of the concurrency: rounds × C requests, all measured.
    pub rounds: u32,
    /// Prompts drawn from this many distinct ones, prefix cache on; None: all distinct.
    pub prompt_pool: Option<u32>,
    /// Clients start evenly over a request's lifetime instead of together.
    pub staggered: bool,
    /// The engine's frontend (`[frontend] engine = ...`) in front of it.
    pub frontend: bool,
    /// The engine's own scheduler (vllm-v1, sglang) instead of chunked batching.
    pub engine_schedulers: bool,
    /// Whose scheduler limits the engines run with.
    pub engine_limits: Limits,
    /// The KV cache's dtype the runs are assumed to have had.
    pub kv_cache: KvCache,
    /// The experts' routing the MoE rows' kernels are read at.
    pub moe_distribution: &'static str,
    /// Every row priced by the roofline instead of the database (the roofline's own error).
    pub roofline: bool,
    /// TensorRT-LLM rows with DP attention under its attention-DP balancing
    /// ([`ADP_BALANCE_RECIPE`]).
    pub adp_balance: bool,
    /// Which count of clients runs where a row's sources disagree.
    pub clients: Clients,
}

/// TensorRT-LLM's `attention_dp_config` in InferenceX's DeepSeek-R1 recipes with DP attention
/// (SemiAnalysisAI/InferenceX 0a919c5f, `benchmarks/dsr1_fp8_b200_trt.sh`: `batching_wait_iters:
/// 0, enable_balance: true, timeout_iters: 60`), as TensorRT-LLM's own DeepSeek-V4 guide sets it
/// for throughput-oriented serving. That the scoreboard's DP rows ran so is an assumption: their
/// settings are not recorded (their images, TensorRT-LLM 1.2.0rc6 written `nvcr.io#…` as
/// InferenceX's Slurm runners write them, suggest InferenceX's runs).
const ADP_BALANCE_RECIPE: (u32, u32) = (60, 0);

/// TensorRT-LLM's attention-DP balancing with `timeout_iters` and `batching_wait_iters`.
fn adp_balance(doc: &mut Doc, (timeout, wait): (u32, u32)) {
    doc.set("cluster.attention_dp_config.enable_balance", true)
        .set("cluster.attention_dp_config.timeout_iters", timeout as i64)
        .set("cluster.attention_dp_config.batching_wait_iters", wait as i64);
}

impl Bench {
    /// How the rows were run, as silicon.json's keys.
    fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        let v = serde_json::json!({
            "rounds": self.rounds,
            "clients_start": if self.staggered { "staggered" } else { "together" },
            "prompt_pool": self.prompt_pool,
            "frontend": self.frontend,
            "engine_schedulers": self.engine_schedulers,
            "engine_limits": format!("{:?}", self.engine_limits).to_lowercase(),
            "kv_cache": format!("{:?}", self.kv_cache).to_lowercase(),
            "moe_distribution": self.moe_distribution,
            "roofline": self.roofline,
            "adp_balance": self.adp_balance,
            "clients": if self.clients == Clients::Source { "source" } else { "batch-size" },
        });
        v.as_object().expect("an object").clone()
    }
}

/// Whose scheduler limits a row's engine runs with (`--engine-limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Limits {
    /// By the row's source: the launch flags of the published recipe whose image, days,
    /// model and search space the row matches (InferenceX's, [`super::recipes`]); else the
    /// generator's for AIConfigurator's benchmark campaigns, the engines' defaults for rows of
    /// the gap analysis.
    Auto,
    /// AIConfigurator's benchmark generator ([`generator_settings`]).
    Generator,
    /// The engines' own defaults ([`engine_settings`]).
    Defaults,
}

/// How many clients a row's benchmark had, where its sources disagree (`--clients`): 29 rows
/// of the gap analysis in aiconfigurator-core 0.12.0's sample name 2 to 32 times their
/// `batch_size` × attention-DP ranks in their id and `silicon_concurrency`, one campaign row
/// fewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Clients {
    /// `batch_size` × the attention-DP ranks, as AIConfigurator's estimator reads the row (its
    /// batch_size is each worker's).
    BatchSize,
    /// The id's and `silicon_concurrency`'s count, the benchmark's own, on one instance.
    Source,
}

/// The KV cache's dtype a row's run is assumed to have had (`--kv-cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum KvCache {
    /// FP8 for vLLM and TensorRT-LLM rows with FP8 (per-tensor or block-scaled) or NVFP4
    /// weights, BF16 otherwise ([`KvCache::dtype`]); a recipe's own where a row runs one.
    Auto,
    /// Every row BF16.
    Bf16,
    /// Every row FP8.
    Fp8,
}

impl KvCache {
    /// The KV dtype of a case's run, an assumption (the rows do not record it):
    /// - AIConfigurator gives a quantized deployment an FP8 KV cache: its quantization profiles
    ///   map fp8 and nvfp4 to `kvcache_quant_mode` fp8 (`src/aiconfigurator/sdk/task_v1_compat.py`
    ///   `_PROFILE_TO_QUANT`), its checkpoint inference does so for fp8, fp8_block and nvfp4
    ///   (`aic-core/src/aiconfigurator_core/sdk/models/helpers.py`
    ///   `_infer_quant_modes_from_raw_config`), and its generator passes it to the engine
    ///   (`kv_cache_dtype`, `--kv-cache-dtype`), ai-dynamo/aiconfigurator 095f58a51. NVIDIA's
    ///   ModelOpt checkpoints carry `kv_cache_quant_algo: FP8` (all 21 FP8 and NVFP4 ones in
    ///   aiconfigurator-core 0.12.0's `model_configs/`), which the engines follow under
    ///   their default `auto` (vLLM `vllm/utils/torch_utils.py` `resolve_kv_cache_dtype_string`
    ///   at 959009b40; TensorRT-LLM `tensorrt_llm/_torch/model_config.py` at 1a0dc5f70).
    /// - SGLang rows in FP4 ran NVIDIA's ModelOpt NVFP4 checkpoints, whose `kv_cache_quant_algo`
    ///   FP8 SGLang follows under `auto` (`ModelRunner.configure_kv_cache_dtype`,
    ///   model_runner.py, the same in 0.5.3 to 0.5.10): FP8, as the generator's profile too.
    /// - Other SGLang rows stay BF16: SGLang's `auto` is the model's dtype for the FP8 and BF16
    ///   checkpoints they name (deepseek-ai's and Qwen's FP8 carry no KV scheme), and the database
    ///   has no FP8-KV attention for SGLang's dense models on H200.
    /// - MXFP4 (gpt-oss's own checkpoint) and BF16 weights: BF16, as AIConfigurator's profiles.
    pub(super) fn dtype(self, c: &Case) -> &'static str {
        let quantized = matches!(c.weights, "fp8" | "fp8-block" | "fp4");
        match self {
            KvCache::Auto if quantized && matches!(c.framework.as_str(), "vllm" | "trtllm") => "fp8",
            KvCache::Auto if c.weights == "fp4" && c.framework == "sglang" => "fp8",
            KvCache::Fp8 => "fp8",
            _ => "bf16",
        }
    }
}

/// A case's expert parallelism, DP attention ranks, and vLLM's asynchronous scheduling.
fn layout_and_cpu(doc: &mut Doc, c: &Case) {
    if c.ep {
        doc.set("cluster.ep", true);
    }
    if c.dp != 1 {
        doc.set("cluster.dp_attention", c.dp as i64);
    }
    if c.async_scheduling {
        doc.set("scheduler.cpu.overlap", true);
    }
}

/// The shortest length a client with `--random-range-ratio` `ratio` draws for `len`: ⌊ratio ×
/// len⌋, at least 1 (`sample_random_requests`, utils/bench_serving/benchmark_serving.py).
fn shortest(len: u64, ratio: f64) -> u64 {
    ((len as f64 * ratio).floor() as u64).max(1)
}

/// A case's prompt and output lengths: the row's own, or prompts from a pool of shared ones
/// (`--prompt-pool`); with a recipe's client (`range_ratio`), each uniform in
/// [⌊ratio × L⌋, L] ([`super::recipes::Flags::range_ratio`]).
fn lengths(doc: &mut Doc, c: &Case, bench: Bench, range_ratio: Option<f64>) {
    let mut length = |key: &str, len: u64| match range_ratio {
        Some(ratio) => {
            doc.set(&format!("workload.{key}.kind"), "uniform")
                .set(&format!("workload.{key}.min"), shortest(len, ratio) as i64)
                .set(&format!("workload.{key}.max"), len as i64);
        }
        None => {
            doc.set(&format!("workload.{key}.kind"), "fixed").set(&format!("workload.{key}.value"), len as i64);
        }
    };
    length("output_tokens", c.osl);
    match bench.prompt_pool {
        // A pooled prompt is the pool member (all but its last token, as a shared segment) and
        // one token of its own, so that a repeat shares every full block of the prompt.
        Some(n) if c.isl > 1 => {
            doc.set("workload.prompt_tokens.kind", "fixed")
                .set("workload.prompt_tokens.value", 1)
                .set("workload.prefix.system.groups", n as i64)
                .set("workload.prefix.system.tokens.kind", "fixed")
                .set("workload.prefix.system.tokens.value", (c.isl - 1) as i64)
                .set("scheduler.prefix_cache.enabled", true);
        }
        _ => length("prompt_tokens", c.isl),
    }
}

/// The scenario of a case, as servesim's scenario keys.
pub(super) fn scenario_doc(c: &Case, bench: Bench, database: Option<&Path>, overhead: Overhead, ramp_s: f64) -> Doc {
    let mut doc = Doc::default();
    doc.set("name", "silicon").set("seed", 1);
    doc.set("model.preset", c.model).set("model.weight_dtype", c.weight_dtype).set("model.kv_dtype", c.kv(bench));
    if let Some(a) = c.attention_dtype {
        doc.set("model.attention_dtype", a);
    }
    doc.set("gpu.preset", c.gpu).set("cluster.instances", 1).set("cluster.tp", c.tp as i64);
    layout_and_cpu(&mut doc, c);
    let gpu = GpuPreset::find(c.gpu).expect("cases have presets").spec();
    let mut rounds = bench.rounds;
    match c.limits(bench.engine_limits) {
        RowLimits::Generator => {
            // The generator's limits are each rank's (its max_batch_size is the row's batch_size).
            let per_rank = c.concurrency / c.dp.max(1);
            let at = (&gpu, c.engine_version);
            generator_settings(&mut doc, &c.framework, at, (c.isl, c.osl, per_rank), bench.engine_schedulers);
        }
        RowLimits::Defaults => {
            engine_settings(&mut doc, &c.framework, (&gpu, c.engine_version), c.osl, bench.engine_schedulers)
        }
        RowLimits::Recipe(r) => {
            recipe_settings(&mut doc, r, c, &gpu, bench.engine_schedulers);
            rounds = r.flags.rounds;
        }
    }
    sglang_memory(&mut doc, c, &gpu, bench);
    doc.set("workload.requests", (rounds * c.concurrency) as i64)
        .set("workload.arrival.kind", "closed-loop")
        .set("workload.arrival.clients", c.concurrency as i64)
        .set("workload.arrival.ramp_s", ramp_s);
    lengths(&mut doc, c, bench, c.range_ratio(bench));
    doc.set("cost.overhead", c.framework.as_str());
    if !c.roofline {
        doc.set("cost.database.framework", c.framework.as_str())
            .set("cost.database.system", c.system.as_str())
            .set("cost.database.weights", c.weights);
        if c.moe {
            doc.set("cost.database.moe_distribution", bench.moe_distribution);
        }
        if let Some(p) = database {
            doc.set("cost.database.path", p.display().to_string());
        }
    }
    if let Some((base, per_seq, overlap)) = overhead {
        doc.set("cost.cpu_overhead_base_us", base)
            .set("cost.cpu_overhead_per_seq_us", per_seq)
            .set("scheduler.cpu.overlap", overlap);
    }
    if bench.frontend {
        doc.set("frontend.engine", c.framework.as_str());
    }
    if bench.adp_balance && c.dp > 1 && c.framework == "trtllm" {
        adp_balance(&mut doc, ADP_BALANCE_RECIPE);
    }
    // TensorRT-LLM sizes its KV cache by its own rule, with its default free_gpu_memory_fraction
    // 0.9 (`KvCacheConfig`): not the 0.80 of the generator's template, under which campaign rows
    // that measured no queueing could not have fit their clients (docs/fidelity.md).
    if c.framework == "trtllm" {
        doc.set("memory.engine", "trtllm");
    }
    doc
}

/// An SGLang row without a recipe (whose script gives its own fraction) sizes its KV cache by
/// SGLang's default `mem_fraction_static` at the row's release (the newest read without one,
/// [`sglang_mem_fraction_static`]), at SGLang's own chunked prefill size for the GPU: neither the
/// engine's defaults nor the generator's template (`cli_args.*.j2`, ai-dynamo/aiconfigurator
/// 095f58a51) set `--chunked-prefill-size` or `--mem-fraction-static`.
fn sglang_memory(doc: &mut Doc, c: &Case, gpu: &GpuSpec, bench: Bench) {
    if c.framework != "sglang" || matches!(c.limits(bench.engine_limits), RowLimits::Recipe(_)) {
        return;
    }
    let server = SglangServer {
        version: c.engine_version,
        tp: c.tp as u64,
        pp: 1,
        dp_attention: c.dp.max(1) as u64,
        chunked_prefill_size: sglang_chunked_prefill_size(gpu, c.engine_version),
        mla: c.mla,
        cuda_graph_max_bs: None,
    };
    doc.set("memory.engine", "sglang").set("memory.mem_fraction_static", sglang_mem_fraction_static(gpu, &server));
}

/// A case's prediction: its requests' mean TTFT, TPOT and E2E (ms), the share of its
/// iteration time read from the database beyond the grid it measured, the tokens its KV cache
/// holds and the preemptions of the run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Predicted {
    pub ttft: f64,
    pub tpot: f64,
    pub e2e: f64,
    pub extrapolated: f64,
    pub kv_tokens: u64,
    pub preemptions: u64,
}

/// The prediction of a case's run.
pub(super) fn predict(s: &Scenario) -> std::result::Result<Predicted, String> {
    let out = servesim_sim::engine::try_run(s).map_err(|e| e.to_string())?;
    if let Some(st) = &out.summary.stopped {
        return Err(format!("the run stopped early ({})", st.reason));
    }
    let recs: Vec<_> = out.recorder.records.iter().filter(|r| r.status == Status::Finished).collect();
    if recs.is_empty() {
        // Say why: the statuses the requests ended in, most common first.
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for r in &out.recorder.records {
            let what = match r.status {
                Status::Rejected(why) => format!("rejected ({})", why.as_str()),
                s => s.as_str().to_string(),
            };
            *by.entry(what).or_default() += 1;
        }
        let mut by: Vec<(String, usize)> = by.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        if let [(what, _)] = by.as_slice() {
            return Err(format!("no request finished: every one was {what}"));
        }
        let of = out.recorder.records.len();
        let list: Vec<String> = by.iter().map(|(w, n)| format!("{n} of {of} {w}")).collect();
        return Err(format!("no request finished: {}", list.join(", ")));
    }
    let ttft = recs.iter().filter_map(|r| r.ttft()).map(|t| t.as_millis_f64()).sum::<f64>() / recs.len() as f64;
    let tpots: Vec<f64> = recs.iter().filter_map(|r| r.tpot_ms()).collect();
    let tpot = if tpots.is_empty() { 0.0 } else { tpots.iter().sum::<f64>() / tpots.len() as f64 };
    let e2e = recs.iter().filter_map(|r| r.e2e()).map(|t| t.as_millis_f64()).sum::<f64>() / recs.len() as f64;
    let extrapolated = out.summary.cost.fallbacks.iter().filter(|f| f.extrapolated).fold(0.0, |a, f| a + f.share);
    let kv_tokens = out.summary.kv.blocks_total * s.groups[0].scheduler.block_tokens();
    Ok(Predicted { ttft, tpot, e2e, extrapolated, kv_tokens, preemptions: out.summary.preemptions })
}

/// Reads the CSV; errors name the line.
pub(super) fn read(path: &Path) -> Result<Vec<Row>> {
    let text = crate::input::read_text(path, "--silicon file")?;
    let mut rd = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let headers: Vec<String> = rd
        .headers()
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?
        .iter()
        .map(str::to_string)
        .collect();
    for need in [
        "id",
        "backend",
        "model_path",
        "system",
        "isl",
        "osl",
        "batch_size",
        "tp_size",
        "silicon_ttft_ms",
        "silicon_tpot_ms",
    ] {
        if !headers.iter().any(|h| h == need) {
            return Err(CliError::input(format!("{}: no column {need} (is it silicon_sample.csv?)", path.display())));
        }
    }
    if let Some((i, h)) = headers.iter().enumerate().find(|(i, h)| headers[..*i].contains(h)) {
        return Err(CliError::input(format!(
            "{}: line 1: column {h:?} appears twice (columns {} and {}): which one holds the value is ambiguous",
            path.display(),
            headers.iter().position(|x| x == h).unwrap_or(0) + 1,
            i + 1
        )));
    }
    let mut rows = Vec::new();
    for (i, rec) in rd.records().enumerate() {
        let rec = rec.map_err(|e| CliError::input(format!("{}: line {}: {e}", path.display(), i + 2)))?;
        let fields: BTreeMap<String, String> = headers.iter().cloned().zip(rec.iter().map(str::to_string)).collect();
        let id = fields.get("id").cloned().unwrap_or_default();
        rows.push(Row { line: i + 2, id, fields });
    }
    Ok(rows)
}

/// One row's outcome.
#[derive(Clone, Debug)]
pub(super) struct Outcome {
    pub row: Row,
    pub case: std::result::Result<Case, String>,
    pub predicted: Option<std::result::Result<Predicted, String>>,
    /// The scenario the row ran, as resolved (with `--scenarios`).
    pub scenario: Option<String>,
}

impl Outcome {
    pub(super) fn errors(&self) -> Option<(f64, f64)> {
        let c = self.case.as_ref().ok()?;
        let p = self.predicted.as_ref()?.as_ref().ok()?;
        Some((
            (p.ttft - c.measured_ttft) / c.measured_ttft * 100.0,
            (p.tpot - c.measured_tpot) / c.measured_tpot * 100.0,
        ))
    }
}

/// The scenario of a case with its clients starting over `ramp_s`. A model the database covers
/// whose kernels it lacks for this row (gpt-oss in FP8, say) is priced by the roofline instead,
/// and the row's note says why.
pub(super) fn scenario_of(
    c: &mut Case,
    bench: Bench,
    database: Option<&Path>,
    overhead: Overhead,
    ramp_s: f64,
    resources: &Arc<crate::scenario_file::FileResources>,
) -> std::result::Result<Scenario, String> {
    let build = |c: &Case| {
        let res: Arc<dyn Resources> = resources.clone();
        let doc = scenario_doc(c, bench, database, overhead, ramp_s).0;
        servesim_sim::scenario::edit::from_table::<servesim_sim::scenario::ScenarioFile>(doc, "")
            .and_then(|file| Scenario::from_file_in(file, "silicon", res))
            .map_err(|e| e.to_string())
    };
    let mut e = match build(c) {
        Ok(s) => return Ok(s),
        Err(e) => e,
    };
    // An FP8 KV cache assumed where the database measured the engine's attention only with a
    // BF16 one: BF16, and the row says so.
    if c.kv_dtype.is_none() && c.kv(bench) == "fp8" && e.contains("(fp8 KV cache") {
        c.kv_dtype = Some("bf16");
        c.note = [c.note.as_str(), "KV cache bf16: the database has no FP8-KV attention for this engine and GPU"]
            .into_iter()
            .filter(|n| !n.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        e = match build(c) {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
    }
    let Some((_, why)) = e.split_once("cost.database: ").filter(|_| !c.roofline && (c.windowed || c.mla)) else {
        return Err(e);
    };
    // "<database root>: <what is missing>": the root is the machine's.
    let why = why.split_once(": ").map_or(why, |(_, w)| w);
    c.roofline = true;
    c.note = join_notes(&format!("roofline: not in the database ({why})"), &c.roofline_note);
    build(c)
}

/// Two notes of a row as one.
fn join_notes(a: &str, b: &str) -> String {
    [a, b].into_iter().filter(|n| !n.is_empty()).collect::<Vec<_>>().join("; ")
}

/// Runs the cases (in parallel; results in row order); with `keep`, each outcome holds the
/// scenario its row ran.
pub(super) fn run_cases(
    rows: &[Row],
    bench: Bench,
    database: Option<&Path>,
    overhead: &(dyn Fn(&Case) -> Overhead + Sync),
    (resources, keep): (&Arc<crate::scenario_file::FileResources>, bool),
) -> Vec<Outcome> {
    rows.par_iter()
        .map(|r| {
            let mut case = case_as(r, bench.clients);
            if bench.roofline {
                case = case.map(|c| Case {
                    note: join_notes("roofline: --roofline", &c.roofline_note),
                    roofline: true,
                    ..c
                });
            }
            let mut scenario = None;
            let predicted = case.as_mut().ok().map(|c| {
                let ov = overhead(c);
                let s = scenario_of(c, bench, database, ov, 0.0, resources)?;
                let (s, p) = match predict(&s) {
                    // Staggered: the clients started evenly over one request's lifetime, as
                    // the run with all of them starting together predicts it.
                    Ok(p) if bench.staggered => {
                        let s = scenario_of(c, bench, database, ov, p.e2e / 1e3, resources)?;
                        let p = predict(&s);
                        (s, p)
                    }
                    p => (s, p),
                };
                scenario = keep.then(|| s.resolved_toml());
                p
            });
            Outcome { row: r.clone(), case, predicted, scenario }
        })
        .collect()
}

/// The per-row files into `out`: silicon.csv, silicon-calibrated.csv (with a calibration),
/// and with `scenarios` each run row's scenario, as resolved, in scenarios/LINE.toml (LINE:
/// the row's line in the CSV), headed by the row's id and measured figures, for `servesim
/// simulate` to run it again.
fn write_rows(out: &Path, csv: String, calibrated: Option<String>, scenarios: Option<&[Outcome]>) -> Result<()> {
    std::fs::create_dir_all(out)?;
    crate::atomic::write(&out.join("silicon.csv"), csv)?;
    if let Some(c) = calibrated {
        crate::atomic::write(&out.join("silicon-calibrated.csv"), c)?;
    }
    let Some(outs) = scenarios else { return Ok(()) };
    let dir = out.join("scenarios");
    std::fs::create_dir_all(&dir)?;
    for x in outs {
        let Some(text) = &x.scenario else { continue };
        let head = format!(
            "# validate --silicon, line {} of the file: {}\n# measured: TTFT {} ms, TPOT {} ms (mean)\n",
            x.row.line,
            x.row.id,
            x.row.get("silicon_ttft_ms"),
            x.row.get("silicon_tpot_ms")
        );
        crate::atomic::write(&dir.join(format!("{}.toml", x.row.line)), head + text)?;
    }
    Ok(())
}

/// The per-row CSV (silicon.csv), and the count of rows not run by reason.
fn rows_csv(outs: &[Outcome], bench: Bench) -> (String, BTreeMap<String, usize>) {
    let mut csv = String::from(
        "line,id,half,model,system,framework,version,weights,kv_cache,tp,isl,osl,concurrency,measured_ttft_ms,predicted_ttft_ms,ttft_error_pct,measured_tpot_ms,predicted_tpot_ms,tpot_error_pct,limits,extrapolated_pct,kv_tokens,preemptions,measured_decoding,predicted_decoding,status\n",
    );
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for x in outs {
        let r = &x.row;
        let common = format!("{},{},{}", r.line, r.id, r.half());
        match (&x.case, &x.predicted) {
            (Err(why), _) => {
                *reasons.entry(why.split(':').next().unwrap_or(why).to_string()).or_default() += 1;
                csv += &format!("{common},,,,,,,,,,,,,,,,,,,,,,,\"not expressed: {}\"\n", why.replace('"', "'"));
            }
            (Ok(c), Some(p)) => {
                let ver = r.get("backend_version");
                // `run`: the columns extrapolated_pct, kv_tokens, preemptions, measured_decoding
                // and predicted_decoding.
                let measured_decoding = c.decoding(bench, c.measured_ttft, c.measured_tpot);
                let (pt, pp, et, ep, run, status) = match p {
                    Ok(p) => {
                        let (a, b) = x.errors().expect("predicted");
                        let (t, q) = (format!("{:.3}", p.ttft), format!("{:.4}", p.tpot));
                        let run = format!(
                            "{:.1},{},{},{measured_decoding:.1},{:.1}",
                            p.extrapolated * 100.0,
                            p.kv_tokens,
                            p.preemptions,
                            c.decoding(bench, p.ttft, p.tpot)
                        );
                        let recipe = match c.limits(bench.engine_limits) {
                            RowLimits::Recipe(r) => format!("launch flags and client of {}", r.at.source),
                            _ => String::new(),
                        };
                        // The pricing first (a status that starts "roofline" is a roofline row's).
                        (t, q, format!("{a:.2}"), format!("{b:.2}"), run, join_notes(&c.note, &recipe))
                    }
                    Err(e) => {
                        *reasons.entry(format!("failed: {e}")).or_default() += 1;
                        let none = String::new;
                        let run = format!(",,,{measured_decoding:.1},");
                        (none(), none(), none(), none(), run, format!("failed: {e}"))
                    }
                };
                csv += &format!(
                    "{common},{},{},{},{ver},{},{},{},{},{},{},{:.3},{pt},{et},{:.4},{pp},{ep},{},{run},\"{}\"\n",
                    c.model,
                    c.system,
                    c.framework,
                    c.weights,
                    c.kv(bench),
                    c.tp,
                    c.isl,
                    c.osl,
                    c.concurrency,
                    c.measured_ttft,
                    c.measured_tpot,
                    c.limits(bench.engine_limits).name(),
                    status.replace('"', "'")
                );
            }
            (Ok(_), None) => unreachable!("expressible rows are predicted"),
        }
    }
    (csv, reasons)
}

/// The median of a list (`None` when empty).
pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(servesim_sim::cost::profile::median_sorted(&v))
}

/// Median |error| of TTFT and TPOT over outcomes that pass `keep`.
pub(super) fn medians(outs: &[Outcome], keep: &dyn Fn(&Outcome) -> bool) -> (usize, Option<f64>, Option<f64>) {
    let errs: Vec<(f64, f64)> = outs.iter().filter(|o| keep(o)).filter_map(|o| o.errors()).collect();
    (errs.len(), median(errs.iter().map(|e| e.0.abs()).collect()), median(errs.iter().map(|e| e.1.abs()).collect()))
}

/// The arguments of the scoreboard.
pub(super) struct Options<'a> {
    pub file: &'a Path,
    pub filters: &'a [String],
    pub database: Option<&'a Path>,
    pub bench: Bench,
    pub fit_overhead: bool,
    /// Row columns grouping rows for a calibration each (`--calibrate-by`); empty: none.
    pub calibrate_by: &'a [String],
    pub out: PathBuf,
    pub quiet: bool,
    /// Write each run row's scenario into `out`/scenarios (`--scenarios`).
    pub scenarios: bool,
}

fn filter_rows(rows: Vec<Row>, filters: &[String]) -> Result<Vec<Row>> {
    let mut keep = rows;
    for f in filters {
        let (k, v) =
            f.split_once('=').ok_or_else(|| CliError::input(format!("--filter: expected KEY=VALUE, got {f:?}")))?;
        if !keep.is_empty() && !keep[0].fields.contains_key(k) {
            let cols: Vec<&String> = keep[0].fields.keys().collect();
            return Err(CliError::input(format!("--filter {f}: no column {k} (columns: {cols:?})")));
        }
        keep.retain(|r| r.get(k) == v);
    }
    Ok(keep)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}%"))
}

/// The scoreboard: prints the table, writes silicon.csv and silicon.json.
pub(super) fn run(o: Options) -> Result<()> {
    let rows = filter_rows(read(o.file)?, o.filters)?;
    if rows.is_empty() {
        return Err(CliError::input("--silicon: no rows (after --filter)"));
    }
    for k in o.calibrate_by {
        if !rows[0].fields.contains_key(k) {
            let cols: Vec<&String> = rows[0].fields.keys().collect();
            return Err(CliError::input(format!("--calibrate-by {k}: no column {k} (columns: {cols:?})")));
        }
    }
    let resources = crate::scenario_file::FileResources::new(Path::new(""));
    let mut fitted: BTreeMap<String, (f64, f64, bool)> = BTreeMap::new();
    if o.fit_overhead {
        for fw in ["vllm", "sglang", "trtllm"] {
            let fit_rows: Vec<Row> = rows
                .iter()
                .filter(|r| r.get("backend") == fw && r.half() == "fit" && case_of(r).is_ok())
                .cloned()
                .collect();
            if fit_rows.is_empty() {
                continue;
            }
            let mut best: Option<((f64, f64, bool), f64)> = None;
            for overlap in [true, false] {
                for base in (0..=16).map(|i| i as f64 * 250.0) {
                    for per_seq in [0.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0] {
                        let ov = (base, per_seq, overlap);
                        let outs = run_cases(&fit_rows, o.bench, o.database, &|_| Some(ov), (&resources, false));
                        let (n, t, p) = medians(&outs, &|_| true);
                        let (Some(t), Some(p)) = (t, p) else { continue };
                        let score = (t + p) / 2.0;
                        if !o.quiet {
                            errln!("fit {fw}: base {base} µs, per seq {per_seq} µs, overlap {overlap}: {n} rows, TTFT {t:.1}%, TPOT {p:.1}%");
                        }
                        if best.as_ref().is_none_or(|b| score < b.1) {
                            best = Some((ov, score));
                        }
                    }
                }
            }
            if let Some((ov, _)) = best {
                fitted.insert(fw.to_string(), ov);
            }
        }
    }
    let overhead = |c: &Case| fitted.get(&c.framework).copied();
    let outs = run_cases(&rows, o.bench, o.database, &overhead, (&resources, o.scenarios));

    let (csv, reasons) = rows_csv(&outs, o.bench);
    // Groups: (model, system, framework, weights).
    let mut groups: BTreeMap<(String, String, String, String), Vec<usize>> = BTreeMap::new();
    for (i, x) in outs.iter().enumerate() {
        if let (Ok(c), Some(Ok(_))) = (&x.case, &x.predicted) {
            groups
                .entry((c.model.to_string(), c.system.clone(), c.framework.clone(), c.weights.to_string()))
                .or_default()
                .push(i);
        }
    }
    let mut table = String::new();
    table += &format!(
        "{:<15} {:<10} {:<7} {:<9} {:>5} {:>11} {:>11}\n",
        "model", "system", "engine", "weights", "rows", "TTFT |err|", "TPOT |err|"
    );
    let mut group_json = Vec::new();
    for ((m, s, f, w), idx) in &groups {
        let sub: Vec<Outcome> = idx.iter().map(|&i| outs[i].clone()).collect();
        let (n, t, p) = medians(&sub, &|_| true);
        table += &format!("{m:<15} {s:<10} {f:<7} {w:<9} {n:>5} {:>11} {:>11}\n", pct(t), pct(p));
        group_json.push(serde_json::json!({"model": m, "system": s, "framework": f, "weights": w, "rows": n,
            "ttft_median_abs_error_pct": t, "tpot_median_abs_error_pct": p}));
    }
    // The headline is the dense models' vLLM + SGLang rows (the issue's target); MoE rows apart.
    let vs = |x: &Outcome, moe: bool| {
        x.case.as_ref().is_ok_and(|c| {
            (c.framework == "vllm" || c.framework == "sglang") && c.moe == moe && !c.roofline && !c.windowed && !c.mla
        })
    };
    let mut headline = Vec::new();
    for half in ["fit", "report", "all"] {
        let keep = |x: &Outcome| vs(x, false) && (half == "all" || x.row.half() == half);
        let (n, t, p) = medians(&outs, &keep);
        table += &format!(
            "vLLM + SGLang dense, {half:<6} half{}: {n} rows, median |error| TTFT {}, TPOT {}\n",
            if half == "all" { " (both)" } else { "" },
            pct(t),
            pct(p)
        );
        headline.push(serde_json::json!({"half": half, "rows": n, "ttft_median_abs_error_pct": t, "tpot_median_abs_error_pct": p}));
    }
    let (n, t, p) = medians(&outs, &|x: &Outcome| vs(x, true));
    if n > 0 {
        table +=
            &format!("vLLM + SGLang MoE, both halves: {n} rows, median |error| TTFT {}, TPOT {}\n", pct(t), pct(p));
    }
    let moe_json = serde_json::json!({"rows": n, "ttft_median_abs_error_pct": t, "tpot_median_abs_error_pct": p});
    // Windowed and MLA models priced by the database, and the rows priced by the roofline (DP
    // attention, kernels the database lacks), every engine, by half.
    let mut partition = |label: &str, pick: &dyn Fn(&Case) -> bool| {
        let mut json = Vec::new();
        for half in ["fit", "report", "all"] {
            let keep = |x: &Outcome| x.case.as_ref().is_ok_and(pick) && (half == "all" || x.row.half() == half);
            let (n, t, p) = medians(&outs, &keep);
            if n > 0 {
                table += &format!(
                    "{label}, all engines, {half:<6} half: {n} rows, median |error| TTFT {}, TPOT {}\n",
                    pct(t),
                    pct(p)
                );
            }
            json.push(serde_json::json!({"half": half, "rows": n, "ttft_median_abs_error_pct": t, "tpot_median_abs_error_pct": p}));
        }
        json
    };
    let windowed_json = partition("Windowed models (database)", &|c: &Case| c.windowed && !c.roofline);
    let mla_json = partition("MLA models (database)", &|c: &Case| c.mla && !c.roofline);
    let roofline_json = partition("Kernels the database lacks (roofline)", &|c: &Case| c.roofline);
    let expressed = outs.iter().filter(|x| x.errors().is_some()).count();
    table += &format!("rows {} in all: {expressed} run; not run:\n", outs.len());
    for (why, n) in &reasons {
        table += &format!("  {n:>5}  {why}\n");
    }
    for (fw, (b, s, ov)) in &fitted {
        table += &format!("fitted on the fit half: {fw} overhead {b} µs + {s} µs per sequence, overlap {ov}\n");
    }
    let calibrated = (!o.calibrate_by.is_empty())
        .then(|| super::silicon_calibrated::run(&outs, o.calibrate_by, o.bench, o.database, &resources, o.quiet));
    if let Some(c) = &calibrated {
        table += &c.table();
    }
    write_rows(&o.out, csv, calibrated.as_ref().map(|c| c.csv()), o.scenarios.then_some(&outs[..]))?;
    let mut json = serde_json::json!({
        "file": o.file.display().to_string(),
        "filters": o.filters,
        "rows": outs.len(),
        "run": expressed,
        "not_run": reasons,
        "groups": group_json,
        "vllm_sglang": headline,
        "vllm_sglang_moe": moe_json,
        "windowed_models": windowed_json,
        "mla_models": mla_json,
        "roofline_models": roofline_json,
        "fitted_overheads": fitted.iter().map(|(k, (b, s, ov))| serde_json::json!({"framework": k, "base_us": b, "per_seq_us": s, "overlap": ov})).collect::<Vec<_>>(),
    });
    for (k, v) in o.bench.json() {
        json[k] = v;
    }
    if let Some(c) = &calibrated {
        let (n, [t0, t1, p0, p1]) = c.medians(&|_| true);
        json["calibrated"] = serde_json::json!({
            "by": c.keys,
            "held_out_rows": n,
            "ttft_median_abs_error_pct": {"uncalibrated": t0, "calibrated": t1},
            "tpot_median_abs_error_pct": {"uncalibrated": p0, "calibrated": p1},
            "groups": c.groups,
        });
    }
    crate::atomic::write(&o.out.join("silicon.json"), serde_json::to_string_pretty(&json).expect("serialises") + "\n")?;
    if !o.quiet {
        out!("{table}");
        outln!("outputs     {}/ (silicon.csv, silicon.json)", o.out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fields: &[(&str, &str)]) -> Row {
        let mut base: BTreeMap<String, String> = [
            ("mode", "agg"),
            ("backend", "vllm"),
            ("system", "h200_sxm"),
            ("pp_size", "1"),
            ("isl", "1000"),
            ("osl", "100"),
            ("batch_size", "8"),
            ("silicon_ttft_ms", "100"),
            ("silicon_tpot_ms", "10"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in fields {
            base.insert(k.to_string(), v.to_string());
        }
        Row { line: 2, id: "x".into(), fields: base }
    }

    /// The scenario of a case priced by the roofline (no kernel database here).
    fn scenario(c: &Case, b: Bench) -> Scenario {
        let c = Case { roofline: true, ..c.clone() };
        let doc = scenario_doc(&c, b, None, None, 0.0).0;
        let file = servesim_sim::scenario::edit::from_table(doc, "").unwrap();
        Scenario::from_file(file, "t").unwrap()
    }

    fn int_at(d: &Doc, path: &str) -> i64 {
        d.at(path).and_then(toml::Value::as_integer).unwrap_or_else(|| panic!("no integer at {path}"))
    }

    fn str_at<'a>(d: &'a Doc, path: &str) -> &'a str {
        d.at(path).and_then(toml::Value::as_str).unwrap_or_else(|| panic!("no string at {path}"))
    }

    /// The benchmark as the scoreboard runs it by default, one round.
    fn bench() -> Bench {
        Bench {
            rounds: 1,
            prompt_pool: None,
            staggered: false,
            frontend: false,
            adp_balance: false,
            engine_schedulers: false,
            engine_limits: Limits::Auto,
            kv_cache: KvCache::Auto,
            moe_distribution: servesim_sim::cost::DEFAULT_MOE_DISTRIBUTION,
            roofline: false,
            clients: Clients::BatchSize,
        }
    }

    #[test]
    fn a_measured_time_that_cannot_be_is_set_aside_and_a_duplicated_column_refused() {
        let qwen = [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "1")];
        for (ttft, tpot, key) in [("-5", "10", "silicon_ttft_ms -5"), ("100", "0", "silicon_tpot_ms 0")] {
            let r = row(&[qwen[0], qwen[1], qwen[2], ("silicon_ttft_ms", ttft), ("silicon_tpot_ms", tpot)]);
            assert_eq!(case_of(&r).unwrap_err(), format!("{key}: a measured time must be > 0"));
        }
        let dir = std::env::temp_dir().join(format!("servesim-silicon-dup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.csv");
        let head =
            "id,backend,model_path,system,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms,silicon_ttft_ms";
        std::fs::write(&path, format!("{head}\nx,vllm,m,h100_sxm,1,1,1,1,5,5,6\n")).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.ends_with("s.csv: line 1: column \"silicon_ttft_ms\" appears twice (columns 9 and 11): which one holds the value is ambiguous"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_row_whose_id_gives_no_concurrency_is_flagged() {
        // silicon_sample.csv has 12 such ids, e.g.
        // qwen3_32b_qwen3_32b_gb200_trtllm_agg_4000x1000_c_tp1_epnone_1 (batch_size 144).
        let qwen = [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "1")];
        let mut r = row(&qwen);
        r.id = "qwen3_32b_qwen3_32b_gb200_trtllm_agg_4000x1000_c_tp1_epnone_1".into();
        let c = case_of(&r).unwrap();
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.note, "the id gives no concurrency (\"_c_\"): batch_size 8 read as the concurrency, unconfirmed");
        r.id = "qwen3_32b_qwen3_32b_h100_sxm_vllm_agg_4000x1000_c8_tp1_epnone_1".into();
        assert_eq!(case_of(&r).unwrap().note, "");
    }

    /// silicon_sample.csv line 907: qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_4000x1000_c8_tp2_epnone_11,
    /// `silicon_concurrency=8`, batch_size 2, TP 2, no attention DP.
    #[test]
    fn a_row_whose_sources_name_other_clients_runs_either_and_says_both() {
        let qwen =
            [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "2"), ("batch_size", "2")];
        let mut r = row(&qwen);
        r.id = "qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_4000x1000_c8_tp2_epnone_11".into();
        r.fields.insert(
            "silicon_data_source".into(),
            "source_file=Qwen_Qwen3-32B.csv; silicon_concurrency=8; measured=2026-03-23".into(),
        );
        let c = case_as(&r, Clients::BatchSize).unwrap();
        assert_eq!((c.concurrency, c.source_clients), (2, Some(8)));
        assert_eq!(
            c.note,
            "silicon_concurrency (else the id) names 8 clients, batch_size 2: 2 run (`--clients batch-size`), 8 the other \
             reading"
        );
        let s = case_as(&r, Clients::Source).unwrap();
        assert_eq!((s.concurrency, s.source_clients), (8, Some(8)));
        assert!(s.note.ends_with("8 run (`--clients source`), 2 the other reading"), "{}", s.note);
        // The scenario runs 8 closed-loop clients.
        let d = scenario_doc(&s, bench(), None, None, 0.0);
        assert_eq!(int_at(&d, "workload.arrival.clients"), 8);
        // silicon_concurrency goes before the id; a row whose sources agree has no note.
        r.fields.insert("silicon_data_source".into(), "silicon_concurrency=4".into());
        assert_eq!(case_as(&r, Clients::Source).unwrap().concurrency, 4);
        r.fields.insert("silicon_data_source".into(), "model=x".into());
        assert_eq!(case_as(&r, Clients::Source).unwrap().concurrency, 8);
        r.id = "qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_4000x1000_c2_tp2_epnone_11".into();
        let same = case_as(&r, Clients::Source).unwrap();
        assert_eq!((same.concurrency, same.source_clients, same.note.as_str()), (2, None, ""));
        // A DP row's batch_size is each rank's: 32 × 8 ranks = the id's 256, no note.
        let ds = row(&[
            ("model_path", "deepseek-ai/DeepSeek-R1"),
            ("gemm_quant_mode", "fp8"),
            ("backend", "sglang"),
            ("system", "b200_sxm"),
            ("tp_size", "1"),
            ("attention_dp_size", "8"),
            ("moe_tp_size", "1"),
            ("moe_ep_size", "8"),
            ("batch_size", "32"),
            ("silicon_data_source", "source_file=2026-03-25.csv; silicon_concurrency=256"),
        ]);
        let dp = case_as(&ds, Clients::Source).unwrap();
        assert_eq!((dp.concurrency, dp.source_clients), (256, None));
    }

    #[test]
    fn an_sglang_row_sizes_its_cache_by_sglangs_rule_at_its_release() {
        // Qwen3-32B in BF16 on one H100 under SGLang 0.5.8.post1 (the gap-analysis rows): the
        // rule of 0.5.3-0.5.9, 512 + 1.5 × 8192 + 2 × 256 + 1/8 × 1024 = 13,440 MiB of 81,559:
        // 0.835 (memory::tests); 0.5.1.post1's tiers: 0.874.
        let qwen = [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "1")];
        let fraction = |version: &str| {
            let r = row(&[
                qwen[0],
                qwen[1],
                qwen[2],
                ("backend", "sglang"),
                ("system", "h100_sxm"),
                ("backend_version", version),
            ]);
            let mut c = case_of(&r).unwrap();
            c.gap_analysis = true;
            let s = scenario(&c, bench());
            let g = &s.groups[0];
            (g.memory.terms.as_ref().map(|t| (t.engine, t.fraction)), g.scheduler.prefix_cache.enabled)
        };
        let sglang = servesim_sim::memory::MemoryEngine::Sglang;
        assert_eq!(fraction("0.5.8.post1"), (Some((sglang, 0.835)), false));
        assert_eq!(fraction("0.5.1.post1"), (Some((sglang, 0.874)), false));
        // Without a version, the newest release read (0.5.10's piecewise graphs: 0.830).
        assert_eq!(fraction(""), (Some((sglang, 0.830)), false));
        // A vLLM row keeps servesim's own rule.
        let c = case_of(&row(&[qwen[0], qwen[1], qwen[2], ("backend", "vllm")])).unwrap();
        assert!(scenario(&c, bench()).groups[0].memory.terms.is_none());
    }

    #[test]
    fn a_row_whose_requests_all_fail_says_how_they_ended() {
        // TensorRT-LLM's defaults (8,192 tokens, no chunked prefill) and a 9,000-token prompt:
        // every request is refused, as the engine refuses it.
        let qwen = [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "2")];
        let mut c = case_of(&row(&[qwen[0], qwen[1], qwen[2], ("backend", "trtllm"), ("isl", "9000")])).unwrap();
        c.gap_analysis = true;
        c.roofline = true; // no database here
        let err = predict(&scenario(&c, bench())).unwrap_err();
        assert_eq!(err, "no request finished: every one was rejected (prompt_exceeds_batch_tokens)");
    }

    #[test]
    fn quantized_vllm_and_tensorrt_llm_rows_and_sglang_nvfp4_rows_run_an_fp8_kv_cache_the_rest_bf16() {
        let kv = |backend: &str, model: &str, gemm: &str, assume: KvCache| {
            let c = case_of(&row(&[
                ("backend", backend),
                ("model_path", model),
                ("gemm_quant_mode", gemm),
                ("tp_size", "2"),
            ]))
            .unwrap();
            let mut b = bench();
            b.kv_cache = assume;
            let dtype = assume.dtype(&c);
            assert_eq!(str_at(&scenario_doc(&c, b, None, None, 0.0), "model.kv_dtype"), dtype);
            assert_eq!(scenario(&c, b).model.kv_dtype.name(), dtype);
            dtype
        };
        let llama = "meta-llama/Llama-3.1-70B";
        for (backend, model, gemm, want) in [
            ("vllm", llama, "fp8", "fp8"),
            ("trtllm", llama, "fp8", "fp8"),
            ("trtllm", llama, "nvfp4", "fp8"),
            ("vllm", "Qwen/Qwen3-32B-FP8", "fp8", "fp8"), // block-scaled
            ("sglang", llama, "fp8", "bf16"),
            ("sglang", llama, "nvfp4", "fp8"), // a ModelOpt NVFP4 checkpoint's own FP8 cache
            ("vllm", llama, "bfloat16", "bf16"),
            ("trtllm", llama, "bfloat16", "bf16"),
        ] {
            assert_eq!(kv(backend, model, gemm, KvCache::Auto), want, "{backend} {model} {gemm}");
            assert_eq!(kv(backend, model, gemm, KvCache::Bf16), "bf16", "{backend} {model} {gemm}");
            assert_eq!(kv(backend, model, gemm, KvCache::Fp8), "fp8", "{backend} {model} {gemm}");
        }
        // gpt-oss: a row in FP4 ran its own MXFP4 checkpoint: BF16, as AIConfigurator's mxfp4 profile.
        let oss = case_of(&row(&[
            ("backend", "trtllm"),
            ("model_path", "openai/gpt-oss-120b"),
            ("gemm_quant_mode", "nvfp4"),
            ("moe_quant_mode", "nvfp4"),
            ("tp_size", "1"),
        ]))
        .unwrap();
        assert_eq!((oss.weights, KvCache::Auto.dtype(&oss)), ("mxfp4", "bf16"));
    }

    #[test]
    fn a_dense_nvfp4_row_holds_every_projection_in_four_bits() {
        // AIConfigurator's dense model (sdk/models/llama.py, 095f58a51) runs the QKV, output,
        // gate/up and down GEMMs in the row's nvfp4, the LM head in bf16: llama-3.1-70b's
        // 68,451,041,280 projection parameters × 18/32 bytes + 2,102,665,216 others × 2 =
        // 42,709,041,152 bytes, plus its RoPE table, against 70,553,706,496 at FP8 size.
        let c = case_of(&row(&[
            ("backend", "trtllm"),
            ("model_path", "meta-llama/Llama-3.1-70B"),
            ("system", "b200_sxm"),
            ("precision", "fp4"),
            ("gemm_quant_mode", "nvfp4"),
            ("tp_size", "1"),
        ]))
        .unwrap();
        let d = scenario_doc(&c, bench(), None, None, 0.0);
        assert_eq!((str_at(&d, "model.weight_dtype"), str_at(&d, "model.attention_dtype")), ("nvfp4", "nvfp4"));
        let s = scenario(&c, bench());
        assert_eq!(s.model.weight_bytes(), 42_709_041_152);
        // An FP8 row keeps every weight in FP8 and names no attention dtype.
        let f = case_of(&row(&[
            ("backend", "trtllm"),
            ("model_path", "meta-llama/Llama-3.1-70B"),
            ("gemm_quant_mode", "fp8"),
            ("tp_size", "1"),
        ]))
        .unwrap();
        let d = scenario_doc(&f, bench(), None, None, 0.0);
        assert_eq!((str_at(&d, "model.weight_dtype"), d.at("model.attention_dtype")), ("fp8", None));
    }

    #[test]
    fn vllm_rows_from_0_14_schedule_asynchronously() {
        // vLLM's async scheduling is on by default from 0.14 (vllm-project/vllm PR #27614): its
        // rows' CPU work overlaps the GPU's; older, unversioned and other engines' rows do not.
        let qwen = [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "2")];
        let at = |backend: &str, version: &str| {
            let c = case_of(&row(&[qwen[0], qwen[1], qwen[2], ("backend", backend), ("backend_version", version)]))
                .unwrap();
            let overlap = scenario(&c, bench()).groups[0].scheduler.cpu.overlap;
            (c.async_scheduling, overlap)
        };
        assert_eq!(at("vllm", "0.15.1"), (true, Some(true)));
        assert_eq!(at("vllm", "0.18.0"), (true, Some(true)));
        assert_eq!(at("vllm", "0.14.0"), (true, Some(true)));
        assert_eq!(at("vllm", "0.12.0"), (false, None));
        assert_eq!(at("vllm", ""), (false, None));
        assert_eq!(at("sglang", "0.5.6"), (false, None));
    }

    #[test]
    fn campaign_rows_run_with_the_generators_limits_and_gap_analysis_rows_with_the_defaults() {
        // AIConfigurator's generator rules (rule_plugin/benchmark/*.rule, 095f58a51) by hand, at
        // C = 8, ISL 1000, OSL 100: vLLM 8 + 1000 + 1500 = 2508 batched tokens; SGLang a
        // prefill limit of 1000 + 1500 = 2500; TensorRT-LLM 2508 rounded up to 32 = 2528.
        let h200 = GpuPreset::find("h200").unwrap().spec();
        let generator = |framework: &str, c: u32, own: bool| {
            let mut doc = Doc::default();
            generator_settings(&mut doc, framework, (&h200, None), (1000, 100, c), own);
            doc
        };
        // SGLang's own chunk at the row's release: an L40S (46,068 MiB) chunks at 8192 before
        // 0.5.3 and 4096 from it (memory::sglang_chunked_prefill_size).
        let l40s = GpuPreset::find("l40s").unwrap().spec();
        let chunk = |version| {
            let mut doc = Doc::default();
            generator_settings(&mut doc, "sglang", (&l40s, version), (1000, 100, 8), true);
            int_at(&doc, "scheduler.max_num_batched_tokens")
        };
        assert_eq!((chunk(Some((0, 5, 2))), chunk(None)), (8192, 4096));
        let vllm = generator("vllm", 8, false);
        assert_eq!(
            (int_at(&vllm, "scheduler.max_num_seqs"), int_at(&vllm, "scheduler.max_num_batched_tokens")),
            (512, 2508)
        );
        assert_eq!(int_at(&generator("vllm", 600, false), "scheduler.max_num_seqs"), 1200);
        let sglang = generator("sglang", 8, true);
        assert_eq!(int_at(&sglang, "scheduler.batching.max_prefill_tokens"), 2500);
        assert_eq!(sglang.at("scheduler.batching.mixed_chunk"), Some(&toml::Value::Boolean(true)));
        assert_eq!(int_at(&generator("sglang", 8, false), "scheduler.max_num_batched_tokens"), 2500);
        let trt = generator("trtllm", 8, false);
        assert_eq!(
            (int_at(&trt, "scheduler.max_num_seqs"), int_at(&trt, "scheduler.max_num_batched_tokens")),
            (8, 2528)
        );
        assert_eq!(int_at(&trt, "scheduler.kv_cache.reserve_output_tokens"), 100);
        // Which rows get them: by the source column.
        let qwen = [("model_path", "Qwen/Qwen3-32B"), ("gemm_quant_mode", "bf16"), ("tp_size", "2")];
        let source = |s| [qwen[0], qwen[1], qwen[2], ("silicon_data_source", s)];
        let campaign = case_of(&row(&source("source_file=2026-04-06.csv; model=x"))).unwrap();
        let gap = case_of(&row(&source(
            "source_file=/Users/x/projects/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/Qwen_Qwen3-32B.csv",
        )))
        .unwrap();
        assert!(!campaign.gap_analysis && gap.gap_analysis);
        assert_eq!(
            (campaign.limits(Limits::Auto), gap.limits(Limits::Auto)),
            (RowLimits::Generator, RowLimits::Defaults)
        );
        assert_eq!(
            (gap.limits(Limits::Generator), campaign.limits(Limits::Defaults)),
            (RowLimits::Generator, RowLimits::Defaults)
        );
        assert_eq!(scenario(&campaign, bench()).groups[0].scheduler.max_num_batched_tokens, 2508);
        assert_eq!(scenario(&gap, bench()).groups[0].scheduler.max_num_batched_tokens, 8192);
    }

    #[test]
    fn engine_schedulers_swap_chunked_batching_for_each_engines_own() {
        let h200 = servesim_sim::spec::GpuPreset::find("h200").unwrap().spec();
        let engine = |framework: &str, own: bool| {
            let mut doc = Doc::default();
            engine_settings(&mut doc, framework, (&h200, None), 1024, own);
            doc
        };
        let batching =
            |d: &Doc| (str_at(d, "scheduler.batching.kind").to_string(), d.at("scheduler.batching.priority").cloned());
        let prio = |p: &str| Some(toml::Value::from(p));
        let vllm = engine("vllm", false);
        assert_eq!(
            (batching(&vllm), int_at(&vllm, "scheduler.max_num_seqs")),
            (("chunked".into(), prio("decode")), 1024)
        );
        assert_eq!(batching(&engine("vllm", true)), ("vllm-v1".into(), None));
        // vLLM's full-prompt admission gate as the row's release had it: from 0.19.0 (a row
        // without a version is taken as 0.13).
        let gate = |v: Option<EngineVersion>| {
            let mut doc = Doc::default();
            engine_settings(&mut doc, "vllm", (&h200, v), 1024, true);
            doc.at("scheduler.batching.reserve_full_isl").and_then(toml::Value::as_bool)
        };
        assert_eq!(
            (gate(Some((0, 19, 0))), gate(Some((0, 18, 1))), gate(None)),
            (Some(true), Some(false), Some(false))
        );
        assert_eq!(batching(&engine("sglang", false)), ("chunked".into(), prio("prefill")));
        let sglang = engine("sglang", true);
        assert_eq!(
            (batching(&sglang), int_at(&sglang, "scheduler.max_num_batched_tokens")),
            (("sglang".into(), None), 8192)
        );
        // TensorRT-LLM runs its own scheduler either way: whole prompts, KV to completion.
        let trt = engine("trtllm", false);
        assert_eq!(trt.0, engine("trtllm", true).0);
        assert_eq!(int_at(&trt, "scheduler.max_num_batched_tokens"), 8192);
        assert_eq!(batching(&trt), ("continuous".into(), prio("mixed")));
        assert_eq!(str_at(&trt, "scheduler.kv_cache.allocation"), "reserve-max");
        assert_eq!(int_at(&trt, "scheduler.kv_cache.reserve_output_tokens"), 1024);
    }

    #[test]
    fn moe_rows_run_with_experts_spanning_the_gpus_and_qwen_fp8_checkpoints_are_block_scaled() {
        let qwen = [("model_path", "Qwen/Qwen3-235B-A22B-FP8"), ("gemm_quant_mode", "fp8"), ("tp_size", "4")];
        let c = case_of(&row(&[qwen[0], qwen[1], qwen[2], ("moe_tp_size", "4"), ("moe_ep_size", "1")])).unwrap();
        assert_eq!((c.model, c.weights, c.tp), ("qwen3-235b-a22b", "fp8-block", 4));
        assert!(c.note.contains("block-scaled"), "{}", c.note);
        // Expert parallelism over the same GPUs: the database's expert-parallel rows over 4 GPUs,
        // said so; the scenario's layout is expert-parallel.
        let ep = case_of(&row(&[qwen[0], qwen[1], qwen[2], ("moe_tp_size", "1"), ("moe_ep_size", "4")])).unwrap();
        assert!(
            ep.note.contains("MoE TP 1 × EP 4 read from the database's expert-parallel rows over 4 GPUs"),
            "{}",
            ep.note
        );
        assert!(scenario(&ep, bench()).groups[0].layout.ep);
        assert!(!scenario(&c, bench()).groups[0].layout.ep);
        let wide = case_of(&row(&[qwen[0], qwen[1], qwen[2], ("moe_tp_size", "1"), ("moe_ep_size", "8")]));
        assert!(wide.unwrap_err().contains("the experts do not span the attention's GPUs"));
        let split = case_of(&row(&[qwen[0], qwen[1], ("tp_size", "1"), ("moe_tp_size", "2"), ("moe_ep_size", "1")]));
        assert!(split.unwrap_err().starts_with("moe_tp_size 2 ≠ tp_size 1"));
        // A dense model's rows carry moe_tp 1 at any TP: they run; its per-tensor FP8 stays fp8.
        let dense = [("model_path", "nvidia/Llama-3.1-70B-Instruct-FP8"), ("gemm_quant_mode", "fp8")];
        let c =
            case_of(&row(&[dense[0], dense[1], ("tp_size", "4"), ("moe_tp_size", "1"), ("moe_ep_size", "1")])).unwrap();
        assert_eq!((c.model, c.weights), ("llama-3.1-70b", "fp8"));
    }

    /// MiniMax-M2.5's rows run its preset, its FP8 block-scaled as its config.json ships it;
    /// with DP attention ranks (2 × TP 2, experts EP 4 over the 4 GPUs) they run as a MoE model's
    /// DP attention, and a dense model's are refused.
    #[test]
    fn minimax_rows_run_block_scaled_and_with_dp_attention_ranks() {
        let m = [("model_path", "MiniMaxAI/MiniMax-M2.5"), ("gemm_quant_mode", "fp8"), ("tp_size", "2")];
        let c = case_of(&row(&[m[0], m[1], m[2], ("moe_tp_size", "2"), ("moe_ep_size", "1")])).unwrap();
        assert_eq!((c.model, c.weights, c.tp, c.dp), ("minimax-m2.5", "fp8-block", 2, 1));
        let dp = [m[0], m[1], m[2], ("attention_dp_size", "2"), ("moe_tp_size", "1"), ("moe_ep_size", "4")];
        let c = case_of(&row(&dp)).unwrap();
        assert_eq!((c.weights, c.tp, c.dp, c.ep), ("fp8-block", 4, 2, true));
        assert_eq!(scenario(&c, bench()).groups[0].layout.dp_attention, 2);
        let llama = row(&[("model_path", "meta-llama/Llama-3.1-70B"), ("tp_size", "2"), ("attention_dp_size", "2")]);
        assert!(case_of(&llama).unwrap_err().starts_with("attention data parallelism on a dense model"));
    }

    /// `--adp-balance`: TensorRT-LLM rows with DP attention get InferenceX's attention_dp_config
    /// (enable_balance, timeout 60, no batching wait); TensorRT-LLM rows without DP ranks and
    /// SGLang rows with them do not (the key would be refused, or is not SGLang's).
    #[test]
    fn adp_balance_applies_to_tensorrt_llm_rows_with_dp_ranks_only() {
        let ds = [("model_path", "deepseek-ai/DeepSeek-R1"), ("gemm_quant_mode", "fp8")];
        let dp = [("tp_size", "1"), ("attention_dp_size", "8"), ("moe_tp_size", "1"), ("moe_ep_size", "8")];
        let on = Bench { adp_balance: true, ..bench() };
        let balance = |c: &Case| {
            let doc = scenario_doc(c, on, None, None, 0.0);
            ["enable_balance", "timeout_iters", "batching_wait_iters"]
                .map(|k| doc.at(&format!("cluster.attention_dp_config.{k}")).map(|v| v.to_string()))
        };
        let trt = case_of(&row(&[ds[0], ds[1], ("backend", "trtllm"), dp[0], dp[1], dp[2], dp[3]])).unwrap();
        assert_eq!(balance(&trt), [Some("true".into()), Some("60".into()), Some("0".into())]);
        // The scenario takes the key (a key it refused would fail here).
        assert_eq!(scenario(&trt, on).groups[0].layout.dp_attention, 8);
        assert_eq!(scenario_doc(&trt, bench(), None, None, 0.0).at("cluster.attention_dp_config"), None);
        let sgl = case_of(&row(&[ds[0], ds[1], ("backend", "sglang"), dp[0], dp[1], dp[2], dp[3]])).unwrap();
        assert_eq!(balance(&sgl), [None, None, None]);
        let tp = [("tp_size", "8"), ("moe_tp_size", "1"), ("moe_ep_size", "8")];
        let trt_tp = case_of(&row(&[ds[0], ds[1], ("backend", "trtllm"), tp[0], tp[1], tp[2]])).unwrap();
        assert_eq!(balance(&trt_tp), [None, None, None]);
    }

    /// The DeepSeek-R1 FP8 row of InferenceX's TP 4 recipe (aiconfigurator-core 0.12.0
    /// silicon_sample.csv line 2005, its source as the row has it) runs the recipe's flags and
    /// client by default: 32 running, chunks of 8192 prefill first, SGLang's memory rule at 0.95,
    /// an FP8 cache, a receive interval of 10 (the script's TP 4 branch, at any concurrency),
    /// lengths uniform in [0.8 L, L], 10 requests a client; under `--engine-limits generator`
    /// none of it.
    #[test]
    fn a_row_of_an_inferencex_recipe_runs_its_flags_and_client() {
        let src = "source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency=32; \
                   measured=2026-03-25T16:34:14Z; wip=False; image=lmsysorg/sglang:v0.5.9-cu130";
        let fields = |c: &'static str| {
            row(&[
                ("model_path", "deepseek-ai/DeepSeek-R1"),
                ("gemm_quant_mode", "fp8"),
                ("backend", "sglang"),
                ("system", "b200_sxm"),
                ("tp_size", "4"),
                ("moe_tp_size", "4"),
                ("moe_ep_size", "1"),
                ("isl", "8192"),
                ("osl", "1024"),
                ("batch_size", c),
                ("silicon_data_source", src),
            ])
        };
        let c = case_of(&fields("32")).unwrap();
        assert_eq!(c.limits(Limits::Auto).name(), "recipe");
        let b = Bench { rounds: 20, ..bench() };
        let d = scenario_doc(&c, b, None, None, 0.0);
        assert_eq!((int_at(&d, "scheduler.max_num_seqs"), int_at(&d, "scheduler.max_num_batched_tokens")), (32, 8192));
        assert_eq!(
            (str_at(&d, "scheduler.batching.kind"), str_at(&d, "scheduler.batching.priority")),
            ("chunked", "prefill")
        );
        assert_eq!(str_at(&d, "memory.engine"), "sglang");
        assert_eq!(d.at("memory.mem_fraction_static").and_then(toml::Value::as_float), Some(0.95));
        assert_eq!(str_at(&d, "model.kv_dtype"), "fp8");
        assert_eq!(int_at(&d, "scheduler.recv_interval"), 10);
        assert_eq!((int_at(&d, "workload.prompt_tokens.min"), int_at(&d, "workload.prompt_tokens.max")), (6553, 8192));
        assert_eq!((int_at(&d, "workload.output_tokens.min"), int_at(&d, "workload.output_tokens.max")), (819, 1024));
        assert_eq!(int_at(&d, "workload.requests"), 320);
        // The scenario takes every key.
        assert_eq!(scenario(&c, b).groups[0].scheduler.recv_interval, 10);
        let c8 = case_of(&fields("8")).unwrap();
        assert_eq!(int_at(&scenario_doc(&c8, b, None, None, 0.0), "scheduler.recv_interval"), 10);
        let g = scenario_doc(&c, Bench { engine_limits: Limits::Generator, ..b }, None, None, 0.0);
        // Under the generator SGLang's own fraction (this row names no backend_version: the
        // newest release read), at its own chunk on a B200 (16,384; the generator's 9,692-token
        // budget is not its chunked prefill size): 28,160 MiB with the MLA backend's piecewise
        // graphs, 0.846 (memory::tests).
        let fraction = g.at("memory.mem_fraction_static").and_then(toml::Value::as_float);
        assert_eq!((g.at("scheduler.recv_interval"), fraction), (None, Some(0.846)));
        assert_eq!(int_at(&g, "scheduler.max_num_batched_tokens"), 9692);
        assert_eq!((str_at(&g, "model.kv_dtype"), int_at(&g, "workload.prompt_tokens.value")), ("bf16", 8192));
        assert_eq!(int_at(&g, "workload.requests"), 640);
        // An explicit --kv-cache is every row's, recipe rows too.
        let bf16 = scenario_doc(&c, Bench { kv_cache: KvCache::Bf16, ..b }, None, None, 0.0);
        assert_eq!(str_at(&bf16, "model.kv_dtype"), "bf16");
        // Outside the recipe's search space (TP 4 up to 32 clients): the generator's.
        assert_eq!(case_of(&fields("64")).unwrap().limits(Limits::Auto).name(), "generator");
        // silicon.csv names the recipe a row ran, and says nothing of it under the generator.
        // Decoding at a time (Little's law on the 32 clients): the recipe's client draws outputs
        // in [819, 1024], a mean of 921.5, so measured (TTFT 100 ms, TPOT 10 ms) 32 × 9205 /
        // 9305 = 31.66 and predicted (1 s, 1 ms) 32 × 920.5 / 1920.5 = 15.34; the generator's
        // 1024 tokens: 32 × 10,230 / 10,330 = 31.69 and 32 × 1023 / 2023 = 16.18.
        let p = Predicted { ttft: 1000.0, tpot: 1.0, e2e: 1.0, extrapolated: 0.0, kv_tokens: 1, preemptions: 0 };
        let out = Outcome { row: fields("32"), case: Ok(c.clone()), predicted: Some(Ok(p)), scenario: None };
        let line = |b: Bench| rows_csv(std::slice::from_ref(&out), b).0.lines().nth(1).unwrap().to_string();
        let recipe = line(b);
        assert!(
            recipe.ends_with(
                ",recipe,0.0,1,0,31.7,15.3,\"launch flags and client of InferenceX dsr1-fp8-b200-sglang, \
                 benchmarks/single_node/dsr1_fp8_b200.sh at 12ba0ae07 (TP 4)\""
            ),
            "{recipe}"
        );
        assert!(line(Bench { engine_limits: Limits::Generator, ..b }).ends_with(",generator,0.0,1,0,31.7,16.2,\"\""));
        // The gpt-oss-120b vLLM 0.11.2 row at 512 clients on two H100s (silicon_sample.csv line
        // 4215): TTFT 462,052.658 ms, TPOT 14.7705 ms, 8,192 tokens out: D = 8191 × 14.7705 =
        // 120,985.2 ms, 512 × D / (462,052.7 + D) = 106.2 requests decoding at a time.
        let g = Case { concurrency: 512, osl: 8192, recipe: None, gap_analysis: false, ..c.clone() };
        let gen = Bench { engine_limits: Limits::Generator, ..b };
        assert!(
            (g.decoding(gen, 462_052.658, 14.7705) - 106.24).abs() < 0.01,
            "{}",
            g.decoding(gen, 462_052.658, 14.7705)
        );
        assert_eq!(g.decoding(gen, 0.0, 0.0), 0.0);
    }

    /// The gpt-oss-120b H100 row of InferenceX's vLLM recipe (aiconfigurator-core 0.12.0
    /// silicon_sample.csv line 1904, its fields as the row has them) runs
    /// benchmarks/single_node/gptoss_fp4_h100.sh's flags at cec542a9a: `--max-num-seqs $CONC`,
    /// 8192 batched tokens, V1's chunked prefill decodes first, vLLM's memory rule at 0.9, the
    /// checkpoint's BF16 cache, and InferenceX's client; the generator's limits instead are
    /// 512 sequences and C + ISL + 1500 tokens.
    #[test]
    fn a_row_of_an_inferencex_vllm_recipe_runs_its_flags_and_client() {
        let r = row(&[
            ("model_path", "openai/gpt-oss-120b"),
            ("backend_version", "0.18.0"),
            ("system", "h100_sxm"),
            ("precision", "fp4"),
            ("gemm_quant_mode", "nvfp4"),
            ("moe_quant_mode", "nvfp4"),
            ("isl", "1024"),
            ("osl", "1024"),
            ("batch_size", "64"),
            ("tp_size", "4"),
            ("moe_tp_size", "4"),
            ("moe_ep_size", "1"),
            (
                "silicon_data_source",
                "source_file=2026-03-25.csv; model=GPT-OSS-120B; silicon_concurrency=64; \
                 measured=2026-03-27T08:01:51Z; wip=False; image=vllm/vllm-openai:v0.18.0",
            ),
        ]);
        let c = case_of(&r).unwrap();
        assert_eq!(c.limits(Limits::Auto).name(), "recipe");
        let d = scenario_doc(&c, bench(), None, None, 0.0);
        assert_eq!((int_at(&d, "scheduler.max_num_seqs"), int_at(&d, "scheduler.max_num_batched_tokens")), (64, 8192));
        assert_eq!(
            (str_at(&d, "scheduler.batching.kind"), str_at(&d, "scheduler.batching.priority")),
            ("chunked", "decode")
        );
        assert_eq!(str_at(&d, "memory.engine"), "vllm");
        assert_eq!(d.at("memory.gpu_memory_utilization").and_then(toml::Value::as_float), Some(0.9));
        assert_eq!(str_at(&d, "model.kv_dtype"), "bf16");
        assert_eq!((int_at(&d, "workload.prompt_tokens.min"), int_at(&d, "workload.prompt_tokens.max")), (819, 1024));
        assert_eq!(int_at(&d, "workload.requests"), 640);
        assert_eq!(d.at("scheduler.recv_interval"), None);
        let own = scenario_doc(&c, Bench { engine_schedulers: true, ..bench() }, None, None, 0.0);
        assert_eq!(str_at(&own, "scheduler.batching.kind"), "vllm-v1");
        // The scenario takes every key: vLLM's rule sizes the pool.
        let s = scenario(&c, bench());
        assert_eq!((s.groups[0].scheduler.max_num_seqs, s.groups[0].scheduler.max_num_batched_tokens), (64, 8192));
        let g = scenario_doc(&c, Bench { engine_limits: Limits::Generator, ..bench() }, None, None, 0.0);
        assert_eq!((int_at(&g, "scheduler.max_num_seqs"), int_at(&g, "scheduler.max_num_batched_tokens")), (512, 2588));
        assert_eq!((g.at("memory.engine"), int_at(&g, "workload.prompt_tokens.value")), (None, 1024));
    }

    /// DeepSeek-R1 FP8 TensorRT-LLM rows of InferenceX's dsr1_fp8_b200_trt.sh at ec7bafaae
    /// (silicon_sample.csv's rows of 2026-01-29 on 1.2.0rc6.post2): 1024/1024 at 64 clients on
    /// TP 8 runs `--max_num_tokens` 8192 unchunked with TensorRT-LLM's 2048 sequences, 0.8 of
    /// the free memory under its rule, batch waiting (40 iterations, 0.8), an FP8 cache; the
    /// 256-client row with EP and DP attention (32 a rank on 8) the attention-DP balancing at
    /// 0.7.
    #[test]
    fn a_row_of_an_inferencex_trtllm_recipe_runs_its_scripts_branch() {
        let fields = |osl: &'static str, c: &'static str, layout: [(&'static str, &'static str); 4]| {
            let mut f = vec![
                ("model_path", "deepseek-ai/DeepSeek-R1"),
                ("gemm_quant_mode", "fp8"),
                ("backend", "trtllm"),
                ("system", "b200_sxm"),
                ("isl", "1024"),
                ("osl", osl),
                ("batch_size", c),
                (
                    "silicon_data_source",
                    "measured=2026-01-29T00:00:00.000Z; nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2",
                ),
            ];
            f.extend(layout);
            row(&f)
        };
        let tp8 = [("tp_size", "8"), ("attention_dp_size", "1"), ("moe_tp_size", "8"), ("moe_ep_size", "1")];
        let c = case_of(&fields("1024", "64", tp8)).unwrap();
        assert_eq!(c.limits(Limits::Auto).name(), "recipe");
        let d = scenario_doc(&c, bench(), None, None, 0.0);
        assert_eq!(
            (int_at(&d, "scheduler.max_num_seqs"), int_at(&d, "scheduler.max_num_batched_tokens")),
            (2048, 8192)
        );
        assert_eq!(
            (str_at(&d, "scheduler.batching.kind"), str_at(&d, "scheduler.kv_cache.allocation")),
            ("continuous", "reserve-max")
        );
        assert_eq!(str_at(&d, "memory.engine"), "trtllm");
        assert_eq!(d.at("memory.gpu_memory_utilization").and_then(toml::Value::as_float), Some(0.8));
        assert_eq!(int_at(&d, "scheduler.batch_wait.timeout_iters"), 40);
        assert_eq!(d.at("scheduler.batch_wait.max_tokens_ratio").and_then(toml::Value::as_float), Some(0.8));
        assert_eq!((str_at(&d, "model.kv_dtype"), int_at(&d, "workload.requests")), ("fp8", 640));
        assert_eq!(d.at("cluster.attention_dp_config"), None);
        // The scenario takes every key.
        assert_eq!(scenario(&c, bench()).groups[0].scheduler.max_num_batched_tokens, 8192);
        // With EP and DP attention: the balancing, 0.7 of the free memory, no batch waiting.
        let dp = [("tp_size", "1"), ("attention_dp_size", "8"), ("moe_tp_size", "1"), ("moe_ep_size", "8")];
        let c = case_of(&fields("8192", "32", dp)).unwrap();
        assert_eq!((c.limits(Limits::Auto).name(), c.concurrency, c.dp), ("recipe", 256, 8));
        let d = scenario_doc(&c, bench(), None, None, 0.0);
        assert_eq!(d.at("memory.gpu_memory_utilization").and_then(toml::Value::as_float), Some(0.7));
        assert_eq!(d.at("cluster.attention_dp_config.enable_balance").and_then(toml::Value::as_bool), Some(true));
        assert_eq!(int_at(&d, "cluster.attention_dp_config.timeout_iters"), 60);
        assert_eq!(d.at("scheduler.batch_wait"), None);
        // gpt-oss's script sets 512 sequences and leaves the balancing's iterations at
        // TensorRT-LLM's 50 and 10.
        let oss = case_of(&row(&[
            ("model_path", "openai/gpt-oss-120b"),
            ("backend", "trtllm"),
            ("system", "b200_sxm"),
            ("gemm_quant_mode", "nvfp4"),
            ("isl", "1024"),
            ("osl", "1024"),
            ("batch_size", "128"),
            ("tp_size", "1"),
            ("attention_dp_size", "2"),
            ("moe_tp_size", "1"),
            ("moe_ep_size", "2"),
            (
                "silicon_data_source",
                "measured=2026-02-05T23:18:58Z; image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2.post2",
            ),
        ]))
        .unwrap();
        let o = scenario_doc(&oss, bench(), None, None, 0.0);
        assert_eq!(
            (int_at(&o, "scheduler.max_num_seqs"), int_at(&o, "scheduler.max_num_batched_tokens")),
            (512, 20000)
        );
        assert_eq!(o.at("memory.gpu_memory_utilization").and_then(toml::Value::as_float), Some(0.85));
        let adp = (
            int_at(&o, "cluster.attention_dp_config.timeout_iters"),
            int_at(&o, "cluster.attention_dp_config.batching_wait_iters"),
        );
        assert_eq!(adp, (50, 10));
        // Under the generator's limits none of it.
        let g = scenario_doc(&c, Bench { engine_limits: Limits::Generator, ..bench() }, None, None, 0.0);
        assert_eq!((g.at("memory.gpu_memory_utilization"), g.at("cluster.attention_dp_config")), (None, None));
    }

    #[test]
    fn mla_and_windowed_rows_run_with_their_layout_on_the_database() {
        let ds = [("model_path", "deepseek-ai/DeepSeek-R1"), ("gemm_quant_mode", "fp8"), ("backend", "sglang")];
        // Attention TP 1 on 8 DP ranks, experts over 8 GPUs by EP: servesim's tp 8, dp 8, ep.
        let c = case_of(&row(&[
            ds[0],
            ds[1],
            ds[2],
            ("tp_size", "1"),
            ("attention_dp_size", "8"),
            ("moe_tp_size", "1"),
            ("moe_ep_size", "8"),
        ]))
        .unwrap();
        assert_eq!((c.model, c.tp, c.dp, c.ep, c.roofline, c.weight_dtype), ("deepseek-r1", 8, 8, true, false, "fp8"));
        assert!(
            c.note.contains("MoE TP 1 × EP 8 read from the database's expert-parallel rows over 8 GPUs"),
            "{}",
            c.note
        );
        // batch_size 8 is each rank's: 64 clients in all, each rank's scheduler held to the
        // generator's limits for a batch of 8 (SGLang: 1024 sequences, a 1000 + 1500-token prefill).
        assert_eq!(c.concurrency, 64);
        let doc = scenario_doc(&c, bench(), None, None, 0.0);
        assert_eq!(str_at(&doc, "cost.database.weights"), "fp8-block");
        assert_eq!(doc.at("cluster.dp_attention").and_then(|v| v.as_integer()), Some(8));
        assert_eq!(doc.at("workload.arrival.clients").and_then(|v| v.as_integer()), Some(64));
        let vllm = case_of(&row(&[
            ds[0],
            ds[1],
            ("tp_size", "1"),
            ("attention_dp_size", "8"),
            ("moe_tp_size", "1"),
            ("moe_ep_size", "8"),
        ]))
        .unwrap();
        let doc = scenario_doc(&vllm, bench(), None, None, 0.0);
        // vLLM's generator rule per rank: max_num_batched_tokens = 8 + 1000 + 1500.
        assert_eq!(doc.at("scheduler.max_num_batched_tokens").and_then(|v| v.as_integer()), Some(2508));
        let s = scenario(&c, bench());
        assert_eq!((s.groups[0].tp, s.groups[0].layout.dp_attention, s.groups[0].layout.ep), (8, 8, true));
        // Plain TP8 experts; a TP × EP hybrid runs as EP over its GPUs, and says so; experts
        // that do not span the GPUs are refused.
        // Without DP attention the database prices it: block-scaled FP8 GEMMs (the checkpoint's).
        let tp = case_of(&row(&[ds[0], ds[1], ds[2], ("tp_size", "8"), ("moe_tp_size", "8"), ("moe_ep_size", "1")]))
            .unwrap();
        assert_eq!((tp.dp, tp.ep, tp.roofline, tp.mla, tp.weights), (1, false, false, true, "fp8-block"));
        let doc = scenario_doc(&tp, bench(), None, None, 0.0);
        assert_eq!(str_at(&doc, "cost.database.weights"), "fp8-block");
        assert_eq!(str_at(&doc, "cost.database.moe_distribution"), "power_law_1.2");
        // A hybrid reads the database's experts over its GPUs, or, should the database lack them,
        // runs on the roofline as EP over its GPUs; both say so.
        let hybrid =
            case_of(&row(&[ds[0], ds[1], ("tp_size", "4"), ("moe_tp_size", "2"), ("moe_ep_size", "2")])).unwrap();
        assert_eq!((hybrid.tp, hybrid.dp, hybrid.ep, hybrid.roofline), (4, 1, true, false));
        assert!(
            hybrid.note.contains("MoE TP 2 × EP 2 read from the database's expert-parallel rows over 4 GPUs"),
            "{}",
            hybrid.note
        );
        assert!(
            hybrid.roofline_note.contains("MoE TP 2 × EP 2 priced as EP over its 4 GPUs"),
            "{}",
            hybrid.roofline_note
        );
        assert_eq!(
            scenario_doc(&hybrid, bench(), None, None, 0.0).at("cluster.ep").and_then(|v| v.as_bool()),
            Some(true),
            "the database's expert-parallel rows"
        );
        let short = case_of(&row(&[ds[0], ds[1], ("tp_size", "4"), ("moe_tp_size", "2"), ("moe_ep_size", "1")]));
        assert!(short.unwrap_err().contains("the experts do not span the GPUs"));
        // gpt-oss's "nvfp4" rows ran its MXFP4 checkpoint.
        let oss = case_of(&row(&[
            ("model_path", "openai/gpt-oss-120b"),
            ("gemm_quant_mode", "nvfp4"),
            ("tp_size", "2"),
            ("moe_tp_size", "2"),
            ("moe_ep_size", "1"),
        ]))
        .unwrap();
        assert_eq!((oss.weight_dtype, oss.tp), ("mxfp4", 2));
        assert!(oss.note.contains("nvfp4 read as mxfp4"), "{}", oss.note);
    }
}
