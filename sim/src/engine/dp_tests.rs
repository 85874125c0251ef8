//! DP attention ranks as the engines run them: each rank its own scheduler, limits and KV
//! cache, behind the engine's balancer, all ranks stepping together.

use crate::cost::BatchShape;
use crate::metrics::Status;
use crate::scenario::Scenario;

/// qwen3-30b-a3b on two H100s as two DP attention ranks of one GPU each, `seqs` sequences per
/// rank, `blocks` KV blocks of 16 tokens per rank, two clients sending `prompt`-token requests of
/// 2 output tokens.
fn two_ranks(engine: &str, seqs: u32, blocks: u32, prompt: u32) -> Scenario {
    let toml = format!(
        r#"{}
[scheduler]
max_num_seqs = {seqs}
max_num_batched_tokens = 8192
# vLLM without chunked prefill refuses a budget below the context length.
max_model_len = 8192
[scheduler.batching]
kind = "continuous"
[scheduler.prefix_cache]
enabled = false
[memory]
kv_blocks = {blocks}
[workload]
requests = 2
arrival = {{ kind = "closed-loop", clients = 2 }}
prompt_tokens = {{ kind = "fixed", value = {prompt} }}
output_tokens = {{ kind = "fixed", value = 2 }}
"#,
        dp2(engine, "")
    );
    Scenario::from_toml(&toml, "dp").unwrap()
}

/// The head of a scenario of qwen3-30b-a3b on two H100s as two DP attention ranks under
/// `engine`, with `cluster` lines added to `[cluster]`.
fn dp2(engine: &str, cluster: &str) -> String {
    format!(
        "engine = \"{engine}\"\n[model]\npreset = \"qwen3-30b-a3b\"\n[gpu]\npreset = \"h100-sxm\"\n\
         [cluster]\ntp = 2\ndp_attention = 2\n{cluster}"
    )
}

#[test]
fn each_rank_runs_its_own_requests_under_its_own_limits_in_lock_step() {
    // One sequence per rank: the two requests run side by side, one on each rank, their
    // prefills in one lock-step iteration priced as two ranks of one 100-token prefill each.
    let s = two_ranks("sglang", 1, 100, 100);
    assert_eq!(s.dp_balance, crate::router::DpBalance::RoundRobin);
    let out = crate::engine::run(&s);
    let recs = &out.recorder.records;
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r.status == Status::Finished));
    let cost = crate::engine::cost_model(&s, 0);
    let mut prefill = BatchShape::default();
    prefill.add_prefill(100, 0, true);
    let step = cost.dp_iteration_times(&[prefill, prefill], None).0;
    for r in recs {
        assert_eq!(r.first_token - r.arrival, step, "both first tokens after one lock-step prefill");
    }
    // The same limits on one scheduler (no DP ranks) run them one after the other.
    let mut one = s.clone();
    one.groups[0].layout.dp_attention = 1;
    let out = crate::engine::run(&one);
    let firsts: Vec<_> = out.recorder.records.iter().map(|r| r.first_token).collect();
    assert_ne!(firsts[0], firsts[1], "one scheduler of max_num_seqs 1 serves them in turn");
}

#[test]
fn a_rank_holds_only_its_own_share_of_the_kv_blocks() {
    // 10 blocks of 16 tokens per rank (20 in the instance): a 200-token prompt needs 13 and is
    // refused though the instance's blocks would hold it; a 100-token prompt fits.
    let s = two_ranks("vllm", 4, 10, 200);
    assert_eq!(s.groups[0].memory.kv_blocks, 20);
    let out = crate::engine::run(&s);
    let kv = Status::Rejected(crate::metrics::RejectReason::ExceedsKvCapacity);
    assert!(out.recorder.records.iter().all(|r| r.status == kv), "{:?}", out.recorder.records);
    let out = crate::engine::run(&two_ranks("vllm", 4, 10, 100));
    assert!(out.recorder.records.iter().all(|r| r.status == Status::Finished));
}

#[test]
fn the_balancer_is_the_engines_own_unless_set() {
    assert_eq!(two_ranks("vllm", 4, 100, 100).dp_balance, crate::router::DpBalance::VllmDp);
    let s = two_ranks("sglang", 4, 100, 100);
    assert_eq!(
        s.resolved.cluster.dp_balance,
        Some(crate::router::DpBalance::RoundRobin),
        "written in the resolved file"
    );
    // vLLM's balancer: 4 × waiting + running, the first minimum. Two clients at once go to
    // rank 0 (0) and rank 1 (rank 0 now scores 4), so they run side by side here too.
    let out = crate::engine::run(&two_ranks("vllm", 1, 100, 100));
    let r = &out.recorder.records;
    assert_eq!(r[0].first_token, r[1].first_token);
}

#[test]
fn routers_weigh_a_dp_instance_by_every_ranks_limits() {
    // One sequence per rank, 100 blocks of 16 tokens each: the reference decode batch is two
    // sequences (one per rank), not the one a single rank's limit would allow.
    let s = two_ranks("sglang", 1, 100, 100);
    let sim = crate::engine::Simulation::new(&s);
    let cost = crate::engine::cost_model(&s, 0);
    let mut b = BatchShape::default();
    for _ in 0..2 {
        b.add_decode(crate::router::REFERENCE_CONTEXT);
    }
    let want = 2.0 / cost.iteration_time(&b).as_secs_f64();
    assert!((sim.instances()[0].capacity() - want).abs() < 1e-9 * want, "{} vs {want}", sim.instances()[0].capacity());
}

