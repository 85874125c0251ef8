//! Batching: static vs continuous, chunked prefill, prefill vs decode priority.

use super::*;

/// Chat-like traffic at about half the capacity of one H100 running llama-3-8b.
const CHAT: &str = "duration_s = 120\narrival = { kind = \"poisson\", rate = 12 }\n\
    prompt_tokens = { kind = \"lognormal\", median = 500, p99 = 3000, max = 4000 }\n\
    output_tokens = { kind = \"lognormal\", median = 150, p99 = 800, max = 1000 }";

#[test]
fn static_batching_has_worse_ttft_than_continuous_at_equal_load() {
    let cont = run(&h100("", CHAT)).summary;
    let stat = run(&h100("[scheduler.batching]\nkind = \"static\"", CHAT)).summary;
    eprintln!(
        "TTFT p99: continuous {:.0} ms, static {:.0} ms; throughput {:.2} vs {:.2} req/s",
        cont.ttft_ms.p99, stat.ttft_ms.p99, cont.throughput.requests_per_s, stat.throughput.requests_per_s
    );
    assert_eq!(cont.requests.finished, stat.requests.finished, "same requests served");
    // A static batch runs until its longest request is done (hundreds of decode steps) while
    // arrivals wait for it: the tail TTFT is a batch's lifetime, not one prefill.
    assert!(
        stat.ttft_ms.p99 > 5.0 * cont.ttft_ms.p99,
        "static {} vs continuous {}",
        stat.ttft_ms.p99,
        cont.ttft_ms.p99
    );
    assert!(stat.ttft_ms.mean > 3.0 * cont.ttft_ms.mean);
}

/// Short chats mixed with documents thousands of tokens long.
const LONG_PROMPTS: &str = "duration_s = 120\narrival = { kind = \"poisson\", rate = 5 }\n\
    prompt_tokens = { kind = \"mixture\", components = [ \
        { weight = 0.6, kind = \"uniform\", min = 100, max = 400 }, \
        { weight = 0.4, kind = \"uniform\", min = 6000, max = 7500 } ] }\n\
    output_tokens = { kind = \"uniform\", min = 100, max = 300 }";

#[test]
fn chunked_prefill_cuts_the_tpot_tail_on_long_prompts() {
    let whole = run(&h100("", LONG_PROMPTS)).summary;
    let chunked =
        run(&h100("max_num_batched_tokens = 512\n[scheduler.batching]\nkind = \"chunked\"", LONG_PROMPTS)).summary;
    eprintln!(
        "TPOT p99: whole prompts {:.1} ms, chunked {:.1} ms; TTFT p50 {:.0} vs {:.0} ms",
        whole.tpot_ms.p99, chunked.tpot_ms.p99, whole.ttft_ms.p50, chunked.ttft_ms.p50
    );
    assert_eq!(whole.requests.finished, chunked.requests.finished);
    // A 7,000-token prefill stalls every running decode for one whole prefill (~200 ms);
    // in 512-token chunks each decode waits at most one chunk's iteration.
    assert!(
        chunked.tpot_ms.p99 < 0.8 * whole.tpot_ms.p99,
        "chunked {} vs whole {}",
        chunked.tpot_ms.p99,
        whole.tpot_ms.p99
    );
    assert!(chunked.itl_ms.max < 0.5 * whole.itl_ms.max, "worst stall {} vs {}", chunked.itl_ms.max, whole.itl_ms.max);
    // The cost: a long prompt now takes ~14 iterations to prefill.
    assert!(chunked.ttft_ms.max > whole.ttft_ms.max, "chunking delays the longest prompts' first token");
}

#[test]
fn prefill_priority_trades_tpot_for_ttft() {
    let mixed = run(&h100("", CHAT)).summary;
    let prefill = run(&h100("[scheduler.batching]\nkind = \"continuous\"\npriority = \"prefill\"", CHAT)).summary;
    eprintln!(
        "continuous mixed: TTFT p50 {:.1} TPOT p99 {:.1}; prefill-first: TTFT p50 {:.1} TPOT p99 {:.1}",
        mixed.ttft_ms.p50, mixed.tpot_ms.p99, prefill.ttft_ms.p50, prefill.tpot_ms.p99
    );
    assert!(prefill.tpot_ms.p99 > mixed.tpot_ms.p99, "decodes pause for prefill-only iterations");
    assert!(prefill.ttft_ms.p50 < mixed.ttft_ms.p50, "prompts do not share their iteration with decodes");

    let chunked = |p: &str| {
        run(&h100(
            &format!("max_num_batched_tokens = 512\n[scheduler.batching]\nkind = \"chunked\"\npriority = \"{p}\""),
            LONG_PROMPTS,
        ))
        .summary
    };
    let (dec, pre) = (chunked("decode"), chunked("prefill"));
    eprintln!(
        "chunked decode-first: TTFT p50 {:.1} TPOT p99 {:.1}; prefill-first: TTFT p50 {:.1} TPOT p99 {:.1}",
        dec.ttft_ms.p50, dec.tpot_ms.p99, pre.ttft_ms.p50, pre.tpot_ms.p99
    );
    assert!(pre.ttft_ms.mean < dec.ttft_ms.mean);
    assert!(pre.tpot_ms.p99 > dec.tpot_ms.p99);
}
