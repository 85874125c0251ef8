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