#[test]
fn tensorrt_llms_balancer_picks_the_rank_with_the_fewest_active_prompt_tokens_under_its_cap() {
    use crate::instance::RankLoad;
    use crate::router::{Router, TrtllmAdp};
    let rank = |outstanding: u64, prompt_tokens: u64| RankLoad { outstanding, prompt_tokens, ..RankLoad::default() };
    let req = crate::router::testing::request(100, 10, crate::workload::NO_SESSION);
    // Requests 1, 2, 1: the cap is max(⌈(4 + 1) / 3⌉, 2) = 2, so rank 1 (2 requests) is out
    // though it holds the fewest tokens; of ranks 0 and 2, rank 2 holds fewer tokens.
    assert_eq!(TrtllmAdp.route(&req, &[rank(1, 100), rank(2, 40), rank(1, 50)]), 2);
    // Equal tokens: the fewer requests, then the lower rank (its heap's order).
    assert_eq!(TrtllmAdp.route(&req, &[rank(2, 60), rank(1, 60), rank(1, 60)]), 1);
    // All equal: rank 0.
    assert_eq!(TrtllmAdp.route(&req, &[rank(0, 0), rank(0, 0)]), 0);
    // The engine's own by default.
    assert_eq!(two_ranks("trtllm", 4, 100, 100).dp_balance, crate::router::DpBalance::TrtllmAdp);
}

/// qwen3-30b-a3b as two DP attention ranks under TensorRT-LLM, four 100-token requests of 200
/// output tokens sent 50 ms apart, with `attention_dp_config` = `balance` (TOML, or none).
fn trtllm_four(balance: &str) -> Scenario {
    let toml = format!(
        r#"{}
[scheduler]
max_num_seqs = 4
max_num_batched_tokens = 8192
[memory]
kv_blocks = 1000
[workload]
requests = 4
arrival = {{ kind = "constant", rate = 20 }}
prompt_tokens = {{ kind = "fixed", value = 100 }}
output_tokens = {{ kind = "fixed", value = 200 }}
"#,
        dp2("trtllm", balance)
    );
    Scenario::from_toml(&toml, "adp").unwrap()
}

/// TensorRT-LLM's `_balance_adp_requests` (`instance::adp`): request 1 runs at once (the other
/// rank has nothing: its dummy request decodes), request 2 too (its rank has no decode).
/// Request 3 arrives while both ranks decode and only its rank has a context: with the timeout
/// out of reach it waits for request 4 on the other rank, and the two prefill in one lock-step
/// iteration. Without the balancing request 3 has its first token before request 4 is sent.
#[test]
fn trtllm_attention_dp_balance_holds_a_context_until_every_rank_has_one() {
    let first = |s: &Scenario| {
        let out = crate::engine::run(s);
        let mut recs = out.recorder.records.clone();
        assert!(recs.iter().all(|r| r.status == Status::Finished));
        recs.sort_by_key(|r| r.arrival);
        recs
    };
    let off = first(&trtllm_four(""));
    assert!(off[2].first_token < off[3].arrival, "{:?}", off);
    let held = "attention_dp_config = { enable_balance = true, timeout_iters = 100000, batching_wait_iters = 0 }";
    let on = first(&trtllm_four(held));
    for i in 0..2 {
        assert_eq!(on[i].first_token, off[i].first_token, "request {} runs at once", i + 1);
    }
    assert!(on[2].first_token > on[3].arrival, "{:?}", on);
    assert_eq!(on[2].first_token, on[3].first_token, "requests 3 and 4 prefill in one iteration");
    // What to deploy says what trtllm-serve must be given for it (its YAML options only).
    let note = |s: &Scenario| {
        let d = crate::scenario::Deployment::of(s, &[1]);
        d.servers[0].command.notes.iter().find(|n| n.starts_with("attention_dp_config")).cloned()
    };
    let n = note(&trtllm_four(held)).expect("a note");
    assert!(n.contains("{enable_balance: true, timeout_iters: 100000, batching_wait_iters: 0}"), "{n}");
    assert_eq!(note(&trtllm_four("")), None);
}

#[test]
fn attention_dp_balance_without_dp_ranks_is_refused() {
    let toml = r#"
[model]
preset = "qwen3-30b-a3b"
[gpu]
preset = "h100-sxm"
[cluster]
tp = 2
attention_dp_config = { enable_balance = true }
[workload]
requests = 1
arrival = { kind = "poisson", rate = 1 }
prompt_tokens = { kind = "fixed", value = 100 }
output_tokens = { kind = "fixed", value = 2 }
"#;
    let e = Scenario::from_toml(toml, "adp").unwrap_err().to_string();
    assert!(e.contains("cluster.attention_dp_config.enable_balance") && e.contains("dp_attention"), "{e}");
}
