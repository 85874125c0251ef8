//! A plan's evidence in words: each candidate's capacity, the count below failing, headroom,
//! borderline counts, the binding constraint, spares, autoscaling and pools — the same text in
//! the CLI's table and the HTML report.

use servesim_sim::plan::{self, CandidateResult, PlanReport};

use crate::output::thousands;

/// The evidence of each candidate's count: its capacity, the count below failing, headroom,
/// borderline counts, the binding constraint, spares and autoscaling (in the CLI's table and
/// in the HTML report).
pub(crate) fn evidence(r: &PlanReport) -> String {
    let h = &r.header;
    let mut o =
        String::from("method: capacity of one instance → instances for the load → GPUs and memory; evidence:\n");
    for c in &r.candidates {
        if let Some(p) = &c.pools {
            o += &pool_lines(c, p);
            continue;
        }
        o += &format!("  {}: {} × tp {}", c.name, c.gpu, c.tp);
        if c.pp > 1 {
            o += &format!(" × pp {}", c.pp);
        }
        if let Some(cap) = c.single_instance_capacity_rps {
            o += &format!("; one instance sustains {cap:.2} req/s");
            if let (Some(m), true) = (h.load_rps_mean, cap > 0.0) {
                o += &format!(" → {:.2} instances' worth of the mean load", m / cap);
            }
        }
        o += "\n";
        o += &count_text(c, h);
        if let Some(why) = &c.infeasible_reason {
            o += &format!("    infeasible: {why}\n");
        }
        if c.deterministic {
            o += "    deterministic: its runs drew no random number, so every seed gives the same result; each count ran once\n";
        }
        for b in &c.borderline {
            o += &format!(
                "    borderline: {} instances pass on {} of {} seeds (attainment {:.2}–{:.2}%), so not counted as passing\n",
                b.instances,
                b.passed,
                b.seeds,
                b.attainment_min * 100.0,
                b.attainment_max * 100.0
            );
        }
        if let (Some(b), Some(ev)) = (c.binding, &c.binding_evidence) {
            o += &format!("    binding {}: {ev}\n", b.as_str());
        }
        if let Some(cal) = &c.calibration {
            o += &format!("    cost model {cal}\n");
        }
        if let Some(sc) = &c.spare_check {
            o += &spare_lines(sc, c.instances_min);
        }
        if let Some(a) = &c.autoscaled {
            o += &autoscale_lines(a);
        }
    }
    o
}

/// The count a candidate needs and what the one below it did, with what headroom takes it to
/// ("" when it has none).
fn count_text(c: &CandidateResult, h: &plan::PlanHeader) -> String {
    let (Some(n), Some(inst), Some(gpus)) = (c.instances_min, c.instances, c.gpus) else { return String::new() };
    let below = c.points.iter().find(|p| p.instances + 1 == n);
    let fails = match below {
        Some(p) if c.deterministic => {
            format!("{} fail{}", plan::instances(p.instances), if p.instances == 1 { "s" } else { "" })
        }
        Some(p) => format!(
            "{} fail{} on {} of {} seeds",
            plan::instances(p.instances),
            if p.instances == 1 { "s" } else { "" },
            p.seeds.len() - p.passed(),
            p.seeds.len()
        ),
        None => format!("{} is the least possible", h.spare + 1),
    };
    let down = if h.spare > 0 { format!(" with {} down", h.spare) } else { String::new() };
    let every = if c.deterministic { "under every seed" } else { "on every seed" };
    format!(
        "    {} meet{} the SLO{down} {every} ({fails}); with headroom {inst} → {gpus} GPUs, {:.0} GiB of GPU memory, {} KV blocks per instance\n",
        plan::instances(n),
        if n == 1 { "s" } else { "" },
        gpus as f64 * c.gpu_memory_gib.unwrap_or(0.0),
        thousands(c.kv_blocks_per_instance.unwrap_or(0))
    )
}

/// What N + k showed: the count without failures, and the same count with k down.
fn spare_lines(sc: &plan::SpareCheck, n_plus_k: Option<u32>) -> String {
    let worst = |p: &servesim_sim::plan::Point| p.worst().attainment * 100.0;
    let n = sc.instances_min_no_failures;
    let mut o = format!(
        "    N+{}: with none down {} meet the SLO (worst seed {:.2}%)",
        sc.spare,
        plan::instances(n),
        worst(&sc.no_failures)
    );
    match &sc.with_spare_down {
        Some(p) => {
            o += &format!(
                "; with {} down they {} ({:.2}%, passing on {} of {} seeds)",
                sc.spare,
                if p.all_pass() { "still meet it" } else { "miss it" },
                worst(p),
                p.passed(),
                p.seeds.len()
            );
        }
        None => o += &format!("; {} down leaves none up", sc.spare),
    }
    match n_plus_k {
        Some(m) => o += &format!(" → {} with {} down\n", plan::instances(m), sc.spare),
        None => o += "\n",
    }
    o
}

/// The autoscaled fleet against the fixed one.
fn autoscale_lines(a: &plan::AutoscaleComparison) -> String {
    let cost = |c: Option<f64>| c.map(|x| format!(", ${x:.2}/day")).unwrap_or_default();
    format!(
        "    fixed {} instances: {:.1} instance-hours/day{}, attainment {:.2}%\n    autoscaled {}–{}: {:.2} instances on average (max {}), {:.1} instance-hours/day{}, attainment {:.2}% (worst seed; {})\n",
        a.fixed_instances,
        a.fixed_instance_hours_per_day,
        cost(a.fixed_cost_per_day),
        a.fixed_attainment * 100.0,
        a.min,
        a.max,
        a.instances_mean,
        a.instances_max,
        a.instance_hours_per_day,
        cost(a.cost_per_day),
        a.attainment * 100.0,
        if a.met { "meets the SLO" } else { "misses the SLO" }
    )
}
/// The method lines of a disaggregated candidate: both pools' counts and the pairs that fail.
fn pool_lines(c: &CandidateResult, p: &plan::PoolsResult) -> String {
    let mut o = format!(
        "  {}: prefill pool {} × tp {}, decode pool {} × tp {} (each pool sized for its part of the SLO: TTFT on prefill, TPOT and E2E on decode; then jointly)\n",
        c.name, p.prefill.gpu, p.prefill.tp, p.decode.gpu, p.decode.tp
    );
    if let (Some(np), Some(nd)) = (p.prefill_instances_min, p.decode_instances_min) {
        let fails: Vec<String> = p
            .points
            .iter()
            .filter(|x| (x.prefill, x.decode) != (np, nd))
            .map(|x| {
                let failed = x.seeds.iter().filter(|s| !s.met).count();
                format!("{} + {} fails on {} of {} seeds", x.prefill, x.decode, failed, x.seeds.len())
            })
            .collect();
        let fails = if fails.is_empty() { "1 + 1 is the least possible".to_string() } else { fails.join("; ") };
        o += &format!(
            "    {np} prefill + {nd} decode instances meet the SLO on every seed ({fails}); with headroom {} + {} → {} + {} GPUs\n",
            p.prefill_instances.unwrap_or(0),
            p.decode_instances.unwrap_or(0),
            p.prefill_gpus.unwrap_or(0),
            p.decode_gpus.unwrap_or(0)
        );
    }
    if let Some(why) = &c.infeasible_reason {
        o += &format!("    infeasible: {why}\n");
    }
    if let (Some(b), Some(ev)) = (c.binding, &c.binding_evidence) {
        o += &format!("    binding {}: {ev}\n", b.as_str());
    }
    o
}
