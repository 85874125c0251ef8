//! Scenarios: the TOML a user writes, parsed and validated in two steps.
//!
//! ```text
//!   TOML text ──serde (deny_unknown_fields, key paths)──► ScenarioFile ──validate──► Scenario
//! ```
//! [`ScenarioFile`] mirrors the file; every field has a documented default. [`Scenario`] holds
//! resolved values only (preset dimensions filled in, memory budget computed) and is what the
//! simulator runs. Every error names the key path and the value:
//! `workload.arrival.rate: must be in [1e-12, 1e9] requests/s, got -3`.

mod cluster;
mod deploy;
pub mod edit;
mod engines;
mod file;
pub mod launch;
mod plan_file;
mod resources;

pub use crate::cost::{CostSection, CostSpec, DatabaseRequest, DatabaseSpec, DATABASE_FRAMEWORKS, DATABASE_WEIGHTS};
pub use crate::instance::InstanceGroup;
pub use crate::metrics::{MetricsSection, SloSection};
pub(crate) use cluster::gpu_or_preset;
pub use cluster::GroupSection;
pub use deploy::{Deployment, LlmD, RouterDeploy, Server};
pub use engines::{
    vllm_limits, vllm_settled_limits, EngineLimits, EngineVersion, ServingEngine, VLLM_LIMIT_RULES,
    VLLM_LOCAL_PREFILL_CADENCE_FROM, VLLM_NEWEST_READ, VLLM_RESERVES_FULL_ISL_FROM,
};
pub use file::*;
pub use launch::LaunchCommand;
pub use plan_file::{CandidateSection, PlanSection, TuneSection};
pub use resources::{NoFiles, ResourceError, Resources};

use std::sync::Arc;

use crate::config::de;
pub use crate::config::{check, ConfigError};
use crate::cost::profile::Profile;
use crate::cost::Profiled;
use crate::memory::{plan_memory, MemoryBudget, MemoryConfig};
use crate::spec::{GpuSpec, ModelSpec};
use crate::workload::WorkloadSpec;

/// The largest seed: TOML integers are signed 64-bit, and `plan` adds one per extra seed.
pub const MAX_SEED: u64 = 1 << 62;

/// Parses scenario text into the file model, turning serde's errors into key-path messages.
pub fn parse(src: &str) -> Result<ScenarioFile, ConfigError> {
    crate::config::parse(src)
}

/// A validated scenario: everything the simulator needs, resolved.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub model: ModelSpec,
    pub groups: Vec<InstanceGroup>,
    pub(crate) router: RouterSpec,
    /// The engine's balancer between each instance's DP attention ranks (`cluster.dp_balance`).
    pub(crate) dp_balance: crate::router::DpBalance,
    /// TensorRT-LLM's attention-DP balancing of DP attention ranks (`cluster.attention_dp_config`).
    pub(crate) attention_dp: crate::instance::adp::AttentionDpConfig,
    pub workload: WorkloadSpec,
    pub slo: SloSection,
    pub metrics: MetricsSection,
    pub run: RunSection,
    /// `[fleet]`: failures, restarts, autoscaling (`None`: a fixed fleet that never fails).
    pub fleet: Option<crate::fleet::FleetSection>,
    /// `[frontend]`, resolved (`None`: requests reach the router when sent).
    pub frontend: Option<crate::frontend::FrontendSpec>,
    /// Prefill and decode pools: the KV link and the decode router (`None`: colocated).
    pub(crate) disaggregation: Option<crate::disagg::Disaggregation>,
    /// The file with every default and preset filled in, for writing next to the outputs.
    pub resolved: ScenarioFile,
    /// Where the files the scenario names come from (see [`Resources`]).
    pub(crate) resources: Arc<dyn Resources>,
    /// Every iteration's time × this (1: as priced): the planner's re-sizing over a cost
    /// source's error band ([`Scenario::set_cost_scale`]). Not a key of the file.
    pub(crate) cost_scale: f64,
    /// The document as written, when it names an `engine` (whose rules filled in the keys it
    /// leaves out): what [`Scenario::engine_defaults_after`] applies an edit to, so that those
    /// rules follow the edit.
    given: Option<Arc<toml::Table>>,
}

