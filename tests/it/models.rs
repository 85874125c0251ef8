//! Models of 2026 end to end: the shipped DeepSeek-R1, gpt-oss-120b and Qwen3-235B scenarios
//! simulate and plan, DP attention holds more KV than tensor-parallel attention, and the new
//! keys refuse what cannot be simulated with the key and the value.

use crate::common::{out_dir, plan_json, root, servesim, stderr, stdout};

/// The error of a scenario made of `text` and a small workload.
fn refused(text: &str) -> String {
    let text = format!(
        "{text}[workload]\nrequests = 10\narrival = {{ kind = \"poisson\", rate = 1 }}\n\
         prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}\n"
    );
    servesim_sim::Scenario::from_toml(&text, "t").err().map(|e| e.to_string()).unwrap_or_default()
}

const DEEPSEEK: &str =
    "name = \"t\"\n[model]\npreset = \"deepseek-r1\"\nweight_dtype = \"fp8\"\n[gpu]\npreset = \"h200\"\n";

#[test]
fn deepseek_r1_on_8_h200_with_ep8_and_dp_attention_simulates_and_plans() {
    let dir = out_dir("models_deepseek");
    let sim = servesim(&["simulate", "--scenario", "scenarios/deepseek-r1-h200.toml", "--out", dir.to_str().unwrap()]);
    assert!(sim.status.success(), "{}", stderr(&sim));
    assert!(stdout(&sim).contains("2 × h200 (tp 8, dp-attention 8, ep)"), "{}", stdout(&sim));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["requests"]["finished"], s["requests"]["arrived"], "{s}");
    let plan = plan_json("scenarios/deepseek-r1-h200.toml", &out_dir("models_deepseek_plan"));
    let cand = |name: &str| plan["candidates"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
    let (dp, tp) = (cand("h200-tp8-dp8-ep8"), cand("h200-tp8"));
    assert_eq!(dp["feasible"], true, "{dp}");
    // Each of the 8 ranks keeps its own sequences' latent; under TP every GPU keeps all of it.
    let blocks = |c: &serde_json::Value| c["kv_blocks_per_instance"].as_u64().unwrap();
    assert!(blocks(&dp) > 6 * blocks(&tp), "{} vs {}", blocks(&dp), blocks(&tp));
    // Cheapest feasible: 2 DP instances ($59.20/h) against TP8's 3.
    assert_eq!(plan["recommended"], "h200-tp8-dp8-ep8", "{plan}");
}

