//! Plan candidates: each one is the scenario with a few keys changed, built by editing the
//! scenario document so that any key — today's and tomorrow's — can be part of a candidate.

use crate::config::ConfigError;
use crate::scenario::edit::{from_table, merge, overlay, set_path, to_table};
use crate::scenario::{CandidateSection, PlanSection, Scenario};

/// A candidate ready to run: its scenario has one homogeneous group of one instance (the search
/// sets the count), or it cannot run at all (`infeasible`, e.g. the model does not fit).
#[derive(Clone, Debug)]
pub struct Candidate {
    pub name: String,
    pub scenario: Option<Scenario>,
    /// Why it cannot run, when it cannot.
    pub infeasible: Option<String>,
    pub gpu: String,
    pub tp: u64,
    /// Pipeline stages of `tp` GPUs each: an instance has `tp × pp` GPUs.
    pub pp: u64,
    pub price_per_gpu_hour: Option<f64>,
    /// A disaggregated candidate: its prefill and decode pools, both sized by the search
    /// (`gpu`, `tp` and the price above are the prefill pool's).
    pub(crate) pools: Option<super::PoolCandidate>,
    /// Whether a calibration corrects its cost model (`cost.calibration`), in words: `calibrated
    /// by PATH`, or why the one the scenario names does not apply; `None` when none is named.
    pub calibration: Option<String>,
    /// What prices its iterations, in words (its groups' [`InstanceGroup::cost_words`], the
    /// calibration included); `None` when it has no scenario.
    ///
    /// [`InstanceGroup::cost_words`]: crate::instance::InstanceGroup::cost_words
    pub priced_by: Option<String>,
}

/// Why a candidate cannot run, when its derive error is a result rather than a mistake (`e`
/// back otherwise): the model does not fit the GPU at this TP (a pool's group, when `pooled`), vLLM
/// would not start with its context length or its limits ([`crate::instance::VLLM_NO_START`]), or
/// the database's kernels for this GPU and TP are refused by the GPU's floor (the L40S's o_proj
/// at TP 4 runs a 64-sequence decode step in 295.65 µs, under its 334.96 µs floor at 864 GB/s;
/// our assumption: the microbenchmark's weights stay in the L2 cache between repetitions).
fn not_runnable(e: ConfigError, pooled: bool) -> Result<String, ConfigError> {
    let pool_memory = pooled && e.path.starts_with("cluster.groups[") && e.path.ends_with("].memory");
    match e.path.as_str() {
        "memory" => Ok(e.message),
        // The floor's refusal (`Roofline::floor_words`), or a profile without tables at the
        // candidate's TP; a missing database stays an error to act on.
        p if pool_memory
            || (p.ends_with("cost.database") && e.message.contains("needs at its peaks"))
            || e.message.contains(crate::cost::NO_TABLES_AT_TP)
            || ((p.ends_with("scheduler.max_model_len")
                || p.ends_with("scheduler.max_num_batched_tokens")
                || p.ends_with("batching.max_num_active_seqs"))
                && e.message.starts_with(crate::instance::VLLM_NO_START)) =>
        {
            Ok(format!("{}: {}", e.path, e.message))
        }
        _ => Err(e),
    }
}

/// A candidate's [`Candidate::calibration`] and [`Candidate::priced_by`] (one group's words, or
/// each group's after its name); `None` without a scenario.
fn words(s: &Option<Scenario>) -> (Option<String>, Option<String>) {
    let Some(s) = s else { return (None, None) };
    let priced = match s.groups.as_slice() {
        [g] => g.cost_words(),
        gs => gs.iter().map(|g| format!("{}: {}", g.name, g.cost_words())).collect::<Vec<_>>().join("; "),
    };
    (s.groups.first().and_then(calibration_words), Some(priced))
}

/// A group's calibration in words (see [`Candidate::calibration`]).
fn calibration_words(g: &crate::instance::InstanceGroup) -> Option<String> {
    let path = match &g.cost {
        crate::cost::CostSpec::Roofline(c) => c.calibration.clone().unwrap_or_default(),
        crate::cost::CostSpec::Linear(_) => String::new(),
    };
    match g.calibration.as_ref()? {
        Ok(_) => Some(format!("calibrated by {path}")),
        Err(why) => Some(format!("uncalibrated: {why}")),
    }
}

