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
    // Up to 0.30 the cap holds a request alone too (`lone_request_uncapped = false`).
    let capped = run(&paper(
        "max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 8\n\
         lone_request_uncapped = false",
        1000,
        w,
    ));
    assert_eq!(capped.recorder.records[0].ttft(), Some(us(5400)));
    assert_eq!(capped.summary.iterations, 6, "5 chunks and 1 decode");
    let whole = run(&paper("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"", 1000, w));
    assert_eq!(whole.recorder.records[0].ttft(), Some(us(1400)));
    // From 0.31.0 (`Scheduler.schedule`, vllm/v1/core/sched/scheduler.py: the threshold only
    // when running + waiting > 1) a request alone takes the whole budget: one step, 1400 µs.
    let alone = run(&paper(
        "max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 8",
        1000,
        w,
    ));
    assert_eq!(alone.recorder.records[0].ttft(), Some(us(1400)));
}

#[test]
fn vllm_v1_floors_an_adaptive_threshold_at_a_fair_share_of_the_budget() {
    // `--long-prefill-token-threshold-adaptive` (vLLM 0.31.0 on): the threshold is
    // max(threshold, budget ÷ (running + waiting)). Budget 100, threshold 8, A and B (40-token
    // prompts, 2 out) both at 0: 2 requests, a cap of max(8, 50) = 50: step 1 takes both
    // prompts whole (80 tokens, 1800 µs), both first tokens at 1800. Without adaptive, 8 each
    // a step: 5 steps of 16 tokens (1160 µs), the first tokens at 5800.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let first = |adaptive: &str| {
        let s = listed(
            &format!("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 8\n{adaptive}"),
            1000,
        );
        let out = Simulation::with_requests(&s, requests(&[(0, 40, 2), (0, 40, 2)])).run();
        (out.recorder.records[0].first_token, out.recorder.records[1].first_token)
    };
    assert_eq!(first("long_prefill_token_threshold_adaptive = true"), (us(1800), us(1800)));
    assert_eq!(first(""), (us(5800), us(5800)));
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
    // (vLLM up to 0.30: the cap holds A alone in step 1 too.)
    let s = scenario(&paper(
        "max_num_batched_tokens = 10\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 6\n\
         lone_request_uncapped = false",
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

#[test]
fn vllm_v1_admits_a_request_only_when_its_whole_prompt_fits_from_0_19() {
    // vLLM 0.19.0's `scheduler_reserve_full_isl` (on by default; vllm/config/scheduler.py, the
    // gate `KVCacheManager.can_fit_full_sequence` in vllm/v1/core/kv_cache_manager.py, 0.19.0
    // and 0.19.1; `allocate_slots(full_sequence_must_fit=...)` in 0.34.0): a waiting request
    // is admitted only if the free blocks hold its whole prompt, though only its first chunk is
    // allocated. 10 blocks of 16 tokens, budget 40, iteration 1000 + 10 µs per token. A (64-token
    // prompt, 8 out) at 0, B (100, 2) at 100 µs.
    // 0: A's first 40 → 1400. 1400: A's last 24; the budget's 16 left would take B's first chunk
    // (1 block of the 6 free), but B's 100 tokens need 7: B waits. A's first token at 2640, its
    // 7 decodes of 1010 µs end at 9710, when its blocks (never fewer than 6 free) are freed and B
    // is admitted: 40, 40 and 20 tokens, 1400 + 1400 + 1200 µs, its first token at 13710.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let run = |gate: &str| {
        let s = listed(&format!("max_num_batched_tokens = 40\n[scheduler.batching]\nkind = \"vllm-v1\"\n{gate}"), 10);
        Simulation::with_requests(&s, requests(&[(0, 64, 8), (100, 100, 2)])).run()
    };
    let out = run("");
    let r = &out.recorder.records;
    assert_eq!((r[0].first_token, r[0].finish), (us(2640), us(9710)));
    assert_eq!((r[1].scheduled, r[1].first_token), (us(9710), us(13710)));
    assert_eq!(out.summary.preemptions, 0);
    // Before 0.19 (or --no-scheduler-reserve-full-isl) B's first chunk is admitted at 1400, and
    // B runs out of blocks while A holds its own: it preempts itself.
    let out = run("reserve_full_isl = false");
    let r = &out.recorder.records;
    assert_eq!(r[1].scheduled, us(1400));
    assert!(r[1].preemptions >= 1, "{}", r[1].preemptions);
    // engine = "vllm" sets it by the release: off at 0.18.1, on at 0.19.0.
    let at = |v: &str| {
        let text = paper("[scheduler.batching]\nkind = \"vllm-v1\"", 10, "requests = 1\narrival = { kind = \"constant\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 1 }\noutput_tokens = { kind = \"fixed\", value = 1 }");
        scenario(&format!("engine = \"vllm\"\nengine_version = \"{v}\"\n{text}")).resolved_toml()
    };
    assert!(at("0.18.1").contains("reserve_full_isl = false"), "{}", at("0.18.1"));
    // and, vLLM V1 keeping no watermark by default, `scheduler.watermark` 0 for any batching kind.
    assert!(at("0.19.0").contains("\nwatermark = 0.0\n"), "{}", at("0.19.0"));
    // A request alone takes the whole budget past the threshold from 0.31.0.
    assert!(at("0.30.0").contains("lone_request_uncapped = false"), "{}", at("0.30.0"));
    assert!(at("0.31.0").contains("lone_request_uncapped = true"), "{}", at("0.31.0"));
    assert!(at("0.19.0").contains("reserve_full_isl = true"), "{}", at("0.19.0"));
}

#[test]
fn vllm_v1_keeps_its_own_watermark_free_while_requests_run() {
    // vLLM's `--watermark` (0.24.0 on; `KVCacheManager.allocate_slots`, vllm/v1/core/
    // kv_cache_manager.py, 0.24.0 and 0.34.0): ⌊0.2 × 10⌋ = 2 blocks kept free when admitting a
    // waiting request while others run. A (64, 8 out) at 0, B (64, 2) at 100 µs, budget 200.
    // 0: A's 64 → 1640. 1640: A's decode takes its 5th block (5 free); B needs 4 + 2 > 5: it
    // waits until A's last token at 1640 + 7 × 1010 = 8710, when nothing runs and the watermark
    // is not applied. Without it B is admitted at 1640.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let b_scheduled = |scheduler: &str, batching: &str| {
        let s = listed(
            &format!("max_num_batched_tokens = 200\n{scheduler}\n[scheduler.batching]\nkind = \"vllm-v1\"\n{batching}"),
            10,
        );
        Simulation::with_requests(&s, requests(&[(0, 64, 8), (100, 64, 2)])).run().recorder.records[1].scheduled
    };
    assert_eq!(b_scheduled("", "watermark = 0.2"), us(8710));
    assert_eq!(b_scheduled("", ""), us(1640));
    // `scheduler.watermark` is not vLLM V1's: it changes nothing here.
    assert_eq!(b_scheduled("watermark = 0.2", ""), us(1640));
}

#[test]
fn vllm_v1_admits_no_more_running_requests_than_max_num_active_seqs() {
    // vLLM 0.31.0's `--max-num-active-seqs` (`Scheduler.max_num_active_reqs`, vllm/v1/core/
    // sched/scheduler.py, 0.31.0 and 0.34.0): the waiting loop stops at that many running, while
    // `max_num_seqs` sizes the runner. A (10-token prompt, 3 out) at 0, B (10, 2) at 100 µs,
    // 1000 + 10 µs per token. With 1 active: A's tokens at 1100, 2110, 3120; B admitted at 3120,
    // its first token at 4220. Without: B's prompt rides A's decode at 1100 → 2210.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let b = |limit: &str| {
        let s =
            listed(&format!("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"\n{limit}"), 1000);
        let out = Simulation::with_requests(&s, requests(&[(0, 10, 3), (100, 10, 2)])).run();
        (out.recorder.records[1].scheduled, out.recorder.records[1].first_token)
    };
    assert_eq!(b("max_num_active_seqs = 1"), (us(3120), us(4220)));
    assert_eq!(b(""), (us(1100), us(2210)));
    // Above max_num_seqs vLLM does not start (SchedulerConfig, vllm/config/scheduler.py).
    let text =
        paper("max_num_seqs = 1\n[scheduler.batching]\nkind = \"vllm-v1\"\nmax_num_active_seqs = 2", 1000, LISTED);
    let e = servesim_sim::Scenario::from_toml(&text, "t").unwrap_err().to_string();
    assert!(e.starts_with("scheduler.batching.max_num_active_seqs: vLLM does not start"), "{e}");
}

#[test]
fn vllm_v1_paces_prefill_by_the_schedule_interval_until_the_queue_backs_up() {
    // vLLM 0.33.0's local `--prefill-schedule-interval` (`Scheduler.schedule`, vllm/v1/core/
    // sched/scheduler.py, 0.33.0 and 0.34.0): while a running request decodes, prefill waits
    // until the interval since the last step that carried any has passed; a step that admitted
    // and left requests waiting (`prefill_capacity_bound`) lifts the hold until an admitting step
    // empties the queue. 1000 + 10 µs per token, interval 3.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let sched = |budget: u64, interval: &str| {
        format!("max_num_batched_tokens = {budget}\n[scheduler.batching]\nkind = \"vllm-v1\"\n{interval}")
    };
    // A (10-token prompt, 10 out) at 0, B (10, 3) at 1500 µs, budget 100. Step 1 (A's prompt,
    // the last prefill) → 1100; steps 2 and 3 are held (2 − 1 and 3 − 1 < 3): A decodes alone →
    // 2110, 3120; step 4 admits B: 1 + 10 tokens → 4230. Every step: B rides step 3 → 3220.
    let b = |interval: &str| {
        let s = listed(&sched(100, interval), 1000);
        let r = Simulation::with_requests(&s, requests(&[(0, 10, 10), (1500, 10, 3)])).run().recorder.records;
        (r[1].scheduled, r[1].first_token)
    };
    assert_eq!(b("prefill_schedule_interval = 3"), (us(3120), us(4230)));
    assert_eq!(b(""), (us(2110), us(3220)));
    // Budget 11, and C (10, 3) beside B. Steps 1–3 as above; step 4 (3120) admits B's 10 beside
    // A's decode and leaves C waiting: capacity-bound. Step 5 (4230) is not held: C's first 9
    // tokens beside two decodes → 5340, the queue empty. Steps 6 and 7 hold C's last token (6 − 5,
    // 7 − 5 < 3): A and B → 6360 (B's last token), A → 7370. Step 8: C's last token → 8390.
    let s = scenario(&paper(
        &sched(11, "prefill_schedule_interval = 3"),
        1000,
        &LISTED.replace("requests = 2", "requests = 3"),
    ));
    let r =
        Simulation::with_requests(&s, requests(&[(0, 10, 10), (1500, 10, 3), (1500, 10, 3)])).run().recorder.records;
    assert_eq!((r[1].first_token, r[1].finish), (us(4230), us(6360)));
    assert_eq!((r[2].scheduled, r[2].first_token), (us(4230), us(8390)));
    // vLLM before 0.33 runs prefill every step without DP ranks; with DP attention its
    // coordinator paces the ranks together: both refused, not run as something else.
    let with = |head: &str, cluster: &str| {
        let text = format!("{head}{}{cluster}", paper(&sched(100, "prefill_schedule_interval = 3"), 1000, LISTED));
        servesim_sim::Scenario::from_toml(&text, "t").map(|_| ()).unwrap_err().to_string()
    };
    let e = with("engine = \"vllm\"\nengine_version = \"0.32.0\"\n", "");
    assert!(e.contains("prefill_schedule_interval: 3 under vLLM 0.32.0: before 0.33.0"), "{e}");
    let e = with("", "[cluster]\ndp_attention = 2\n");
    assert!(e.contains("3 with dp_attention = 2: vLLM's DP coordinator"), "{e}");
}

#[test]
fn sglang_preempts_running_requests_for_a_waiting_one_of_higher_priority() {
    // SGLang's priority preemption (`PrefillAdder.preempt_to_schedule`, managers/
    // schedule_policy.py; `get_new_batch_prefill`, managers/scheduler.py; 0.5.15): with no
    // request slot left, a waiting request retracts the running ones whose priority is lower by
    // more than the threshold. One slot (max_num_seqs = 1), 1000 + 10 µs per token. A (class 1,
    // 10-token prompt, 5 out) at 0, B (class 0, 10, 2) at 1500 µs. A's prompt → 1100, a decode →
    // 2110. At 2110 B finds no slot: A's class exceeds B's by 1 > 0, so A is retracted and B
    // prefilled → 3210 (B's first token), B's decode → 4220 (B done; A, of class 1, cannot preempt
    // B). A's 12 tokens again → 5340, two decodes → 7360. With threshold 1 (1 is not more than
    // 1) B waits for A (tokens at 1100 … 5140): B's prompt → 6240.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let run = |queue: &str, threshold: i64| {
        let sched = format!(
            "max_num_seqs = 1\nmax_num_batched_tokens = 100\n{queue}[scheduler.batching]\nkind = \"sglang\"\n\
             priority_preemption_threshold = {threshold}"
        );
        let s = scenario(&paper(&sched, 1000, LISTED));
        Simulation::with_requests(&s, classed(&[(0, 10, 5, 1), (1500, 10, 2, 0)])).run().recorder.records
    };
    let priority = "[scheduler.queue]\nkind = \"priority\"\n";
    let r = run(priority, 0);
    assert_eq!((r[1].first_token, r[1].finish), (us(3210), us(4220)));
    assert_eq!((r[0].preemptions, r[0].finish), (1, us(7360)));
    let r = run(priority, 1);
    assert_eq!((r[0].preemptions, r[0].finish, r[1].first_token), (0, us(5140), us(6240)));
    // SGLang preempts by priority only with priority scheduling: a queue not ranked by it is refused.
    let text = paper("[scheduler.batching]\nkind = \"sglang\"\npriority_preemption_threshold = 10", 1000, LISTED);
    let e = servesim_sim::Scenario::from_toml(&text, "t").unwrap_err().to_string();
    assert!(
        e.starts_with("scheduler.queue.kind: SGLang preempts by priority only with --enable-priority-scheduling"),
        "{e}"
    );
}

