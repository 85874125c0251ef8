//! `[[cluster.groups]]`: heterogeneous clusters, one group per kind of instance.
//!
//! ```text
//!   [[cluster.groups]]                 [[cluster.groups]]
//!   name = "h100", count = 4            name = "a100", count = 2
//!   gpu = "h100-sxm", tp = 1            gpu = "a100-80g", tp = 2
//!                                       scheduler = { max_num_seqs = 128 }   ← merged over [scheduler]
//! ```
//! The model is shared. Each group's `scheduler`, `memory` and `cost` tables are overrides:
//! their keys replace those of the top-level sections (see [`super::edit::merge`]), so a group
//! says only what differs. The resolved scenario writes every group out in full.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use super::edit::{from_table, overlay, to_table};
use super::engines::LimitsFromGpu;
use super::file::{GpuSection, MemorySection, SchedulerSection};
use super::{check, de, ConfigError, InstanceGroup, ScenarioFile};
use crate::cost::CostSpec;
use crate::instance::Role;
use crate::instance::SeqsFromPool;
use crate::memory::MemoryConfig;
use crate::spec::{GpuSpec, ModelSpec};

/// One group of identical instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSection {
    /// Label in reports. Default: `<gpu name>-tp<tp>`.
    pub(crate) name: Option<String>,
    /// Instances in the group (1–100000).
    pub(crate) count: u32,
    /// A GPU preset name (`"a100-80g"`) or a table like `[gpu]`. Default: the top-level `[gpu]`.
    #[serde(default, deserialize_with = "gpu_or_preset")]
    pub(crate) gpu: Option<GpuSection>,
    /// Tensor-parallel degree of each instance. Default 1.
    pub(crate) tp: Option<u32>,
    /// Attention data-parallel ranks over the instance's GPUs (as `cluster.dp_attention`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) dp_attention: Option<u32>,
    /// Expert parallelism (as `cluster.ep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ep: Option<bool>,
    /// Pipeline-parallel stages of each instance (as `cluster.pp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pp: Option<u32>,
    /// Keys overriding `[scheduler]` for this group.
    pub(crate) scheduler: Option<toml::Table>,
    /// Keys overriding `[memory]` for this group.
    pub(crate) memory: Option<toml::Table>,
    /// Keys overriding `[cost]` for this group (a different `kind` replaces it whole).
    pub(crate) cost: Option<toml::Table>,
    /// `"prefill"` or `"decode"`: the group's pool in a disaggregated cluster (see
    /// [`crate::disagg`]). Default `"mixed"`: whole requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<Role>,
}

/// Accepts a GPU as a preset name or as a `[gpu]`-like table, keeping key paths in errors.
pub(crate) fn gpu_or_preset<'de, D: Deserializer<'de>>(d: D) -> Result<Option<GpuSection>, D::Error> {
    match toml::Value::deserialize(d)? {
        toml::Value::String(s) => Ok(Some(GpuSection { preset: Some(s), ..GpuSection::default() })),
        toml::Value::Table(t) => de::variant::<GpuSection, D::Error>(t).map(Some),
        other => {
            Err(D::Error::custom(format!("expected a GPU preset name or a table, got {} {other}", other.type_str())))
        }
    }
}

/// A group's scheduler: the top-level one overlaid with its own (`table`), its context length
/// resolved; the limits the engine fills in taken on the group's `gpu` ([`LimitsFromGpu`]); a
/// `max_num_seqs` of its own is a given one to SGLang's rule, whatever the top-level file
/// (`rule`) left to the engine ([`SeqsFromPool`]); the top-level "auto" length (`fit`), which
/// reaches the group as the context it resolved to, is fitted to the group's pool unless the
/// group gives its own.
fn group_scheduler(
    table: toml::Table,
    (rule, limits, fit): (Option<SeqsFromPool>, Option<LimitsFromGpu>, bool),
    g: &GroupSection,
    gpu: &GpuSpec,
    model: &ModelSpec,
    path: &str,
) -> Result<SchedulerSection, ConfigError> {
    let mut scheduler: SchedulerSection = from_table(table, &format!("{path}.scheduler"))?;
    if let Some(limits) = limits {
        limits.apply(&mut scheduler, gpu, g.dp_attention.unwrap_or(1), g.scheduler.as_ref());
    }
    let own_seqs = g.scheduler.as_ref().is_some_and(|t| t.contains_key("max_num_seqs"));
    scheduler.seqs_from_pool = rule.map(|r| SeqsFromPool { given: r.given || own_seqs, ..r });
    scheduler.resolve_model_len(model, &format!("{path}.scheduler"))?;
    if let Some(limits) = limits {
        limits.settle(&mut scheduler, g.scheduler.as_ref(), &format!("{path}.scheduler"))?;
    }
    scheduler.fit_model_len |= fit && !g.scheduler.as_ref().is_some_and(|t| t.contains_key("max_model_len"));
    let dp = g.dp_attention.unwrap_or(1);
    super::engines::check_prefill_cadence(&scheduler.batching, dp, limits, &format!("{path}.scheduler"))?;
    scheduler.validate(&format!("{path}.scheduler"))?;
    Ok(scheduler)
}

