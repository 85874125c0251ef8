//! Prefix caching: the gain on shared prefixes, the Mooncake trace's own reuse, no gain
//! without reuse, and the cache's knobs (capacity, TTL, minimum prefix, CPU tier, sessions).

use super::*;
use servesim_sim::workload::{Request, Segment, Workload, NO_CLIENT, NO_SESSION};
use servesim_sim::SimTime;

const ON: &str = "[scheduler.prefix_cache]\nenabled = true";

/// Four system prompts of 2,000 tokens (125 blocks), 200 new tokens per request, at low load.
const SHARED: &str = "duration_s = 120\narrival = { kind = \"poisson\", rate = 2 }\n\
    prompt_tokens = { kind = \"fixed\", value = 200 }\noutput_tokens = { kind = \"fixed\", value = 100 }\n\
    [workload.prefix]\nsystem = { groups = 4, tokens = { kind = \"fixed\", value = 2000 } }";

#[test]
fn shared_prefixes_cut_prefill_tokens_and_ttft_by_about_the_hit_fraction() {
    let off = run(&h100("", SHARED)).summary;
    let on = run(&h100(ON, SHARED)).summary;
    let h = on.prefix_cache.hit_rate_tokens;
    let ttft_drop = 1.0 - on.ttft_ms.mean / off.ttft_ms.mean;
    eprintln!(
        "hit rate {:.4} by tokens, {:.4} by requests; prefill tokens {} → {}; TTFT mean {:.1} → {:.1} ms (drop {:.3})",
        h,
        on.prefix_cache.hit_rate_requests,
        off.prefill_tokens,
        on.prefill_tokens,
        off.ttft_ms.mean,
        on.ttft_ms.mean,
        ttft_drop
    );
    // Every request but the first of each group finds its 2,000-token system prompt cached.
    let n = on.requests.arrived as f64;
    assert!((h - 2000.0 / 2200.0 * (n - 4.0) / n).abs() < 1e-9, "hit rate {h}");
    assert!((on.prefix_cache.hit_rate_requests - (n - 4.0) / n).abs() < 1e-9);
    // Prefill tokens drop by exactly the hit fraction (no preemption here).
    assert_eq!(on.preemptions, 0);
    assert_eq!(on.prefill_tokens, off.prefill_tokens - on.prefix_cache.prefill_tokens_saved);
    assert!((on.prefill_tokens as f64 / off.prefill_tokens as f64 - (1.0 - h)).abs() < 1e-9);
    // TTFT (one prefill at this load) drops by about the hit fraction: less, since a prefill
    // also pays fixed costs (reading the weights, CPU overhead) that caching does not remove.
    assert!(ttft_drop > h - 0.15 && ttft_drop < h, "TTFT drop {ttft_drop} vs hit rate {h}");
    assert_eq!(on.prefix_cache.evictions, 0);
}

#[test]
fn without_reuse_caching_changes_nothing() {
    let w = "duration_s = 60\narrival = { kind = \"poisson\", rate = 20 }\n\
        prompt_tokens = { kind = \"lognormal\", median = 700, p99 = 6000, max = 7000 }\n\
        output_tokens = { kind = \"lognormal\", median = 150, p99 = 900, max = 1024 }";
    let off = run(&h100("", w));
    let on = run(&h100(ON, w));
    assert_eq!(on.summary.prefix_cache.hit_rate_tokens, 0.0);
    assert_eq!(off.recorder.records, on.recorder.records, "identical requests, identical timings");
    // Unique content (a new user segment per request) is hashed but never found.
    let unique = "[workload.prefix.rag]\ndocuments = 1\ntokens = { kind = \"fixed\", value = 1 }\nper_request = 0";
    let on2 = run(&h100(ON, &format!("{w}\n{unique}")));
    assert_eq!(on2.summary.prefix_cache.hit_rate_tokens, 0.0);
    assert_eq!(off.recorder.records, on2.recorder.records);
}

