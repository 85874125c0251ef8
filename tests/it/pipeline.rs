//! Pipeline parallelism (`[cluster] pp`): stage times computed by hand, the memory of a stage,
//! the GPUs a plan counts, launch commands in and out, and the errors.

use crate::common::*;
use servesim_sim::metrics::Status;
use servesim_sim::SimTime;

/// One request of a 100-token prompt and 3 output tokens on llama-3-8b (32 layers, hidden
/// 4096), priced by a line (5 ms + 50 µs per token), over `tp` × `pp` H100s.
fn one_request(tp: u32, pp: u32) -> String {
    format!(
        "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"h100-sxm\"\n\
         [cluster]\ntp = {tp}\npp = {pp}\n[cost]\nkind = \"linear\"\nbase_us = 5000\nper_token_us = 50\n\
         [workload]\nrequests = 1\narrival = {{ kind = \"constant\", rate = 1 }}\n\
         prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 3 }}\n"
    )
}

#[test]
fn one_request_crosses_every_stage_and_each_send() {
    // PP 2 on one node: stages of 16 layers, the send between them over NVLink (450 GB/s)
    // plus AIConfigurator's 10 µs P2P latency.
    // Prefill: the line gives 5000 + 50 × 100 = 10,000 µs for the whole model; each stage
    // does half, and stage 0 sends 100 × 4096 × 2 = 819,200 bytes: 1,820.44 ns + 10,000 ns.
    // One micro-batch: the iteration is its trip, 10,000,000 + 11,820.44 → 10,011,820 ns.
    // Decode: 5,050 µs over both stages plus 8,192 bytes (18.2 ns) + 10 µs → 5,060,018 ns.
    let out = run(&one_request(1, 2));
    let r = out.recorder.records[0];
    assert_eq!(r.status, Status::Finished);
    assert_eq!(r.ttft(), Some(SimTime(10_011_820)));
    assert_eq!(r.e2e(), Some(SimTime(10_011_820 + 2 * 5_060_018)));
    // One micro-batch at a time: each stage works half of every iteration (stage 0 its half of
    // the layers and the send, stage 1 its half while the other waits): busy 50%.
    let p = &out.summary.cost.pipelines;
    assert_eq!((p.len(), p[0].stages), (1, 2));
    // (The period is rounded to whole nanoseconds, the stages' work is not.)
    assert!((p[0].busy_share - 0.5).abs() < 1e-6, "{}", p[0].busy_share);
    // Without stages the same line prices the request with no sends.
    let flat = run(&one_request(1, 1)).recorder.records[0];
    assert_eq!(flat.ttft(), Some(SimTime(10_000_000)));
    assert_eq!(flat.e2e(), Some(SimTime(10_000_000 + 2 * 5_050_000)));
}

#[test]
fn a_pipeline_over_two_nodes_sends_over_the_network() {
    // TP 8 × PP 2: the second stage is on another node; the send goes over the H100's
    // 400 Gb/s NIC (50 GB/s per GPU): 819,200 bytes in 16,384 ns, + 10 µs.
    let out = run(&one_request(8, 2));
    assert_eq!(out.recorder.records[0].ttft(), Some(SimTime(10_000_000 + 26_384)));
    // A network given in [gpu] replaces the preset's: 100 GB/s halves the transfer.
    let src = one_request(8, 2).replace("preset = \"h100-sxm\"\n", "preset = \"h100-sxm\"\nnetwork_gb_per_s = 100\n");
    assert_eq!(run(&src).recorder.records[0].ttft(), Some(SimTime(10_000_000 + 18_192)));
}

/// llama-3.1-70b at FP8 under a steady load, priced by the roofline.
fn seventy_b(tp: u32, pp: u32) -> String {
    format!(
        "seed = 3\n[model]\npreset = \"llama-3.1-70b\"\nweight_dtype = \"fp8\"\n[gpu]\npreset = \"h100-sxm\"\n\
         [cluster]\ntp = {tp}\npp = {pp}\n[scheduler]\nmax_num_seqs = 256\nmax_num_batched_tokens = 8192\n\
         [workload]\nrequests = 300\narrival = {{ kind = \"poisson\", rate = 4 }}\n\
         prompt_tokens = {{ kind = \"fixed\", value = 1024 }}\noutput_tokens = {{ kind = \"fixed\", value = 128 }}\n"
    )
}

