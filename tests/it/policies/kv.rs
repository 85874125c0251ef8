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
