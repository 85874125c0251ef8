//! `servesim tune`: on a small space searched exhaustively, the recommended configuration is
//! the cheapest feasible one, the frontier is exactly the non-dominated feasible set, and the
//! winner is written as a scenario that meets the SLO and as a launch command.

use crate::common::*;

/// The known-answer plan scenario (tests/plan/known-answer.toml: 5 ms + 50 µs per token, 180
/// req/s, TPOT ≤ 10 ms binds, ⌈180 / 50⌉ = 4 instances) with prices and a [tune] section.
fn tuned(extra: &str) -> String {
    read(&root().join("tests/plan/known-answer.toml"))
        + "[plan.price_per_gpu_hour]\na100-80g = 1.80\nh100-sxm = 3.00\n"
        + "[tune]\n"
        + extra
}

/// [`tuned`] over 20 s of traffic instead of 60 (the same counts, a third of the work; these
/// tests run each space twice, pruned and exhaustive, in the unoptimised test build).
fn tuned_short(extra: &str) -> String {
    let s = tuned(extra);
    assert!(s.contains("duration_s = 60\n"));
    s.replace("duration_s = 60\n", "duration_s = 20\n")
}

fn tune_json(src: &str, name: &str) -> (serde_json::Value, std::path::PathBuf) {
    tune_json_with(src, name, &[])
}