#[test]
fn stages_hold_their_share_of_memory_and_a_plan_counts_every_gpu() {
    // The reserve pinned: servesim's default one grows with the FFN and vocabulary shards,
    // twice as wide at TP 4.
    let pinned = |src: String| src.replace("[cluster]", "[memory]\nreserve_gib = 2\n[cluster]");
    let tp8 = scenario(&pinned(seventy_b(8, 1)));
    let pp2 = scenario(&pinned(seventy_b(4, 2)));
    let (a, b) = (&tp8.groups[0], &pp2.groups[0]);
    assert_eq!((b.tp, b.layout.pp, b.gpus(), b.name.as_str()), (4, 2, 8, "h100-sxm-tp4-pp2"));
    // Eight GPUs either way hold the same bytes of weights and of KV per token (40 layers ×
    // 2 KV heads vs 80 × 1): the same blocks.
    assert_eq!(
        (b.memory.weight_bytes, b.memory.kv_bytes_per_token),
        (a.memory.weight_bytes, a.memory.kv_bytes_per_token)
    );
    assert_eq!(b.memory.kv_blocks, a.memory.kv_blocks);
    // The resolved file keeps the stages.
    let again = servesim_sim::Scenario::from_toml(&pp2.resolved_toml(), "t").unwrap();
    assert_eq!(again.groups[0].layout, b.layout);
    // Every request is served, and each GPU-second is counted: 8 GPUs per instance.
    let out = run_checked(&seventy_b(4, 2));
    assert_eq!(out.summary.requests.finished, 300);
}

#[test]
fn a_stage_for_each_layer_group_is_slower_per_token_than_tensor_parallelism() {
    // Same 8 GPUs: decode reads each stage's weights once per micro-batch, so TPOT grows with
    // the stages (a TP group reads its shard once per step), while the sends stay small.
    let tpot = |tp: u32, pp: u32| run(&seventy_b(tp, pp)).summary.tpot_ms.p50;
    let (t8, t4p2, t1p8) = (tpot(8, 1), tpot(4, 2), tpot(1, 8));
    assert!(t8 < t4p2 && t4p2 < t1p8, "{t8} {t4p2} {t1p8}");
    // With batches of many sequences the stages are busier than with one request's 1/pp,
    // and the more stages, the more each waits.
    let busy = |tp: u32, pp: u32| run(&seventy_b(tp, pp)).summary.cost.pipelines[0].busy_share;
    let (b2, b8) = (busy(4, 2), busy(1, 8));
    assert!(b2 > 0.5 && b2 < 1.0 && b8 > 0.125 && b8 < b2, "{b2} {b8}");
    assert!(run(&seventy_b(8, 1)).summary.cost.pipelines.is_empty());
}

#[test]
fn bad_stage_counts_name_the_key() {
    let err = |src: &str| servesim_sim::Scenario::from_toml(src, "t").unwrap_err().to_string();
    let e = err(&one_request(1, 0));
    assert!(e.contains("cluster.pp") && e.contains("must be in [1, 64]"), "{e}");
    let e = err(&one_request(1, 33));
    assert!(e.contains("cluster.pp") && e.contains("the model's 32 layers"), "{e}");
    // Memory names the stage that does not fit.
    let src = seventy_b(1, 2).replace("weight_dtype = \"fp8\"", "weight_dtype = \"bf16\"");
    let e = err(&src.replace("[cluster]", "[memory]\ngpu_memory_utilization = 0.8\n[cluster]"));
    assert!(e.contains("at tp 1 × pp 2 (stage 1 of 2: 40 layers)"), "{e}");
    // Not with DP attention, and not in a disaggregated pool.
    let moe = "[model]\npreset = \"qwen3-235b-a22b\"\nweight_dtype = \"fp8\"\n[gpu]\npreset = \"h200\"\n\
               [cluster]\ntp = 4\ndp_attention = 4\npp = 2\n[workload]\nrequests = 1\n\
               arrival = { kind = \"constant\", rate = 1 }\n\
               prompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 10 }\n";
    let e = err(moe);
    assert!(e.contains("cluster.pp") && e.contains("DP attention"), "{e}");
}