/// The parallel layout of a group (`path` names the table holding `tp`, `dp_attention`, `ep`,
/// `pp`).
pub(crate) fn layout(
    model: &ModelSpec,
    tp: u64,
    dp: u32,
    ep: bool,
    pp: u32,
    path: &str,
) -> Result<crate::cost::Layout, ConfigError> {
    check((1..=64).contains(&dp), path, "dp_attention", "must be in [1, 64]", dp)?;
    check((1..=64).contains(&pp), path, "pp", "must be in [1, 64]", pp)?;
    let msg = format!("must not exceed the model's {} layers (each stage holds at least one)", model.layers);
    check(pp as u64 <= model.layers, path, "pp", &msg, pp)?;
    if pp > 1 {
        let msg = "pipeline stages with DP attention are not modelled (give pp = 1 or dp_attention = 1)";
        check(dp == 1, path, "pp", msg, pp)?;
        let msg = format!("makes {} GPUs per instance (tp × pp); at most 1024", tp * pp as u64);
        check(tp * pp as u64 <= 1024, path, "pp", &msg, pp)?;
    }
    check(tp.is_multiple_of(dp as u64), path, "dp_attention", &format!("must divide tp ({tp})"), dp)?;
    for (key, on, v) in [("dp_attention", dp > 1, dp.to_string()), ("ep", ep, ep.to_string())] {
        if on {
            let msg = format!("needs a MoE model; {} has no experts", model.name);
            check(model.experts > 1, path, key, &msg, v)?;
        }
    }
    if ep {
        let msg = format!("needs tp ({tp}) to divide the model's {} experts", model.experts);
        check(model.experts.is_multiple_of(tp), path, "ep", &msg, ep)?;
    }
    Ok(crate::cost::Layout { dp_attention: dp as u64, ep, pp: pp as u64 })
}

/// `cluster.attention_dp_config`, which balances DP attention ranks: refused where no instance
/// has them.
fn attention_dp(
    file: &ScenarioFile,
    groups: &[InstanceGroup],
) -> Result<crate::instance::adp::AttentionDpConfig, ConfigError> {
    let c = file.cluster.attention_dp_config.unwrap_or_default();
    check(
        !c.enable_balance || groups.iter().any(|g| g.layout.dp_attention > 1),
        "cluster.attention_dp_config",
        "enable_balance",
        "balances DP attention ranks: set cluster.dp_attention > 1 (no instance has DP ranks)",
        c.enable_balance,
    )?;
    Ok(c)
}

/// The engine's own balancer between DP ranks: vLLM's, TensorRT-LLM's, or round-robin (SGLang's,
/// and servesim's without an engine); written into the resolved file where an instance has DP
/// ranks.
fn dp_balance(
    file: &mut ScenarioFile,
    groups: &[InstanceGroup],
    heterogeneous: bool,
) -> Result<crate::router::DpBalance, ConfigError> {
    let dp_balance = file.cluster.dp_balance.unwrap_or(match file.engine {
        Some(ServingEngine::Vllm) => crate::router::DpBalance::VllmDp,
        Some(ServingEngine::Trtllm) => crate::router::DpBalance::TrtllmAdp,
        _ => crate::router::DpBalance::RoundRobin,
    });
    if !groups.iter().any(|g| g.layout.dp_attention > 1) {
        return Ok(dp_balance);
    }
    file.cluster.dp_balance = Some(dp_balance);
    let key = |i: usize| if heterogeneous { format!("cluster.groups[{i}].scheduler") } else { "scheduler".into() };
    if let Some(i) = groups.iter().position(|g| g.scheduler.recv_interval > 1 && g.layout.dp_attention > 1) {
        return Err(ConfigError::at(
            &format!("{}.recv_interval", key(i)),
            format!(
                "{} with DP attention: not simulated (SGLang 70310f05's SchedulerRecvSkipper refuses DP \
                 attention; later versions count across the ranks); give 1",
                groups[i].scheduler.recv_interval
            ),
        ));
    }
    Ok(dp_balance)
}

