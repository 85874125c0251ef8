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
