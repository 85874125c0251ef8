//! Results checked against values computed by hand (or by the cost model directly): one request
//! on an idle instance, simultaneous arrivals batched together, and the KV block count.

use crate::common::*;
use servesim_sim::cost::BatchShape;
use servesim_sim::engine::cost_model;
use servesim_sim::metrics::Status;
use servesim_sim::SimTime;

const P: u64 = 1000;
const O: u64 = 50;

fn one_request(extra: &str) -> String {
    llama8b(
        &format!(
            "requests = 1\narrival = {{ kind = \"constant\", rate = 1 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = {P} }}\noutput_tokens = {{ kind = \"fixed\", value = {O} }}"
        ),
        extra,
    )
}

#[test]
fn one_request_ttft_is_one_prefill_and_e2e_adds_o_minus_1_decodes() {
    let src = one_request("");
    let s = scenario(&src);
    let cost = cost_model(&s, 0);
    let mut prefill = BatchShape::default();
    prefill.add_prefill(P, 0, true);
    let ttft = cost.iteration_time(&prefill);
    // Decode step k (k = 1 .. O-1) attends to the prompt and the k tokens generated so far.
    let mut e2e = ttft;
    for k in 1..O {
        let mut d = BatchShape::default();
        d.add_decode(P + k);
        e2e += cost.iteration_time(&d);
    }

    let out = run(&src);
    let r = out.recorder.records[0];
    assert_eq!(r.status, Status::Finished);
    assert_eq!(r.arrival, SimTime::ZERO);
    assert_eq!(r.ttft(), Some(ttft), "TTFT = one prefill iteration");
    assert_eq!(r.e2e(), Some(e2e), "E2E = TTFT + O-1 decode iterations");
    assert_eq!(r.queue(), Some(SimTime::ZERO));
    let tpot = (e2e - ttft).as_millis_f64() / (O - 1) as f64;
    assert!((out.summary.tpot_ms.mean - tpot).abs() < 1e-9);
    // ITL: O-1 gaps, each one decode iteration; their mean is the TPOT.
    assert_eq!(out.summary.itl_ms.count, O - 1);
    assert!((out.summary.itl_ms.mean - tpot).abs() < 1e-9);
    assert_eq!(out.summary.iterations, O);

    // Sanity of the magnitudes: a decode step of an 8B model on an H100 streams ~15 GiB of
    // weights at 0.8 × 3.35 TB/s (≈ 6 ms) plus overheads; the prefill of 1000 tokens is
    // compute-bound at ≈ 16 TFLOP.
    let decode_ms = tpot;
    assert!(decode_ms > 6.0 && decode_ms < 9.0, "decode step {decode_ms} ms");
}