/// Plans one GPU's memory for a group: the group may store its KV in another dtype, and a
/// draft model (speculative decoding) takes its weights and KV out of the same memory.
/// `memory_key` and `scheduler_key` name the sections in errors.
pub(crate) fn group_memory(
    model: &ModelSpec,
    gpu: &GpuSpec,
    cfg: &MemoryConfig,
    scheduler: &SchedulerSection,
    tp: u64,
    memory_key: &str,
    scheduler_key: &str,
) -> Result<MemoryBudget, ConfigError> {
    let kv_model = scheduler.kv_cache.model(model);
    let mut memory = plan_memory(&kv_model, gpu, cfg).map_err(|e| ConfigError::at(memory_key, e.to_string()))?;
    // A pinned count is the engine's, draft model included.
    let draft = scheduler.speculative.as_ref().and_then(|s| s.draft.as_ref()).filter(|_| cfg.kv_blocks.is_none());
    if let Some(d) = draft {
        let key = format!("{scheduler_key}.speculative.draft");
        let draft = scheduler.kv_cache.model(&d.resolve(&key)?);
        crate::instance::speculative::plan_draft_memory(&mut memory, &draft, tp, cfg.dp_attention)
            .map_err(|e| ConfigError::at(&key, e.to_string()))?;
    }
    Ok(memory)
}

/// The measured profile of a group whose roofline cost names one (`cost.profile`) or a kernel
/// database (`cost.database`), checked against the model, GPU and TP degree. `path_key` names
/// the group's `cost` section in errors.
fn group_profile(
    g: &InstanceGroup,
    model: &ModelSpec,
    resources: &dyn Resources,
    path_key: &str,
) -> Result<Slices, ConfigError> {
    let CostSpec::Roofline(c) = &g.cost else { return Ok((None, None)) };
    if c.profile.is_some() && g.layout.dp_attention > 1 {
        return Err(ConfigError::at(
            &format!("{path_key}.profile"),
            format!(
                "{} with DP attention: a profile file's tables are not read for DP ranks; use cost.database (the \
                 kernel database prices each rank at its own TP degree), or remove profile",
                model.name
            ),
        ));
    }
    let kv_model = g.scheduler.kv_cache.model(model);
    let (p, key, measured_in) = match (&c.profile, &c.database) {
        (Some(path), _) => {
            let key = format!("{path_key}.profile");
            let p = resources.profile(path).map_err(|e| ConfigError::at(&key, e.to_string()))?;
            (p, format!("{key}: {path}"), None)
        }
        (None, Some(d)) => {
            let key = format!("{path_key}.database");
            let mut req = database_request(g, d, model, &kv_model, &key)?;
            let p = resources.database(&req).map_err(|e| ConfigError::at(&key, e.to_string()))?;
            let dp = g.layout.dp_attention;
            if dp > 1 {
                // Each DP rank's own slice: its attention and projections at its TP degree.
                (req.tp, req.experts) = ((g.tp / dp) as u32, false);
                let rank = resources
                    .database(&req)
                    .map_err(|e| ConfigError::at(&key, format!("DP attention rank (TP {}): {e}", g.tp / dp)))?;
                let measured_in = crate::cost::DatabaseRequest::measured_dtype(&req.weights);
                check_profile(g, &kv_model, (&p, Some(&rank)), &key, measured_in, path_key)?;
                return Ok((Some(p), Some(rank)));
            }
            (p, key, crate::cost::DatabaseRequest::measured_dtype(&req.weights))
        }
        (None, None) => return Ok((None, None)),
    };
    check_profile(g, &kv_model, (&p, None), &key, measured_in, path_key)?;
    Ok((Some(p), None))
}

/// A group's measured tables: the instance's, and under DP attention one rank's.
type Slices = (Option<Arc<Profile>>, Option<Arc<Profile>>);

/// What group `g`'s `cost.database` `d` asks of the database (`key` names it in errors): the
/// system of the group's GPU, the checkpoint's weights, the instance's TP degree and experts.
fn database_request(
    g: &InstanceGroup,
    d: &crate::cost::DatabaseSpec,
    model: &ModelSpec,
    kv_model: &ModelSpec,
    key: &str,
) -> Result<DatabaseRequest, ConfigError> {
    let system_of = |name: &str| crate::spec::GpuPreset::find(name).and_then(|p| p.database_system);
    let gpu_system = system_of(&g.gpu.name);
    let system = match (&d.system, gpu_system) {
        (Some(s), Some(gs)) if system_of(s) != Some(gs) => {
            return Err(ConfigError::at(
                &format!("{key}.system"),
                format!(
                    "{s} does not match the group's GPU {} (database system {gs}); omit system to follow the GPU",
                    g.gpu.name
                ),
            ))
        }
        (Some(s), _) => system_of(s).map_or(s.clone(), str::to_string),
        (None, Some(gs)) => gs.to_string(),
        (None, None) => {
            return Err(ConfigError::at(
                &format!("{key}.system"),
                format!("the GPU {} is not a preset with a kernel database; name the database's system", g.gpu.name),
            ))
        }
    };
    // DeepSeek's and Kimi's FP8 releases (the presets with latent attention) are
    // block-scaled: `quantization_config.weight_block_size` [128, 128] in their
    // config.json; their GEMMs are the database's fp8_block ones.
    let weights = d.weights.clone().unwrap_or_else(|| match model.weight_dtype {
        crate::spec::Dtype::Fp8 if model.arch.mla.is_some() => "fp8-block".to_string(),
        w => w.name().to_string(),
    });
    Ok(DatabaseRequest {
        system,
        framework: d.framework().to_string(),
        version: d.version.clone(),
        weights,
        gemm_kernel: d.gemm_kernel.clone(),
        moe_distribution: d
            .moe_distribution
            .clone()
            .unwrap_or_else(|| crate::cost::DEFAULT_MOE_DISTRIBUTION.to_string()),
        path: d.path.clone(),
        model: kv_model.clone(),
        tp: g.tp as u32,
        gpu: g.gpu.clone(),
        experts: true,
        expert_parallel: g.layout.ep,
    })
}

