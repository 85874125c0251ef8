//! Every policy, alone and combined, run through the foundation's invariants after every
//! event (conservation, KV ownership and sharing, swap space, CPU tier, time), and twice for
//! determinism.

use super::*;

const LOAD: &str = "duration_s = 20\narrival = { kind = \"poisson\", rate = 30 }\n\
    prompt_tokens = { kind = \"uniform\", min = 16, max = 900 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 600 }\n\
    class_weights = [0.5, 0.3, 0.2]";

const PREFIXED: &str = "duration_s = 20\narrival = { kind = \"poisson\", rate = 20 }\n\
    prompt_tokens = { kind = \"uniform\", min = 16, max = 200 }\noutput_tokens = { kind = \"uniform\", min = 1, max = 300 }\n\
    [workload.prefix]\nsystem = { groups = 5, tokens = { kind = \"uniform\", min = 100, max = 600 }, skew = 1 }\n\
    rag = { documents = 50, tokens = { kind = \"uniform\", min = 50, max = 400 } }\n\
    sessions = { turns = { kind = \"uniform\", min = 1, max = 4 }, think_time_s = 0.5 }";

/// (name, `[scheduler]` body, workload)
fn cases() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("continuous", "max_num_seqs = 64\nmax_num_batched_tokens = 2048", LOAD),
        ("continuous prefill-first", "max_num_batched_tokens = 2048\n[scheduler.batching]\nkind = \"continuous\"\npriority = \"prefill\"", LOAD),
        ("static", "max_num_seqs = 32\nmax_num_batched_tokens = 2048\n[scheduler.batching]\nkind = \"static\"", LOAD),
        ("chunked", "max_num_batched_tokens = 256\n[scheduler.batching]\nkind = \"chunked\"", LOAD),
        ("chunked prefill-first", "max_num_batched_tokens = 256\n[scheduler.batching]\nkind = \"chunked\"\npriority = \"prefill\"", LOAD),
        ("vllm-v1", "max_num_batched_tokens = 256\n[scheduler.batching]\nkind = \"vllm-v1\"\nlong_prefill_token_threshold = 96", LOAD),
        ("sglang", "max_num_batched_tokens = 256\n[scheduler.batching]\nkind = \"sglang\"\nmax_prefill_tokens = 512", LOAD),
        (
            "sglang prefix cache",
            "max_num_batched_tokens = 256\n[scheduler.batching]\nkind = \"sglang\"\nschedule_conservativeness = 0.3\n\
             [scheduler.prefix_cache]\nenabled = true\nmin_prefix_tokens = 32",
            PREFIXED,
        ),
        ("shortest prompt", "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"shortest-prompt\"", LOAD),
        ("shortest job", "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"shortest-job\"\noutput_error = 0.8", LOAD),
        ("priority aging", "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"priority\"\naging_per_s = 0.3", LOAD),
        (
            "length tiers",
            "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"length-tiers\"\nshort_max_tokens = 200\nmedium_max_tokens = 600\nlong_max_running = 3",
            LOAD,
        ),
        ("edf", "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"edf\"\nttft_ms = [300, 3000]", LOAD),
        ("short jump", "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"short-jump\"\nshort_max_tokens = 200\nqueue_threshold = 5", LOAD),
        (
            "admission",
            "max_num_batched_tokens = 2048\n[scheduler.admission]\nmax_queue = 40\nmax_prompt_tokens = 800\nqueue_timeout_s = 1\n\
             circuit_breaker = { open_delay_s = 2, close_delay_s = 1 }",
            LOAD,
        ),
        ("swap", "max_num_batched_tokens = 2048\n[scheduler.preemption]\nkind = \"swap\"\ncpu_swap_gib = 0.001", LOAD),
        ("reserve max", "max_num_batched_tokens = 2048\n[scheduler.kv_cache]\nallocation = \"reserve-max\"\nreserve_output_tokens = 300", LOAD),
        ("fp8 kv", "max_num_batched_tokens = 2048\n[scheduler.kv_cache]\ndtype = \"fp8\"", LOAD),
        ("prefix cache", "max_num_batched_tokens = 2048\n[scheduler.prefix_cache]\nenabled = true", PREFIXED),
        (
            "prefix cache tiers",
            "max_num_batched_tokens = 2048\n[scheduler.prefix_cache]\nenabled = true\nttl_s = 2\nmin_prefix_tokens = 64\ncpu_gib = 0.002",
            PREFIXED,
        ),
        ("speculative", "max_num_batched_tokens = 2048\n[scheduler.speculative]\nk = 3\nacceptance = 0.7\ndraft_cost_fraction = 0.2", LOAD),
        ("cpu overlap", "max_num_batched_tokens = 2048\n[scheduler.cpu]\noverlap = true\nper_seq_us = 100", LOAD),
        (
            "disaggregated",
            "max_num_batched_tokens = 2048\n[scheduler.queue]\nkind = \"priority\"\naging_per_s = 0.3\n\
             [[cluster.groups]]\nrole = \"prefill\"\ncount = 1\n[[cluster.groups]]\nrole = \"decode\"\ncount = 1",
            LOAD,
        ),
        (
            "everything",
            "max_num_batched_tokens = 512\n[scheduler.batching]\nkind = \"chunked\"\n[scheduler.queue]\nkind = \"priority\"\naging_per_s = 1\n\
             [scheduler.admission]\nqueue_timeout_s = 4\n[scheduler.preemption]\nkind = \"swap\"\ncpu_swap_gib = 0.001\n\
             [scheduler.prefix_cache]\nenabled = true\ncpu_gib = 0.002\n\
             [scheduler.speculative]\nk = 2\nacceptance = 0.6\ndraft_cost_fraction = 0.3",
            PREFIXED,
        ),
    ]
}