#[test]
fn the_binary_reports_the_same_request() {
    let dir = out_dir("one_request");
    let path = dir.with_extension("toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, pin_overhead(&one_request(""))).unwrap();
    let o = servesim(&["simulate", "--scenario", path.to_str().unwrap(), "--out", dir.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = read(&dir.join("requests.csv"));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];

    let out = run(&one_request(""));
    let r = out.recorder.records[0];
    let ms = |t: SimTime| format!("{}.{:06}", t.0 / 1_000_000, t.0 % 1_000_000);
    assert_eq!(col("first_token_ms"), ms(r.first_token));
    assert_eq!(col("finish_ms"), ms(r.finish));
    assert_eq!(col("status"), "finished");
    assert_eq!(col("prompt_tokens"), P.to_string());
    assert_eq!(col("output_tokens"), O.to_string());
}

#[test]
fn simultaneous_arrivals_share_one_prefill_iteration() {
    // Three closed-loop clients start at time zero: one iteration prefills all three.
    let src = llama8b(
        "requests = 3\narrival = { kind = \"closed-loop\", clients = 3 }\n\
         prompt_tokens = { kind = \"fixed\", value = 300 }\noutput_tokens = { kind = \"fixed\", value = 2 }",
        "",
    );
    let s = scenario(&src);
    let cost = cost_model(&s, 0);
    let mut prefill = BatchShape::default();
    for _ in 0..3 {
        prefill.add_prefill(300, 0, true);
    }
    let t1 = cost.iteration_time(&prefill);
    let mut dec = BatchShape::default();
    for _ in 0..3 {
        dec.add_decode(301);
    }
    let t2 = cost.iteration_time(&dec);
    let out = run(&src);
    for r in &out.recorder.records {
        assert_eq!(r.ttft(), Some(t1));
        assert_eq!(r.e2e(), Some(t1 + t2));
    }
    assert_eq!(out.summary.batch.max, 3);
}

#[test]
fn kv_blocks_of_llama3_8b_on_h100_by_hand() {
    // H100 SXM: 81,559 MiB; 90% usable.
    let usable = (81_559u64 * 1_048_576) as f64 * 0.9;
    let usable = usable.floor() as u64; // 76,970,020,044 B
                                        // Weights: 8,030,261,248 parameters × 2 bytes.
    let weights = 8_030_261_248u64 * 2;
    // Reserve: 1 GiB + activations of 8,192 tokens × (4 × 4,096 + 2 × 14,336) × 2 B
    //          + fp32 logits of 256 sequences × 128,256 vocabulary.
    let reserve = (1u64 << 30) + 8192 * (4 * 4096 + 2 * 14336) * 2 + 256 * 128_256 * 4;
    // KV per token: 2 × 32 layers × 8 heads × 128 × 2 B = 131,072 B; 16 tokens per block.
    let block = 131_072u64 * 16;
    let blocks = (usable - weights - reserve) / block;
    assert_eq!(blocks, 28_116);

    let src = one_request("[memory]\ngpu_memory_utilization = 0.9");
    let s = scenario(&src);
    assert_eq!(s.groups[0].memory.kv_blocks, blocks);
    assert_eq!(s.groups[0].memory.kv_bytes_per_token, 131_072);

    let o =
        servesim(&["memory", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--context", "4096", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["kv_blocks"], blocks);
    assert_eq!(v["kv_bytes_per_token"], 131_072);
    assert_eq!(v["weight_bytes"], weights);
    // 4,096-token requests need 256 blocks each.
    assert_eq!(v["concurrent_requests"], blocks / 256);
}

#[test]
fn memory_command_reports_a_model_that_does_not_fit() {
    let o = servesim(&["memory", "--model", "llama-3-70b", "--gpu", "a100-80g"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("llama-3-70b does not fit on a100-80g at tp 1"), "{e}");
    // 141.1 GB of weights + reserve vs 72 GiB usable.
    assert!(e.contains("GiB usable at gpu_memory_utilization 0.9 by 6"), "{e}");
    let o = servesim(&["memory", "--model", "llama-3-70b", "--gpu", "a100-80g", "--tp", "4", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn memory_engine_sglang_takes_its_releases_fraction_at_its_own_chunk() {
    // sglang/srt/server_args.py of the 0.5.9 sdist: on a B200 (183,359 MiB) SGLang chunks
    // prefills at 16,384 and graphs batches to 512; at TP 4 it reserves 512 + 1.5 × 16,384 +
    // 2 × 512 + 4/8 × 1024 = 26,624 MiB: round((183359 − 26624) / 183359, 3) = 0.855, which
    // leaves DeepSeek-R1's 156.26 GiB of FP8 weights per GPU no room.
    let args = ["memory", "--model", "deepseek-r1", "--gpu", "b200", "--tp", "4", "--weight-dtype", "fp8", "--engine"];
    let o = servesim(&[&args[..], &["sglang", "--engine-version", "0.5.9"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("usable at SGLang's mem_fraction_static 0.855 by 3.67 GiB"), "{}", stderr(&o));
    // 0.5.2's tiers: a flat 32 GiB above 160 GiB, 0.821; the command's own chunk enters the rule.
    let o = servesim(&[&args[..], &["sglang", "--engine-version", "0.5.2"]].concat());
    assert!(stderr(&o).contains("mem_fraction_static 0.821"), "{}", stderr(&o));
    let o =
        servesim(&[&args[..], &["sglang", "--engine-version", "0.5.9", "--max-num-batched-tokens", "8192"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("× mem_fraction_static 0.922"), "{}", stdout(&o));
    // With DP attention each rank takes its share of the chunk, and the rule reads the server's
    // back: H200 TP 8 over 8 ranks under 0.5.9, 0.769 (memory::tests).
    let dp = ["memory", "--model", "deepseek-r1", "--gpu", "h200", "--tp", "8", "--dp-attention", "8"];
    let o = servesim(&[&dp[..], &["--engine", "sglang", "--engine-version", "0.5.9"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("× mem_fraction_static 0.769"), "{}", stdout(&o));
    assert!(stdout(&o).contains("at a chunked prefill size of 8,192"), "{}", stdout(&o));
    let bad = servesim(&[&args[..], &["sglang", "--engine-version", "new"]].concat());
    assert!(stderr(&bad).contains("--engine-version \"new\": expected a version such as 0.5.9"), "{}", stderr(&bad));
    // Its running requests from the pool (memory::sglang_max_running_requests): on the 8 H200
    // ranks 18,730 blocks of 16 each, ⌊299,680 / 163,840 × 512⌋ = 936, held up to 2048; Llama
    // 3.1 70B in FP8 on one A100 keeps 45 blocks, and half of its 720 tokens bind: 360.
    assert!(stdout(&o).contains("max running requests         2,048"), "{}", stdout(&o));
    let a100 =
        ["memory", "--model", "llama-3.1-70b", "--weight-dtype", "fp8", "--gpu", "a100-80g", "--engine", "sglang"];
    let o = servesim(&a100);
    assert!(
        stdout(&o).contains("KV blocks                       45")
            && stdout(&o).contains("max running requests           360"),
        "{}",
        stdout(&o)
    );
    let o = servesim(&[&a100[..], &["--format", "json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((json["kv_tokens"].as_u64(), json["max_running_requests"].as_u64()), (Some(720), Some(360)));
}

#[test]
fn memory_engine_vllm_shows_every_term_of_vllms_rule() {
    // vllm/v1/worker/gpu_worker.py Worker.determine_available_memory (vllm-project/vllm
    // 35d5cda): requested = total × 0.9 with the H100 80GB's total as CUDA reports it (79.19
    // GiB in vLLM's start-up line), less weights (+ the 131072 × 128 bf16 RoPE table), the
    // profiling peak (the dummy sampler's 256 × 128256 × 32 B + the 8192 × 4096 bf16 hidden
    // states beat the forward pass's 8192 × (2 × 4096 + 3 × 14336) × 2 B) and 0.05 GiB non-torch.
    let o =
        servesim(&["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let visible = 81_091u64 << 20; // 79.1904 GiB: vLLM prints 79.19
    let requested = (visible as f64 * 0.9).floor() as u64;
    let weights = 8_030_261_248u64 * 2 + 131_072 * 128 * 2;
    let peak = 256 * 128_256 * 32 + 8192 * 4096 * 2;
    let non_torch = (0.05 * (1u64 << 30) as f64) as u64;
    let kv = requested - weights - peak - non_torch;
    assert_eq!(v["terms"]["visible_bytes"], visible);
    assert_eq!(v["usable_bytes"], requested);
    assert_eq!(v["weight_bytes"], weights);
    assert_eq!(v["terms"]["activation_bytes"], peak);
    assert_eq!(v["terms"]["forward_peak_bytes"], 8192 * (2 * 4096 + 3 * 14336) * 2);
    assert_eq!(v["kv_bytes"], kv);
    assert_eq!(v["kv_blocks"], kv / (16 * 131_072));
    // vLLM's start-up check holds back one block: the pool's 28,000-odd blocks hold far more than
    // the model's 131,072-token context, which is the longest request.
    assert_eq!(v["vllm_longest_request"], 131_072);
    // Llama-3.1-70B over two H100s holds fewer tokens than its context: every block but one.
    let o = servesim(&[
        "memory",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h100-sxm",
        "--tp",
        "2",
        "--engine",
        "vllm",
        "--format",
        "json",
    ]);
    let big: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let blocks = big["kv_blocks"].as_u64().unwrap();
    assert!(blocks * 16 < 131_072, "{blocks}");
    assert_eq!(big["vllm_longest_request"].as_u64(), Some((blocks - 1) * 16));
    // The table names each term, and says which are estimates.
    let o = servesim(&["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm"]);
    let t = stdout(&o);
    for line in [
        "visible to CUDA",
        "requested at 0.9",
        "of which RoPE table",
        "peak activation",
        "forward pass",
        "sampler",
        "non-torch memory",
        "an estimate from published logs",
        "CUDA graphs",
        "not counted",
        "longest request            131,072      tokens (vLLM's start-up check",
    ] {
        assert!(t.contains(line), "{line}: {t}");
    }
    // A measured term replaces its estimate; flags of another rule are refused by name.
    let o = servesim(&[
        "memory",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--engine",
        "vllm",
        "--non-torch-gib",
        "0",
        "--cuda-graph-gib",
        "1",
        "--format",
        "json",
    ]);
    let w: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(w["kv_bytes"], kv + non_torch - (1 << 30));
    let o =
        servesim(&["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--reserve-gib", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--reserve-gib: only with --engine servesim"), "{}", stderr(&o));
    let o = servesim(&[
        "memory",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--engine",
        "sglang",
        "--cuda-graph-gib",
        "1",
    ]);
    assert!(stderr(&o).contains("--cuda-graph-gib: only with --engine vllm"), "{}", stderr(&o));
    let o = servesim(&[
        "memory",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--engine",
        "sglang",
        "--mem-fraction-static",
        "1.5",
    ]);
    assert!(stderr(&o).contains("--mem-fraction-static: must be in (0, 1), got 1.5"), "{}", stderr(&o));
}

/// TensorRT-LLM's rule, by hand (`KvCacheCreator._cal_max_tokens`,
/// tensorrt_llm/_torch/pyexecutor/_util.py, NVIDIA/TensorRT-LLM 1a0dc5f70): KV = (total − peak)
/// × free_gpu_memory_fraction, the peak being the weights, the profiling forward at
/// max_num_tokens and the memory outside torch (vLLM's estimate, 0.05 GiB, an assumption).
#[test]
fn memory_engine_trtllm_takes_its_fraction_of_what_the_peak_leaves() {
    let o =
        servesim(&["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "trtllm", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let visible = 81_091u64 << 20;
    let weights = 8_030_261_248u64 * 2 + 131_072 * 128 * 2;
    let forward = 8192 * (2 * 4096 + 3 * 14336) * 2;
    let non_torch = (0.05 * (1u64 << 30) as f64) as u64;
    let kv = ((visible - weights - forward - non_torch) as f64 * 0.9).floor() as u64;
    assert_eq!((v["weight_bytes"].as_u64(), v["terms"]["activation_bytes"].as_u64()), (Some(weights), Some(forward)));
    assert_eq!(v["kv_bytes"], kv);
    assert_eq!(v["kv_blocks"], kv / (16 * 131_072));
    let t = stdout(&servesim(&["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "trtllm"]));
    for line in [
        "TensorRT-LLM: weights + peak + 0.9 × the rest, its free_gpu_memory_fraction",
        "peak activation",
        "non-torch memory",
        "an estimate",
    ] {
        assert!(t.contains(line), "{line}: {t}");
    }
}

#[test]
fn goodput_is_the_offered_load_times_attainment_and_vllm_bench_divides_by_the_whole_run() {
    // 40 requests evenly spaced at 4 req/s on an idle 8B: every one meets a loose SLO. The
    // offered window is 39 gaps of 0.25 s plus one = 10 s, so goodput = 40 / 10 = 4 req/s
    // exactly; vLLM's request_goodput divides by first arrival → last finish (drain included).
    let src = llama8b(
        "requests = 40\narrival = { kind = \"constant\", rate = 4 }\n\
         prompt_tokens = { kind = \"fixed\", value = 200 }\noutput_tokens = { kind = \"fixed\", value = 200 }",
        "[slo]\nttft_ms = 10000\n",
    );
    let out = run(&src);
    assert_eq!(out.summary.slo.attainment, 1.0);
    assert!((out.summary.slo.goodput_rps - 4.0).abs() < 1e-9, "{}", out.summary.slo.goodput_rps);
    let last_finish = out.recorder.records.iter().map(|r| r.finish).max().unwrap();
    let bench = 40.0 / last_finish.as_secs_f64();
    assert!((out.summary.slo.goodput_vllm_bench_rps - bench).abs() < 1e-9);
    // The last request decodes 200 tokens (over a second) after arriving, longer than a gap.
    assert!(bench < 3.9, "the drain after the last arrival lowers vLLM's figure: {bench}");

    // A TTFT threshold only some requests meet: goodput = 4 req/s × attainment, still over the
    // offered window.
    let src = src.replace("ttft_ms = 10000", "ttft_ms = 0.001");
    let out = run(&src);
    assert_eq!(out.summary.slo.attainment, 0.0);
    assert_eq!(out.summary.slo.goodput_rps, 0.0);
}

#[test]
fn the_offered_window_of_n_arrivals_is_their_span_plus_one_gap() {
    use servesim_sim::metrics::offered_window_s;
    let t = |s: f64| SimTime::from_secs_f64(s);
    assert_eq!(offered_window_s([t(1.0), t(2.0), t(3.0)].into_iter()), 3.0);
    assert_eq!(offered_window_s([t(5.0)].into_iter()), 0.0);
    assert_eq!(offered_window_s(std::iter::empty()), 0.0);
    // Order does not matter; equal times span nothing.
    assert_eq!(offered_window_s([t(3.0), t(1.0)].into_iter()), 4.0);
    assert_eq!(offered_window_s([t(2.0), t(2.0)].into_iter()), 0.0);
}

#[test]
fn the_frontend_processes_requests_one_at_a_time_and_delays_each_token() {
    // Two closed-loop clients send 300-token prompts at time zero. One API server takes
    // 1000 µs + 2 µs × 300 = 1.6 ms per request, so the engine gets request 0 at 1.6 ms (and,
    // idle, prefills it alone) and request 1 at 3.2 ms, during that prefill: request 1 joins the
    // next iteration beside request 0's decode. Every token reaches the client 0.5 ms after its
    // iteration ends.
    let src = llama8b(
        "requests = 2\narrival = { kind = \"closed-loop\", clients = 2 }\n\
         prompt_tokens = { kind = \"fixed\", value = 300 }\noutput_tokens = { kind = \"fixed\", value = 2 }",
        "[frontend]\nrequest_us = 1000\nprompt_token_us = 2\ntoken_us = 500\nservers = 1\n",
    );
    let s = scenario(&src);
    let cost = cost_model(&s, 0);
    let ms = |x: f64| SimTime::from_secs_f64(x / 1e3);
    let mut p1 = BatchShape::default();
    p1.add_prefill(300, 0, true);
    let t1 = cost.iteration_time(&p1);
    let mut mixed = BatchShape::default();
    mixed.add_decode(301);
    mixed.add_prefill(300, 0, true);
    let t2 = cost.iteration_time(&mixed);
    let mut d = BatchShape::default();
    d.add_decode(301);
    let t3 = cost.iteration_time(&d);
    let e1 = ms(1.6) + t1;
    assert!(e1 > ms(3.2), "request 1 must reach the engine during the first prefill");
    let delay = ms(0.5);

    let out = run(&src);
    let r = &out.recorder.records;
    assert_eq!(r[0].arrival, SimTime::ZERO);
    assert_eq!(r[1].arrival, SimTime::ZERO);
    assert_eq!(r[0].first_token, e1 + delay);
    assert_eq!(r[0].finish, e1 + t2 + delay);
    assert_eq!(r[1].first_token, e1 + t2 + delay);
    assert_eq!(r[1].finish, e1 + t2 + t3 + delay);
    // The gaps between tokens are the iterations' (the delay shifts every token alike).
    assert!((out.summary.itl_ms.max - t2.max(t3).as_millis_f64()).abs() < 1e-9);
    let f = out.summary.frontend.as_ref().expect("summary.frontend");
    assert_eq!(f.requests, 2);
    assert!((f.mean_ms - 2.4).abs() < 1e-9 && (f.max_ms - 3.2).abs() < 1e-9, "{f:?}");
    assert!((f.token_delay_ms - 0.5).abs() < 1e-12);

    // Without the section: both prompts in one iteration at time zero.
    let plain = run(&llama8b(
        "requests = 2\narrival = { kind = \"closed-loop\", clients = 2 }\n\
         prompt_tokens = { kind = \"fixed\", value = 300 }\noutput_tokens = { kind = \"fixed\", value = 2 }",
        "",
    ));
    assert!(plain.summary.frontend.is_none());
    assert_eq!(plain.recorder.records[0].first_token, plain.recorder.records[1].first_token);
}

#[test]
fn frontend_keys_are_checked_by_name() {
    let base = "requests = 1\narrival = { kind = \"constant\", rate = 1 }\n\
                prompt_tokens = { kind = \"fixed\", value = 10 }\noutput_tokens = { kind = \"fixed\", value = 2 }";
    for (extra, key) in [
        ("[frontend]\nservers = 0\n", "frontend.servers"),
        ("[frontend]\nprompt_token_us = -2\n", "frontend.prompt_token_us"),
        ("[frontend]\nengine = \"tgi\"\n", "frontend.engine"),
        ("[frontend]\ntokenize_us = 3\n", "tokenize_us"),
    ] {
        let e = servesim_sim::Scenario::from_toml(&llama8b(base, extra), "t").unwrap_err().to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
}