/// A [`paper`] scenario for two requests given to [`Simulation::with_requests`] (its workload
/// is not drawn; its request count sizes the records).
fn listed(scheduler: &str, blocks: u32) -> servesim_sim::Scenario {
    scenario(&paper(scheduler, blocks, LISTED))
}

/// [`listed`]'s workload, not drawn.
const LISTED: &str = "requests = 2\narrival = { kind = \"constant\", rate = 1 }\n\
    prompt_tokens = { kind = \"fixed\", value = 1 }\noutput_tokens = { kind = \"fixed\", value = 1 }";

/// Requests at given arrival times (µs) with given prompt and output lengths.
fn requests(list: &[(u64, u32, u32)]) -> Vec<servesim_sim::workload::Request> {
    classed(&list.iter().map(|&(at, prompt, output)| (at, prompt, output, 0)).collect::<Vec<_>>())
}

/// [`requests`] with a priority class each (the last of the four).
fn classed(list: &[(u64, u32, u32, u8)]) -> Vec<servesim_sim::workload::Request> {
    use servesim_sim::workload::{Request, NO_CLIENT, NO_SESSION};
    list.iter()
        .enumerate()
        .map(|(id, &(at, prompt, output, class))| Request {
            id: id as u64,
            arrival: servesim_sim::SimTime(at * 1000),
            prompt_tokens: prompt,
            output_tokens: output,
            client: NO_CLIENT,
            session: NO_SESSION,
            class,
            content: vec![],
        })
        .collect()
}