/// Builds the profiled cost model of group `g` from `p` (named by `key`, "path.key: file") to
/// check it: it fits the model, runs no op faster than the GPU can, and, with `strict`, leaves
/// nothing to the roofline.
fn check_profile(
    g: &InstanceGroup,
    kv_model: &ModelSpec,
    (p, rank): (&Profile, Option<&Profile>),
    key: &str,
    measured_in: Option<crate::spec::Dtype>,
    path_key: &str,
) -> Result<(), ConfigError> {
    let CostSpec::Roofline(c) = &g.cost else { return Ok(()) };
    let at = |e: String| {
        let (k, what) = key.split_once(": ").unwrap_or((key, ""));
        ConfigError::at(k, if what.is_empty() { e } else { format!("{what}: {e}") })
    };
    let (gpu, params) = (g.gpu.clone(), c.params());
    let (fallbacks, impossible) = match rank {
        Some(r) => {
            let m = crate::cost::DpProfiled::new(kv_model.clone(), gpu, g.tp, g.layout, params, r, p)
                .map_err(|e| at(e.to_string()))?;
            let impossible = m.slices().iter().find_map(|s| s.impossible_op(measured_in));
            (crate::cost::CostModel::fallbacks(&m), impossible)
        }
        None => {
            let m = Profiled::new(kv_model.clone(), gpu, g.tp, params, p).map_err(|e| at(e.to_string()))?;
            (m.fallbacks().to_vec(), m.impossible_op(measured_in))
        }
    };
    if let Some(why) = impossible {
        return Err(at(why));
    }
    if c.strict && !fallbacks.is_empty() {
        let list: Vec<String> = fallbacks.iter().map(|f| format!("{} ({})", f.op, f.reason)).collect();
        return Err(ConfigError::at(
            &format!("{path_key}.strict"),
            format!("the roofline would price {}", list.join("; ")),
        ));
    }
    Ok(())
}

/// A profile file (`cost.profile`) imported from one engine's kernels in a scenario whose
/// `engine` is another is an error naming both: its attention and collectives are that engine's.
/// Profiles measured by servesim's own kernels (`calibrate run`) name no engine and pass.
fn check_profile_engine(engine: Option<ServingEngine>, g: &InstanceGroup, path_key: &str) -> Result<(), ConfigError> {
    let (Some(engine), Some(p), CostSpec::Roofline(c)) = (engine, &g.profile, &g.cost) else { return Ok(()) };
    let (Some(file), Some(db)) = (&c.profile, &p.meta.database) else { return Ok(()) };
    if db.framework == engine.name() {
        return Ok(());
    }
    Err(ConfigError::at(
        &format!("{path_key}.profile"),
        format!(
            "{file}: its kernels are {}'s ({} database: {} {} {}), and the scenario's engine is {}: import {}'s \
             (`servesim calibrate import-aic --framework {} ...`) or read them from the database \
             (`[cost] database = {{ framework = \"{}\" }}`)",
            db.framework,
            db.name,
            db.system,
            db.framework,
            db.version,
            engine.name(),
            engine.name(),
            engine.name(),
            engine.name()
        ),
    ))
}

