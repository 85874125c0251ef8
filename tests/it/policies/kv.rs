//! KV allocation: paged blocks vs max-length reservation; fp8 KV.

use super::*;

/// More load than either configuration serves: 200 clients with no think time.
const SATURATED: &str = "requests = 3000\narrival = { kind = \"closed-loop\", clients = 200 }\n\
    prompt_tokens = { kind = \"uniform\", min = 200, max = 800 }\noutput_tokens = { kind = \"uniform\", min = 50, max = 350 }";

#[test]
fn max_length_reservation_fits_fewer_requests_and_serves_less() {
    let paged = run(&h100("", SATURATED)).summary;
    let reserve = run(&h100("[scheduler.kv_cache]\nallocation = \"reserve-max\"", SATURATED)).summary;
    eprintln!(
        "batch mean/max: paged {:.1}/{}, reserve-max {:.1}/{}; throughput {:.0} vs {:.0} output tok/s",
        paged.batch.mean,
        paged.batch.max,
        reserve.batch.mean,
        reserve.batch.max,
        paged.throughput.output_tokens_per_s,
        reserve.throughput.output_tokens_per_s
    );
    // Each request reserves max_model_len = 8,192 tokens = 512 blocks up front: of 28,116
    // blocks, ⌊28,116 / 512⌋ = 54 requests fit at once. Paged, all 200 clients fit.
    assert_eq!(reserve.batch.max, 54);
    assert_eq!(paged.batch.max, 200);
    assert!(reserve.throughput.output_tokens_per_s < 0.8 * paged.throughput.output_tokens_per_s);
    // A smaller reservation (prompt + 512 output tokens) fits more.
    let r512 = run(&h100("[scheduler.kv_cache]\nallocation = \"reserve-max\"\nreserve_output_tokens = 512", SATURATED))
        .summary;
    assert!(r512.batch.max > 54 && r512.throughput.output_tokens_per_s > reserve.throughput.output_tokens_per_s);
}

#[test]
fn fp8_kv_halves_bytes_per_token_and_doubles_the_blocks() {
    let bf16 = scenario(&h100("", SATURATED));
    let fp8 = scenario(&h100("[scheduler.kv_cache]\ndtype = \"fp8\"", SATURATED));
    let (a, b) = (&bf16.groups[0].memory, &fp8.groups[0].memory);
    assert_eq!(a.kv_bytes_per_token, 131_072);
    assert_eq!(b.kv_bytes_per_token, 65_536);
    // Same bytes for KV, half a block's size: twice the blocks (up to one for the rounding).
    assert_eq!(a.kv_bytes, b.kv_bytes);
    assert_eq!(b.kv_blocks, a.kv_bytes / (65_536 * 16));
    assert!(b.kv_blocks == 2 * a.kv_blocks || b.kv_blocks == 2 * a.kv_blocks + 1);
    // Under KV pressure (a quarter of the GPU for KV), twice the blocks hold twice the requests.
    let tight = |kv: &str| {
        run(&llama8b(
            SATURATED,
            &format!("[memory]\ngpu_memory_utilization = 0.3\n[scheduler.kv_cache]\ndtype = \"{kv}\""),
        ))
        .summary
    };
    let (x, y) = (tight("bf16"), tight("fp8"));
    eprintln!(
        "batch mean: bf16 {:.1}, fp8 {:.1}; preemptions {} vs {}; output tok/s {:.0} vs {:.0}",
        x.batch.mean,
        y.batch.mean,
        x.preemptions,
        y.preemptions,
        x.throughput.output_tokens_per_s,
        y.throughput.output_tokens_per_s
    );
    assert!(y.batch.mean > 1.6 * x.batch.mean);
    assert!(y.throughput.output_tokens_per_s > x.throughput.output_tokens_per_s);
}