#[test]
fn vllm_v1_under_the_priority_policy_preempts_its_lowest_priority_request() {
    // vLLM's priority policy (`Scheduler.schedule`, vllm/v1/core/sched/scheduler.py, read in
    // 0.16.0, 0.32.0, 0.33.0 and 0.34.0): a running request that needs a block when none is free
    // preempts `max(self.running, key=(priority, arrival_time))`, not the last admitted; from
    // 0.33.0 one that preempted itself lets the pass go on to the next running request.
    // 6 blocks of 16 tokens, budget 200, 1000 + 10 µs per token. X (class 0, 8-token prompt, 10
    // out) at 0, A (class 1, 46, 10) at 50 µs, B (class 0, 20, 3) at 2000 µs.
    // 0: X's 8 → 1080. 1080: X's decode, A's 46 (3 blocks; 2 free) → 2550. 2550: X, A decode,
    // B's 20 (its 2 blocks; 0 free) → 3770. 3770: three decodes → 4800. 4800: A's 49th token
    // needs a 4th block. Under the priority policy A, of class 1, is the victim — itself:
    // from 0.33 B's decode still runs beside X's (1020 µs: B's 3rd and last token at 5820); up
    // to 0.32 the pass stops with X's (1010 µs), and B's 3rd token comes after one more step of
    // X and B, at 5810 + 1020 = 6830 (A's 49 tokens need 4 blocks of the 3 free: it waits).
    // FCFS preempts the last admitted, B, and A gets its block.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let run = |queue: &str, batching: &str| {
        let sched =
            format!("max_num_batched_tokens = 200\n{queue}[scheduler.batching]\nkind = \"vllm-v1\"\n{batching}");
        let s = scenario(&paper(&sched, 6, &LISTED.replace("requests = 2", "requests = 3")));
        Simulation::with_requests(&s, classed(&[(0, 8, 10, 0), (50, 46, 10, 1), (2000, 20, 3, 0)])).run()
    };
    let priority = "[scheduler.queue]\nkind = \"priority\"\n";
    let out = run(priority, "");
    let r = &out.recorder.records;
    assert_eq!((r[1].preemptions, r[2].preemptions), (1, 0));
    assert_eq!((r[2].first_token, r[2].finish), (us(3770), us(5820)));
    let out = run(priority, "priority_pass_continues = false");
    let r = &out.recorder.records;
    assert_eq!((r[1].preemptions, r[2].preemptions, r[2].finish), (1, 0, us(6830)));
    let out = run("", "");
    let r = &out.recorder.records;
    assert_eq!((r[1].preemptions, r[2].preemptions), (0, 1));
    // engine = "vllm" sets the pass's rule by the release.
    let at = |v: &str| {
        let text = paper("[scheduler.batching]\nkind = \"vllm-v1\"", 10, "requests = 1\narrival = { kind = \"constant\", rate = 1 }\nprompt_tokens = { kind = \"fixed\", value = 1 }\noutput_tokens = { kind = \"fixed\", value = 1 }");
        scenario(&format!("engine = \"vllm\"\nengine_version = \"{v}\"\n{text}")).resolved_toml()
    };
    assert!(at("0.32.0").contains("priority_pass_continues = false"), "{}", at("0.32.0"));
    assert!(at("0.33.0").contains("priority_pass_continues = true"), "{}", at("0.33.0"));
}