/// The candidates of a scenario's `[plan]` (or the scenario's own cluster when there are none).
/// Bad keys are errors naming `plan.candidates[i]`; a candidate whose model does not fit in
/// memory is returned as infeasible, with the reason.
pub fn candidates(s: &Scenario) -> Result<Vec<Candidate>, ConfigError> {
    let plan = s.resolved.plan.clone().unwrap_or_default();
    let mut base = to_table(&s.resolved);
    base.remove("plan");
    // A candidate is one group of its own: the autoscaler scales it whatever the scenario's
    // group was called, and failures are left to `simulate` (plan runs take `[plan] spare`).
    if let Some(toml::Value::Table(f)) = base.get_mut("fleet") {
        f.remove("failures");
        if let Some(toml::Value::Table(a)) = f.get_mut("autoscale") {
            a.remove("group");
        }
    }
    let sections: Vec<CandidateSection> = if plan.candidates.is_empty() {
        if s.disaggregation.is_some() {
            pool_groups(s, "plan")?;
            vec![CandidateSection {
                name: "disaggregated".into(),
                gpu: None,
                tp: None,
                pp: None,
                scheduler: None,
                memory: None,
                cost: None,
                router: None,
                set: None,
            }]
        } else if s.groups.len() > 1 {
            return Err(ConfigError::at(
                "plan.candidates",
                "required for a heterogeneous cluster: list the configurations to size".into(),
            ));
        } else {
            let g = &s.groups[0];
            vec![CandidateSection {
                name: g.name.clone(),
                gpu: None,
                tp: None,
                pp: None,
                scheduler: None,
                memory: None,
                cost: None,
                router: None,
                set: None,
            }]
        }
    } else {
        plan.candidates.clone()
    };
    sections
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if crate::engine::cancelled() {
                return Err(ConfigError::at("plan.candidates", "stopped before every candidate was read".into()));
            }
            materialise(s, &plan, &base, i, c)
        })
        .collect::<Result<Vec<Candidate>, ConfigError>>()
        .and_then(|cs| {
            // A calibration named for the plan but applying to none of its candidates is refused.
            let named: Vec<&String> = cs.iter().filter_map(|c| c.calibration.as_ref()).collect();
            if !named.is_empty() && named.iter().all(|w| w.starts_with("uncalibrated")) {
                return Err(ConfigError::at(
                    "cost.calibration",
                    format!("refused: it applies to no candidate ({})", named[0].trim_start_matches("uncalibrated: ")),
                ));
            }
            Ok(cs)
        })
}

fn table<'a>(doc: &'a mut toml::Table, key: &str) -> &'a mut toml::Table {
    let v = doc.entry(key.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if !v.is_table() {
        *v = toml::Value::Table(toml::Table::new());
    }
    v.as_table_mut().expect("made a table")
}

/// The candidate's `[cluster]`: one homogeneous group of one instance (a disaggregated scenario
/// keeps its pools), the single group's TP and stages, then the candidate's own TP, PP and router.
fn edit_cluster(cluster: &mut toml::Table, c: &CandidateSection, pooled: bool, single_tp: Option<u64>, single_pp: u64) {
    if !pooled {
        cluster.remove("groups");
        cluster.insert("instances".into(), toml::Value::Integer(1));
    }
    if let Some(tp) = single_tp {
        cluster.insert("tp".into(), toml::Value::Integer(tp as i64));
    }
    if let Some(tp) = c.tp {
        cluster.insert("tp".into(), toml::Value::Integer(tp as i64));
    }
    if !pooled && single_pp > 1 {
        cluster.insert("pp".into(), toml::Value::Integer(single_pp as i64));
    }
    if let Some(pp) = c.pp {
        cluster.insert("pp".into(), toml::Value::Integer(pp as i64));
    }
    if let Some(r) = &c.router {
        let mut over = toml::Table::new();
        over.insert("router".into(), toml::Value::Table(r.clone()));
        merge(cluster, &over);
    }
}

/// Applies candidate `c` (`path` names it) to a scenario document: its cluster
/// ([`edit_cluster`]), GPU, scheduler, memory and cost overlays, then its `set` keys.
fn edit_document(
    doc: &mut toml::Table,
    c: &CandidateSection,
    path: &str,
    pooled: bool,
    single_tp: Option<u64>,
    single_pp: u64,
) -> Result<(), ConfigError> {
    edit_cluster(table(doc, "cluster"), c, pooled, single_tp, single_pp);
    if let Some(g) = &c.gpu {
        doc.insert("gpu".into(), toml::Value::Table(to_table(g)));
    }
    for (key, over) in [("scheduler", &c.scheduler), ("memory", &c.memory), ("cost", &c.cost)] {
        let Some(o) = over else { continue };
        let t = overlay(table(doc, key), o);
        doc.insert(key.into(), toml::Value::Table(t));
        // A pool's own table (the resolved file's holds every key) gives way to the candidate's
        // keys too, which are the whole configuration's.
        let groups = table(doc, "cluster").get_mut("groups").and_then(toml::Value::as_array_mut);
        for g in groups.into_iter().flatten().filter_map(toml::Value::as_table_mut) {
            if let Some(toml::Value::Table(own)) = g.get(key) {
                let t = overlay(own, o);
                g.insert(key.into(), toml::Value::Table(t));
            }
        }
    }
    for (k, v) in c.set.iter().flatten() {
        set_path(doc, k, v.clone())
            .map_err(|m| ConfigError::at(&format!("{path} ({}).set.\"{k}\"", c.name), m.to_string()))?;
    }
    Ok(())
}