/// A kernel database of one engine (`cost.database.framework`) in a scenario whose `engine` is
/// another is an error naming both: its attention, collectives and MoE kernels are that
/// engine's. Left out, the framework follows the engine.
fn check_database_engine(engine: Option<ServingEngine>, g: &InstanceGroup, path: &str) -> Result<(), ConfigError> {
    let (Some(engine), CostSpec::Roofline(c)) = (engine, &g.cost) else { return Ok(()) };
    let Some(d) = &c.database else { return Ok(()) };
    if d.framework() == engine.name() {
        return Ok(());
    }
    Err(ConfigError::at(
        &format!("{path}.database.framework"),
        format!(
            "\"{}\": the kernels of {} in a scenario whose engine is {}; leave framework out (the database then \
             reads {}'s kernels) or name the engine whose kernels you mean",
            d.framework(),
            d.framework(),
            engine.name(),
            engine.name()
        ),
    ))
}

/// The serving engine a group's calibration is matched on: the scenario's `engine`, else the
/// kernel database's framework, else an engine named by `cost.overhead`, else `unspecified`.
pub(crate) fn group_engine(engine: Option<ServingEngine>, cost: &CostSpec) -> String {
    if let Some(e) = engine {
        return e.name().to_string();
    }
    match cost {
        CostSpec::Roofline(c) => match (&c.database, &c.overhead) {
            (Some(d), _) => d.framework().to_string(),
            (None, Some(o)) if DATABASE_FRAMEWORKS.contains(&o.as_str()) => o.clone(),
            _ => "unspecified".into(),
        },
        CostSpec::Linear(_) => "unspecified".into(),
    }
}

/// The calibration a group's cost names (`cost.calibration`), or why it does not apply to the
/// group (another GPU, engine or cost source).
fn group_calibration(
    g: &InstanceGroup,
    engine: &str,
    resources: &dyn Resources,
    path_key: &str,
) -> Result<Option<Result<Arc<crate::cost::Calibration>, String>>, ConfigError> {
    let CostSpec::Roofline(c) = &g.cost else { return Ok(None) };
    let Some(path) = &c.calibration else { return Ok(None) };
    let key = format!("{path_key}.calibration");
    let cal = resources.calibration(path).map_err(|e| ConfigError::at(&key, e.to_string()))?;
    Ok(Some(match cal.mismatch(&g.gpu.name, engine, g.cost_source()) {
        None => Ok(cal),
        Some(why) => Err(format!("{path}: {why}")),
    }))
}

/// `seed` within [`MAX_SEED`]; `engine_version` a release `ServingEngine::version` reads, and
/// only with an `engine`.
fn check_seed_and_engine_version(file: &ScenarioFile) -> Result<(), ConfigError> {
    check(file.seed <= MAX_SEED, "", "seed", &format!("must be ≤ {MAX_SEED} (2^62)"), file.seed)?;
    let Some(v) = &file.engine_version else { return Ok(()) };
    let readable = ServingEngine::version(v).is_some();
    check(readable, "", "engine_version", "must be a release such as \"0.15.1\"", format!("{v:?}"))?;
    check(
        file.engine.is_some(),
        "",
        "engine_version",
        "needs an engine (give engine = \"vllm\", ...)",
        format!("{v:?}"),
    )
}