#[test]
fn sglang_runs_prefill_batches_apart_from_decode_batches() {
    // python/sglang/srt/managers/scheduler.py `get_next_batch_to_run` (SGLang's default, no
    // --enable-mixed-chunk): a prefill batch whenever one can be formed, else a decode batch.
    // Iteration = 1000 + 10 µs per token. A (10-token prompt, 4 out) at 0, B (10, 4) at 1500.
    // 0: prefill A → 1100 (A's first token). 1100: decode A → 2110. 2110: B waits: a prefill
    // batch of B alone, A's decode skipped → 3210. 3210, 4230: decode A and B → A's 4th token
    // at 5250. 5250: decode B → 6260.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let s = listed("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"sglang\"", 1000);
    let out = Simulation::with_requests(&s, requests(&[(0, 10, 4), (1500, 10, 4)])).run();
    let r = &out.recorder.records;
    assert_eq!((r[0].first_token, r[1].scheduled, r[1].first_token), (us(1100), us(2110), us(3210)));
    assert_eq!((r[0].finish, r[1].finish), (us(5250), us(6260)));
    // Chunked decode-first puts B's prompt beside A's decode at 2110 instead: 1110 µs.
    let c = listed("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"chunked\"", 1000);
    let out = Simulation::with_requests(&c, requests(&[(0, 10, 4), (1500, 10, 4)])).run();
    assert_eq!(out.recorder.records[1].first_token, us(3220));
}

