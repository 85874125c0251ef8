//! Preemption: recompute vs swap, for long and short contexts.
//!
//! The mechanism: recomputing a context costs a prefill of its tokens. While those tokens fit
//! under the GPU's ridge point (about 134 tokens for an A100: 0.7 × 312 TFLOP/s over 0.8 ×
//! 2 TB/s, in FLOPs per weight byte) they ride along in a memory-bound decode iteration almost
//! for free; past it every token costs 2 × parameters FLOPs, and attention grows
//! quadratically. Swapping costs 2 × KV bytes over PCIe, linear in the context. So recompute
//! wins for short contexts and swap for long ones; where the crossover lies depends on the
//! model's KV bytes per token. llama-2-7b (no GQA: 512 KiB of KV per token) on an A100
//! (32 GB/s to the host) puts it in the middle: swapping costs 33 µs per token, recomputing
//! a long context about 65 µs.

use super::*;

/// llama-2-7b on an A100 whose KV cache holds about `kv_tokens` tokens (the rest of memory
/// reserved), saturated by closed-loop clients so that it preempts often.
fn tight(kind: &str, kv_tokens: u64, workload: &str) -> servesim_sim::metrics::Summary {
    let src = |reserve_gib: f64| {
        format!(
            "[model]\npreset = \"llama-2-7b\"\n[gpu]\npreset = \"a100-80g\"\n[memory]\nreserve_gib = {reserve_gib}\n\
             [scheduler.preemption]\nkind = \"{kind}\"\n[workload]\n{workload}\n"
        )
    };
    // With no reserve, all that weights leave is KV; reserve what exceeds `kv_tokens`.
    let m = scenario(&src(0.0)).groups[0].memory.clone();
    assert_eq!(m.kv_bytes_per_token, 524_288);
    let reserve_gib = (m.kv_bytes - kv_tokens * m.kv_bytes_per_token) as f64 / (1u64 << 30) as f64;
    let src = src(reserve_gib);
    let blocks = scenario(&src).groups[0].memory.kv_blocks;
    assert!((blocks * 16).abs_diff(kv_tokens) <= 16, "{blocks} blocks");
    run(&src).summary
}

#[test]
fn swap_wins_for_long_contexts_and_recompute_for_short_ones() {
    // Long: 1,500–2,500-token prompts growing by 500–1,500 tokens, 8 users, KV for ~3 of them
    // at full length: recomputing ~3,000 tokens is a compute-bound prefill (≈ 0.2 s), swapping
    // them ≈ 0.1 s.
    let long = "requests = 300\narrival = { kind = \"closed-loop\", clients = 8 }\n\
        prompt_tokens = { kind = \"uniform\", min = 1500, max = 2500 }\noutput_tokens = { kind = \"uniform\", min = 500, max = 1500 }";
    // Short: contexts under 200 tokens, 16 users, KV for ~8 of them: recomputing ~60 tokens
    // rides along in a memory-bound decode iteration; swapping them costs PCIe time.
    let short = "requests = 3000\narrival = { kind = \"closed-loop\", clients = 16 }\n\
        prompt_tokens = { kind = \"uniform\", min = 20, max = 60 }\noutput_tokens = { kind = \"uniform\", min = 60, max = 140 }";
    let mut results = vec![];
    for (name, kv, w) in [("long", 8_000, long), ("short", 1_200, short)] {
        let (r, s) = (tight("recompute", kv, w), tight("swap", kv, w));
        eprintln!(
            "{name}: preemptions recompute {} swap {}; prefill tokens {} vs {}; swap transfers {:.2} s; \
             busy {:.2} vs {:.2} s; E2E mean {:.0} vs {:.0} ms; output tok/s {:.1} vs {:.1}",
            r.preemptions,
            s.preemptions,
            r.prefill_tokens,
            s.prefill_tokens,
            s.swap.transfer_s,
            r.cpu.busy_s,
            s.cpu.busy_s,
            r.e2e_ms.mean,
            s.e2e_ms.mean,
            r.throughput.output_tokens_per_s,
            s.throughput.output_tokens_per_s
        );
        assert!(r.preemptions > 50 && s.preemptions > 50, "{name}: the scenario must preempt");
        assert_eq!(s.swap.recompute_fallbacks, 0);
        // Recomputation prefills the preempted contexts again; swapping does not.
        assert!(r.prefill_tokens > s.prefill_tokens && s.swap.transfer_s > 0.0);
        results.push((r, s));
    }
    let (lr, ls) = &results[0];
    let (sr, ss) = &results[1];
    // The same work takes less GPU time with swap for long contexts, with recompute for short.
    assert!(ls.cpu.busy_s < lr.cpu.busy_s, "long: swap is cheaper");
    assert!(ls.throughput.output_tokens_per_s > lr.throughput.output_tokens_per_s);
    assert!(sr.cpu.busy_s < ss.cpu.busy_s, "short: recompute is cheaper");
    assert!(sr.throughput.output_tokens_per_s > ss.throughput.output_tokens_per_s);
}