/// The Mooncake conversation trace as requests: one content segment per hash id (512 tokens,
/// the last one what is left of the prompt), arriving at the trace's timestamps.
fn mooncake() -> Vec<Request> {
    let text = read(&root().join("data/traces/mooncake_conversation_trace.jsonl"));
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let input = v["input_length"].as_u64().unwrap() as u32;
            let ids: Vec<u64> = v["hash_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
            let n = ids.len() as u32;
            assert!(512 * (n - 1) < input && input <= 512 * n, "one id per 512-token block");
            let content = ids
                .iter()
                .enumerate()
                .map(|(i, &h)| Segment { hash: h, tokens: if i as u32 == n - 1 { input - 512 * (n - 1) } else { 512 } })
                .collect();
            Request {
                id: 0,
                arrival: SimTime::from_millis_f64(v["timestamp"].as_f64().unwrap()),
                prompt_tokens: input,
                output_tokens: v["output_length"].as_u64().unwrap().max(1) as u32,
                client: NO_CLIENT,
                session: NO_SESSION,
                class: 0,
                content,
            }
        })
        .collect()
}

#[test]
fn an_unbounded_cache_finds_exactly_the_mooncake_trace_s_own_reuse() {
    let reqs = mooncake();
    // The trace's reuse, computed from the ids alone: a request's leading ids seen in any
    // earlier request are cached tokens.
    let mut seen = std::collections::HashSet::new();
    let (mut hit, mut total) = (0u64, 0u64);
    for r in &reqs {
        let lead = r.content.iter().take_while(|s| seen.contains(&s.hash)).map(|s| s.tokens as u64).sum::<u64>();
        hit += lead;
        total += r.prompt_tokens as u64;
        seen.extend(r.content.iter().map(|s| s.hash));
    }
    let reuse = hit as f64 / total as f64;
    // A tiny model on a huge, fast GPU: nothing is ever evicted, every prefill is quick, so
    // a request finds whatever earlier requests computed.
    let src = "[model]\nname = \"tiny\"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 1\nhead_dim = 64\n\
        intermediate = 512\nvocab = 1000\nmax_context = 200000\n\
        [gpu]\nname = \"big\"\nbf16_tflops = 1000\nhbm_gb_per_s = 5000\nmemory_gib = 60\n\
        interconnect_gb_per_s = 50\npcie_gb_per_s = 64\n\
        [memory]\nreserve_gib = 1\n\
        [scheduler]\nblock_tokens = 64\nmax_num_batched_tokens = 200000\n[scheduler.prefix_cache]\nenabled = true\n\
        [workload]\nrequests = 1000000\narrival = { kind = \"poisson\", rate = 1 }\n\
        prompt_tokens = { kind = \"fixed\", value = 1 }\noutput_tokens = { kind = \"fixed\", value = 1 }\n";
    let s = scenario(src);
    assert!(s.groups[0].memory.kv_tokens() > 100_000_000, "room for every block of the trace");
    let w = Workload::from_requests(s.workload.clone(), s.seed, reqs);
    let mut sim = Simulation::with_workload(&s, w);
    while sim.step() {}
    let out = sim.finish().summary;
    let got = out.prefix_cache.hit_rate_tokens;
    eprintln!(
        "Mooncake conversation: trace reuse {:.6} ({hit} of {total} tokens); unbounded cache hit rate {got:.6}, by requests {:.4}; evictions {}",
        reuse, out.prefix_cache.hit_rate_requests, out.prefix_cache.evictions
    );
    assert_eq!(out.requests.finished, 12_031);
    assert_eq!(out.prefix_cache.evictions, 0);
    assert!((reuse - 0.3736).abs() < 0.0005, "the trace's reuse is about 37%: {reuse}");
    // Equal but for block granularity (64-token blocks; a fully cached prompt recomputes its
    // last block) and requests arriving together (they cannot use each other's blocks).
    assert!(got <= reuse && got > reuse - 0.005, "cache {got} vs trace {reuse}");
}

/// Many system prompts, Zipf-popular, on an instance with little KV: the cache competes with
/// running requests for blocks.
const ZIPF: &str = "duration_s = 120\narrival = { kind = \"poisson\", rate = 20 }\n\
    prompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"uniform\", min = 20, max = 200 }\n\
    [workload.prefix]\nsystem = { groups = 400, tokens = { kind = \"uniform\", min = 500, max = 1500 }, skew = 1.0 }";