#[test]
fn sglang_admits_against_the_running_requests_reservation_times_new_token_ratio() {
    // schedule_policy.py `PrefillAdder` (sgl-project/sglang ad0119fd): a waiting request is
    // admitted if prompt + min(output, 4096) < (free + evictable) tokens − Σ running requests'
    // min(output left, 4096) × new_token_ratio. 20 blocks of 16 tokens; A (32-token prompt, 100
    // out) is prefilled at 0 (1320 µs) and holds 2 blocks: 288 tokens free. At 1320 A has 99
    // tokens to go and the ratio is its start, 0.7: 288 − 69.3 = 218.7 left. B (arrived at 100
    // µs, 100 out) with a 118-token prompt needs 218 < 218.7: admitted at 1320; with 119 it
    // needs 219: refused, the batch is marked full and B waits until A has finished (99 decode
    // batches of 1010 µs: 1320 + 99 × 1010 = 101,310 µs).
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let sched = |extra: &str| {
        listed(&format!("max_num_batched_tokens = 1000\n[scheduler.batching]\nkind = \"sglang\"\n{extra}"), 20)
    };
    let b_scheduled = |s: &servesim_sim::Scenario, prompt: u32| {
        let out = Simulation::with_requests(s, requests(&[(0, 32, 100), (100, prompt, 100)])).run();
        assert_eq!(out.recorder.records[0].first_token, us(1320));
        (out.recorder.records[1].scheduled, out.summary.preemptions)
    };
    let s = sched("");
    // The ratio is an estimate: together A and B need 9 + 14 blocks by their last tokens, so
    // admitting B costs a retraction later; waiting for A costs none.
    let (at, retracted) = b_scheduled(&s, 118);
    assert_eq!(at, us(1320));
    assert!(retracted >= 1, "{retracted}");
    assert_eq!(b_scheduled(&s, 119), (us(101_310), 0));
    // schedule_conservativeness 2: the ratio starts at min(0.7 × 2, 1) = 1, so A reserves all
    // 99 tokens: 288 − 99 = 189 left, and even 118 + 100 = 218 waits.
    let s = sched("schedule_conservativeness = 2");
    assert_eq!(b_scheduled(&s, 118), (us(101_310), 0));
    assert_eq!(b_scheduled(&s, 88).0, us(1320));
}

