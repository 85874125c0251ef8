//! `servesim plan`: a known answer computed by hand, the minimum count against independent
//! runs, determinism across thread counts, and sharding.

use crate::common::*;
use servesim_sim::engine;
use servesim_sim::plan;
use servesim_sim::Scenario;

/// The known answer. Each iteration costs B + c·(tokens) with B = 5 ms, c = 50 µs; each request
/// brings P + O − 1 = 200 tokens of work (a 100-token prefill and 100 one-token decodes). Over a
/// long stretch at arrival rate r the instance is always busy, so time = iterations × B + work:
/// 1 = B / T̄ + c·r·200, and the mean iteration time is T̄ = B / (1 − c·r·200). A request's TPOT
/// is the mean of the ≈100 iterations it decodes through, so ≈ T̄. TPOT ≤ 10 ms ⇔
/// 1 − 0.01·r ≥ 0.5 ⇔ r ≤ r* = 50 req/s (TTFT ≈ 2 iterations, far under its 1 s limit).
/// At 180 req/s, round-robin of evenly spaced arrivals gives each of N instances 180/N req/s,
/// evenly spaced: N must satisfy 180/N ≤ r*, so N = ⌈180 / 50⌉ = 4; with 3 each takes 60 req/s,
/// T̄ = 5 / (1 − 0.6) = 12.5 ms, which fails. The load k = 4 times 45 req/s (which one instance
/// serves) needs ⌈4 × 45 / r*⌉ = 4 instances.
#[test]
fn known_answer_capacity_and_count() {
    let out = out_dir("plan_known");
    let v = plan_json("tests/plan/known-answer.toml", &out);
    let c = &v["candidates"][0];
    let r_star = 50.0;
    let cap = c["single_instance_capacity_rps"].as_f64().unwrap();
    assert!((cap / r_star - 1.0).abs() < 0.05, "single-instance capacity {cap} req/s, hand value {r_star}");
    assert_eq!(c["instances_min"], 4, "⌈180 / 50⌉");
    assert_eq!(c["instances"], 4);
    assert_eq!(c["feasible"], true);
    assert_eq!(c["binding"], "per-token-compute");
    // N − 1 = 3 instances at 60 req/s each: TPOT ≈ T̄ = 12.5 ms, by the same formula.
    let below = &c["points"][0];
    assert_eq!(below["instances"], 3);
    let tpot = below["seeds"][0]["tpot_ms_p99"].as_f64().unwrap();
    assert!((tpot / 12.5 - 1.0).abs() < 0.03, "TPOT at 3 instances {tpot} ms, hand value 12.5");
    // And at 4: 45 req/s each, T̄ = 5 / (1 − 0.45) = 9.09 ms.
    let tpot4 = c["tpot_ms_p99"].as_f64().unwrap();
    assert!((tpot4 / (5.0 / 0.55) - 1.0).abs() < 0.03, "TPOT at 4 instances {tpot4} ms");

    // What was simulated: arrivals at i/180 s for 60 s, the last at t = 60 s: 10,801 requests,
    // 180 in any 1 s, 10 s or 60 s window (181 where the nanosecond rounding of i/180 puts a
    // window's two ends 1 ns closer than its length).
    let off = &v["offered"];
    assert_eq!(
        (off["requests"].as_u64(), off["first_s"].as_f64(), off["last_s"].as_f64()),
        (Some(10_801), Some(0.0), Some(60.0))
    );
    for p in off["peak_rps"].as_array().unwrap() {
        let p = p.as_f64().unwrap();
        assert!((180.0..=181.0).contains(&p.round()), "{off}");
    }
    // The base load, 45 req/s, fits one instance; the load k = 4 times higher needs ⌈k·45 / r*⌉.
    let src = read(&root().join("tests/plan/known-answer.toml")).replace("rate = 180", "rate = 45");
    let path = out.join("base.toml");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(&path, src).unwrap();
    let v1 = plan_json(path.to_str().unwrap(), &out);
    assert_eq!(v1["candidates"][0]["instances_min"], 1);
    let k = 4.0;
    assert_eq!(c["instances_min"].as_u64().unwrap(), (k * 45.0 / cap).ceil() as u64);
}