#[test]
fn reserving_each_requests_own_output_fits_as_many_as_their_lengths_allow() {
    // TensorRT-LLM's GUARANTEED_NO_EVICT: a request is admitted with blocks for its prompt and
    // its own max output. 1,000 + 600 tokens = 100 blocks of 16; of 1,000 blocks less the 1%
    // watermark kept free, ⌊990 / 100⌋ = 9 requests run at once. Reserving up to max_model_len
    // (8,192 tokens, 512 blocks) fits 1.
    let fixed = "requests = 200\narrival = { kind = \"closed-loop\", clients = 50 }\n\
        prompt_tokens = { kind = \"fixed\", value = 1000 }\noutput_tokens = { kind = \"fixed\", value = 600 }";
    let with = |kv: &str| llama8b(fixed, &format!("[memory]\nkv_blocks = 1000\n[scheduler.kv_cache]\n{kv}"));
    let own = run(&with("allocation = \"reserve-max\"\nreserve_request_output = true")).summary;
    assert_eq!(own.batch.max, 9);
    let max_len = run(&with("allocation = \"reserve-max\"")).summary;
    assert_eq!(max_len.batch.max, 1);
    // `engine = "trtllm"` runs this policy unless the file says otherwise, with no watermark
    // (the reservation is the guarantee): ⌊1000 / 100⌋ = 10.
    let trt = scenario(&format!("engine = \"trtllm\"\n{}", llama8b(fixed, "[memory]\nkv_blocks = 1000\n")));
    let resolved = trt.resolved_toml();
    assert!(resolved.contains("allocation = \"reserve-max\"\nreserve_request_output = true"), "{resolved}");
    assert_eq!(servesim_sim::engine::run(&trt).summary.batch.max, 10);
    let paged = scenario(&format!(
        "engine = \"trtllm\"\n{}",
        llama8b(fixed, "[memory]\nkv_blocks = 1000\n[scheduler.kv_cache]\nallocation = \"paged\"\n")
    ));
    assert!(!paged.resolved_toml().contains("reserve_request_output"));
    // Contradictions are named.
    for (kv, want) in [
        (
            "allocation = \"reserve-max\"\nreserve_request_output = true\nreserve_output_tokens = 5",
            "give either reserve_output_tokens or reserve_request_output",
        ),
        ("reserve_request_output = true", "needs allocation = \"reserve-max\""),
    ] {
        let e = servesim_sim::Scenario::from_toml(&with(kv), "t").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("scheduler.kv_cache.reserve_request_output") && e.contains(want), "{kv}: {e}");
    }
}