#[test]
fn sglang_retracts_the_request_with_the_least_output_and_the_longest_prompt() {
    // schedule_batch.py `retract_decode`, called from scheduler.py `update_running_batch` when
    // the next decode does not fit: sort by (output tokens, −prompt tokens), retract from the
    // smallest. 6 blocks of 16 tokens, schedule_conservativeness 0 (no reservation for the
    // running requests, so both are admitted). A (20-token prompt, 40 out) at 0: prefill 1200
    // µs, 2 blocks. B (16, 40) arrives at 100 µs, prefilled alone 1200 → 2360, 1 block. Then
    // both decode (1020 µs a batch), equal in output; A's 4th block is due at its 29th token
    // (d = 28 batches after 2360, t = 30,920), when none is free: A, the longer prompt, is
    // retracted — not B, the most recently admitted, as vLLM would. B alone finishes its 11
    // last tokens at 30,920 + 11 × 1010 = 42,030; A is then recomputed (49 tokens, 1490 µs)
    // and decodes its last 10: 43,520 + 10 × 1010 = 53,620.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let s = listed(
        "max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"sglang\"\nschedule_conservativeness = 0",
        6,
    );
    let out = Simulation::with_requests(&s, requests(&[(0, 20, 40), (100, 16, 40)])).run();
    let r = &out.recorder.records;
    assert_eq!((r[0].first_token, r[1].scheduled, r[1].first_token), (us(1200), us(1200), us(2360)));
    assert_eq!((r[0].preemptions, r[1].preemptions), (1, 0));
    assert_eq!(r[1].finish, us(42_030));
    assert_eq!(r[0].finish, us(53_620));
    // The retracted request goes back to the waiting queue, behind what already waits there
    // (scheduler.py `update_running_batch` → `_add_request_to_queue`; FCFS keeps insertion
    // order): C (16-token prompt, 2 out) arrives at 20,000 µs and waits (no block is free).
    // At 30,920 A is retracted and B decodes alone → 31,930. C, now first, fits: B reserves
    // its 12 tokens left × new_token_ratio 1 (min(1, (28 + 20) / 41)) out of 3 blocks freed,
    // 48 − 12 = 36 ≥ 16 + 2. C's prefill: 1000 + 160 µs → first token at 33,090. Were A first
    // in line (servesim's rule before), its 48 + 12 tokens would not fit, and C would wait for
    // A to be readmitted after B and finish: scheduled at 53,620.
    let three = "requests = 3\narrival = { kind = \"constant\", rate = 1 }\n\
        prompt_tokens = { kind = \"fixed\", value = 1 }\noutput_tokens = { kind = \"fixed\", value = 1 }";
    let sched = "max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"sglang\"\nschedule_conservativeness = 0";
    let s3 = scenario(&paper(sched, 6, three));
    let out = Simulation::with_requests(&s3, requests(&[(0, 20, 40), (100, 16, 40), (20_000, 16, 2)])).run();
    let r = &out.recorder.records;
    assert_eq!(r[0].preemptions, 1);
    assert_eq!((r[2].scheduled, r[2].first_token), (us(31_930), us(33_090)));
    assert!(r[0].finish > r[2].finish, "{:?} {:?}", r[0].finish, r[2].finish);
    // vLLM V1's rule preempts the latest admitted instead: B.
    let v = listed("max_num_batched_tokens = 100\n[scheduler.batching]\nkind = \"vllm-v1\"", 6);
    let out = Simulation::with_requests(&v, requests(&[(0, 20, 40), (100, 16, 40)])).run();
    let r = &out.recorder.records;
    assert_eq!(r[0].preemptions, 0);
    assert!(r[1].preemptions >= 1, "{}", r[1].preemptions);
}

