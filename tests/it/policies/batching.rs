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

/// One GPU, a linear iteration cost (1000 µs + 10 µs per token) and `blocks` KV blocks of 16
/// tokens: times and block counts that can be worked out on paper.
fn paper(scheduler: &str, blocks: u32, workload: &str) -> String {
    llama8b(
        workload,
        &format!(
            "[cost]\nkind = \"linear\"\nbase_us = 1000\nper_token_us = 10\n[memory]\nkv_blocks = {blocks}\n\
             [scheduler]\nblock_tokens = 16\n{scheduler}\n"
        ),
    )
}

#[test]
fn vllm_v1_caps_each_requests_tokens_per_step_at_the_long_prefill_threshold() {
    // vllm/v1/core/sched/scheduler.py (vllm-project/vllm 00024d31), `schedule`: a waiting or
    // running request gets min(owed, long_prefill_token_threshold, budget). A 40-token prompt
    // with threshold 8 and budget 100 is prefilled in 5 steps of 1000 + 8 × 10 µs; its first
    // token comes at 5 × 1080 = 5400 µs. Without the threshold: one step, 1000 + 400 = 1400 µs.
    let w = "requests = 1\narrival = { kind = \"constant\", rate = 1 }\n\
             prompt_tokens = { kind = \"fixed\", value = 40 }\noutput_tokens = { kind = \"fixed\", value = 2 }";
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let capped = run(&paper(
        "max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 8",
        1000,
        w,
    ));
    assert_eq!(capped.recorder.records[0].ttft(), Some(us(5400)));
    assert_eq!(capped.summary.iterations, 6, "5 chunks and 1 decode");
    let whole = run(&paper("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"", 1000, w));
    assert_eq!(whole.recorder.records[0].ttft(), Some(us(1400)));
}

#[test]
fn vllm_v1_shares_one_budget_running_requests_first_then_waiting_ones() {
    // Budget 10, threshold 6, iteration = 1000 + 10 µs per token. A (20-token prompt) arrives
    // at 0, B (4) at 500 µs, C (4) at 1500 µs; each generates 4 tokens.
    // Step 1 at 0: A alone, min(20, 6, 10) = 6 tokens → 1060 µs.
    // Step 2 at 1060: running A takes 6, then waiting B its 4 (budget spent) → 1100 µs; B's
    //   first token at 2160.
    // Step 3 at 2160: running in order, A 6 and B's decode 1; waiting C gets what is left,
    //   min(4, 6, 3) = 3 → 10 tokens, 1100 µs.
    // Step 4 at 3260: A its last 2, B 1, C its last 1 → 4 tokens, 1040 µs: A's and C's first
    //   tokens at 4300.
    use servesim_sim::engine::Simulation;
    use servesim_sim::workload::{Request, NO_CLIENT, NO_SESSION};
    let s = scenario(&paper(
        "max_num_batched_tokens = 10\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 6",
        1000,
        "requests = 3\narrival = { kind = \"constant\", rate = 1000 }\n\
         prompt_tokens = { kind = \"fixed\", value = 4 }\noutput_tokens = { kind = \"fixed\", value = 4 }",
    ));
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let req = |id: u64, at: u64, prompt: u32| Request {
        id,
        arrival: us(at),
        prompt_tokens: prompt,
        output_tokens: 4,
        client: NO_CLIENT,
        session: NO_SESSION,
        class: 0,
        content: vec![],
    };
    let out = Simulation::with_requests(&s, vec![req(0, 0, 20), req(1, 500, 4), req(2, 1500, 4)]).run();
    let r = &out.recorder.records;
    assert_eq!(r[1].scheduled, us(1060));
    assert_eq!(r[1].first_token, us(2160));
    assert_eq!(r[2].scheduled, us(2160), "C is admitted with the budget the running requests left");
    assert_eq!(r[0].first_token, us(4300));
    assert_eq!(r[2].first_token, us(4300));
    assert_eq!(out.summary.preemptions, 0);
}