fn tune_json_with(src: &str, name: &str, extra: &[&str]) -> (serde_json::Value, std::path::PathBuf) {
    let out = out_dir(name);
    std::fs::create_dir_all(&out).unwrap();
    let path = out.join("tune.toml");
    std::fs::write(&path, src).unwrap();
    let mut args = vec![
        "tune",
        "--scenario",
        path.to_str().unwrap(),
        "--format",
        "json",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = servesim(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    (serde_json::from_slice(&o.stdout).expect("tune --format json prints JSON"), out)
}

/// `tune --exhaustive` of the scenario `tune_json` wrote into `out`, into `out/exhaustive`.
fn exhaustive_of(out: &std::path::Path) -> serde_json::Value {
    let (scenario, dir) = (out.join("tune.toml"), out.join("exhaustive"));
    let args = ["tune", "--scenario", scenario.to_str().unwrap(), "--exhaustive", "--format", "json", "--quiet"];
    let o = servesim(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("tune --format json prints JSON")
}

#[test]
fn the_cheapest_feasible_configuration_and_the_frontier_are_those_of_the_exhaustive_search() {
    let space = "gpu = [\"h100-sxm\", \"a100-80g\"]\ntp = [1, 2]\nmax_num_seqs = [16, 256]\n";
    let (v, out) = tune_json_with(&tuned_short(space), "tune_small", &["--exhaustive"]);
    assert_eq!(v["configurations"], 8);
    let cands = v["plan"]["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 8);
    // The linear cost does not depend on the GPU or TP, so the cheaper GPU at TP 1 with the
    // larger batch limit wins, at the hand count ⌈180 / 50⌉ = 4: 4 × $1.80.
    assert_eq!(v["recommended"], "a100-80g-tp1-s256");
    let win = cands.iter().find(|c| c["name"] == "a100-80g-tp1-s256").unwrap();
    assert_eq!((win["instances"].as_u64(), win["gpus"].as_u64()), (Some(4), Some(4)));
    assert!((win["cost_per_hour"].as_f64().unwrap() - 7.2).abs() < 1e-9);
    // Recomputed from the results: no feasible configuration is cheaper.
    let feasible: Vec<&serde_json::Value> = cands.iter().filter(|c| c["feasible"] == true).collect();
    let cost = |c: &serde_json::Value| c["cost_per_hour"].as_f64().unwrap();
    let cheapest = feasible.iter().map(|c| cost(c)).fold(f64::INFINITY, f64::min);
    assert_eq!(cost(win), cheapest);
    // The frontier: every feasible configuration that no other is at least as good as on $/h,
    // p99 TTFT and p99 TPOT and better on one — no more, no fewer.
    let point =
        |c: &serde_json::Value| (cost(c), c["ttft_ms_p99"].as_f64().unwrap(), c["tpot_ms_p99"].as_f64().unwrap());
    let dominated = |c: &serde_json::Value| {
        let p = point(c);
        feasible.iter().any(|o| {
            let q = point(o);
            q.0 <= p.0 && q.1 <= p.1 && q.2 <= p.2 && (q.0 < p.0 || q.1 < p.1 || q.2 < p.2)
        })
    };
    let mut want: Vec<String> =
        feasible.iter().filter(|c| !dominated(c)).map(|c| c["name"].as_str().unwrap().to_string()).collect();
    let mut got: Vec<String> =
        v["frontier"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(got.contains(&"a100-80g-tp1-s256".to_string()), "the cheapest is on the frontier");
    // TP 2 doubles the GPUs at the same speed here: never on the frontier.
    assert!(got.iter().all(|n| !n.contains("tp2")), "{got:?}");
    // The winner as a scenario at its count, which meets the SLO when simulated, and as a
    // launch command.
    let winner = read(&out.join("winner.toml"));
    assert!(winner.contains("instances = 4"), "{winner}");
    let o = servesim(&[
        "simulate",
        "--scenario",
        out.join("winner.toml").to_str().unwrap(),
        "--format",
        "json",
        "-q",
        "--out",
        out.join("winner-run").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run: serde_json::Value = serde_json::from_str(&read(&out.join("winner-run/summary.json"))).unwrap();
    assert!(run["slo"]["attainment"].as_f64().unwrap() >= 0.99, "{}", run["slo"]);
    assert_eq!(
        v["launch_command"],
        "vllm serve meta-llama/Meta-Llama-3-8B-Instruct --tensor-parallel-size 1 --max-num-seqs 256 \
         --max-num-batched-tokens 8192 --no-enable-prefix-caching"
    );
    // The manifest: the winner's 4 replicas of that command.
    let docs = yaml_rust2::YamlLoader::load_from_str(&read(&out.join("deploy.yaml"))).unwrap();
    let dep = docs.iter().find(|d| d["kind"].as_str() == Some("Deployment")).unwrap();
    assert_eq!(dep["spec"]["replicas"].as_i64(), Some(4));
    let args: Vec<&str> = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(v["launch_command"].as_str().unwrap().ends_with(&args[..args.len() - 4].join(" ")), "{args:?}");
}

#[test]
fn a_bad_tune_section_is_refused_by_key() {
    let dir = out_dir("tune_bad");
    std::fs::create_dir_all(&dir).unwrap();
    let refuse = |src: &str, want: &str| {
        let path = dir.join("t.toml");
        std::fs::write(&path, src).unwrap();
        let o = servesim(&["tune", "--scenario", path.to_str().unwrap(), "--quiet", "--out", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(want), "{want}: {}", stderr(&o));
    };
    refuse(&tuned_short("tp = [1, 1]\n"), "tune.tp: lists 1 twice");
    refuse(&tuned_short("max_num_seqs = [0]\n"), "tune.max_num_seqs: must be ≥ 1, got 0");
    refuse(
        &tuned_short("tp = [1, 2]\nmax_num_seqs = [1, 2, 3]\nmax_configurations = 5\n"),
        "the lists make 6 configurations",
    );
    refuse(&tuned_short("gpu = [\"h9000\"]\n"), "h9000");
    refuse(&tuned_short("kv_dtype = [\"fp8\", \"fp8\"]\n"), "tune.kv_dtype: lists \"fp8\" twice");
    refuse(&tuned_short("kv_dtype = [\"fp7\"]\n"), "fp7");
    refuse(&read(&root().join("tests/plan/known-answer.toml")), "tune: missing section");
}

#[test]
fn an_sglang_scenario_gets_sglangs_launch_command() {
    let src = format!("engine = \"sglang\"\n{}", tuned_short("max_num_seqs = [256]\nprefix_caching = [false]\n"));
    let (v, _) = tune_json(&src, "tune_sglang");
    assert_eq!(v["recommended"], "s256-noprefix");
    assert_eq!(
        v["launch_command"],
        "python3 -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct --tp 1 \
         --max-running-requests 256 --chunked-prefill-size 8192 --disable-radix-cache"
    );
    // The KV dtype as a knob: an fp8 cache holds twice the blocks of a bf16 one (half the
    // bytes per token), and SGLang's flag names the fp8 format.
    let src = format!("engine = \"sglang\"\n{}", tuned_short("max_num_seqs = [256]\nkv_dtype = [\"bf16\", \"fp8\"]\n"));
    let (v, _) = tune_json_with(&src, "tune_kv", &["--exhaustive"]);
    let blocks = |name: &str| {
        let c = v["plan"]["candidates"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
        c["kv_blocks_per_instance"].as_u64().unwrap()
    };
    let (b16, b8) = (blocks("kv-bf16-s256"), blocks("kv-fp8-s256"));
    assert!(b8 >= 2 * b16 && b8 <= 2 * b16 + 1, "{b16} vs {b8}");
    let src = format!("engine = \"sglang\"\n{}", tuned_short("max_num_seqs = [256]\nkv_dtype = [\"fp8\"]\n"));
    let (v, _) = tune_json(&src, "tune_kv_fp8");
    assert_eq!(v["recommended"], "kv-fp8-s256");
    assert!(
        v["launch_command"]
            .as_str()
            .unwrap()
            .ends_with("--max-running-requests 256 --chunked-prefill-size 8192 --kv-cache-dtype fp8_e4m3"),
        "{}",
        v["launch_command"]
    );
}

#[test]
fn shards_merge_to_the_unsharded_tune_and_threads_change_nothing() {
    let out = out_dir("tune_shards");
    std::fs::create_dir_all(&out).unwrap();
    let path = out.join("t.toml");
    std::fs::write(&path, tuned_short("gpu = [\"h100-sxm\", \"a100-80g\"]\nmax_num_seqs = [16, 256]\n")).unwrap();
    let p = path.to_str().unwrap();
    let run = |threads: &str, args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_servesim"))
            .args(args)
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let whole = out.join("whole");
    let one = out.join("one-thread");
    run("2", &["tune", "--scenario", p, "--quiet", "--format", "json", "--out", whole.to_str().unwrap()]);
    run("1", &["tune", "--scenario", p, "--quiet", "--format", "json", "--out", one.to_str().unwrap()]);
    assert_eq!(read(&whole.join("tune.json")), read(&one.join("tune.json")), "thread count changed the result");
    let shards = out.join("shards");
    for sh in ["1/3", "2/3", "3/3"] {
        run("2", &["tune", "--scenario", p, "--quiet", "--shard", sh, "--out", shards.to_str().unwrap()]);
    }
    let merged = out.join("merged");
    run("2", &["merge", shards.to_str().unwrap(), "--format", "json", "--out", merged.to_str().unwrap()]);
    assert_eq!(read(&whole.join("tune.json")), read(&merged.join("tune.json")), "merged shards differ");
    assert_eq!(read(&whole.join("winner.toml")), read(&merged.join("winner.toml")));
}

#[test]
fn pruning_by_cost_floor_never_drops_the_cheapest() {
    // TP 8 costs at least 8 GPUs × $1.80 = $14.40 an hour, more than the $7.20 the first wave
    // (TP 1) finds: those four are pruned, and the answer is the exhaustive search's.
    let src = tuned_short("gpu = [\"h100-sxm\", \"a100-80g\"]\ntp = [1, 8]\nmax_num_seqs = [16, 256]\n");
    let (pruned, out) = tune_json(&src, "tune_pruned");
    let names: Vec<&str> = pruned["pruned"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.iter().all(|n| n.contains("-tp8-")), "{names:?}");
    for p in pruned["pruned"].as_array().unwrap() {
        assert!(p["cost_floor"].as_f64().unwrap() > p["cheapest_found"].as_f64().unwrap());
    }
    assert_eq!(pruned["configurations"], 4);
    let all = exhaustive_of(&out);
    assert_eq!(all["configurations"], 8);
    assert_eq!(all["pruned"].as_array().unwrap().len(), 0);
    assert_eq!(pruned["recommended"], all["recommended"]);
    let cost = |v: &serde_json::Value| {
        let name = v["recommended"].as_str().unwrap();
        v["plan"]["candidates"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap()["cost_per_hour"]
            .as_f64()
    };
    assert_eq!(cost(&pruned), cost(&all));
    // Every configuration the exhaustive search found feasible costs at least the answer.
    let best = cost(&all).unwrap();
    for c in all["plan"]["candidates"].as_array().unwrap().iter().filter(|c| c["feasible"] == true) {
        assert!(c["cost_per_hour"].as_f64().unwrap() >= best, "{}", c["name"]);
    }
}

#[test]
fn pruning_by_one_run_and_by_ties_keeps_the_exhaustive_answer() {
    // Linear cost, so the GPU does not change speed; max_num_seqs does: 4 instances at 256,
    // 8 at 16, 13 at 8 (the exhaustive search below). Waves of 4, cheapest floor first:
    //   1. l40s s16 ×2, s8 ×2 ($0.50):   searched; cheapest 8 × $0.50 = $4.00
    //   2. l40s s256 ×2: searched ($2.00); b200 s16 ×2 ($0.50): passes at 8 instances ($4.00)
    //      and misses at 7 (the most costing less): it can at best tie $4.00 and waits;
    //   3. b200 s8 ×2: miss at 4 ($2.00) → pruned by one run; b200 s256 ×2: pass at 4, and no
    //      count costs less than $2.00: a tie, searched at the end;
    //   4… a100 (miss at 1 instance), h100 (floor $3.00 > $2.00, unrun).
    // At the end the cheapest is $2.00 < $4.00: b200 s16 is pruned, b200 s256 is searched.
    let src = tuned_short("gpu = [\"l40s\", \"b200\", \"a100-80g\", \"h100-sxm\"]\nmax_num_seqs = [16, 8, 256]\nmax_num_batched_tokens = [4096, 8192]\n")
        .replace("h100-sxm = 3.00\n", "h100-sxm = 3.00\nl40s = 0.50\nb200 = 0.50\n");
    let dir = out_dir("tune_probe");
    let html_path = dir.join("tune.html");
    let (pruned, out) = tune_json_with(&src, "tune_probe", &["--report", html_path.to_str().unwrap()]);
    let all = exhaustive_of(&out);
    assert_eq!(all["configurations"], 24);
    let exhaustive =
        |name: &str| all["plan"]["candidates"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
    assert_eq!(pruned["recommended"], all["recommended"]);
    assert_eq!(pruned["recommended"], "l40s-s256-t4096");
    let best = exhaustive("l40s-s256-t4096")["cost_per_hour"].as_f64().unwrap();
    assert!((best - 2.0).abs() < 1e-9, "{best}");
    // Every pruned configuration costs at least its stated least cost in the exhaustive search,
    // and that is more than the answer.
    let list = pruned["pruned"].as_array().unwrap();
    for p in list {
        let e = exhaustive(p["name"].as_str().unwrap());
        let least = p["least_cost"].as_f64().unwrap();
        assert!(least > best, "{p}");
        if e["feasible"] == true {
            assert!(e["cost_per_hour"].as_f64().unwrap() >= least - 1e-9, "{p} vs {}", e["cost_per_hour"]);
        }
    }
    let find = |n: &str| list.iter().find(|p| p["name"] == n).cloned();
    // By floor, unrun: all h100 configurations.
    let unrun: Vec<&str> =
        list.iter().filter(|p| p.get("failed_at_instances").is_none()).map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(unrun.len(), 6, "{unrun:?}");
    assert!(unrun.iter().all(|n| n.starts_with("h100-sxm")), "{unrun:?}");
    // By one run: b200 s8 missed at 4 instances ($2.00 is 4 × $0.50), so it costs ≥ 5 × $0.50.
    let s8 = find("b200-s8-t4096").expect("b200-s8 pruned");
    assert_eq!((s8["failed_at_instances"].as_u64(), s8["least_cost"].as_f64()), (Some(4), Some(2.5)));
    // The tie: b200 s16 missed at 7, so it costs ≥ 8 × $0.50 = $4.00, the cheapest when it ran.
    let s16 = find("b200-s16-t8192").expect("b200-s16 pruned as a tie beaten later");
    assert_eq!((s16["failed_at_instances"].as_u64(), s16["least_cost"].as_f64()), (Some(7), Some(4.0)));
    assert_eq!(exhaustive("b200-s16-t8192")["instances"], 8);
    // The tie with the answer is searched (the plan breaks ties), with the exhaustive count.
    assert!(find("b200-s256-t4096").is_none());
    let searched = pruned["plan"]["candidates"].as_array().unwrap();
    assert_eq!(searched.len() + list.len(), 24);
    for c in searched {
        let e = exhaustive(c["name"].as_str().unwrap());
        assert_eq!((&c["feasible"], &c["instances"]), (&e["feasible"], &e["instances"]), "{}", c["name"]);
    }
    // The HTML report: the two cost charts, every searched configuration in the table, every
    // pruned one in its own, the frontier counted; `servesim report DIR` writes the same page.
    let html = read(&html_path);
    assert_eq!(html.matches("<svg").count(), 2, "two charts");
    assert!(html.contains("worst-seed TTFT p99 against cost") && html.contains("worst-seed TPOT p99 against cost"));
    let frontier = pruned["frontier"].as_array().unwrap().len();
    assert!(html.contains(&format!("Pareto frontier ({frontier})")), "frontier count in the legend");
    for c in searched {
        assert!(html.contains(c["name"].as_str().unwrap()), "{}", c["name"]);
    }
    let pruned_table = &html[html.find("<h2>Pruned</h2>").expect("a pruned table")..];
    assert_eq!(pruned_table.matches("<tr><td>").count(), list.len());
    assert!(pruned_table.contains("missed the SLO on the first seed at 7 instance(s)"), "the tie's evidence");
    let again = out.join("again.html");
    let o = servesim(&["report", out.to_str().unwrap(), "--out", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&again), html);
}

#[test]
fn a_disaggregated_scenario_tunes_each_pools_gpu_and_tp() {
    // scenarios/disaggregated.toml: a prefill and a decode pool, each sized by the plan's pool
    // search; the knobs pick each pool's TP and GPU.
    let src = read(&root().join("scenarios/disaggregated.toml")).replace("duration_s = 120\n", "duration_s = 40\n")
        + "\n[plan.price_per_gpu_hour]\nh100-sxm = 3.0\nh200 = 3.7\n"
        + "[tune]\nprefill_tp = [1, 2]\ndecode_gpu = [\"h100-sxm\", \"h200\"]\n";
    let (v, out) = tune_json_with(&src, "tune_pools", &["--exhaustive"]);
    let cands = v["plan"]["candidates"].as_array().unwrap();
    let mut names: Vec<&str> = cands.iter().map(|c| c["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["p-tp1-d-h100-sxm", "p-tp1-d-h200", "p-tp2-d-h100-sxm", "p-tp2-d-h200"]);
    for c in cands.iter().filter(|c| c["feasible"] == true) {
        let p = &c["pools"];
        let name = c["name"].as_str().unwrap();
        // Each pool has the knobs' TP and GPU, and the cost is both pools' GPUs at their prices.
        assert_eq!(p["prefill"]["tp"].as_u64(), Some(if name.contains("p-tp2") { 2 } else { 1 }), "{name}");
        assert_eq!(p["decode"]["gpu"], if name.ends_with("h200") { "h200" } else { "h100-sxm" }, "{name}");
        let price = |g: &serde_json::Value| if g == "h200" { 3.7 } else { 3.0 };
        let cost = p["prefill_gpus"].as_f64().unwrap() * price(&p["prefill"]["gpu"])
            + p["decode_gpus"].as_f64().unwrap() * price(&p["decode"]["gpu"]);
        assert!((c["cost_per_hour"].as_f64().unwrap() - cost).abs() < 1e-9, "{name}: {cost}");
    }
    let best = cands.iter().find(|c| c["name"] == v["recommended"]).unwrap();
    let cheapest = cands
        .iter()
        .filter(|c| c["feasible"] == true)
        .map(|c| c["cost_per_hour"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(best["cost_per_hour"].as_f64(), Some(cheapest));
    // The winner as a scenario with each pool at its count, and one launch command per pool.
    let (np, nd) =
        (best["pools"]["prefill_instances"].as_u64().unwrap(), best["pools"]["decode_instances"].as_u64().unwrap());
    let winner: toml::Table = read(&out.join("winner.toml")).parse().unwrap();
    let groups = winner["cluster"]["groups"].as_array().unwrap();
    let count = |role: &str| groups.iter().find(|g| g["role"].as_str() == Some(role)).unwrap()["count"].as_integer();
    assert_eq!((count("prefill"), count("decode")), (Some(np as i64), Some(nd as i64)));
    let launch = v["launch_command"].as_str().unwrap();
    assert!(
        launch.starts_with(&format!("prefill ({np} instances): vllm serve meta-llama/Meta-Llama-3-8B-Instruct")),
        "{launch}"
    );
    assert!(launch.contains(&format!("; decode ({nd} instances): vllm serve")), "{launch}");
    assert_eq!(launch.matches("NixlConnector").count(), 2, "{launch}");
    // The pool knobs need pools.
    let dir = out_dir("tune_pools_bad");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.toml");
    std::fs::write(&path, tuned_short("decode_tp = [1, 2]\n")).unwrap();
    let o = servesim(&["tune", "--scenario", path.to_str().unwrap(), "--quiet", "--out", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("this one has no [cluster.disaggregation]"), "{}", stderr(&o));
}

#[test]
fn a_budget_of_runs_stops_between_waves_and_says_the_answer_is_not_proven() {
    // The probe test's space: the first wave (l40s s16 ×2, s8 ×2) alone takes more than 20 runs,
    // so the other 20 configurations are not reached; the answer is the first wave's cheapest
    // (8 × $0.50 at s16), and the output says it is not proven the cheapest (that is $2.00).
    let src = tuned_short("gpu = [\"l40s\", \"b200\", \"a100-80g\", \"h100-sxm\"]\nmax_num_seqs = [16, 8, 256]\nmax_num_batched_tokens = [4096, 8192]\n")
        .replace("h100-sxm = 3.00\n", "h100-sxm = 3.00\nl40s = 0.50\nb200 = 0.50\n");
    let (v, dir) = tune_json_with(&src, "tune_budget", &["--budget", "20"]);
    assert_eq!(v["budget_runs"], 20);
    let unsearched = v["unsearched"].as_array().unwrap();
    assert_eq!(unsearched.len(), 20, "{unsearched:?}");
    assert!(unsearched
        .iter()
        .all(|n| !n.as_str().unwrap().starts_with("l40s-s16") && !n.as_str().unwrap().starts_with("l40s-s8")));
    assert_eq!(v["plan"]["candidates"].as_array().unwrap().len(), 4);
    assert_eq!(v["recommended"], "l40s-s16-t4096");
    assert_eq!(v["pruned"].as_array().unwrap().len(), 0);
    // The table says so.
    let o = servesim(&[
        "tune",
        "--scenario",
        dir.join("tune.toml").to_str().unwrap(),
        "--budget",
        "20",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("the budget of 20 runs was spent: 20 configuration(s) not searched"), "{}", stdout(&o));
    assert!(stdout(&o).contains("not proven the cheapest of the space"));
    // --budget with --exhaustive or --shard is refused by the parser.
    let o =
        servesim(&["tune", "--scenario", dir.join("tune.toml").to_str().unwrap(), "--budget", "20", "--exhaustive"]);
    assert!(!o.status.success() && stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn pipeline_stages_are_a_knob_and_reach_the_launch_command() {
    // Two stages of one H100 each: 2 instances of 2 GPUs meet the SLO (tests/it/pipeline.rs
    // derives it), and the command vLLM is launched with says so.
    let (v, _) = tune_json(&tuned_short("gpu = [\"h100-sxm\"]\npp = [2]\n"), "tune_pp");
    assert_eq!(v["recommended"], "h100-sxm-pp2");
    let launch = v["launch_command"].as_str().unwrap();
    assert!(launch.starts_with("vllm serve ") && launch.contains(" --pipeline-parallel-size 2 "), "{launch}");
}

#[test]
fn the_launch_command_reads_back_as_the_winners_settings() {
    // tune writes each engine's flags; `scenario from-vllm` / `from-sglang` read them: the two
    // must agree on every flag, so the winner's launch command, read back, is the winner.
    for (engine, from) in [("vllm", "from-vllm"), ("sglang", "from-sglang")] {
        let src = format!(
            "engine = \"{engine}\"\n{}",
            tuned_short(
                "max_num_seqs = [128]\nmax_num_batched_tokens = [4096]\nprefix_caching = [false]\nkv_dtype = [\"fp8\"]\n"
            )
        );
        let (v, out) = tune_json(&src, &format!("tune_roundtrip_{engine}"));
        let launch = v["launch_command"].as_str().unwrap().to_string();
        let words: Vec<&str> = launch.split_whitespace().collect();
        let mut args = vec!["scenario", from, "--gpu", "h100-sxm", "--out"];
        let back = out.join("back.toml");
        args.push(back.to_str().unwrap());
        args.push("--");
        args.extend(&words);
        let o = servesim(&args);
        assert!(o.status.success(), "{engine}: {launch}: {}", stderr(&o));
        let t: toml::Table = read(&back).parse().unwrap();
        let sch = &t["scheduler"];
        assert_eq!(sch["max_num_seqs"].as_integer(), Some(128), "{engine}: {launch}\n{t}");
        assert_eq!(sch["max_num_batched_tokens"].as_integer(), Some(4096), "{engine}: {launch}\n{t}");
        assert_eq!(sch["prefix_cache"]["enabled"].as_bool(), Some(false), "{engine}: {launch}\n{t}");
        assert_eq!(t["model"]["kv_dtype"].as_str(), Some("fp8"), "{engine}: {launch}\n{t}");
        assert_eq!(t["cluster"]["tp"].as_integer(), Some(1), "{engine}: {launch}\n{t}");
    }
}

/// The table says what priced each configuration: the shipped peak scenario over two GPUs is
/// priced by each GPU's own kernels from the database, the known answer by its linear line.
#[test]
fn the_table_says_what_priced_each_configuration() {
    let out = out_dir("tune_priced_by");
    std::fs::create_dir_all(&out).unwrap();
    let path = out.join("tune.toml");
    let peak = read(&root().join("scenarios/peak.toml")).replace("duration_s = 180", "duration_s = 30");
    std::fs::write(&path, format!("{peak}\n[tune]\ngpu = [\"h100-sxm\", \"a100-80g\"]\n")).unwrap();
    let o = servesim(&["tune", "--scenario", path.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("tune.json"))).unwrap();
    let mut want = String::from("\npriced by:\n");
    let mut sources: Vec<(String, String)> = v["plan"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["priced_by"].as_str().unwrap().to_string(), c["name"].as_str().unwrap().to_string()))
        .collect();
    sources.sort();
    assert_eq!(sources.len(), 2, "{sources:?}");
    for (source, name) in &sources {
        assert!(source.starts_with("the kernel database (vllm kernels of "), "{source}");
        want += &format!("  {source}: 1 configuration(s): {name}\n");
    }
    assert!(table.contains(&want), "{want}\n---\n{table}");
    let known = tuned_short("max_num_seqs = [16, 256]\n");
    std::fs::write(&path, known).unwrap();
    let o = servesim(&["tune", "--scenario", path.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\npriced by:\n  linear"), "{}", stdout(&o));
}
