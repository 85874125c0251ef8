use super::*;
use crate::scenario::Scenario;

fn scenario(engine: &str, extra: &str) -> Scenario {
    crate::scenario::deploy::tests::scenario(engine, "round-robin", 4, extra)
}

#[test]
fn every_flag_is_one_engines_once() {
    // A spelling names one flag per engine: the reader could not tell two apart.
    for e in [ServingEngine::Vllm, ServingEngine::Sglang, ServingEngine::Trtllm] {
        let mut seen = std::collections::BTreeSet::new();
        for f in FLAGS.iter().filter(|f| f.engines.contains(&e)) {
            for n in f.names {
                assert!(seen.insert(*n), "{} spells {n} twice", e.name());
                assert!(n.starts_with('-'), "{n}");
            }
        }
    }
}

#[test]
fn the_table_reads_both_ways() {
    let f = flag(ServingEngine::Sglang, "--max-running-requests").unwrap();
    assert_eq!((f.key, f.kind), ("max_num_seqs", FlagKind::Value));
    assert_eq!(spelling(ServingEngine::Sglang, "max_num_seqs", None), Some("--max-running-requests"));
    assert_eq!(spelling(ServingEngine::Vllm, "max_num_seqs", None), Some("--max-num-seqs"));
    assert_eq!(spelling(ServingEngine::Trtllm, "max_num_seqs", None), Some("--max_batch_size"));
    assert_eq!(spelling(ServingEngine::Vllm, "prefix", Some(false)), Some("--no-enable-prefix-caching"));
    assert_eq!(spelling(ServingEngine::Sglang, "prefix", Some(false)), Some("--disable-radix-cache"));
    assert_eq!(spelling(ServingEngine::Sglang, "prefix", Some(true)), None);
    assert!(flag(ServingEngine::Vllm, "--max-running-requests").is_none());
    // Every key a launch command writes, read back by the same engine, is the same key.
    for e in [ServingEngine::Vllm, ServingEngine::Sglang, ServingEngine::Trtllm] {
        for key in ["tp", "pp", "max_num_seqs", "max_num_batched_tokens"] {
            let name = spelling(e, key, None).unwrap();
            assert_eq!(flag(e, name).unwrap().key, key);
        }
    }
}

#[test]
fn launch_commands_write_what_was_simulated() {
    let s = scenario("vllm", "");
    let g = &s.groups[0];
    let c = LaunchCommand::of(ServingEngine::Vllm, g, &s.model);
    assert_eq!(
        c.line(),
        "vllm serve meta-llama/Meta-Llama-3-70B-Instruct --tensor-parallel-size 4 --max-num-seqs 96 \
         --max-num-batched-tokens 4096 --enable-prefix-caching"
    );
    // vLLM's admission limit and priority policy, SGLang's priority scheduling and its
    // preemption, as `scenario from-vllm` / `from-sglang` read them.
    let line = |engine: ServingEngine, extra: &str| {
        let s = scenario(engine.name(), extra);
        LaunchCommand::of(engine, &s.groups[0], &s.model).line()
    };
    let q = "[scheduler.queue]\nkind = \"priority\"\n[scheduler.batching]\n";
    let l = line(ServingEngine::Vllm, &format!("{q}kind = \"vllm-v1\"\nmax_num_active_seqs = 32"));
    assert!(l.ends_with("--max-num-active-seqs 32 --scheduling-policy priority --enable-prefix-caching"), "{l}");
    let l = line(ServingEngine::Sglang, &format!("{q}kind = \"sglang\"\npriority_preemption_threshold = 3"));
    assert!(l.ends_with("--enable-priority-scheduling --priority-scheduling-preemption-threshold 3"), "{l}");
    let l = line(ServingEngine::Sglang, "[scheduler.queue]\nkind = \"priority\"");
    assert!(l.ends_with("--enable-priority-scheduling --disable-priority-preemption"), "{l}");
    let s = scenario("sglang", "weight_dtype = \"fp8\"\nkv_dtype = \"fp8\"");
    let c = LaunchCommand::of(ServingEngine::Sglang, &s.groups[0], &s.model);
    assert_eq!(
        c.line(),
        "python3 -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-70B-Instruct --tp 4 \
         --max-running-requests 96 --chunked-prefill-size 4096 --quantization fp8 --kv-cache-dtype fp8_e4m3"
    );
    // A 4-bit format the checkpoint is not in cannot be had by a flag: said, not written.
    let s = scenario("trtllm", "weight_dtype = \"nvfp4\"");
    let c = LaunchCommand::of(ServingEngine::Trtllm, &s.groups[0], &s.model);
    assert_eq!(
        c.line(),
        "trtllm-serve meta-llama/Meta-Llama-3-70B-Instruct --tp_size 4 --max_batch_size 96 --max_num_tokens 4096"
    );
    assert!(c.notes[0].contains("serve a nvfp4 checkpoint"), "{:?}", c.notes);
    // Speculative decoding: its k said, its method not invented.
    let mut s = scenario("sglang", "");
    s.groups[0].scheduler.speculative = Some(crate::instance::speculative::SpeculativeSection {
        k: 3,
        acceptance: None,
        acceptance_rates: None,
        acceptance_length: Some(2.5),
        draft_cost_fraction: Some(0.05),
        draft: None,
    });
    let c = LaunchCommand::of(ServingEngine::Sglang, &s.groups[0], &s.model);
    assert!(!c.line().contains("speculative"), "{}", c.line());
    assert!(
        c.notes.iter().any(|n| n.starts_with("speculative decoding, 3 tokens proposed a step")
            && n.contains("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")),
        "{:?}",
        c.notes
    );
}

#[test]
fn shell_words_are_quoted_when_the_shell_would_split_them() {
    assert_eq!(shell_word("--tp"), "--tp");
    assert_eq!(shell_word(r#"{"a":1}"#), r#"'{"a":1}'"#);
    assert_eq!(shell_word("it's"), r"'it'\''s'");
    assert_eq!(shell_word(""), "''");
}