#[test]
fn an_over_full_closed_loop_queues_the_clients_past_the_kv_and_a_cache_of_twice_the_blocks_runs_them_all() {
    // TensorRT-LLM's GUARANTEED_NO_EVICT (`engine = "trtllm"`: each request reserves its prompt
    // and its own output at admission, no watermark). 6 clients, each request 32 + 96 tokens
    // = 8 blocks of 16; every iteration takes 10 ms (the linear cost, nothing per token).
    // With 32 blocks, 4 requests run at once and 2 clients wait. All start together: 4 are
    // admitted at 0 and finish together after their 96 tokens (96 iterations, 0.96 s); their 4
    // clients send again and join the 2 waiting, of which the 2 waiting and 2 of the new run,
    // the other 2 waiting a whole lifetime in turn. After the first 4, every batch of 4 holds 2
    // that waited 0.96 s: of 60 requests, 2 × (60 − 4) / 4 = 28 wait, each a TTFT of 960 +
    // 10 ms, the rest 10 ms — the closed loop's steady state, a wait of E2E × (clients /
    // slots − 1) = 0.96 × (6/4 − 1) s per request. Nothing is preempted: the reservation
    // guarantees the output. With 64 blocks (an FP8 cache in the bytes of this BF16 one,
    // `fp8_kv_halves_bytes_per_token_and_doubles_the_blocks`), all 6 run at once and none waits.
    let over_full = |blocks: u32| {
        let s = format!(
            "engine = \"trtllm\"\n{}",
            llama8b(
                "requests = 60\narrival = { kind = \"closed-loop\", clients = 6 }\n\
                 prompt_tokens = { kind = \"fixed\", value = 32 }\noutput_tokens = { kind = \"fixed\", value = 96 }",
                &format!(
                    "[memory]\nkv_blocks = {blocks}\n\
                     [cost]\nkind = \"linear\"\nbase_us = 10000\nper_token_us = 0\nper_seq_us = 0"
                ),
            )
        );
        run(&s)
    };
    let tight = over_full(32);
    assert_eq!(tight.summary.batch.max, 4);
    assert_eq!(tight.summary.preemptions, 0);
    let ttft: Vec<f64> = finished(&tight).filter_map(|r| r.ttft()).map(|t| t.as_millis_f64()).collect();
    assert_eq!(ttft.len(), 60);
    let waited: Vec<f64> = ttft.iter().copied().filter(|t| *t > 500.0).collect();
    assert_eq!(waited.len(), 28, "{ttft:?}");
    assert!(waited.iter().all(|t| (t - 970.0).abs() < 1e-6), "{ttft:?}");
    let m = mean(ttft.iter().copied());
    assert!((m - (10.0 + 28.0 * 960.0 / 60.0)).abs() < 1e-6, "mean TTFT {m} ms");
    let roomy = over_full(64);
    assert_eq!(roomy.summary.batch.max, 6);
    let worst = max(finished(&roomy).filter_map(|r| r.ttft()).map(|t| t.as_millis_f64()));
    assert!((worst - 10.0).abs() < 1e-6, "no request waits: worst TTFT {worst} ms");
}

/// A tiny model whose first 2 of 4 layers see only the last 32 tokens, under vLLM's memory rule
/// with `kv_blocks` pinned (as its log reports them), blocks of 16 tokens; `rest` adds lines.
fn windowed_vllm(kv_blocks: u32, rest: &str, workload: &str) -> String {
    format!(
        "[model]\nname = \"tiny-windowed\"\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n\
         intermediate = 1024\nvocab = 1000\nmax_context = 4096\nwindow = {{ tokens = 32, layers = 2 }}\n\
         [gpu]\nname = \"small\"\nbf16_tflops = 50\nhbm_gb_per_s = 200\nmemory_gib = 1\n\
         interconnect_gb_per_s = 50\npcie_gb_per_s = 16\n\
         [memory]\nengine = \"vllm\"\nkv_blocks = {kv_blocks}\n{rest}\n[workload]\n{workload}\n"
    )
}

/// The blocks instance 0 holds after each event of `src`'s run (the invariants checked after
/// each), consecutive repeats left out.
fn blocks_held(src: &str) -> Vec<u32> {
    let mut sim = servesim_sim::engine::Simulation::new(&scenario(src));
    let mut held = vec![];
    while sim.step() {
        sim.check_invariants();
        let n = sim.instances()[0].kv_blocks_used();
        if held.last() != Some(&n) {
            held.push(n);
        }
    }
    held
}