#[test]
fn launch_commands_carry_the_stages_in() {
    let dir = out_dir("pipeline_from_vllm");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.toml");
    let o = servesim(&[
        "scenario",
        "from-vllm",
        "--gpu",
        "h100-sxm",
        "--out",
        path.to_str().unwrap(),
        "--",
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-70B-Instruct",
        "--tensor-parallel-size",
        "4",
        "--pipeline-parallel-size",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("pipeline"), "{}", stderr(&o));
    let s = scenario(&read(&path));
    assert_eq!((s.groups[0].tp, s.groups[0].layout.pp), (4, 2));
}

#[test]
fn a_plan_sizes_pipelined_instances_and_counts_their_gpus() {
    // tests/plan/known-answer.toml (tests/it/plan.rs derives it) with two stages. The line's
    // 50 µs per token is split over the stages, its fixed 5 ms is paid by every micro-batch
    // on every stage's half: with two equal micro-batches an iteration is
    // 2 × (2.5 ms + 25 µs × T/2) + the sends = 5 ms + 25 µs × T (+ 20 µs). At rate r each
    // request brings 200 tokens: T̄ = 5 / (1 − 0.005 r) ms, TPOT ≤ 10 ms ⇔ r ≤ 100 req/s:
    // ⌈180 / 100⌉ = 2 instances (one alone at 180 req/s would need T̄ = 50 ms), 4 GPUs.
    let dir = out_dir("pipeline_plan");
    std::fs::create_dir_all(&dir).unwrap();
    let src = read(&root().join("tests/plan/known-answer.toml")).replace("[cost]", "[cluster]\npp = 2\n[cost]");
    let path = scenario_file(&dir, "pp.toml", &src);
    let v = plan_json(&path, &dir.join("out"));
    let c = &v["candidates"][0];
    assert_eq!((c["tp"].as_u64(), c["pp"].as_u64()), (Some(1), Some(2)));
    assert_eq!(c["instances_min"], 2);
    assert_eq!(c["gpus"], 4, "2 instances × 1 × 2 GPUs");
    let tpot = c["tpot_ms_p99"].as_f64().unwrap();
    assert!(tpot < 10.0 && tpot > 9.0, "TPOT at 2 instances {tpot} ms, hand value ≈ 9.1");

    // As candidates side by side: one stage needs ⌈180 / 50⌉ = 4 instances (tests/it/plan.rs),
    // two stages 2 of 2 GPUs: the same 4 GPUs.
    let src = read(&root().join("tests/plan/known-answer.toml"))
        + "[[plan.candidates]]\nname = \"one-stage\"\n[[plan.candidates]]\nname = \"two-stages\"\npp = 2\n";
    let path = scenario_file(&dir, "candidates.toml", &src);
    let v = plan_json(&path, &dir.join("out2"));
    let c = &v["candidates"];
    assert_eq!((c[0]["instances_min"].as_u64(), c[0]["gpus"].as_u64()), (Some(4), Some(4)));
    assert_eq!(
        (c[1]["pp"].as_u64(), c[1]["instances_min"].as_u64(), c[1]["gpus"].as_u64()),
        (Some(2), Some(2), Some(4))
    );
}

/// `servesim scenario from-vllm --gpu GPU [--out OUT] -- CMD...`, run from the repository root.
fn from_vllm_command(gpu: &str, out: Option<&std::path::Path>, cmd: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_servesim"));
    c.args(["scenario", "from-vllm", "--gpu", gpu]).current_dir(root());
    if let Some(out) = out {
        c.arg("--out").arg(out);
    }
    c.arg("--").args(cmd);
    c
}

/// `scenario from-vllm` prices from the kernel database where it has the GPU, engine and model:
/// llama-3-8b under vLLM on h100_sxm is a slice shipped in calibrate/profiles/aic/; Llama-3.1-70B
/// is not, and with no database on the machine (SERVESIM_AIC_DATA names an empty folder) the
/// file says the roofline prices it, and why, as stderr does.
#[test]
fn from_vllm_prices_from_the_kernel_database_where_it_has_the_model_else_says_roofline() {
    let dir = out_dir("from_vllm_cost");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let run = |model: &str, out: &str| {
        from_vllm_command("h100-sxm", Some(&dir.join(out)), &[model, "--tensor-parallel-size", "4"])
            .env("SERVESIM_AIC_DATA", dir.join("empty"))
            .output()
            .unwrap()
    };
    let o = run("meta-llama/Llama-3.1-8B-Instruct", "8b.toml");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("cost: AIConfigurator's kernel database (vllm on h100_sxm)"), "{}", stderr(&o));
    let text = read(&dir.join("8b.toml"));
    assert!(text.contains("database = { framework = \"vllm\" }"), "{text}");
    let s = scenario(&text);
    assert!(s.groups[0].profile.is_some(), "priced from the database slice");
    let o = run("meta-llama/Llama-3.1-70B-Instruct", "70b.toml");
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("cost: the roofline, not measured kernels: ") && e.contains("no AIConfigurator kernel tables there"),
        "{e}"
    );
    let text = read(&dir.join("70b.toml"));
    assert!(text.contains("# Iteration times from the roofline") && !text.contains("database ="), "{text}");
}

/// `--gpu FILE.toml` describes a GPU without a preset with a scenario's `[gpu]` keys: the
/// scenario carries them (and the roofline prices it, said so); a file missing a key the GPU
/// needs is refused naming the file and the key.
#[test]
fn from_vllm_takes_a_gpu_file_for_a_gpu_without_a_preset() {
    let dir = out_dir("from_vllm_gpu_file");
    std::fs::create_dir_all(&dir).unwrap();
    // Figures of a made-up GPU, not a datasheet's.
    let good = dir.join("lab.toml");
    std::fs::write(&good, "[gpu]\nname = \"lab-gpu\"\nbf16_tflops = 200\nhbm_gb_per_s = 1000\nmemory_gib = 48\ninterconnect_gb_per_s = 32\npcie_gb_per_s = 32\n").unwrap();
    let out = dir.join("s.toml");
    let o =
        from_vllm_command(good.to_str().unwrap(), Some(&out), &["meta-llama/Llama-3.1-8B-Instruct"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("cost: the roofline, not measured kernels"), "{}", stderr(&o));
    let s = scenario(&read(&out));
    let g = &s.groups[0].gpu;
    assert_eq!((g.name.as_str(), g.bf16_flops, g.hbm_bytes_per_s), ("lab-gpu", 200e12, 1000e9));
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nbf16_tflops = 100\n").unwrap();
    let o = from_vllm_command(bad.to_str().unwrap(), None, &["meta-llama/Llama-3.1-8B-Instruct"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.toml: gpu.hbm_gb_per_s: required when no preset is given"), "{}", stderr(&o));
}