impl Scenario {
    /// An error naming both deployments when the scenario names a calibration that applies to
    /// none of its groups. With `sweep` (a plan or tune, whose candidates may run other GPUs),
    /// a scenario with plan candidates or tune knobs is left to them: they say per candidate
    /// whether it applies, and refuse a calibration that applies to none.
    pub fn check_calibration(&self, sweep: bool) -> Result<(), ConfigError> {
        let named: Vec<(usize, &String)> = self
            .groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.calibration.as_ref()?.as_ref().err().map(|e| (i, e)))
            .collect();
        if named.is_empty() || self.groups.iter().any(|g| g.calibrated().is_some()) {
            return Ok(());
        }
        let candidates =
            self.resolved.plan.as_ref().is_some_and(|p| !p.candidates.is_empty()) || self.resolved.tune.is_some();
        if sweep && candidates {
            return Ok(());
        }
        let (i, why) = named[0];
        let key = if self.resolved.cluster.groups.is_empty() {
            "cost.calibration".to_string()
        } else {
            format!("cluster.groups[{i}].cost.calibration")
        };
        Err(ConfigError::at(&key, format!("refused: {why}")))
    }

    /// Parses and validates scenario text. `default_name` names the scenario when the file
    /// does not (the CLI passes the file stem). Named files (profiles, traces) are not read:
    /// see [`Scenario::from_toml_in`].
    pub fn from_toml(src: &str, default_name: &str) -> Result<Scenario, ConfigError> {
        Scenario::from_toml_in(src, default_name, Arc::new(NoFiles))
    }

    /// Like [`Scenario::from_toml`], with `resources` providing the files the scenario names.
    pub fn from_toml_in(src: &str, default_name: &str, resources: Arc<dyn Resources>) -> Result<Scenario, ConfigError> {
        let file = parse(src)?;
        if file.engine.is_some() {
            // The file parsed, so it is a TOML table; its keys say what the user gave.
            let given: toml::Table = src.parse().unwrap_or_default();
            let file = file.with_engine_defaults(&given);
            let mut s = Scenario::from_file_in(file, default_name, resources)?;
            s.given = Some(Arc::new(given));
            return Ok(s);
        }
        Scenario::from_file_in(file, default_name, resources)
    }

    /// Validates a parsed file, without files (a `cost.profile` is an error).
    pub fn from_file(file: ScenarioFile, default_name: &str) -> Result<Scenario, ConfigError> {
        Scenario::from_file_in(file, default_name, Arc::new(NoFiles))
    }

    /// Validates a parsed file, with `resources` providing the files it names.
    pub fn from_file_in(
        mut file: ScenarioFile,
        default_name: &str,
        resources: Arc<dyn Resources>,
    ) -> Result<Scenario, ConfigError> {
        let name = file.name.clone().unwrap_or_else(|| default_name.to_string());
        check(
            !name.is_empty()
                && !name.starts_with('.')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "",
            "name",
            "must be letters, digits, '-', '_' or '.', not starting with '.' (it names the output folder)",
            format!("{name:?}"),
        )?;
        file.name = Some(name.clone());
        check_seed_and_engine_version(&file)?;
        let model = file.model.resolve("model")?;
        let heterogeneous = !file.cluster.groups.is_empty();
        let top_gpu = if heterogeneous && file.gpu == GpuSection::default() {
            None
        } else if file.gpu == GpuSection::default() {
            return Err(ConfigError::at("gpu", "missing section: give [gpu] preset = \"...\" or every number".into()));
        } else {
            Some(file.gpu.resolve("gpu")?)
        };
        file.model = ModelSection::from_spec(&model);
        if let Some(gpu) = &top_gpu {
            file.gpu = GpuSection::from_spec(gpu);
        }
        file.cluster.validate("cluster")?;
        file.memory.validate("memory")?;
        file.cost.validate("cost")?;
        file.workload.validate("workload")?;
        file.slo.validate("slo")?;
        file.metrics.validate("metrics")?;
        file.run.validate("run")?;
        file.plan.as_ref().map_or(Ok(()), |p| p.validate("plan"))?;
        file.tune.as_ref().map_or(Ok(()), |t| t.validate("tune"))?;
        file.resolve_scheduler(&model)?;
        let mut groups = if heterogeneous {
            cluster::resolve_groups(&mut file, &model, top_gpu.as_ref())?
        } else {
            vec![Scenario::single_group(&mut file, &model, top_gpu.expect("checked above"))?]
        };
        for (i, g) in groups.iter_mut().enumerate() {
            let scheduler = if heterogeneous { format!("cluster.groups[{i}].scheduler") } else { "scheduler".into() };
            g.scheduler.queue.resolve(&file.slo, &format!("{scheduler}.queue"))?;
            let path = if heterogeneous { format!("cluster.groups[{i}].cost") } else { "cost".into() };
            // Another engine's kernels are refused before the database is read.
            check_database_engine(file.engine, g, &path)?;
            (g.profile, g.rank_profile) = group_profile(g, &model, resources.as_ref(), &path)?;
            check_profile_engine(file.engine, g, &path)?;
            g.calibration = group_calibration(g, &group_engine(file.engine, &g.cost), resources.as_ref(), &path)?;
        }
        file.fleet.as_ref().map_or(Ok(()), |f| f.validate("fleet", &groups))?;
        let at_start = groups.iter().map(|g| g.count).fold(0u32, u32::saturating_add);
        let frontend = file.frontend.as_mut().map(|f| f.resolve("frontend", at_start)).transpose()?;
        let disaggregation = crate::disagg::resolve(file.cluster.disaggregation.as_ref(), &groups, heterogeneous)?;
        file.cluster.disaggregation = disaggregation.clone();
        if disaggregation.is_some() {
            if let Some(i) = groups.iter().position(|g| g.layout.dp_attention > 1) {
                return Err(ConfigError::at(
                    &format!("cluster.groups[{i}].dp_attention"),
                    "DP attention in a disaggregated cluster is not simulated yet (KV transfers assume TP ranks)"
                        .into(),
                ));
            }
        }
        if let (Some(plan), Some(_)) = (&file.plan, &disaggregation) {
            if plan.spare > 0 {
                return Err(ConfigError::at(
                    "plan.spare",
                    format!("{} instances down is not planned for a disaggregated cluster (cluster.disaggregation); use plan.spare_instances to add spares without simulating failures", plan.spare),
                ));
            }
        }
        if file.fleet.is_some() && disaggregation.is_some() {
            return Err(ConfigError::at(
                "fleet",
                "failures and autoscaling are not modelled for a disaggregated cluster (cluster.disaggregation); \
                 remove one of the two sections"
                    .into(),
            ));
        }
        if let Some(t) = file.workload.trace.as_mut() {
            if t.source.is_none() {
                resources.trace(t).map_err(|e| ConfigError::at("", e.to_string()))?;
            }
        }
        check_known_requests(&file)?;
        Ok(Scenario {
            name,
            seed: file.seed,
            model,
            dp_balance: dp_balance(&mut file, &groups, heterogeneous)?,
            attention_dp: attention_dp(&file, &groups)?,
            groups,
            router: file.cluster.router.clone(),
            workload: file.workload.clone(),
            slo: file.slo.clone(),
            metrics: file.metrics.clone(),
            run: file.run.clone(),
            fleet: file.fleet.clone(),
            frontend,
            disaggregation: disaggregation.as_ref().map(Into::into),
            resolved: file,
            resources,
            cost_scale: 1.0,
            given: None,
        })
    }

    /// Validates a file derived from this scenario (a plan candidate, a compare variant) with
    /// the same resources.
    pub fn derive(&self, file: ScenarioFile) -> Result<Scenario, ConfigError> {
        Scenario::from_file_in(file, &self.name, self.resources.clone())
    }

    /// `file`, a configuration derived from this one by `edit` (a plan candidate, a run at
    /// another TP) of its resolved file, with this scenario's `engine` rules applied again to
    /// what the edit left: `edit` is applied to the document as written, whose keys the rules
    /// then leave as given. So the defaults that depend on what the edit changed follow it
    /// rather than keep this scenario's numbers: the engine's limits on another GPU, SGLang's
    /// running requests from another pool, vLLM's asynchronous scheduling with pipeline
    /// stages. Without an `engine`, `file` as it is.
    pub fn engine_defaults_after(
        &self,
        file: ScenarioFile,
        edit: impl Fn(&mut toml::Table) -> Result<(), ConfigError>,
    ) -> Result<ScenarioFile, ConfigError> {
        let Some(given) = &self.given else { return Ok(file) };
        let mut given = (**given).clone();
        edit(&mut given)?;
        let mut file = file.with_engine_defaults(&given);
        // A group's limits the engine filled in (the resolved file holds them as numbers) are
        // taken again on the group's GPU, as the document as written leaves them.
        let groups = given.get("cluster").and_then(|c| c.get("groups")).and_then(toml::Value::as_array);
        for (g, written) in file.cluster.groups.iter_mut().zip(groups.into_iter().flatten()) {
            let written = written.get("scheduler").and_then(toml::Value::as_table);
            let Some(resolved) = g.scheduler.as_mut() else { continue };
            for key in ["max_num_seqs", "max_num_batched_tokens"] {
                if !written.is_some_and(|w| w.contains_key(key)) {
                    resolved.remove(key);
                }
            }
        }
        Ok(file)
    }

    /// The one group of the `[cluster] instances, tp` form; the file's `max_num_seqs` becomes
    /// the number the engine's rule gives it ([`SchedulerSection::fit_to_pool`]).
    fn single_group(file: &mut ScenarioFile, model: &ModelSpec, gpu: GpuSpec) -> Result<InstanceGroup, ConfigError> {
        let tp = file.cluster.tp as u64;
        check(
            model.heads.is_multiple_of(tp),
            "cluster",
            "tp",
            &format!("must divide the model's {} attention heads", model.heads),
            tp,
        )?;
        let layout = layout(model, tp, file.cluster.dp_attention, file.cluster.ep, file.cluster.pp, "cluster")?;
        let cfg = MemoryConfig {
            tp,
            dp_attention: layout.dp_attention,
            pp: layout.pp,
            gpu_memory_utilization: file.memory.gpu_memory_utilization,
            block_tokens: file.scheduler.block_tokens as u64,
            reserve_bytes: file.memory.reserve_gib.map(|g| (g * crate::memory::GIB) as u64),
            max_num_batched_tokens: file.scheduler.max_num_batched_tokens as u64,
            max_num_seqs: file.scheduler.max_num_seqs as u64,
            kv_blocks: file.memory.kv_blocks,
            engine: file.memory.engine_memory(file.engine_version.as_deref()),
        };
        let memory = group_memory(model, &gpu, &cfg, &file.scheduler, tp, "memory", "scheduler")?;
        file.scheduler.fit_to_pool(&memory, layout.dp_attention, "scheduler")?;
        let max_model_len = file.scheduler.model_len().expect("resolved by from_file");
        Ok(InstanceGroup {
            name: format!("{}-tp{}{}", gpu.name, tp, layout.suffix()),
            count: file.cluster.instances,
            gpu,
            tp,
            layout,
            scheduler: file.scheduler.clone(),
            memory,
            cost: file.cost.clone(),
            profile: None,
            rank_profile: None,
            calibration: None,
            max_model_len,
            role: crate::instance::Role::Mixed,
        })
    }

    /// Sets the seed (the CLI's `--seed`), keeping the resolved file in step.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
        self.resolved.seed = seed;
    }

    /// Prices every iteration `factor` times as long (> 0; 1: as the cost model says).
    pub fn set_cost_scale(&mut self, factor: f64) {
        self.cost_scale = factor;
    }

    /// The resolved scenario as TOML, with its seed; a cluster of groups opens with
    /// [`GROUPS_NOTE`].
    pub fn resolved_toml(&self) -> String {
        let r = &self.resolved;
        if r.cluster.groups.is_empty() {
            return toml::to_string_pretty(r).expect("scenario serialises");
        }
        // The toml crate's writer is quadratic in the number of tables (32,000 groups took 46 s):
        // the file without its groups, then each `[[cluster.groups]]` table written on its own.
        #[derive(serde::Serialize)]
        struct Groups<'a> {
            groups: [&'a GroupSection; 1],
        }
        #[derive(serde::Serialize)]
        struct One<'a> {
            cluster: Groups<'a>,
        }
        let mut head = r.clone();
        head.cluster.groups.clear();
        let mut out = String::from(GROUPS_NOTE);
        out += &toml::to_string_pretty(&head).expect("scenario serialises");
        for g in &r.cluster.groups {
            out.push('\n');
            out += &toml::to_string_pretty(&One { cluster: Groups { groups: [g] } }).expect("a group serialises");
        }
        out
    }

    /// The serving engine the scenario names at its top level (`engine = "..."`), if any.
    pub fn serving_engine(&self) -> Option<&'static str> {
        self.resolved.engine.map(|e| e.name())
    }

    /// Total instances over all groups.
    pub fn instances(&self) -> u32 {
        self.groups.iter().map(|g| g.count).sum()
    }
}

/// The first lines of a resolved cluster of groups: every group's table holds what its
/// instances run with (the engine's limits on the group's own GPU among them), so the top-level
/// tables, which a group inherits only where it is silent, describe no instance.
pub const GROUPS_NOTE: &str =
    "# A cluster of groups: each cluster.groups table below holds the GPU, TP, scheduler, memory\n\
     # and cost its instances run with. The top-level [gpu], [cluster] instances and tp, [scheduler],\n\
     # [memory] and [cost] are what a group that leaves them out would inherit: here they describe no\n\
     # instance.\n";

/// A workload known to be larger than the run may hold is refused before anything runs.
fn check_known_requests(file: &ScenarioFile) -> Result<(), ConfigError> {
    let known = file.workload.requests.or_else(|| {
        let t = file.workload.trace.as_ref()?;
        Some(t.source.as_ref()?.scan.as_ref()?.requests)
    });
    if let Some(n) = known {
        let what = if file.workload.requests.is_some() { "requests" } else { "trace" };
        check(
            n <= file.run.max_requests,
            "workload",
            what,
            &format!(
                "has more requests than run.max_requests = {} (about 56 bytes of memory each): raise run.max_requests on a machine with the memory",
                file.run.max_requests
            ),
            n,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