#[test]
fn sglang_with_mixed_chunks_decodes_the_running_requests_in_the_prefill_batch() {
    // `--enable-mixed-chunk` (python/sglang/srt/managers/scheduler.py `get_new_batch_prefill`:
    // `PrefillAdder(..., mixed_with_decode_tokens=running_bs)` takes the running requests'
    // tokens off `rem_input_tokens` and `rem_chunk_tokens`, then `mix_with_running`).
    // Iteration = 1000 + 10 µs per token. A (10-token prompt, 4 out) at 0, B (10, 4) at 1500:
    // 0: prefill A → 1100. 1100: decode A → 2110. 2110: B's prefill with A's decode, 11 tokens
    // → 3220 (B's first token, not 3210 as unmixed). 3220: decode both → A's last at 4240.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let mixed = "[scheduler.batching]\nkind = \"sglang\"\nmixed_chunk = true";
    let s = listed(&format!("max_num_batched_tokens = 100\n{mixed}"), 1000);
    let out = Simulation::with_requests(&s, requests(&[(0, 10, 4), (1500, 10, 4)])).run();
    let r = &out.recorder.records;
    assert_eq!((r[0].first_token, r[1].scheduled, r[1].first_token), (us(1100), us(2110), us(3220)));
    assert_eq!(r[0].finish, us(4240));
    // The chunk budget loses the running decodes' tokens: budget 12 and B of 20 tokens. 2110:
    // B's first 11 (12 − A's 1) with A's decode, 12 tokens → 3230. 3230: B's last 9 with A's
    // decode (A's 4th token) → 4330, B's first token.
    let s = listed(&format!("max_num_batched_tokens = 12\n{mixed}"), 1000);
    let out = Simulation::with_requests(&s, requests(&[(0, 10, 4), (1500, 20, 4)])).run();
    let r = &out.recorder.records;
    assert_eq!((r[1].scheduled, r[1].first_token, r[0].finish), (us(2110), us(4330), us(4330)));
}

#[test]
fn sglang_cuts_a_long_prompt_at_the_chunk_budget_and_ends_the_batch_there() {
    // `PrefillAdder.add_one_req`: a prompt over the chunk budget (max_num_batched_tokens,
    // SGLang's --chunked-prefill-size) is cut there and becomes the chunked request, which the
    // next prefill batch continues first (`add_chunked_req`). Budget 64: A (150-token prompt,
    // 2 out) and B (10, 2) both at 0. 0: A's first 64 → 1640. 1640: A's next 64, budget spent
    // → 3280. 3280: A's last 22, then B's 10 → 1320 µs, both first tokens at 4600.
    use servesim_sim::engine::Simulation;
    let us = |x: u64| servesim_sim::SimTime(x * 1000);
    let s = listed("max_num_batched_tokens = 64\n[scheduler.batching]\nkind = \"sglang\"", 1000);
    let out = Simulation::with_requests(&s, requests(&[(0, 150, 2), (0, 10, 2)])).run();
    let r = &out.recorder.records;
    assert_eq!((r[0].first_token, r[1].scheduled, r[1].first_token), (us(4600), us(3280), us(4600)));
    // max_prefill_tokens 27 (the chunked request continues regardless): after A's last 22
    // tokens 5 are left and B's 10 reach them (B would not be the first of its batch), so B
    // waits for the next prefill batch: A's first token at 3280 + 1220 = 4500, then B alone
    // (A's decode waits) 1100 µs → 5600.
    let s =
        listed("max_num_batched_tokens = 64\n[scheduler.batching]\nkind = \"sglang\"\nmax_prefill_tokens = 27", 1000);
    let out = Simulation::with_requests(&s, requests(&[(0, 150, 2), (0, 10, 2)])).run();
    let r = &out.recorder.records;
    assert_eq!((r[0].first_token, r[1].first_token), (us(4500), us(5600)));
}