#[test]
fn a_small_cache_evicts_and_a_cpu_tier_recovers_the_hits() {
    // About 30,000 tokens of KV: the running requests need ~10,000, so the cache holds a part
    // of the 400 prompts (~400,000 tokens).
    let small =
        |extra: &str| run(&llama8b(ZIPF, &format!("[memory]\ngpu_memory_utilization = 0.27\n{ON}\n{extra}"))).summary;
    let big = run(&h100(ON, ZIPF)).summary;
    let gpu_only = small("");
    let tiered = small("cpu_gib = 64");
    eprintln!(
        "hit rate: large cache {:.3} ({} evictions), small {:.3} ({} evictions), small + CPU tier {:.3} ({} tokens from CPU, {:.2} s of PCIe)",
        big.prefix_cache.hit_rate_tokens,
        big.prefix_cache.evictions,
        gpu_only.prefix_cache.hit_rate_tokens,
        gpu_only.prefix_cache.evictions,
        tiered.prefix_cache.hit_rate_tokens,
        tiered.prefix_cache.cpu_hit_tokens,
        tiered.swap.transfer_s
    );
    // The large cache evicts too (each request leaves its unique tail blocks behind), the
    // small one several times as much.
    assert!(gpu_only.prefix_cache.evictions > 3 * big.prefix_cache.evictions);
    assert!(gpu_only.prefix_cache.hit_rate_tokens < big.prefix_cache.hit_rate_tokens - 0.1);
    // Evicted blocks wait in CPU memory and come back over PCIe: nearly the large cache's hits.
    assert!(tiered.prefix_cache.cpu_hit_tokens > 0 && tiered.swap.transfer_s > 0.0);
    assert!(tiered.prefix_cache.hit_rate_tokens > big.prefix_cache.hit_rate_tokens - 0.02);
}

#[test]
fn ttl_and_minimum_prefix_limit_reuse() {
    // A 2,000-token system prompt requested every 0.5 s on average.
    let base = run(&h100(ON, SHARED)).summary.prefix_cache.hit_rate_tokens;
    // Cached blocks expire 0.1 s after their last use: most requests come later than that.
    let ttl = run(&h100(&format!("{ON}\nttl_s = 0.1"), SHARED)).summary;
    // Prefixes shorter than 4,000 tokens are recomputed: no 2,000-token prefix qualifies.
    let min = run(&h100(&format!("{ON}\nmin_prefix_tokens = 4000"), SHARED)).summary;
    eprintln!(
        "hit rate: {base:.3}, TTL 0.1 s {:.3} ({} expired), min prefix 4000 {:.3}",
        ttl.prefix_cache.hit_rate_tokens, ttl.prefix_cache.evictions, min.prefix_cache.hit_rate_tokens
    );
    assert!(ttl.prefix_cache.hit_rate_tokens < 0.5 * base && ttl.prefix_cache.evictions > 0);
    assert_eq!(min.prefix_cache.hit_rate_tokens, 0.0);
}

#[test]
fn multi_turn_sessions_hit_their_own_history() {
    // Sessions of 6 turns, each adding 100 user tokens and a 100-token answer.
    let w = "duration_s = 120\narrival = { kind = \"poisson\", rate = 2 }\n\
        prompt_tokens = { kind = \"fixed\", value = 100 }\noutput_tokens = { kind = \"fixed\", value = 100 }\n\
        [workload.prefix]\nsessions = { turns = { kind = \"fixed\", value = 6 }, think_time_s = 5 }";
    let out = run_checked(&h100(ON, w));
    let recs = &out.recorder.records;
    // Turn k (1-based) has 100 + 200 (k − 1) prompt tokens.
    let turns: Vec<u32> = recs.iter().map(|r| (r.prompt_tokens - 100) / 200 + 1).collect();
    assert!(recs.iter().all(|r| (r.prompt_tokens - 100) % 200 == 0));
    let n6 = turns.iter().filter(|&&t| t == 6).count();
    eprintln!(
        "{} requests, {} sessions reached turn 6; hit rate {:.3} by tokens, {:.3} by requests",
        recs.len(),
        n6,
        out.summary.prefix_cache.hit_rate_tokens,
        out.summary.prefix_cache.hit_rate_requests
    );
    assert!(n6 > 100);
    // Every later turn finds its whole history but the last partial block: of turn k's
    // 100 + 200 (k − 1) tokens, ⌊(200 (k − 1) − 1) / 16⌋ × 16 are cached (the answer's last
    // token is never written to the cache).
    let expected: f64 =
        turns.iter().map(|&t| if t == 1 { 0.0 } else { ((200 * (t - 1) - 1) / 16 * 16) as f64 }).sum::<f64>()
            / recs.iter().map(|r| r.prompt_tokens as f64).sum::<f64>();
    assert!((out.summary.prefix_cache.hit_rate_tokens - expected).abs() < 1e-9, "expected {expected}");
    // Each turn arrives a think time after the previous one's last token.
    assert!(out.summary.requests.finished as usize == recs.len());
}