/// vLLM's hybrid KV cache manager (vllm/v1/core/single_type_kv_cache_manager.py and
/// kv_cache_utils.py at 0.11.0): the sliding-window layers take their blocks from the same pool
/// as the full-attention ones. By hand, for one request of a 512-token prompt and 2 output tokens,
/// window 32, blocks of 16: its prefill writes 512 tokens into both groups, 32 + 32 blocks (a
/// window group allocates every block the step writes). At its decode step,
/// `remove_skipped_blocks(512)` frees the window group's blocks before token 512 − 32 + 1 = 481,
/// i.e. blocks 0 to 29, and `allocate_new_blocks(513)` takes one more in each group: 33 full +
/// 3 window = 36. Then it finishes: 0.
#[test]
fn windowed_layers_take_their_blocks_from_the_pool_as_vllm_does() {
    let one = "requests = 1\narrival = { kind = \"constant\", rate = 1 }\n\
        prompt_tokens = { kind = \"fixed\", value = 512 }\noutput_tokens = { kind = \"fixed\", value = 2 }";
    assert_eq!(blocks_held(&windowed_vllm(1000, "", one)), [64, 36, 0]);
    let s = scenario(&windowed_vllm(1000, "", one));
    let m = &s.groups[0].memory;
    assert_eq!((m.window_kv_bytes, m.window.map(|w| (w.tokens, w.groups))), (0, Some((32, 1))));
    // servesim's own rule sets the window apart instead: the pool holds the full-attention
    // layers' 32 + 1 blocks only.
    let own = one.to_string();
    let servesim = windowed_vllm(1000, "", &own).replace("engine = \"vllm\"\nkv_blocks", "kv_blocks");
    assert_eq!(blocks_held(&servesim), [32, 33, 0]);
    // A decode far past the window holds 3 or 2 window blocks beside its table: prompt 64,
    // 40 tokens out; at computed n the window group holds ⌈(n + 1) ÷ 16⌉ − ⌊(n − 31) ÷ 16⌋.
    let long = "requests = 1\narrival = { kind = \"constant\", rate = 1 }\n\
        prompt_tokens = { kind = \"fixed\", value = 64 }\noutput_tokens = { kind = \"fixed\", value = 40 }";
    let by_hand: Vec<u32> = std::iter::once(8)
        .chain((64..103).map(|n: u32| {
            let end = (n + 1).div_ceil(16);
            end + end - (n + 1).saturating_sub(32) / 16
        }))
        .chain([0])
        .fold(vec![], |mut v, n| {
            if v.last() != Some(&n) {
                v.push(n);
            }
            v
        });
    assert_eq!(blocks_held(&windowed_vllm(1000, "", long)), by_hand);
    assert_eq!(by_hand.iter().max(), Some(&10), "7 full blocks and 3 of the window at the end");
}

/// Every batching policy, prefix caching, swapping and disaggregation keep the invariants
/// (every block owned once or free) with the windows in the pool, under KV pressure.
#[test]
fn pooled_windows_keep_the_invariants_under_every_policy() {
    let load = "duration_s = 10\narrival = { kind = \"poisson\", rate = 30 }\n\
        prompt_tokens = { kind = \"uniform\", min = 16, max = 700 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 300 }\n\
        [workload.prefix]\nsystem = { groups = 3, tokens = { kind = \"uniform\", min = 50, max = 300 }, skew = 1 }";
    for sched in
        ["kind = \"vllm-v1\"", "kind = \"continuous\"", "kind = \"chunked\"", "kind = \"sglang\"", "kind = \"static\""]
    {
        for extra in [
            "",
            "[scheduler.prefix_cache]\nenabled = true",
            "[scheduler.preemption]\nkind = \"swap\"\ncpu_swap_gib = 0.001",
            "[[cluster.groups]]\nrole = \"prefill\"\ncount = 1\n[[cluster.groups]]\nrole = \"decode\"\ncount = 1",
        ] {
            if sched.contains("sglang") && extra.contains("swap") {
                continue; // SGLang's scheduler only recomputes
            }
            let rest = format!("[scheduler]\nmax_num_batched_tokens = 1024\n[scheduler.batching]\n{sched}\n{extra}");
            let out = run_checked(&windowed_vllm(300, &rest, load));
            let s = &out.summary;
            assert_eq!(s.requests.in_flight, 0, "{sched} {extra}");
            assert!(s.requests.finished > 100, "{sched} {extra}: {:?}", s.requests);
            eprintln!("{sched} {extra:.20}: preemptions {}, KV use max {:.2}", s.preemptions, s.kv.utilization_max);
            assert!(s.kv.utilization_max > 0.9, "{sched} {extra}: under KV pressure");
        }
    }
}