/// Two requests of 60 prompt and 40 output tokens on 8 blocks of 16 tokens, prefix caching on
/// and no shared content: the preemption case worked by hand below. Returns (prefill tokens,
/// prefill tokens saved by the cache, preemptions).
fn two_requests_on_eight_blocks(batching: &str, prefix: bool) -> (u64, u64, u64) {
    let src = tiny(
        1.0,
        &format!(
            "max_num_seqs = 8\nmax_num_batched_tokens = 2048\nblock_tokens = 16\n\
             [scheduler.batching]\nkind = \"{batching}\"\n[scheduler.prefix_cache]\nenabled = {prefix}"
        ),
        "requests = 2\narrival = { kind = \"closed-loop\", clients = 2 }\n\
         prompt_tokens = { kind = \"fixed\", value = 60 }\noutput_tokens = { kind = \"fixed\", value = 40 }",
    )
    .replace("[memory]\nreserve_gib = 0", "[memory]\nkv_blocks = 8\nreserve_gib = 0");
    let s = run(&src).summary;
    assert_eq!(s.requests.finished, 2, "{batching}");
    (s.prefill_tokens, s.prefix_cache.prefill_tokens_saved, s.preemptions)
}

#[test]
fn a_preempted_request_resumes_from_its_own_cached_blocks_as_vllm_v1_does() {
    // vLLM V1 frees a preempted request's blocks with their hashes (`Scheduler._preempt_request`
    // → `KVCacheManager.free`, vllm-project/vllm 00024d31); they stay cached, evictable, until
    // an allocation evicts them, and the resumed request's prefix lookup finds what is left.
    // By hand: both prompts prefill (4 blocks each, all 8 used). In the 6th iteration A (first
    // admitted) needs a 5th block for token 65: B (last admitted) is preempted with 64 tokens
    // computed — 4 full blocks, released last block first — and A's allocation evicts B's
    // block 3. B cannot come back while A runs (its 3 cached blocks are all that is free), and
    // A's 6th and 7th blocks (tokens 81 and 97 of its 99) evict B's blocks 2 and 1. When A
    // finishes, B resumes with block 0 cached: 16 tokens hit, 65 − 16 = 49 recomputed.
    let (prefill, saved, preemptions) = two_requests_on_eight_blocks("vllm-v1", true);
    assert_eq!(preemptions, 1);
    assert_eq!(saved, 16, "block 0 of B is re-hit");
    assert_eq!(prefill, 60 + 60 + 49);
    // Without the cache the whole context is recomputed: 60 + 60 + 65.
    let (prefill, saved, preemptions) = two_requests_on_eight_blocks("vllm-v1", false);
    assert_eq!((prefill, saved, preemptions), (60 + 60 + 65, 0, 1));
}