#[test]
fn memory_sizes_a_preset_in_its_published_checkpoints_format() {
    // DeepSeek-V3's checkpoint is block-scaled FP8 (config.json quantization_config): 671 B
    // parameters at 1 byte over 8 H200s fit; in bf16 (2 bytes, about 167 GiB per GPU) they would
    // not.
    let o = servesim(&["memory", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let weights = v["weight_bytes"].as_u64().unwrap() as f64;
    let params = v["params"].as_u64().unwrap() as f64;
    assert!((weights / (params / 8.0) - 1.0).abs() < 0.05, "{weights} bytes for {params} parameters over 8 GPUs");
    assert!(v["kv_blocks"].as_u64().unwrap() > 0);
    let o = servesim(&["memory", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weight-dtype", "bf16"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("deepseek-v3 does not fit on h200 at tp 8: weights 156.24 GiB"), "{}", stderr(&o));
    let o = servesim(&["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]);
    assert!(stdout(&o).starts_with("llama-3.1-8b (bf16 weights"), "{}", stdout(&o));
    // Under DP attention each rank schedules over its own eighth of the instance's blocks.
    let o = servesim(&["memory", "--model", "deepseek-r1", "--gpu", "h200", "--tp", "8", "--dp-attention", "8"]);
    let text = stdout(&o);
    let number = |line: &str, after: &str| -> u64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit() && c != ',')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    let total = number(text.lines().find(|l| l.contains("KV blocks")).unwrap(), "KV blocks");
    let ranks = text.lines().find(|l| l.contains("attention DP ranks")).unwrap();
    assert_eq!(number(ranks, "own sequences' KV:"), total / 8, "{text}");
}

#[test]
fn gpt_oss_120b_fits_one_h100_in_mxfp4_and_the_bf16_error_says_by_how_much() {
    let o = servesim(&[
        "simulate",
        "--scenario",
        "scenarios/gpt-oss-120b-h100.toml",
        "--out",
        out_dir("models_oss").to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(root().join("scenarios/gpt-oss-120b-h100.toml")).unwrap();
    let bf16 = text.replace("weight_dtype = \"mxfp4\"", "weight_dtype = \"bf16\"");
    let e = servesim_sim::Scenario::from_toml(&bf16, "t").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("gpt-oss-120b does not fit on h100-sxm at tp 1") && e.contains("by 14"), "{e}");
    let q = servesim(&[
        "simulate",
        "--scenario",
        "scenarios/qwen3-235b-b200.toml",
        "--out",
        out_dir("models_qwen").to_str().unwrap(),
        "-q",
    ]);
    assert!(q.status.success(), "{}", stderr(&q));
}

#[test]
fn parallel_layouts_and_new_model_keys_refuse_what_cannot_be_simulated() {
    let cases = [
        (format!("{DEEPSEEK}[cluster]\ntp = 8\ndp_attention = 3\n"), "cluster.dp_attention: must divide tp (8), got 3"),
        (
            "name = \"t\"\n[model]\npreset = \"llama-3.1-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[cluster]\ntp = 2\nep = true\n".to_string(),
            "cluster.ep: needs a MoE model; llama-3.1-8b has no experts",
        ),
        (
            "name = \"t\"\n[model]\npreset = \"mixtral-8x7b\"\n[gpu]\npreset = \"h100-sxm\"\n[cluster]\ntp = 16\nep = true\n".to_string(),
            "cluster.ep: needs tp (16) to divide the model's 8 experts",
        ),
        // DP attention asks the database for the instance's slice (TP 8, expert-parallel
        // experts) and each rank's (TP 1); a profile file is refused with the way out.
        (
            format!("{DEEPSEEK}[cluster]\ntp = 8\ndp_attention = 8\nep = true\n[cost]\ndatabase = {{ framework = \"sglang\" }}\n"),
            "no shipped profile for deepseek-r1 on h200_sxm (sglang newest, fp8-block weights, bf16 KV, TP 8)",
        ),
        (
            format!("{DEEPSEEK}[cluster]\ntp = 8\ndp_attention = 8\n[cost]\nprofile = \"p.json\"\n"),
            "cost.profile: deepseek-r1 with DP attention: a profile file's tables are not read for DP ranks; use cost.database",
        ),
        // Without DP attention the database is asked, for the block-scaled FP8 kernels its
        // checkpoint runs (no database here: the message names the request).
        (
            format!("{DEEPSEEK}[cluster]\ntp = 8\n[cost]\ndatabase = {{ framework = \"sglang\" }}\n"),
            "no shipped profile for deepseek-r1 on h200_sxm (sglang newest, fp8-block weights, bf16 KV, TP 8)",
        ),
        (DEEPSEEK.replace("[gpu]", "kv_dtype = \"mxfp4\"\n[gpu]") + "[cluster]\ntp = 8\n", "model.kv_dtype: mxfp4 is a weight format"),
        (
            "name = \"t\"\n[model]\npreset = \"llama-3.1-8b\"\nwindow = { tokens = 128, layers = 40 }\n[gpu]\npreset = \"h100-sxm\"\n".to_string(),
            "model.window.layers: must be < layers (32): at least one layer attends to the whole context, got 40",
        ),
        (
            "name = \"t\"\n[model]\npreset = \"llama-3.1-8b\"\nwindow = { tokens = 128, layers = 32 }\n[gpu]\npreset = \"h100-sxm\"\n".to_string(),
            "model.window.layers: must be < layers (32)",
        ),
        (
            DEEPSEEK.replace("[gpu]", "shared_experts = 1048576\nintermediate = 1099511627776\n[gpu]"),
            "at most 1e17 can be sized",
        ),
        (
            DEEPSEEK.replace("[gpu]", "window = { tokens = 1152921504606846976, layers = 1 }\n[gpu]"),
            "model.window.tokens: must be in [1, 2^40]",
        ),
    ];
    for (text, want) in cases {
        let e = refused(&text);
        assert!(e.contains(want), "want {want:?}, got {e:?}");
    }
    let c = servesim(&[
        "calibrate",
        "run",
        "--backend",
        "cpu",
        "--model",
        "deepseek-r1",
        "--tp",
        "8",
        "--out",
        "/nonexistent/x.json",
    ]);
    assert!(!c.status.success());
    assert!(
        stderr(&c).contains("deepseek-r1 has multi-head latent attention, which calibration does not measure yet"),
        "{}",
        stderr(&c)
    );
}

#[test]
fn a_kv_block_count_the_engine_reported_is_used_as_given() {
    let text = |blocks: &str| {
        format!(
            "name = \"t\"\n[model]\npreset = \"llama-3.1-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[cluster]\ninstances = 2\n\
             [memory]\nkv_blocks = {blocks}\n"
        )
    };
    let s = servesim_sim::Scenario::from_toml(
        &format!(
            "{}[workload]\nrequests = 10\narrival = {{ kind = \"poisson\", rate = 1 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}\n",
            text("5000")
        ),
        "t",
    )
    .unwrap();
    assert_eq!(s.groups[0].memory.kv_blocks, 5000);
    let out = servesim_sim::engine::run(&s);
    assert_eq!(out.summary.kv.blocks_total, 10_000, "two instances of 5000 blocks");
    assert!(refused(&text("0")).contains("memory.kv_blocks: must be in [1, 2^32), got 0"));
    assert!(refused(&text("100000")).contains("100000 KV blocks of 2097152 bytes"), "{}", refused(&text("100000")));
}

#[test]
fn memory_takes_a_custom_gpu_and_a_model_file() {
    let dir = out_dir("models_memory_files");
    std::fs::create_dir_all(&dir).unwrap();
    let gpu = dir.join("gpu.toml");
    std::fs::write(
        &gpu,
        "[gpu]\nname = \"my-h20\"\nbf16_tflops = 148\nhbm_gb_per_s = 4000\nmemory_gib = 96\n\
         interconnect_gb_per_s = 450\npcie_gb_per_s = 64\n",
    )
    .unwrap();
    let model = dir.join("model.toml");
    std::fs::write(&model, "[model]\npreset = \"qwen3-30b-a3b\"\nweight_dtype = \"fp8\"\n").unwrap();
    let o =
        servesim(&["memory", "--model", model.to_str().unwrap(), "--gpu", gpu.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // 96 GiB; fp8 from the model file: one byte per parameter.
    assert_eq!((v["gpu"].as_str(), v["memory_bytes"].as_u64()), (Some("my-h20"), Some(96 << 30)));
    assert_eq!(v["weight_bytes"].as_u64(), Some(30_532_110_336));
    std::fs::write(&gpu, "[gpu]\nname = 3\n").unwrap();
    let o = servesim(&["memory", "--model", "llama-3-8b", "--gpu", gpu.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("line 2: gpu.name: invalid type: integer `3`, expected a string"), "{}", stderr(&o));
}

#[test]
fn the_new_layouts_keep_every_invariant_under_pressure() {
    // KV-tight on purpose: preemptions happen, with 8 DP ranks' blocks in one pool (prompts
    // also held by TensorRT-LLM's balancing), windowed layers set apart, and a pinned block count.
    let workload = "[workload]\nrequests = 300\narrival = { kind = \"poisson\", rate = 50 }\n\
                    prompt_tokens = { kind = \"lognormal\", median = 3000, p99 = 12000, max = 16000 }\n\
                    output_tokens = { kind = \"lognormal\", median = 400, p99 = 2000, max = 3000 }\n";
    for (name, head, sched) in [
        ("dp8", format!("{DEEPSEEK}[cluster]\ntp = 8\ndp_attention = 8\nep = true\n[memory]\nkv_blocks = 600\n"), ""),
        (
            "dp8, TensorRT-LLM's balancing",
            format!(
                "{DEEPSEEK}[cluster]\ntp = 8\ndp_attention = 8\nep = true\n\
                 attention_dp_config = {{ enable_balance = true, timeout_iters = 20, batching_wait_iters = 2 }}\n\
                 [memory]\nkv_blocks = 600\n"
            ),
            "",
        ),
        // Arrivals wait unreceived across decode iterations (SGLang's receive interval).
        (
            "tp8, SGLang's receive interval",
            format!("{DEEPSEEK}[cluster]\ntp = 8\nep = true\n[memory]\nkv_blocks = 1100\n"),
            "recv_interval = 30\n",
        ),
        (
            "oss",
            "name = \"t\"\n[model]\npreset = \"gpt-oss-120b\"\nweight_dtype = \"mxfp4\"\n[gpu]\npreset = \"h100-sxm\"\n\
             [memory]\ngpu_memory_utilization = 0.86\n"
                .to_string(),
            "",
        ),
    ] {
        let text = format!(
            "{head}[scheduler]\nmax_num_batched_tokens = 16384\n{sched}[scheduler.batching]\nkind = \"chunked\"\n{workload}"
        );
        let out = crate::common::run_checked(&text);
        let c = &out.summary.requests;
        assert_eq!(c.finished + c.rejected, c.arrived, "{name}: {c:?}");
        assert!(c.finished > 250, "{name}: {c:?}");
        assert!(out.summary.preemptions > 0 && out.summary.kv.utilization_max > 0.9, "{name}: no pressure");
    }
}