/// The recommended configuration as a team deploys it: plan.json's deployment (4 replicas of the
/// launch command, the router), the same in the table, and deploy.yaml holding it; a later run in
/// the folder that recommends nothing leaves no manifest of the earlier one behind.
#[test]
fn a_plan_says_what_to_deploy_and_writes_its_manifest() {
    let out = out_dir("plan_deploy");
    let v = plan_json("tests/plan/known-answer.toml", &out);
    let d = &v["candidates"][0]["deploy"];
    let server = &d["servers"][0];
    assert_eq!((server["replicas"].as_u64(), server["gpus_per_replica"].as_u64()), (Some(4), Some(1)));
    let args: Vec<&str> = server["command"]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        args.join(" "),
        "meta-llama/Meta-Llama-3-8B-Instruct --tensor-parallel-size 1 --max-num-seqs 256 \
         --max-num-batched-tokens 8192 --no-enable-prefix-caching"
    );
    assert_eq!(d["router"]["command"]["program"][0], "vllm-router");
    // The buyer's figures: 180 req/s of 101 output tokens is 18,180 output tokens/s, 4,545 on
    // each of the 4 GPUs; no price for the GPU in this scenario, so no $ figures.
    let e = &v["candidates"][0]["economics"];
    let tokens = e["output_tokens_per_s"].as_f64().unwrap();
    assert!((tokens / 18_180.0 - 1.0).abs() < 0.02, "{e}");
    assert!((e["output_tokens_per_s_per_gpu"].as_f64().unwrap() - tokens / 4.0).abs() < 1e-9, "{e}");
    assert!(e["cost_per_hour"].is_null() && e["usd_per_million_output_tokens"].is_null(), "{e}");
    let docs = yaml_rust2::YamlLoader::load_from_str(&read(&out.join("deploy.yaml"))).unwrap();
    let dep = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("Deployment") && d["metadata"]["name"].as_str() == Some("known-answer"))
        .unwrap();
    assert_eq!(dep["spec"]["replicas"].as_i64(), Some(4));
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    let got: Vec<&str> = c["args"].as_vec().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(got[..args.len()], args[..]);
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"].as_i64(), Some(1));
    let o =
        servesim(&["plan", "--scenario", "tests/plan/known-answer.toml", "--quiet", "--out", out.to_str().unwrap()]);
    let table = stdout(&o);
    assert!(table.contains("  4 × vllm serve meta-llama/Meta-Llama-3-8B-Instruct --tensor-parallel-size 1"), "{table}");
    assert!(table.contains("  router: vllm-router --host 0.0.0.0"), "{table}");
    assert!(table.contains("  Kubernetes manifest: deploy.yaml"), "{table}");
    // The known answer's cost model is the scenario's own line.
    assert!(table.contains("  priced by:\n    h100-sxm-tp1      linear\n"), "{table}");
    assert!(
        table.contains("  cost: no price for h100-sxm ([plan] prices); 17,979 output tokens/s, 4,494 per GPU"),
        "{table}"
    );
    assert!(table.contains("  headroom 0% and 0 spare instance(s) take the minimum 4 to the recommended 4"), "{table}");
    // Two instances at most: nothing meets the SLO, nothing to deploy, no manifest left behind.
    let src = read(&root().join("tests/plan/known-answer.toml")) + "max_instances = 2\n";
    let path = out.join("few.toml");
    std::fs::write(&path, src).unwrap();
    let v = plan_json(path.to_str().unwrap(), &out);
    assert!(v["recommended"].is_null() && v["candidates"][0]["deploy"].is_null(), "{v}");
    assert!(!out.join("deploy.yaml").exists());

    // Routed to the fewest outstanding requests: llm-d's endpoint picker does that
    // (active-request-scorer), so its Helm values are written beside the manifest, named in the
    // table and plan.json, selecting the manifest's pods; a later run recommending nothing
    // leaves none behind.
    let lo = out.join("least-outstanding.toml");
    let known = read(&root().join("tests/plan/known-answer.toml"));
    std::fs::write(&lo, format!("{known}[cluster]\nrouter = {{ kind = \"least-outstanding\" }}\n")).unwrap();
    let v = plan_json(lo.to_str().unwrap(), &out);
    let l = &v["candidates"][0]["deploy"]["router"]["llm_d"];
    assert_eq!(l["plugins"], serde_json::json!(["active-request-scorer", "max-score-picker"]), "{l}");
    let values = yaml_rust2::YamlLoader::load_from_str(&read(&out.join("llm-d-values.yaml"))).unwrap();
    assert_eq!(values[0]["inferencePool"]["modelServers"]["matchLabels"]["app"].as_str(), Some("known-answer"));
    let file = values[0]["inferenceExtension"]["pluginsConfigFile"].as_str().unwrap();
    assert_eq!(values[0]["inferenceExtension"]["pluginsCustomConfig"][file].as_str(), l["config"].as_str());
    let o = servesim(&["plan", "--scenario", lo.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let table = stdout(&o);
    assert!(table.contains("  or with llm-d's inference scheduler: its endpoint picker with active-request-scorer + max-score-picker\n"), "{table}");
    assert!(table.contains("  llm-d Helm values: llm-d-values.yaml (the fewest requests in flight;"), "{table}");
    let few = known.replace("[plan]\n", "[plan]\nmax_instances = 2\n")
        + "[cluster]\nrouter = { kind = \"least-outstanding\" }\n";
    std::fs::write(&lo, few).unwrap();
    let v = plan_json(lo.to_str().unwrap(), &out);
    assert!(v["recommended"].is_null(), "{v}");
    assert!(!out.join("llm-d-values.yaml").exists());
}

/// With headroom the count recommended is more than the minimum, and it is simulated too: its
/// own TPOT is the hand formula's at its load, and plan.json's figures equal a run of that count.
#[test]
fn the_recommended_count_is_simulated_and_its_figures_are_its_own() {
    let out = out_dir("plan_provisioned");
    std::fs::create_dir_all(&out).unwrap();
    let src = read(&root().join("tests/plan/known-answer.toml")).replace("[plan]\n", "[plan]\nheadroom = 0.5\n");
    let path = out.join("headroom.toml");
    std::fs::write(&path, &src).unwrap();
    let v = plan_json(path.to_str().unwrap(), &out);
    let c = &v["candidates"][0];
    assert_eq!(c["instances_min"], 4);
    assert_eq!(c["instances"], 6, "⌈4 × 1.5⌉");
    let p = &c["provisioned"];
    assert_eq!(p["instances"], 6);
    // 6 instances at 30 req/s each: T̄ = 5 / (1 − 50 µs · 30 · 200) = 7.14 ms, not the 9.09 ms of 4.
    let tpot = p["tpot_ms_p99"].as_f64().unwrap();
    assert!((tpot / (5.0 / 0.7) - 1.0).abs() < 0.03, "TPOT at 6 instances {tpot} ms, hand value 7.14");
    assert!(c["tpot_ms_p99"].as_f64().unwrap() > tpot + 1.0, "the minimum's figure is the minimum's");
    // The figures equal an independent run of the candidate at 6 instances.
    let s = scenario(&src);
    let cand = &plan::candidates(&s).unwrap()[0];
    let mut sc = cand.scenario.clone().unwrap();
    sc.groups[0].count = 6;
    sc.set_seed(1);
    let run = engine::run(&sc).summary;
    let seed0 = &p["point"]["seeds"][0];
    assert_eq!(seed0["tpot_ms_p99"].as_f64().unwrap(), run.tpot_ms.p99);
    assert_eq!(seed0["ttft_ms_p99"].as_f64().unwrap(), run.ttft_ms.p99);
    assert_eq!(seed0["attainment"].as_f64().unwrap(), run.slo.attainment);
    assert_eq!(p["tpot_ms_p99"].as_f64().unwrap(), run.tpot_ms.p99, "one seed: the worst is that seed");
    // The table prints the recommended count's row.
    let o = servesim(&["plan", "--scenario", path.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(table.contains("at 6") && table.contains("(recommended count)"), "{table}");
}

/// Two candidates at the same price: the one with the larger SLO margin at its recommended
/// count is recommended, whatever the file order, and the plan says so.
#[test]
fn a_tie_on_price_goes_to_the_larger_slo_margin_and_says_so() {
    let out = out_dir("plan_tie");
    std::fs::create_dir_all(&out).unwrap();
    // "fast" (50 µs → 40 µs per token) needs 3 instances at $4/GPU-h, "base" 4 at $3: both $12/h.
    // At 3 × 60 req/s fast's TPOT is 5 / (1 − 40 µs · 60 · 200) = 9.6 ms (margin 10/9.6 = 1.04);
    // base's at 4 × 45 req/s is 9.09 ms (margin 1.10): base wins though it is listed second.
    let src = read(&root().join("tests/plan/known-answer.toml"))
        .replace("[plan]\n", "[plan]\nprice_per_gpu_hour = { \"h100-sxm\" = 3, \"a100-80g\" = 4 }\n")
        + "[[plan.candidates]]\nname = \"fast\"\ngpu = \"a100-80g\"\n\
           cost = { kind = \"linear\", base_us = 5000, per_token_us = 40, per_seq_us = 0 }\n\
           [[plan.candidates]]\nname = \"base\"\n";
    let path = out.join("tie.toml");
    std::fs::write(&path, &src).unwrap();
    let v = plan_json(path.to_str().unwrap(), &out);
    let c = v["candidates"].as_array().unwrap();
    assert_eq!((c[0]["instances"].as_u64(), c[1]["instances"].as_u64()), (Some(3), Some(4)), "{v}");
    assert_eq!(c[0]["cost_per_hour"], c[1]["cost_per_hour"]);
    assert_eq!(v["recommended"], "base");
    let t = v["tie_break"].as_str().unwrap();
    assert!(t.contains("base and fast cost the same per hour") && t.contains("SLO margin"), "{t}");
    let margin = |x: &serde_json::Value| 10.0 / x["provisioned"]["tpot_ms_p99"].as_f64().unwrap();
    assert!(margin(&c[1]) > margin(&c[0]));
}

/// Every feasible candidate: N meets the SLO on every seed and N − 1 fails on at least one,
/// checked by running the engine directly (not by trusting the plan's own records).
#[test]
fn minimum_count_meets_the_slo_and_one_fewer_does_not() {
    let out = out_dir("plan_small_json");
    let v = plan_json("tests/plan/small.toml", &out);
    let s = scenario(&read(&root().join("tests/plan/small.toml")));
    let cands = plan::candidates(&s).unwrap();
    let seeds: Vec<u64> = (0..3).map(|i| 11 + i).collect();
    let mut feasible = 0;
    for (c, j) in cands.iter().zip(v["candidates"].as_array().unwrap()) {
        assert_eq!(j["name"], c.name.as_str());
        if j["feasible"] != true {
            assert!(j["infeasible_reason"].as_str().unwrap().contains("rejected whatever the instance count"), "{j}");
            assert_eq!(c.name, "h100-small-batch");
            continue;
        }
        feasible += 1;
        let n = j["instances_min"].as_u64().unwrap() as u32;
        let run = |count: u32, seed: u64| {
            let mut sc = c.scenario.clone().unwrap();
            sc.groups[0].count = count;
            sc.set_seed(seed);
            engine::run(&sc).summary.slo.met
        };
        assert!(seeds.iter().all(|&sd| run(n, sd)), "{}: {n} instances must pass on every seed", c.name);
        if n > 1 {
            assert!(seeds.iter().any(|&sd| !run(n - 1, sd)), "{}: {} instances must fail on some seed", c.name, n - 1);
        }
        // Headroom 25% and one spare; GPUs and cost follow.
        let inst = j["instances"].as_u64().unwrap();
        assert_eq!(inst, (n as f64 * 1.25).ceil() as u64 + 1);
        assert_eq!(j["gpus"].as_u64().unwrap(), inst * c.tp);
        let price = j["price_per_gpu_hour"].as_f64().unwrap();
        assert!((j["cost_per_hour"].as_f64().unwrap() - price * (inst * c.tp) as f64).abs() < 1e-9);
    }
    assert!(feasible >= 3);
    // The recommendation is the cheapest feasible candidate.
    let cheapest = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["feasible"] == true)
        .min_by(|a, b| a["cost_per_hour"].as_f64().unwrap().total_cmp(&b["cost_per_hour"].as_f64().unwrap()))
        .unwrap();
    assert_eq!(v["recommended"], cheapest["name"]);
}

#[test]
fn output_is_identical_for_any_thread_count_and_shards_merge_to_it() {
    let run = |threads: &str, extra: &[&str], out: &std::path::Path| {
        let mut args = vec!["plan", "--scenario", "tests/plan/small.toml", "--quiet", "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_servesim"))
            .args(&args)
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        o.stdout
    };
    let one = out_dir("plan_threads_1");
    let two = out_dir("plan_threads_2");
    let t1 = run("1", &[], &one);
    let t2 = run("2", &[], &two);
    assert!(!t1.is_empty());
    assert_eq!(String::from_utf8_lossy(&t1), String::from_utf8_lossy(&t2), "stdout differs between 1 and 2 threads");
    assert_eq!(read(&one.join("plan.json")), read(&two.join("plan.json")));

    let shards = out_dir("plan_shards");
    for s in ["1/2", "2/2"] {
        let o = run("2", &["--shard", s], &shards);
        assert!(o.is_empty(), "a shard prints nothing on stdout");
    }
    assert!(shards.join("plan-shard-1-of-2.json").exists() && shards.join("plan-shard-2-of-2.json").exists());
    let merged = out_dir("plan_merged");
    let o = servesim(&["merge", shards.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), String::from_utf8_lossy(&t1), "merged shards print what the unsharded run prints");
    assert_eq!(read(&merged.join("plan.json")), read(&one.join("plan.json")));
    assert_eq!(read(&merged.join("deploy.yaml")), read(&one.join("deploy.yaml")));

    // A missing shard is an error that says which.
    let partial = out_dir("plan_partial");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::copy(shards.join("plan-shard-1-of-2.json"), partial.join("plan-shard-1-of-2.json")).unwrap();
    let o = servesim(&["merge", partial.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing shards: 2/2"), "{}", stderr(&o));
}

#[test]
fn peak_has_a_plan_with_at_least_six_candidates() {
    let s = scenario(&read(&root().join("scenarios/peak.toml")));
    let cands = plan::candidates(&s).unwrap();
    assert!(cands.len() >= 6);
    assert!(cands.iter().all(|c| c.scenario.is_some() && c.price_per_gpu_hour.is_some()));
    let gpus: std::collections::BTreeSet<&str> = cands.iter().map(|c| c.gpu.as_str()).collect();
    assert!(gpus.len() >= 4, "several GPU kinds: {gpus:?}");
    // The resolved scenario (written next to simulate's outputs) keeps the plan.
    let again = servesim_sim::Scenario::from_toml(&s.resolved_toml(), "peak").unwrap();
    assert_eq!(again.resolved.plan, s.resolved.plan);
    assert_eq!(plan::candidates(&again).unwrap().len(), cands.len());
}

#[test]
fn bad_flags_exit_2() {
    for (args, expect) in [
        (
            vec!["plan", "--scenario", "tests/plan/small.toml", "--shard", "3/2"],
            "expected I/N with 1 ≤ I ≤ N, got \"3/2\"",
        ),
        (vec!["plan", "--scenario", "tests/plan/small.toml", "--seeds", "0"], "--seeds"),
        (vec!["merge", "target/test-outputs/no-such-dir"], "no such file or folder"),
    ] {
        let o = servesim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expect), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn bad_candidates_are_named() {
    let base = read(&root().join("tests/plan/small.toml"));
    // The scenario validates the file; the planner checks its candidates (the CLI does both
    // for every command, tests/malformed.rs checks that side).
    let check = |from: &str, to: &str, expect: &str| {
        let e = servesim_sim::Scenario::from_toml(&base.replace(from, to), "t")
            .and_then(|s| plan::check_candidates(&s))
            .unwrap_err()
            .to_string();
        assert!(e.contains(expect), "expected «{expect}» in «{e}»");
    };
    check("gpu = \"a100-80g\"", "gpu = \"a100\"", "plan.candidates[1] (a100): gpu.preset: unknown preset \"a100\"");
    check("l40s = 1.2\n", "", "plan.price_per_gpu_hour: no price for GPU \"l40s\" (candidate l40s)");
    check(
        "max_num_batched_tokens = 2048",
        "max_num_batched_tokens = 0",
        "plan.candidates[3] (h100-small-batch): scheduler.max_num_batched_tokens: must be ≥ 1, got 0",
    );
    check("name = \"l40s\"", "name = \"h100\"", "plan.candidates[2].name: is used by another candidate");
    check("seeds = 3", "seeds = 0", "plan.seeds: must be in [1, 100], got 0");
    check(
        "name = \"a100\"\ngpu = \"a100-80g\"",
        "name = \"a100\"\ngpu = \"a100-80g\"\nset = { \"scheduler.max_num_seqs.x\" = 1 }",
        "plan.candidates[1] (a100).set.\"scheduler.max_num_seqs.x\": scheduler.max_num_seqs: is a integer, not a table",
    );
    // A model that does not fit a candidate's GPUs is a result (infeasible), not an error.
    let src = llama8b("duration_s = 10\narrival = { kind = \"poisson\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 10 }", "[cluster]\ntp = 4\n[[plan.candidates]]\nname = \"h100-tp4\"\n[[plan.candidates]]\nname = \"l40s-tp1\"\ngpu = \"l40s\"\ntp = 1")
        .replace("llama-3-8b", "llama-3-70b");
    let s = scenario(&src);
    let cands = plan::candidates(&s).unwrap();
    assert!(cands[0].scenario.is_some() && cands[0].infeasible.is_none());
    let why = cands[1].infeasible.as_deref().unwrap();
    assert!(cands[1].scenario.is_none() && why.starts_with("llama-3-70b does not fit on l40s at tp 1"), "{why}");
    let cfg = plan::SearchConfig::new(&s.resolved.plan.clone().unwrap(), 0, None);
    let r = plan::plan_candidate(&cands[1], &cfg, None, &|_| {});
    assert!(!r.feasible && r.runs == 0 && r.infeasible_reason.as_deref() == Some(why));
}

/// Under vLLM's memory rule a candidate whose KV cache cannot hold one request of the model's
/// context is one vLLM does not start: a result, not an error that ends the plan. Llama-3.1-70B's
/// 131,072 tokens need 20 GiB of KV per GPU at TP 2 (a few thousand tokens fit on two H100s) and
/// 10 GiB at TP 4 (hundreds of thousands fit).
#[test]
fn a_candidate_vllm_would_not_start_is_infeasible_not_fatal() {
    let src = llama8b("duration_s = 10\narrival = { kind = \"poisson\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 10 }", "[memory]\nengine = \"vllm\"\n[cluster]\ntp = 4\n[[plan.candidates]]\nname = \"tp4\"\n[[plan.candidates]]\nname = \"tp2\"\ntp = 2")
        .replace("llama-3-8b", "llama-3.1-70b");
    let cands = plan::candidates(&scenario(&src)).unwrap();
    assert!(cands[0].scenario.is_some() && cands[0].infeasible.is_none());
    let why = cands[1].infeasible.as_deref().unwrap();
    assert!(
        why.starts_with("scheduler.max_model_len: vLLM does not start with max_model_len 131072")
            && why.contains("(20.00 GiB KV cache is needed"),
        "{why}"
    );
}

/// So is a candidate whose limits vLLM refuses to start with (`SchedulerConfig.verify_max_model_len`,
/// vllm/config/scheduler.py in the 0.11.2 and 0.34.0 sdists): 512 sequences over a 256-token
/// budget; and without chunked prefill a budget below the context. The candidate leaving the
/// budget to the engine gets vLLM's own: Llama-3.1-8B's context, 131,072 tokens, without chunked
/// prefill.
#[test]
fn a_candidate_whose_limits_vllm_refuses_is_infeasible_not_fatal() {
    let src = llama8b(
        "duration_s = 10\narrival = { kind = \"poisson\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 10 }",
        "[[plan.candidates]]\nname = \"ok\"\n[[plan.candidates]]\nname = \"seqs\"\nscheduler = { max_num_seqs = 512, max_num_batched_tokens = 256 }\n\
         [[plan.candidates]]\nname = \"whole\"\nscheduler = { max_num_batched_tokens = 2048, batching = { kind = \"continuous\" } }\n\
         [[plan.candidates]]\nname = \"engine\"\nscheduler = { batching = { kind = \"continuous\" } }\n\
         [[plan.candidates]]\nname = \"active\"\nscheduler = { max_num_seqs = 64, batching = { kind = \"vllm-v1\", max_num_active_seqs = 128 } }",
    );
    let src = format!("engine = \"vllm\"\n{src}").replace("llama-3-8b", "llama-3.1-8b");
    let cands = plan::candidates(&scenario(&src)).unwrap();
    assert!(cands[0].infeasible.is_none());
    let why = cands[1].infeasible.as_deref().unwrap();
    assert!(
        why.contains("\"max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (512).\""),
        "{why}"
    );
    let why = cands[2].infeasible.as_deref().unwrap();
    assert!(why.contains("\"max_num_batched_tokens (2048) is smaller than max_model_len (131072)."), "{why}");
    let s = cands[3].scenario.as_ref().unwrap();
    assert_eq!(s.groups[0].scheduler.max_num_batched_tokens, 131_072);
    // --max-num-active-seqs above --max-num-seqs (SchedulerConfig, vllm/config/scheduler.py 0.34.0).
    let why = cands[4].infeasible.as_deref().unwrap();
    assert!(why.contains("\"max_num_active_seqs (128) cannot be greater than max_num_seqs (64).\""), "{why}");
}

/// `--error-band 0.2` on the known answer (its line model has no measured error, so no band by
/// default): with iterations f times as long, T̄ = f·5 / (1 − f·0.01·r) ms per instance at r
/// req/s, TPOT ≤ 10 ms ⇔ r ≤ (1 − 0.5 f) / (0.01 f): 75 req/s at f = 0.8, so ⌈180 / 75⌉ = 3
/// instances; 33.3 req/s at f = 1.2, so ⌈180 / 33.3⌉ = 6.
#[test]
fn the_error_band_resizes_the_known_answer_by_hand() {
    let out = out_dir("plan_band");
    let o = servesim(&[
        "plan",
        "--scenario",
        "tests/plan/known-answer.toml",
        "--format",
        "json",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["candidates"][0]["band"].is_null(), "a linear cost model has no measured error");
    let o = servesim(&[
        "plan",
        "--scenario",
        "tests/plan/known-answer.toml",
        "--error-band",
        "0.2",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("  4 (3–6)  "), "{table}");
    assert!(table.contains("error band: 4 (3–6) instances with iterations ±20.0% (--error-band"), "{table}");
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("plan.json"))).unwrap();
    let b = &v["candidates"][0]["band"];
    assert_eq!((b["instances_fast"].as_u64(), b["instances_slow"].as_u64()), (Some(3), Some(6)), "{b}");
    assert_eq!(v["band_note"], "h100-sxm-tp1 stays the cheapest at both ends of the error band (iterations ±20.0%)");
    // Out of range: refused by the parser, naming the flag.
    let o = servesim(&["plan", "--scenario", "tests/plan/known-answer.toml", "--error-band", "1.5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--error-band") && stderr(&o).contains("must be in [0, 0.9]"), "{}", stderr(&o));
}

/// The default bands are docs/fidelity.md's figures: the scoreboard's median |error| of mean
/// TPOT per partition, and the calibrated rows' held-out one.
#[test]
fn default_error_bands_are_the_measured_figures() {
    use servesim_sim::plan::band::*;
    let doc = read(&root().join("docs/fidelity.md"));
    // The partition table's columns: "as run by default" first, `--roofline` last.
    let tpot_in = |row_start: &str, last: bool| -> f64 {
        let line = doc.lines().find(|l| l.starts_with(row_start)).unwrap_or_else(|| panic!("no row {row_start}"));
        // "| label | TTFT% / TPOT% | ... |"
        let cells: Vec<&str> = line.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
        let cell = if last { cells[cells.len() - 1] } else { cells[1] };
        cell.split('/').nth(1).unwrap().trim().trim_end_matches('%').parse::<f64>().unwrap() / 100.0
    };
    let tpot_of = |row_start: &str| tpot_in(row_start, false);
    assert!(doc.contains("| `--moe-distribution balanced` | `--roofline` |"), "the roofline's column is the last");
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(tpot_of("| dense, vLLM + SGLang, all"), DATABASE_DENSE));
    assert!(close(tpot_of("| Qwen3 MoE, vLLM + SGLang"), DATABASE_MOE));
    assert!(close(tpot_of("| gpt-oss-120b (windowed, MoE), database"), DATABASE_WINDOWED));
    assert!(close(tpot_of("| DeepSeek-R1/V3 (latent attention), database"), DATABASE_MLA));
    assert!(close(tpot_in("| every row run", true), ROOFLINE));
    let both = doc.lines().find(|l| l.starts_with("| both |")).unwrap();
    let last = both.split('|').rfind(|c| !c.trim().is_empty()).unwrap();
    assert!(close(last.trim().trim_end_matches('%').parse::<f64>().unwrap() / 100.0, CALIBRATED), "{both}");
}

/// A candidate whose kernel-database slice the GPU's floor refuses (the shipped L40S slice's
/// o_proj at TP 4 runs a 64-sequence decode step faster than 864 GB/s allows) is infeasible with
/// that reason; the plan still sizes the others.
/// scenarios/peak.toml with its text before the candidates passed through `edit` and these
/// candidates (name, GPU, TP) in place of its own, written to `out`/s.toml.
fn peak_with_candidates(
    out: &std::path::Path,
    edit: impl Fn(&str) -> String,
    candidates: &[(&str, &str, u32)],
) -> std::path::PathBuf {
    let base = read(&root().join("scenarios/peak.toml"));
    let mut text = edit(&base[..base.find("[[plan.candidates]]").unwrap()]);
    for (name, gpu, tp) in candidates {
        text += &format!("[[plan.candidates]]\nname = \"{name}\"\ngpu = \"{gpu}\"\ntp = {tp}\n\n");
    }
    let path = out.join("s.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_candidate_the_database_cannot_price_is_infeasible_not_fatal() {
    let out = out_dir("plan_db_floor");
    std::fs::create_dir_all(&out).unwrap();
    let path =
        peak_with_candidates(&out, |head| head.to_string(), &[("l40s-tp4", "l40s", 4), ("h100-tp1", "h100-sxm", 1)]);
    let v = plan_json(path.to_str().unwrap(), &out);
    let c = &v["candidates"][0];
    assert_eq!(c["feasible"], false, "{c}");
    let why = c["infeasible_reason"].as_str().unwrap();
    assert!(
        why.starts_with("cost.database: attn_post_proj takes") && why.contains("the l40s needs at its peaks"),
        "{why}"
    );
    assert_eq!(v["recommended"], "h100-tp1");
    assert_eq!(v["candidates"][1]["priced_by"], "the kernel database (vllm kernels of h100-sxm)");
}

#[test]
fn a_candidate_at_a_tp_degree_its_profile_lacks_is_infeasible_naming_both() {
    let out = out_dir("plan_profile_tp");
    std::fs::create_dir_all(&out).unwrap();
    // The shipped H100 database profile cut to its TP 1 tables.
    let mut p: serde_json::Value =
        serde_json::from_str(&read(&root().join("calibrate/profiles/aic/h100_sxm-vllm-llama-3-8b-bf16.json"))).unwrap();
    p["ops"].as_array_mut().unwrap().retain(|t| t["tp"].is_null() || t["tp"] == 1);
    p["meta"]["tp"] = serde_json::json!([1]);
    std::fs::write(out.join("tp1.json"), p.to_string()).unwrap();
    let path = peak_with_candidates(
        &out,
        |head| head.replace("database = { framework = \"vllm\" }", "profile = \"tp1.json\""),
        &[("h100-tp2", "h100-sxm", 2), ("h100-tp1", "h100-sxm", 1)],
    );
    let v = plan_json(path.to_str().unwrap(), &out);
    let c = &v["candidates"][0];
    assert_eq!(c["feasible"], false, "{c}");
    let why = c["infeasible_reason"].as_str().unwrap();
    assert!(why.contains("the profile has no tables at TP 2 (it has TP [1])"), "{why}");
    assert_eq!(v["recommended"], "h100-tp1");
    // Each candidate says what priced it: the profile the scenario names.
    assert_eq!(v["candidates"][1]["priced_by"], "profile tp1.json", "{}", v["candidates"][1]);
    // The same profile in a scenario at TP 2 is refused, naming both degrees.
    let sim = std::fs::read_to_string(&path).unwrap().replace("instances = 3\ntp = 1\n", "instances = 3\ntp = 2\n");
    std::fs::write(out.join("sim.toml"), sim).unwrap();
    let o = servesim(&[
        "simulate",
        "--scenario",
        out.join("sim.toml").to_str().unwrap(),
        "--out",
        out.join("run").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no tables at TP 2 (it has TP [1])"), "{}", stderr(&o));
}

/// A scenario whose runs draw no random number (constant arrivals, fixed lengths, round-robin
/// routing: the known answer) gives the same result under every seed: three seeds cost the runs
/// of one, with the same answer, and the plan says it is deterministic. Poisson arrivals draw,
/// so there every seed runs.
#[test]
fn a_run_that_draws_nothing_runs_once_for_every_seed_and_says_so() {
    let out = out_dir("plan_deterministic");
    std::fs::create_dir_all(&out).unwrap();
    let plan = |text: &str, seeds: &str, name: &str| {
        let path = out.join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let o = servesim(&[
            "plan",
            "--scenario",
            path.to_str().unwrap(),
            "--seeds",
            seeds,
            "--format",
            "json",
            "--quiet",
            "--out",
            out.join(name).to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["candidates"][0].clone()
    };
    let known = read(&root().join("tests/plan/known-answer.toml"));
    let (one, three) = (plan(&known, "1", "one"), plan(&known, "3", "three"));
    assert_eq!(three["deterministic"], true, "{three}");
    assert_eq!(three["runs"], one["runs"]);
    assert_eq!(three["simulated_requests"], one["simulated_requests"]);
    for k in ["instances_min", "instances", "ttft_ms_p99", "tpot_ms_p99", "attainment", "goodput_rps"] {
        assert_eq!(three[k], one[k], "{k}");
    }
    // Every seed is listed at the decisive count, with its own seed and the same figures.
    let p = three["points"].as_array().unwrap().iter().find(|p| p["instances"] == three["instances_min"]).unwrap();
    let seeds: Vec<u64> = p["seeds"].as_array().unwrap().iter().map(|s| s["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [1, 2, 3]);
    let table_out = out.join("table");
    let o = servesim(&[
        "plan",
        "--scenario",
        out.join("three.toml").to_str().unwrap(),
        "--seeds",
        "3",
        "--quiet",
        "--out",
        table_out.to_str().unwrap(),
    ]);
    assert!(stdout(&o).contains("deterministic: its runs drew no random number"), "{}", stdout(&o));
    // Poisson arrivals: the seed matters, every seed runs.
    let poisson = known.replace("kind = \"constant\", rate = 180", "kind = \"poisson\", rate = 180");
    let (one, three) = (plan(&poisson, "1", "p1"), plan(&poisson, "3", "p3"));
    assert!(three["deterministic"].is_null(), "{three}");
    assert!(three["runs"].as_u64().unwrap() > one["runs"].as_u64().unwrap() + 1, "{three}");
}

/// A scenario of llama-3-8b on one H100 (the GPU replaced where a case needs another).
fn engine_base() -> String {
    llama8b("duration_s = 10\narrival = { kind = \"poisson\", rate = 2 }\nprompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"fixed\", value = 10 }", "")
}

#[test]
fn a_plan_candidate_takes_its_engines_defaults_on_its_own_gpu_tp_and_stages() {
    // A candidate gets the limits its engine picks on the candidate's GPU, TP and stages — what
    // the scenario written for that GPU gets (the test above computes those by hand) — and
    // keeps every limit the scenario or the candidate gives.
    let plan = "[plan]\n[[plan.candidates]]\nname = \"h100\"\n[[plan.candidates]]\nname = \"l4\"\ngpu = { preset = \"l4\" }\n\
                [[plan.candidates]]\nname = \"a100\"\ngpu = { preset = \"a100-80g\" }\n[[plan.candidates]]\nname = \"l4-tp2\"\n\
                gpu = { preset = \"l4\" }\ntp = 2\n[[plan.candidates]]\nname = \"own\"\ngpu = { preset = \"l4\" }\n\
                scheduler = { max_num_seqs = 64 }\n";
    let written = |engine: &str, gpu: &str, extra: &str| {
        let src = format!("engine = \"{engine}\"\n{}{extra}", engine_base().replace("h100-sxm", gpu));
        let g = &Scenario::from_toml(&src, "t").unwrap().groups[0];
        (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens, g.memory.kv_blocks)
    };
    let candidates = |engine: &str, extra: &str| {
        let s = Scenario::from_toml(&format!("engine = \"{engine}\"\n{}{extra}{plan}", engine_base()), "t").unwrap();
        let cs = plan::candidates(&s).unwrap();
        let g = |c: &plan::Candidate| {
            let g = &c.scenario.as_ref().unwrap().groups[0];
            (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens, g.memory.kv_blocks)
        };
        cs.iter().map(g).collect::<Vec<_>>()
    };
    let tp2 = "[cluster]\ntp = 2\n";
    let own = "[scheduler]\nmax_num_seqs = 64\n";
    for engine in ["vllm", "sglang", "trtllm"] {
        let expected = [
            written(engine, "h100-sxm", ""),
            written(engine, "l4", ""),
            written(engine, "a100-80g", ""),
            written(engine, "l4", tp2),
            written(engine, "l4", own),
        ];
        assert_eq!(candidates(engine, ""), expected, "{engine}");
    }
    let seqs = |engine: &str, extra: &str| candidates(engine, extra).iter().map(|c| (c.0, c.1)).collect::<Vec<_>>();
    // vLLM's get_batch_defaults: the small pair on the L4 and the A100.
    assert_eq!(seqs("vllm", ""), [(1024, 8192), (256, 2048), (256, 2048), (256, 2048), (64, 2048)]);
    // SGLang's chunk by the GPU's memory and its running requests by the pool: 2350 on an L4
    // (37,600 tokens), 4096 on 2 L4s (⌊194,864 / 8192 × 512⌋ = 12,179, held at 4096), a given 64
    // kept (under half the pool).
    assert_eq!(seqs("sglang", ""), [(4096, 8192), (2350, 2048), (4096, 8192), (4096, 2048), (64, 2048)]);
    // A limit the scenario gives holds on every candidate.
    let budget = "[scheduler]\nmax_num_batched_tokens = 4096\n";
    assert_eq!(seqs("vllm", budget), [(1024, 4096), (256, 4096), (256, 4096), (256, 4096), (64, 4096)]);
    // vLLM 0.14 schedules asynchronously, except with pipeline stages (0.14's check): a
    // candidate of two stages runs synchronously.
    let stages = "[plan]\n[[plan.candidates]]\nname = \"pp1\"\n[[plan.candidates]]\nname = \"pp2\"\npp = 2\n";
    let s =
        Scenario::from_toml(&format!("engine = \"vllm\"\nengine_version = \"0.14.0\"\n{}{stages}", engine_base()), "t")
            .unwrap();
    let overlap = plan::candidates(&s)
        .unwrap()
        .iter()
        .map(|c| c.scenario.as_ref().unwrap().groups[0].scheduler.cpu.overlap)
        .collect::<Vec<_>>();
    assert_eq!(overlap, [Some(true), Some(false)]);
    // `calibrate fit`'s run at another TP takes the engine's rules at that TP too.
    let l4 =
        Scenario::from_toml(&format!("engine = \"sglang\"\n{}", engine_base().replace("h100-sxm", "l4")), "t").unwrap();
    let at = servesim_sim::calibration::at_tp(&l4, 2).unwrap();
    let g = &at.groups[0];
    assert_eq!(
        (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens, g.memory.kv_blocks),
        written("sglang", "l4", tp2)
    );
}

#[test]
fn a_disaggregated_candidates_keys_reach_both_pools_and_each_pool_its_gpus_limits() {
    // The pools of scenarios/disaggregated.toml. A candidate's scheduler keys are the whole
    // configuration's: both pools run them, over the resolved file's pool tables, which hold
    // every key.
    let file = std::fs::read_to_string(root().join("scenarios/disaggregated.toml")).unwrap();
    let src = &file[..file.find("\n[plan]").expect("the scenario has a [plan]")];
    let plan = "[plan]\n[[plan.candidates]]\nname = \"base\"\n[[plan.candidates]]\nname = \"seqs2\"\n\
                scheduler = { max_num_seqs = 2 }\n[[plan.candidates]]\nname = \"l4-decode\"\n\
                set = { \"cluster.groups[1].gpu\" = \"l4\" }\n";
    let limits = |engine: &str| {
        let s = Scenario::from_toml(&format!("{engine}{src}\n{plan}"), "d").unwrap();
        let cs = plan::candidates(&s).unwrap();
        let pools = |c: &plan::Candidate| {
            let g = &c.scenario.as_ref().unwrap().groups;
            g.iter().map(|g| (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens)).collect::<Vec<_>>()
        };
        cs.iter().map(pools).collect::<Vec<_>>()
    };
    // servesim's own defaults (256, 8192) without an engine; the candidate's 2 in both pools.
    assert_eq!(limits(""), [vec![(256, 8192); 2], vec![(2, 8192); 2], vec![(256, 8192); 2]]);
    // vLLM's defaults on each pool's GPU: (1024, 8192) on the H100s, (256, 2048) on an L4 pool.
    let vllm = limits("engine = \"vllm\"\n");
    assert_eq!(vllm, [vec![(1024, 8192); 2], vec![(2, 8192); 2], vec![(1024, 8192), (256, 2048)]]);
}