/// The registered kinds of the scheduler's families: (section, kinds, the default kind).
fn families() -> [(&'static str, &'static [&'static str], &'static str); 3] {
    use servesim_sim::instance::batching::BatchingSpec;
    use servesim_sim::instance::preemption::PreemptionSpec;
    use servesim_sim::instance::queue::QueueSpec;
    [
        ("batching", BatchingSpec::KINDS, BatchingSpec::default().kind()),
        ("queue", QueueSpec::KINDS, QueueSpec::default().kind()),
        ("preemption", PreemptionSpec::KINDS, PreemptionSpec::default().kind()),
    ]
}

/// Whether a case of `cases` runs `kind` of `section`, by name or as the default kind.
fn runs_kind(cases: &[(String, String, &str)], section: &str, kind: &str, default: &str) -> bool {
    let named = cases.iter().any(|c| c.1.contains(&format!("[scheduler.{section}]\nkind = \"{kind}\"")));
    let by_default = kind == default && cases.iter().any(|c| !c.1.contains(&format!("[scheduler.{section}]")));
    named || by_default
}

/// `cases`, then one with its defaults for every registered kind none of them runs.
fn with_generated(mut all: Vec<(String, String, &'static str)>) -> Vec<(String, String, &'static str)> {
    for (section, kinds, default) in families() {
        for kind in kinds {
            if !runs_kind(&all, section, kind, default) {
                let sched = format!("max_num_batched_tokens = 2048\n[scheduler.{section}]\nkind = \"{kind}\"");
                all.push((format!("{kind} (defaults)"), sched, LOAD));
            }
        }
    }
    all
}

/// The hand-written cases and a generated one for each kind they do not run: a new policy is
/// checked here with no line added to this file.
fn all_cases() -> Vec<(String, String, &'static str)> {
    with_generated(cases().into_iter().map(|(n, s, w)| (n.to_string(), s.to_string(), w)).collect())
}

#[test]
fn the_cases_run_every_registered_batching_queue_and_preemption_kind() {
    let all = all_cases();
    for (section, kinds, default) in families() {
        for kind in kinds {
            assert!(runs_kind(&all, section, kind, default), "no case runs the {section} kind {kind:?}");
        }
    }
    // A kind no hand-written case runs gets a case of its own, with its defaults.
    let hand = cases().into_iter().map(|(n, s, w)| (n.to_string(), s.to_string(), w));
    let without_sglang: Vec<_> = hand.filter(|c| !c.1.contains("kind = \"sglang\"")).collect();
    assert!(!runs_kind(&without_sglang, "batching", "sglang", "continuous"));
    let generated = with_generated(without_sglang);
    let sglang = generated.iter().find(|c| c.0 == "sglang (defaults)").expect("a generated sglang case");
    assert!(sglang.1.ends_with("[scheduler.batching]\nkind = \"sglang\""), "{}", sglang.1);
}

#[test]
fn every_policy_keeps_the_invariants_after_every_event_and_is_deterministic() {
    for (name, sched, w) in all_cases() {
        let generated = name.ends_with(" (defaults)");
        let name = name.as_str();
        let src = tiny(0.03, &sched, w);
        let a = run_checked(&src);
        let b = run(&src);
        assert_eq!(a.recorder.records, b.recorder.records, "{name}: not deterministic");
        assert_eq!(a.summary, b.summary, "{name}: not deterministic");
        let s = &a.summary;
        eprintln!(
            "{name:<26} finished {:>4} rejected {:>3} timed out {:>3} preemptions {:>4} swapped {:>5} hit rate {:.2} spec steps {}",
            s.requests.finished,
            s.requests.rejected,
            s.requests.timed_out,
            s.preemptions,
            s.swap.swapped_out_blocks,
            s.prefix_cache.hit_rate_tokens,
            s.speculative.steps
        );
        eprintln!("    {:?}", s.requests.rejected_by_reason);
        assert_eq!(s.requests.in_flight, 0, "{name}: everything ends");
        assert!(s.requests.finished > 100, "{name}");
        // Every time is consistent for every finished request.
        for r in finished(&a) {
            assert!(
                r.arrival <= r.scheduled && r.scheduled < r.first_token && r.first_token <= r.finish,
                "{name}: {r:?}"
            );
        }
        // The mechanisms under test were exercised.
        match name {
            "swap" => assert!(s.swap.swapped_out_blocks > 0 && s.swap.recompute_fallbacks > 0),
            "admission" => assert!(s.requests.timed_out > 0 && s.requests.rejected_by_reason["prompt_too_long"] > 0),
            "prefix cache" | "prefix cache tiers" => assert!(s.prefix_cache.hit_rate_tokens > 0.2),
            "speculative" => assert!(s.speculative.steps > 0),
            "everything" => {
                assert!(s.swap.swapped_out_blocks > 0 && s.prefix_cache.cpu_hit_tokens > 0 && s.speculative.steps > 0)
            }
            _ => {}
        }
        if !generated && !matches!(name, "continuous prefill-first" | "fp8 kv" | "reserve max") {
            assert!(
                s.preemptions > 0 || name.contains("static") || name == "admission",
                "{name}: KV pressure preempts"
            );
        }
    }
}