/// Each group's count, and at most [`crate::instance::MAX_INSTANCES`] over all groups.
fn check_total(groups: &[GroupSection]) -> Result<(), ConfigError> {
    for (i, g) in groups.iter().enumerate() {
        let path = format!("cluster.groups[{i}]");
        check((1..=100_000).contains(&g.count), &path, "count", "must be in [1, 100000]", g.count)?;
    }
    let total = groups.iter().map(|g| u64::from(g.count)).sum::<u64>();
    if total > crate::instance::MAX_INSTANCES {
        // Each instance holds its scheduler, KV allocator and queues (a few KiB): 20 groups of
        // 100,000 would need gigabytes before the first event.
        return Err(ConfigError::at(
            "cluster.groups",
            format!(
                "the groups hold {total} instances in all; at most {} are simulated in one cluster",
                crate::instance::MAX_INSTANCES
            ),
        ));
    }
    Ok(())
}

/// Resolves `[[cluster.groups]]` into instance groups, writing each group back in full.
pub(crate) fn resolve_groups(
    file: &mut ScenarioFile,
    model: &ModelSpec,
    top_gpu: Option<&GpuSpec>,
) -> Result<Vec<InstanceGroup>, ConfigError> {
    let mut out = Vec::with_capacity(file.cluster.groups.len());
    let base_scheduler = to_table(&file.scheduler);
    let base_memory = to_table(&file.memory);
    let base_cost = to_table(&file.cost);
    check_total(&file.cluster.groups)?;
    for (i, g) in file.cluster.groups.iter_mut().enumerate() {
        let path = format!("cluster.groups[{i}]");
        let tp = g.tp.unwrap_or(1);
        check((1..=64).contains(&tp), &path, "tp", "must be in [1, 64]", tp)?;
        check(
            model.heads.is_multiple_of(tp as u64),
            &path,
            "tp",
            &format!("must divide the model's {} attention heads", model.heads),
            tp,
        )?;
        let gpu = match (&g.gpu, top_gpu) {
            (Some(s), _) => s.resolve(&format!("{path}.gpu"))?,
            (None, Some(top)) => top.clone(),
            (None, None) => {
                return Err(ConfigError::at(&format!("{path}.gpu"), "required when there is no top-level [gpu]".into()))
            }
        };
        let section = |base: &toml::Table, over: &Option<toml::Table>| match over {
            Some(o) => overlay(base, o),
            None => base.clone(),
        };
        let rules = (file.scheduler.seqs_from_pool, file.limits_from_gpu, file.scheduler.fit_model_len);
        let mut scheduler = group_scheduler(section(&base_scheduler, &g.scheduler), rules, g, &gpu, model, &path)?;
        let memory: MemorySection = from_table(section(&base_memory, &g.memory), &format!("{path}.memory"))?;
        memory.validate(&format!("{path}.memory"))?;
        let cost: CostSpec = from_table(section(&base_cost, &g.cost), &format!("{path}.cost"))?;
        cost.validate(&format!("{path}.cost"))?;
        let layout = super::layout(
            model,
            tp as u64,
            g.dp_attention.unwrap_or(1),
            g.ep.unwrap_or(false),
            g.pp.unwrap_or(1),
            &path,
        )?;
        let cfg = MemoryConfig {
            tp: tp as u64,
            dp_attention: layout.dp_attention,
            pp: layout.pp,
            gpu_memory_utilization: memory.gpu_memory_utilization,
            block_tokens: scheduler.block_tokens as u64,
            reserve_bytes: memory.reserve_gib.map(|x| (x * crate::memory::GIB) as u64),
            max_num_batched_tokens: scheduler.max_num_batched_tokens as u64,
            max_num_seqs: scheduler.max_num_seqs as u64,
            kv_blocks: memory.kv_blocks,
            engine: memory.engine_memory(file.engine_version.as_deref()),
        };
        let budget = super::group_memory(
            model,
            &gpu,
            &cfg,
            &scheduler,
            tp as u64,
            &format!("{path}.memory"),
            &format!("{path}.scheduler"),
        )?;
        scheduler.fit_to_pool(&budget, layout.dp_attention, &format!("{path}.scheduler"))?;
        let max_model_len = scheduler.model_len().expect("resolved by group_scheduler");
        let name = g.name.clone().unwrap_or_else(|| format!("{}-tp{tp}{}", gpu.name, layout.suffix()));
        let role = g.role.unwrap_or_default();
        let msg = "pipeline stages in a disaggregated pool are not modelled (give pp = 1)";
        check(role == Role::Mixed || layout.pp == 1, &path, "pp", msg, layout.pp)?;
        *g = GroupSection {
            name: Some(name.clone()),
            count: g.count,
            gpu: Some(GpuSection::from_spec(&gpu)),
            tp: Some(tp),
            dp_attention: (layout.dp_attention > 1).then_some(layout.dp_attention as u32),
            ep: layout.ep.then_some(true),
            pp: (layout.pp > 1).then_some(layout.pp as u32),
            scheduler: Some(to_table(&scheduler)),
            memory: Some(to_table(&memory)),
            cost: Some(to_table(&cost)),
            role: (role != Role::Mixed).then_some(role),
        };
        out.push(InstanceGroup {
            name,
            count: g.count,
            gpu,
            tp: tp as u64,
            layout,
            scheduler,
            memory: budget,
            cost,
            profile: None,
            rank_profile: None,
            calibration: None,
            max_model_len,
            role,
        });
    }
    Ok(out)
}