fn materialise(
    s: &Scenario,
    plan: &PlanSection,
    base: &toml::Table,
    i: usize,
    c: &CandidateSection,
) -> Result<Candidate, ConfigError> {
    let path = format!("plan.candidates[{i}]");
    let err = |e: ConfigError| ConfigError { path: format!("{path} ({}): {}", c.name, e.path), ..e };
    // A heterogeneous scenario's groups give way to one homogeneous group; its GPU then comes
    // from the candidate (or the top-level [gpu]). A disaggregated one keeps its pools.
    let pooled = s.disaggregation.is_some();
    let single_gpu = (s.groups.len() == 1).then(|| (s.groups[0].gpu.clone(), s.groups[0].tp));
    let single_pp = if s.groups.len() == 1 { s.groups[0].layout.pp } else { 1 };
    let single_tp = single_gpu.as_ref().map(|(_, tp)| *tp);
    let edit = |doc: &mut toml::Table| edit_document(doc, c, &path, pooled, single_tp, single_pp);
    let mut doc = base.clone();
    edit(&mut doc)?;
    // The engine's defaults that depend on the GPU, the TP or the stages follow the candidate's.
    let file = s.engine_defaults_after(from_table(doc, "").map_err(err)?, edit)?;
    let (scenario, infeasible) = match s.derive(file) {
        Ok(sc) => (Some(sc), None),
        Err(e) => (None, Some(not_runnable(e, pooled).map_err(err)?)),
    };
    let (calibration, priced_by) = words(&scenario);
    let price_of = |gpu: &str| -> Result<Option<f64>, ConfigError> {
        if plan.price_per_gpu_hour.is_empty() {
            return Ok(None);
        }
        plan.price_per_gpu_hour.get(gpu).copied().map(Some).ok_or_else(|| {
            let known: Vec<&str> = plan.price_per_gpu_hour.keys().map(String::as_str).collect();
            ConfigError::at(
                "plan.price_per_gpu_hour",
                format!("no price for GPU \"{gpu}\" (candidate {}); priced: {}", c.name, known.join(", ")),
            )
        })
    };
    if pooled {
        let pools = match &scenario {
            Some(sc) => {
                let (p, d) = pool_groups(sc, &path).map_err(err)?;
                let spec = |g: usize| -> Result<super::PoolSpec, ConfigError> {
                    let g = &sc.groups[g];
                    Ok(super::PoolSpec {
                        gpu: g.gpu.name.clone(),
                        tp: g.tp,
                        price_per_gpu_hour: price_of(&g.gpu.name)?,
                    })
                };
                Some(super::PoolCandidate { prefill_group: p, decode_group: d, prefill: spec(p)?, decode: spec(d)? })
            }
            None => None,
        };
        let (gpu, tp, price) = match &pools {
            Some(p) => (p.prefill.gpu.clone(), p.prefill.tp, p.prefill.price_per_gpu_hour),
            None => (String::new(), 1, None),
        };
        return Ok(Candidate {
            calibration,
            priced_by,
            name: c.name.clone(),
            scenario,
            infeasible,
            gpu,
            tp,
            pp: 1,
            price_per_gpu_hour: price,
            pools,
        });
    }
    let pp = scenario.as_ref().map_or(1, |sc| sc.groups[0].layout.pp);
    let (gpu, tp) = match &scenario {
        Some(sc) => (sc.groups[0].gpu.name.clone(), sc.groups[0].tp),
        None => {
            let g = c.gpu.as_ref().and_then(|g| g.preset.clone().or(g.name.clone()));
            let g = g.or_else(|| single_gpu.as_ref().map(|(g, _)| g.name.clone())).unwrap_or_default();
            (g, c.tp.map(|t| t as u64).or(single_gpu.as_ref().map(|(_, t)| *t)).unwrap_or(1))
        }
    };
    let price = price_of(&gpu)?;
    Ok(Candidate {
        name: c.name.clone(),
        scenario,
        infeasible,
        gpu,
        tp,
        pp,
        price_per_gpu_hour: price,
        pools: None,
        calibration,
        priced_by,
    })
}

/// The prefill and decode groups of a disaggregated scenario, which `plan` sizes: exactly one
/// of each.
fn pool_groups(s: &Scenario, path: &str) -> Result<(usize, usize), ConfigError> {
    use crate::instance::Role;
    let of = |r: Role| s.groups.iter().enumerate().filter(|(_, g)| g.role == r).map(|(i, _)| i).collect::<Vec<_>>();
    match (of(Role::Prefill).as_slice(), of(Role::Decode).as_slice()) {
        ([p], [d]) => Ok((*p, *d)),
        (p, d) => Err(ConfigError::at(
            path,
            format!(
                "sizing a disaggregated cluster needs exactly one prefill and one decode group, got {} and {}",
                p.len(),
                d.len()
            ),
        )),
    }
}
