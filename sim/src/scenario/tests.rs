use super::*;

const BASE: &str = r#"
[model]
preset = "llama-3-8b"
[gpu]
preset = "h100-sxm"
[workload]
duration_s = 10
arrival = { kind = "poisson", rate = 2 }
prompt_tokens = { kind = "fixed", value = 100 }
output_tokens = { kind = "fixed", value = 10 }
"#;

fn err(src: &str) -> String {
    Scenario::from_toml(src, "t").unwrap_err().to_string()
}

#[test]
fn base_is_valid_and_resolves_presets() {
    let s = Scenario::from_toml(BASE, "t").unwrap();
    assert_eq!(s.model.layers, 32);
    assert_eq!(s.groups[0].gpu.name, "h100-sxm");
    assert_eq!(s.groups[0].max_model_len, 8192);
    // The resolved file round-trips to the same scenario.
    let again = Scenario::from_toml(&s.resolved_toml(), "t").unwrap();
    assert_eq!(again.model, s.model);
    assert_eq!(again.groups[0].gpu, s.groups[0].gpu);
    assert_eq!(again.groups[0].memory, s.groups[0].memory);
    assert_eq!(again.resolved, s.resolved);
}

#[test]
fn errors_inside_tagged_tables_keep_the_full_key_path() {
    let e = err(&BASE.replace("rate = 2", "rate = -3"));
    assert_eq!(e, "workload.arrival.rate: must be in [1e-12, 1e9] requests/s, got -3");
    let e = err(&BASE.replace("rate = 2", "rate = \"fast\""));
    assert!(e.ends_with("workload.arrival.rate: invalid type: string \"fast\", expected f64"), "{e}");
    let e = err(&BASE.replace("rate = 2", "rate = 2, cv = 3"));
    assert!(e.ends_with("workload.arrival.cv: unknown field `cv`, expected `rate`"), "{e}");
    let e = err(&BASE.replace("kind = \"poisson\"", "kind = \"posson\""));
    assert!(
        e.contains("workload.arrival.kind: unknown kind \"posson\"; expected one of \"poisson\", \"gamma\""),
        "{e}"
    );
}

#[test]
fn nested_mixture_errors_name_the_component() {
    let src = BASE.replace(
        "prompt_tokens = { kind = \"fixed\", value = 100 }",
        "prompt_tokens = { kind = \"mixture\", components = [ { weight = 1, kind = \"uniform\", min = 1, max = \"x\" } ] }",
    );
    let e = err(&src);
    assert!(e.contains("workload.prompt_tokens.components[0].max: invalid type"), "{e}");
}

#[test]
fn parse_errors_carry_the_line() {
    let e = Scenario::from_toml(&BASE.replace("[gpu]", "[gpu]\nbogus = 1"), "t").unwrap_err();
    assert_eq!(e.path, "gpu.bogus");
    assert_eq!(e.line, Some(5));
}

#[test]
fn model_that_does_not_fit_says_by_how_much() {
    let e = err(&BASE.replace("llama-3-8b", "llama-3-70b"));
    assert!(e.starts_with("memory: llama-3-70b does not fit on h100-sxm at tp 1"), "{e}");
    assert!(e.contains("usable at gpu_memory_utilization 0.9 by 62.23 GiB"), "{e}");
}

#[test]
fn max_model_len_above_the_models_context_is_refused() {
    let e = err(&format!("{BASE}[scheduler]\nmax_model_len = 60000\n"));
    assert_eq!(
        e,
        "scheduler.max_model_len: must be ≤ llama-3-8b's context of 8192 tokens (model.max_context), got 60000"
    );
    let e = err(&format!("seed = 9223372036854775807\n{BASE}"));
    assert!(e.starts_with("seed: must be ≤ 4611686018427387904"), "{e}");
    // At the context exactly is fine.
    assert!(Scenario::from_toml(&format!("{BASE}[scheduler]\nmax_model_len = 8192\n"), "t").is_ok());
}

#[test]
fn toml_messages_name_the_duplicate_and_the_bound_in_plain_words() {
    let e = err(&format!("{BASE}[scheduler]\nmax_num_seqs = 5\nmax_num_seqs = 6\n"));
    assert_eq!(e, "line 13: key `max_num_seqs` appears twice");
    let e = err(&format!("{BASE}[gpu]\nbf16_tflops = 3\n"));
    assert_eq!(e, "line 11: table [gpu] appears twice");
    let e = err(&format!("{BASE}[scheduler]\nmax_num_seqs = 99999999999999999999\n"));
    assert_eq!(
        e,
        "line 12: scheduler.max_num_seqs: out of range: must be at most 4294967295, got 99999999999999999999"
    );
    let e = err(&format!("{BASE}[scheduler]\nmax_num_seqs = -5\n"));
    assert_eq!(e, "line 12: scheduler.max_num_seqs: must be a whole number from 0 to 4294967295, got -5");
    let e = err(&format!("{BASE}[scheduler]\nmax_num_seqs = 1e30\n"));
    assert_eq!(e, "line 12: scheduler.max_num_seqs: must be a whole number (no decimal point or exponent), got 1e30");
    let e = err(&format!("gpu = 5\n{}", BASE.replace("[gpu]\npreset = \"h100-sxm\"\n", "")));
    assert_eq!(e, "line 1: gpu: invalid type: integer `5`, expected a table");
    // Wrapped-around sizes are refused: a reserve past a petabyte, dimensions near 2^32.
    let e = err(&format!("{BASE}[memory]\nreserve_gib = 1.7e10\n"));
    assert_eq!(e, "memory.reserve_gib: must be in [0, 1e6] GiB, got 17000000000");
    let e = err(&BASE.replace(
        "preset = \"llama-3-8b\"",
        "preset = \"llama-3-8b\"\nhidden = 4294967296\nheads = 4294967296\nkv_heads = 4294967296",
    ));
    assert!(e.starts_with("model.layers: with these dimensions the model has about 3.022e23 parameters"), "{e}");
}

#[test]
fn the_resolved_file_of_a_heterogeneous_cluster_round_trips() {
    let src = BASE.replace("[gpu]\npreset = \"h100-sxm\"\n", "")
        + "[[cluster.groups]]\nname = \"a\"\ncount = 2\ngpu = { preset = \"h100-sxm\" }\nscheduler = { max_num_seqs = 64 }\n\
           [[cluster.groups]]\nname = \"b\"\ncount = 1\ntp = 2\ngpu = { preset = \"a100-80g\" }\n";
    let s = Scenario::from_toml(&src, "t").unwrap();
    let text = s.resolved_toml();
    assert_eq!(text.matches("[[cluster.groups]]").count(), 2, "{text}");
    let again = Scenario::from_toml(&text, "t").unwrap();
    assert_eq!(again.resolved, s.resolved);
    assert_eq!(again.groups.len(), 2);
    assert_eq!(again.groups[0].scheduler.max_num_seqs, 64);
    assert_eq!((again.groups[1].tp, again.groups[1].gpu.name.as_str()), (2, "a100-80g"));
}

#[test]
fn memory_engine_rules_and_their_keys() {
    // vLLM's rule sizes the KV cache: 79.19 GiB as CUDA sees the H100, × 0.9, less the weights
    // (with the RoPE table), the profiled peak and the non-torch estimate.
    let s = Scenario::from_toml(&format!("{BASE}[memory]\nengine = \"vllm\"\n"), "t").unwrap();
    let m = &s.groups[0].memory;
    let t = m.terms.as_ref().unwrap();
    assert_eq!(m.usable_bytes, (t.visible_bytes as f64 * 0.9).floor() as u64);
    assert_eq!(m.kv_bytes, m.usable_bytes - m.weight_bytes - t.activation_bytes - t.non_torch_bytes);
    // The resolved scenario keeps the rule and CUDA's total, so that it reruns the same.
    let resolved = s.resolved_toml();
    assert!(resolved.contains("engine = \"vllm\"") && resolved.contains("visible_gib = 79.1904296875"), "{resolved}");
    let again = Scenario::from_toml(&resolved, "t").unwrap();
    assert_eq!(again.groups[0].memory.kv_blocks, m.kv_blocks);
    // Without an engine rule the resolved file names none.
    let plain = Scenario::from_toml(BASE, "t").unwrap().resolved_toml();
    assert!(!plain.contains("engine ="), "{plain}");
    // Keys that belong to another rule are refused, by name.
    let e = err(&format!("{BASE}[memory]\nengine = \"vllm\"\nreserve_gib = 1\n"));
    assert_eq!(e, "memory.reserve_gib: only with engine = \"servesim\" (this section has engine = \"vllm\")");
    let e = err(&format!("{BASE}[memory]\nengine = \"sglang\"\ncuda_graph_gib = 1\n"));
    assert_eq!(e, "memory.cuda_graph_gib: only with engine = \"vllm\" (this section has engine = \"sglang\")");
    let e = err(&format!("{BASE}[memory]\nengine = \"sglang\"\nmem_fraction_static = 1.2\n"));
    assert!(e.starts_with("memory.mem_fraction_static: must be in (0, 1), got 1.2"), "{e}");
    let e = err(&format!("{BASE}[memory]\nengine = \"vllm\"\ncuda_graph_max_bs = 32\n"));
    assert_eq!(e, "memory.cuda_graph_max_bs: only with engine = \"sglang\" (this section has engine = \"vllm\")");
    let e = err(&format!("{BASE}[memory]\nengine = \"sglang\"\ncuda_graph_max_bs = 0\n"));
    assert_eq!(e, "memory.cuda_graph_max_bs: must be in [1, 1048576], got 0");
    let e = err(&format!("{BASE}[memory]\nengine = \"tgi\"\n"));
    assert!(e.contains("memory.engine") && e.contains("unknown variant `tgi`"), "{e}");
    let e = err(&BASE.replace("preset = \"h100-sxm\"", "preset = \"h100-sxm\"\nvisible_gib = 90"));
    assert!(e.starts_with("gpu.visible_gib: must not exceed memory_gib, got 90"), "{e}");
    // A GPU's CUDA total, given: the rule uses it.
    let custom = BASE.replace("preset = \"h100-sxm\"", "preset = \"h100-sxm\"\nvisible_gib = 78");
    let s = Scenario::from_toml(&format!("{custom}[memory]\nengine = \"vllm\"\n"), "t").unwrap();
    assert_eq!(s.groups[0].memory.terms.as_ref().unwrap().visible_bytes, 78 << 30);
}

#[test]
fn a_top_level_engine_supplies_its_rules_where_the_file_is_silent() {
    use crate::instance::batching::BatchingSpec;
    use crate::memory::MemoryEngine;
    let s = Scenario::from_toml(&format!("engine = \"vllm\"\n{BASE}"), "t").unwrap();
    let g = &s.groups[0];
    assert!(matches!(g.scheduler.batching, BatchingSpec::VllmV1(_)), "{:?}", g.scheduler.batching);
    assert!(g.scheduler.prefix_cache.enabled);
    assert_eq!(g.memory.terms.as_ref().map(|t| t.engine), Some(MemoryEngine::Vllm));
    let CostSpec::Roofline(c) = &g.cost else { panic!() };
    assert_eq!(c.overhead.as_deref(), Some("vllm"));
    // The resolved file spells every rule out and reruns the same.
    let again = Scenario::from_toml(&s.resolved_toml(), "t").unwrap();
    assert_eq!(again.groups[0].scheduler, g.scheduler);
    assert_eq!(again.groups[0].memory, g.memory);

    // What the file says wins; a hand-sized reserve keeps servesim's memory rule.
    let src = format!(
        "engine = \"vllm\"\n{BASE}[scheduler.batching]\nkind = \"continuous\"\n[scheduler.prefix_cache]\nenabled = false\n\
         [memory]\nreserve_gib = 2\n[cost]\noverhead = \"sglang\"\n"
    );
    let s = Scenario::from_toml(&src, "t").unwrap();
    let g = &s.groups[0];
    assert!(matches!(g.scheduler.batching, BatchingSpec::Continuous(_)));
    assert!(!g.scheduler.prefix_cache.enabled);
    assert!(g.memory.terms.is_none());
    let CostSpec::Roofline(c) = &g.cost else { panic!() };
    assert_eq!(c.overhead.as_deref(), Some("sglang"));

    // SGLang: its scheduler, the radix cache, mem_fraction_static.
    let s = Scenario::from_toml(&format!("engine = \"sglang\"\n{BASE}"), "t").unwrap();
    let g = &s.groups[0];
    assert!(matches!(g.scheduler.batching, BatchingSpec::Sglang(_)), "{:?}", g.scheduler.batching);
    assert_eq!(g.memory.terms.as_ref().map(|t| t.engine), Some(MemoryEngine::Sglang));

    // No engine: nothing changes (every shipped scenario).
    let plain = Scenario::from_toml(BASE, "t").unwrap();
    assert!(matches!(plain.groups[0].scheduler.batching, BatchingSpec::Continuous(_)));
    let e = err(&format!("engine = \"tgi\"\n{BASE}"));
    assert!(e.contains("engine: unknown variant `tgi`, expected one of `vllm`, `sglang`, `trtllm`"), "{e}");
}

#[test]
fn a_top_level_engine_supplies_its_own_limits_on_the_scenarios_gpu() {
    let limits = |engine: &str, gpu: &str, extra: &str| {
        let src = format!("engine = \"{engine}\"\n{}{extra}", BASE.replace("h100-sxm", gpu));
        let s = Scenario::from_toml(&src, "t").unwrap();
        let sch = &s.groups[0].scheduler;
        (sch.max_num_seqs, sch.max_num_batched_tokens)
    };
    // vLLM's get_batch_defaults for its API server: ≥ 70 GiB and not an A100, else the small pair.
    assert_eq!(limits("vllm", "h100-sxm", ""), (1024, 8192));
    assert_eq!(limits("vllm", "a100-80g", ""), (256, 2048));
    assert_eq!(limits("vllm", "l4", ""), (256, 2048));
    // SGLang's chunked prefill size by GPU memory, and its running requests from the KV pool
    // at llama-3-8b's 8192 context (memory::sglang_max_running_requests): on an L4 37,600
    // tokens (`servesim memory --model llama-3-8b --gpu l4 --engine sglang`) give
    // ⌊37,600 / 8192 × 512⌋ = 2350, within [2048, 4096] and under 18,800; the H200's 907,744
    // and the B200's 1,126,448 are held at 4096.
    assert_eq!(limits("sglang", "l4", ""), (2350, 2048));
    assert_eq!(limits("sglang", "h200", ""), (4096, 8192));
    assert_eq!(limits("sglang", "b200", ""), (4096, 16384));
    // A given --max-running-requests, by release (SeqsFromPool::Given): as given in 0.5.8; no
    // more than the pool's estimate (2350) in 0.5.10; no more than half the pool from 0.5.14.
    let given = "[scheduler]\nmax_num_seqs = 30000\n";
    let at = |version: &str| {
        let src =
            format!("engine = \"sglang\"\nengine_version = \"{version}\"\n{}{given}", BASE.replace("h100-sxm", "l4"));
        Scenario::from_toml(&src, "t").unwrap().groups[0].scheduler.max_num_seqs
    };
    assert_eq!((at("0.5.8"), at("0.5.10"), at("0.5.14")), (30000, 2350, 18_800));
    assert_eq!(limits("sglang", "l4", given).0, 18_800);
    // With a drafter SGLang 0.4.6–0.5.12 runs 48 requests by default; 0.5.13 on, the pool's.
    let drafted = |version: &str| {
        let spec = "[scheduler.speculative]\nk = 3\nacceptance = 0.7\ndraft_cost_fraction = 0.1\n";
        let src =
            format!("engine = \"sglang\"\nengine_version = \"{version}\"\n{}{spec}", BASE.replace("h100-sxm", "l4"));
        Scenario::from_toml(&src, "t").unwrap().groups[0].scheduler.max_num_seqs
    };
    assert_eq!((drafted("0.5.9"), drafted("0.5.13")), (48, 2350));
    assert_eq!(limits("trtllm", "h100-sxm", ""), (2048, 8192));
    // What the file says wins, key by key.
    assert_eq!(limits("vllm", "h100-sxm", "[scheduler]\nmax_num_seqs = 64\n"), (64, 8192));
    // SGLang shares its chunk among DP attention ranks (chunked_prefill_size // dp_size): 8
    // ranks on an H200 take 8192 / 8 tokens each, and its memory rule reads the server's 8192
    // back (DP attention on an H200 at TP 8: 0.769, memory::tests). Each rank's running
    // requests follow its own pool: 67,213 blocks of 16 at qwen3-30b-a3b's 40,960 context,
    // ⌊1,075,408 / 40,960 × 512⌋ = 13,442, held at 4096.
    let dp = "[cluster]\ntp = 8\ndp_attention = 8\n";
    let moe = BASE.replace("llama-3-8b", "qwen3-30b-a3b").replace("h100-sxm", "h200");
    let s = Scenario::from_toml(&format!("engine = \"sglang\"\n{moe}{dp}"), "t").unwrap();
    let g = &s.groups[0];
    assert_eq!(g.memory.kv_blocks / 8, 67_213);
    assert_eq!((g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens), (4096, 1024));
    assert_eq!(g.memory.terms.as_ref().map(|t| t.fraction), Some(0.769));
    // The resolved file holds the number, so that running it again gives the same run.
    assert!(s.resolved_toml().contains("max_num_seqs = 4096"), "{}", s.resolved_toml());
    // In a cluster of groups each takes its own pool's number, and a group's own limit is a
    // given one (half the L4's pool at most under 0.5.15), resolved and read back the same.
    let src = format!("engine = \"sglang\"\n{}", BASE.replace("h100-sxm", "l4"))
        + "[[cluster.groups]]\ncount = 1\n[[cluster.groups]]\ncount = 1\nscheduler = { max_num_seqs = 30000 }\n";
    let s = Scenario::from_toml(&src, "t").unwrap();
    let seqs = |s: &Scenario| s.groups.iter().map(|g| g.scheduler.max_num_seqs).collect::<Vec<_>>();
    assert_eq!(seqs(&s), [2350, 18_800]);
    assert_eq!(seqs(&Scenario::from_toml(&s.resolved_toml(), "t").unwrap()), [2350, 18_800]);
    // vLLM on a B200: 16384 tokens from 0.28.0, the newest release read without a version.
    assert_eq!(limits("vllm", "b200", ""), (1024, 16384));
    let src = format!("engine = \"vllm\"\nengine_version = \"0.27.1\"\n{}", BASE.replace("h100-sxm", "b200"));
    let s = Scenario::from_toml(&src, "t").unwrap();
    assert_eq!((s.groups[0].scheduler.max_num_seqs, s.groups[0].scheduler.max_num_batched_tokens), (1024, 8192));
    // No engine: servesim's own defaults.
    let plain = Scenario::from_toml(BASE, "t").unwrap();
    assert_eq!((plain.groups[0].scheduler.max_num_seqs, plain.groups[0].scheduler.max_num_batched_tokens), (256, 8192));
}

#[test]
fn each_group_takes_its_engines_limits_on_its_own_gpu() {
    // vLLM's get_batch_defaults per group's GPU (1024 and 8192 on the H100, 256 and 2048 on the
    // L4), with or without a top-level [gpu]; a limit the group or the top-level [scheduler]
    // gives is kept; SGLang's chunk by each group's GPU (8192 on the H100, 2048 on the L4).
    let groups = "[[cluster.groups]]\ngpu = \"h100-sxm\"\ncount = 1\n[[cluster.groups]]\ngpu = \"l4\"\ncount = 1\n";
    let limits = |engine: &str, top_gpu: bool, extra: &str| {
        let base = if top_gpu { BASE.to_string() } else { BASE.replace("[gpu]\npreset = \"h100-sxm\"\n", "") };
        let src = format!("engine = \"{engine}\"\n{base}{extra}{groups}");
        let s = Scenario::from_toml(&src, "t").unwrap();
        let of = |s: &Scenario| {
            s.groups.iter().map(|g| (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens)).collect::<Vec<_>>()
        };
        // The resolved file holds the numbers, and reads back to them.
        assert_eq!(of(&Scenario::from_toml(&s.resolved_toml(), "t").unwrap()), of(&s));
        of(&s)
    };
    assert_eq!(limits("vllm", false, ""), [(1024, 8192), (256, 2048)]);
    assert_eq!(limits("vllm", true, ""), [(1024, 8192), (256, 2048)]);
    assert_eq!(limits("vllm", true, "[scheduler]\nmax_num_seqs = 64\n"), [(64, 8192), (64, 2048)]);
    let own = groups.replace("gpu = \"l4\"\n", "gpu = \"l4\"\nscheduler = { max_num_batched_tokens = 4096 }\n");
    let src = format!("engine = \"vllm\"\n{BASE}{own}");
    let s = Scenario::from_toml(&src, "t").unwrap();
    assert_eq!((s.groups[1].scheduler.max_num_seqs, s.groups[1].scheduler.max_num_batched_tokens), (256, 4096));
    assert_eq!(limits("sglang", false, "").iter().map(|l| l.1).collect::<Vec<_>>(), [8192, 2048]);
    // Without an engine, servesim's own defaults everywhere.
    let plain = Scenario::from_toml(&format!("{BASE}{groups}"), "t").unwrap();
    assert!(plain.groups.iter().all(|g| (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens) == (256, 8192)));
}

/// The resolved file of a cluster of groups says that the groups' tables run, and each group
/// holds every key of the top-level [gpu] (but a fact of another GPU), [scheduler], [memory]
/// and [cost]: the top-level tables describe no instance, as the note says.
#[test]
fn a_resolved_cluster_of_groups_holds_every_key_in_each_group() {
    fn leaves(v: &toml::Value, at: &str, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => t.iter().for_each(|(k, v)| leaves(v, &format!("{at}.{k}"), out)),
            _ => out.push(at.to_string()),
        }
    }
    let groups = "[[cluster.groups]]\ngpu = \"h100-sxm\"\ncount = 1\n[[cluster.groups]]\ngpu = \"l4\"\ncount = 1\n\
                  scheduler = { max_num_seqs = 8 }\n";
    for engine in ["engine = \"vllm\"\n", "engine = \"sglang\"\n", ""] {
        let s = Scenario::from_toml(&format!("{engine}{BASE}{groups}"), "t").unwrap();
        let text = s.resolved_toml();
        assert!(text.starts_with(GROUPS_NOTE), "{text}");
        let doc: toml::Value = toml::from_str(&text).unwrap();
        for g in doc["cluster"]["groups"].as_array().unwrap() {
            for table in ["gpu", "scheduler", "memory", "cost"] {
                let (mut top, mut own) = (Vec::new(), Vec::new());
                leaves(&doc[table], "", &mut top);
                leaves(&g[table], "", &mut own);
                // What CUDA reports of the memory is the GPU's own fact, known for the H100 and
                // not the L4: the L4 group has none rather than the H100's.
                let missing: Vec<_> = top.iter().filter(|k| !own.contains(k) && *k != ".visible_gib").collect();
                assert!(missing.is_empty(), "{engine}: a group lacks [{table}] {missing:?}");
            }
        }
    }
    // A cluster without groups has no such note.
    assert!(!Scenario::from_toml(BASE, "t").unwrap().resolved_toml().starts_with('#'));
}

#[test]
fn engine_version_sets_vllms_limits_and_asynchronous_scheduling() {
    let resolve = |version: &str, extra: &str| {
        let src =
            format!("engine = \"vllm\"\nengine_version = \"{version}\"\n{}{extra}", BASE.replace("h100-sxm", "b200"));
        let s = Scenario::from_toml(&src, "t").unwrap();
        let g = &s.groups[0];
        (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens, g.scheduler.cpu.overlap, s.resolved_toml())
    };
    let (seqs, tokens, overlap, resolved) = resolve("0.8.4", "");
    assert_eq!((seqs, tokens, overlap), (256, 2048, Some(false)));
    assert!(resolved.contains("engine_version = \"0.8.4\""), "{resolved}");
    let (seqs, tokens, overlap, _) = resolve("0.14.0", "");
    assert_eq!((seqs, tokens, overlap), (1024, 8192, Some(true)));
    // With pipeline stages vLLM 0.14 leaves it off; 0.16.0 does not.
    assert_eq!(resolve("0.14.0", "[cluster]\npp = 2\n").2, Some(false));
    assert_eq!(resolve("0.16.0", "[cluster]\npp = 2\n").2, Some(true));
    // The file's own overlap wins.
    assert_eq!(resolve("0.14.0", "[scheduler.cpu]\noverlap = false\n").2, Some(false));
    // Without a version the overlap is the cost overhead's (unset here).
    let s = Scenario::from_toml(&format!("engine = \"vllm\"\n{BASE}"), "t").unwrap();
    assert_eq!(s.groups[0].scheduler.cpu.overlap, None);
    // Refused: a version that is not one, a version without an engine.
    let e = err(&format!("engine = \"vllm\"\nengine_version = \"latest\"\n{BASE}"));
    assert_eq!(e, "engine_version: must be a release such as \"0.15.1\", got \"latest\"");
    let e = err(&format!("engine_version = \"0.15.1\"\n{BASE}"));
    assert!(e.starts_with("engine_version: needs an engine"), "{e}");
}

/// A GPU without a preset for a known reason (AWS's A10G: no datasheet) is refused with the
/// reason and what to give instead; the A10 is a preset (`spec::gpu`).
#[test]
fn the_a10g_is_refused_with_why_and_the_a10_runs() {
    let toml = |gpu: &str| {
        format!(
            "[model]\npreset = \"llama-3-8b\"\n[gpu]\npreset = \"{gpu}\"\n[workload]\nrequests = 1\n\
             arrival = {{ kind = \"poisson\", rate = 1 }}\nprompt_tokens = {{ kind = \"fixed\", value = 10 }}\n\
             output_tokens = {{ kind = \"fixed\", value = 2 }}\n"
        )
    };
    let e = err(&toml("a10g"));
    assert!(e.contains("gpu.preset") && e.contains("no NVIDIA datasheet") && e.contains("bf16_tflops"), "{e}");
    let s = Scenario::from_toml(&toml("a10"), "t").unwrap();
    assert_eq!((s.groups[0].gpu.hbm_bytes_per_s, s.groups[0].gpu.fp8_flops), (600e9, None));
}

/// Llama-3.1-70B over two H100s under vLLM's memory rule: the pool holds a few thousand tokens,
/// far from the model's 131,072.
const VLLM_70B: &str = r#"
engine = "vllm"
[model]
preset = "llama-3.1-70b"
[gpu]
preset = "h100-sxm"
[cluster]
tp = 2
[memory]
engine = "vllm"
[workload]
requests = 4
arrival = { kind = "poisson", rate = 2 }
prompt_tokens = { kind = "fixed", value = 100 }
output_tokens = { kind = "fixed", value = 10 }
"#;

#[test]
fn vllm_refuses_a_max_model_len_its_kv_cache_cannot_hold_and_auto_fits_it() {
    let fitted = Scenario::from_toml(&format!("{VLLM_70B}[scheduler]\nmax_model_len = \"auto\"\n"), "t").unwrap();
    let g = &fitted.groups[0];
    // One block is 16 tokens × 80 layers × K and V × 4 KV heads per GPU × 128 × 2 bytes; vLLM
    // holds one block back (its null block), so the longest request is the other blocks' tokens.
    assert_eq!(g.memory.block_bytes, 16 * 80 * 2 * 4 * 128 * 2);
    let blocks = g.memory.kv_blocks;
    assert!((100..1000).contains(&blocks), "{blocks}");
    assert_eq!(g.max_model_len, (blocks - 1) * 16);
    // The resolved file keeps the fitted length, and reads back to the same.
    assert!(fitted.resolved_toml().contains(&format!("max_model_len = {}", (blocks - 1) * 16)));
    assert_eq!(Scenario::from_toml(&fitted.resolved_toml(), "t").unwrap().groups[0].max_model_len, g.max_model_len);
    // Without it, the model's context: 131,072 × 80 × 2 × 4 × 128 × 2 bytes = 20 GiB exactly.
    let e = err(VLLM_70B);
    let want = format!(
        "scheduler.max_model_len: vLLM does not start with max_model_len 131072: \"To serve at least one request with the \
         model's max seq len (131072), (20.00 GiB KV cache is needed, which is larger than the available KV cache \
         memory ({:.2} GiB)\" (vllm/v1/core/kv_cache_planning.py); the longest that fits is {}",
        g.memory.kv_bytes as f64 / crate::memory::GIB,
        (blocks - 1) * 16
    );
    assert!(e.starts_with(&want), "{e}\n{want}");
    // At the longest that fits it starts; one token more, it does not.
    let at = |n: u64| Scenario::from_toml(&format!("{VLLM_70B}[scheduler]\nmax_model_len = {n}\n"), "t");
    assert!(at((blocks - 1) * 16).is_ok());
    assert!(at((blocks - 1) * 16 + 1).unwrap_err().to_string().contains("vLLM does not start"));
    // With one block (at this fraction), vLLM's null block leaves none: even "auto" cannot start.
    let one = format!("{VLLM_70B}[scheduler]\nmax_model_len = \"auto\"\n")
        .replace("engine = \"vllm\"\n[workload]", "engine = \"vllm\"\ngpu_memory_utilization = 0.89382\n[workload]");
    let e = err(&one);
    assert!(
        e.starts_with("scheduler.max_model_len: vLLM does not start: its KV cache (0.00 GiB per GPU) holds no request"),
        "{e}"
    );
    // SGLang and servesim's own rule start with any length, and a pinned block count is not checked.
    let sglang = "engine = \"sglang\"\nmem_fraction_static = 0.88\n[workload]";
    assert!(Scenario::from_toml(&VLLM_70B.replace("engine = \"vllm\"\n[workload]", sglang), "t").is_ok());
    assert!(Scenario::from_toml(
        &VLLM_70B.replace("[memory]\nengine = \"vllm\"", "[memory]\nengine = \"servesim\""),
        "t"
    )
    .is_ok());
    assert!(Scenario::from_toml(
        &VLLM_70B.replace("engine = \"vllm\"\n[workload]", "kv_blocks = 300\n[workload]"),
        "t"
    )
    .is_ok());
}

#[test]
fn an_auto_max_model_len_fits_each_groups_own_pool() {
    let src = VLLM_70B.replace("[gpu]\npreset = \"h100-sxm\"\n[cluster]\ntp = 2\n", "")
        + "[scheduler]\nmax_model_len = \"auto\"\n[cluster]\n\
           [[cluster.groups]]\nname = \"small\"\ncount = 1\ntp = 2\ngpu = \"h100-sxm\"\n\
           [[cluster.groups]]\nname = \"large\"\ncount = 1\ntp = 2\ngpu = \"h200\"\n\
           [[cluster.groups]]\nname = \"own\"\ncount = 1\ntp = 2\ngpu = \"h100-sxm\"\nscheduler = { max_model_len = 2048 }\n";
    let s = Scenario::from_toml(&src, "t").unwrap();
    let len: Vec<u64> = s.groups.iter().map(|g| g.max_model_len).collect();
    // Two H100s hold a few thousand tokens; two H200s hold the whole context; a group's own
    // length is its own.
    assert_eq!(len[0], (s.groups[0].memory.kv_blocks - 1) * 16);
    assert!(s.groups[1].memory.kv_blocks * 16 > 131_072);
    assert_eq!(len[1..], [131_072, 2048]);
}

#[test]
fn a_max_model_len_that_is_not_a_length_is_named() {
    let e = err(&format!("{BASE}[scheduler]\nmax_model_len = -1\n"));
    assert!(e.contains("scheduler.max_model_len: -1: expected a whole number of tokens or \"auto\""), "{e}");
    let e = err(&format!("{BASE}[scheduler]\nmax_model_len = \"max\"\n"));
    assert!(e.contains("scheduler.max_model_len: \"max\": expected a whole number of tokens or \"auto\""), "{e}");
    let e = err(&format!("{BASE}[scheduler]\nmax_model_len = 1.5\n"));
    assert!(e.contains("scheduler.max_model_len") && e.contains("a whole number of tokens or \"auto\""), "{e}");
    // "auto" under servesim's own memory rule is the model's context.
    let s = Scenario::from_toml(&format!("{BASE}[scheduler]\nmax_model_len = \"auto\"\n"), "t").unwrap();
    assert_eq!(s.groups[0].max_model_len, 8192);
}

/// SGLang's --max-total-tokens caps each scheduler's pool (`_apply_token_constraints`,
/// model_runner_kv_cache_mixin.py at 0.5.15): the smaller of it and the rule's pool, and the
/// running requests SGLang sizes from that pool follow it.
#[test]
fn sglangs_max_total_tokens_caps_the_pool() {
    let src = |extra: &str| {
        format!(
            "engine = \"sglang\"\n[model]\npreset = \"llama-3.1-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[memory]\n\
             engine = \"sglang\"\n{extra}[workload]\nrequests = 4\narrival = {{ kind = \"poisson\", rate = 2 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}\n"
        )
    };
    let free = Scenario::from_toml(&src(""), "t").unwrap();
    let free_blocks = free.groups[0].memory.kv_blocks;
    assert!(free_blocks * 16 > 100_000, "{free_blocks}");
    let capped = Scenario::from_toml(&src("max_total_tokens = 100000\n"), "t").unwrap();
    let g = &capped.groups[0];
    // 100,000 tokens are 6,250 blocks of 16.
    assert_eq!(g.memory.kv_blocks, 6250);
    assert_eq!(g.memory.kv_bytes, 6250 * g.memory.block_bytes);
    // SGLang's running requests from that pool: min(⌊100,000 / 131,072 × 512⌋ held in [2048,
    // 4096], 100,000 / 2) = 2048.
    assert_eq!(g.scheduler.max_num_seqs, 2048);
    // A cap above the pool changes nothing (SGLang warns and keeps its own).
    let above = Scenario::from_toml(&src("max_total_tokens = 100000000\n"), "t").unwrap();
    assert_eq!(above.groups[0].memory.kv_blocks, free_blocks);
    // Only SGLang's rule has it.
    let e = err(
        &src("max_total_tokens = 100000\n").replace("[memory]\nengine = \"sglang\"", "[memory]\nengine = \"vllm\"")
    );
    assert!(e.starts_with("memory.max_total_tokens: only with engine = \"sglang\""), "{e}");
    let e = err(&src("max_total_tokens = 0\n"));
    assert!(e.starts_with("memory.max_total_tokens: must be in [1, 2^40], got 0"), "{e}");
}

/// vLLM's --kv-cache-memory-bytes: each GPU's KV cache is that, whatever gpu_memory_utilization
/// (Worker.determine_available_memory, vllm/v1/worker/gpu_worker.py at 0.34.0).
#[test]
fn vllms_kv_cache_memory_bytes_is_the_kv_cache() {
    let src = |memory: &str| {
        format!(
            "engine = \"vllm\"\n[model]\npreset = \"llama-3.1-8b\"\n[gpu]\npreset = \"h100-sxm\"\n[memory]\n{memory}\n\
             [workload]\nrequests = 4\narrival = {{ kind = \"poisson\", rate = 2 }}\n\
             prompt_tokens = {{ kind = \"fixed\", value = 100 }}\noutput_tokens = {{ kind = \"fixed\", value = 10 }}\n"
        )
    };
    // 20 GiB of blocks of 16 tokens × 131,072 bytes: 10,240, at any fraction.
    for fraction in ["0.9", "0.3"] {
        let s =
            Scenario::from_toml(&src(&format!("kv_cache_gib = 20\ngpu_memory_utilization = {fraction}")), "t").unwrap();
        assert_eq!((s.groups[0].memory.kv_blocks, s.groups[0].memory.kv_bytes), (10_240, 20 << 30), "{fraction}");
    }
    // 10 GiB hold 81,920 tokens, fewer than the model's 131,072: vLLM's start-up check refuses it.
    assert!(err(&src("kv_cache_gib = 10")).contains("vLLM does not start with max_model_len 131072"));
    // More than the GPU holds beside the weights and the reserve.
    let e = err(&src("kv_cache_gib = 70"));
    assert!(
        e.starts_with("memory: llama-3.1-8b does not fit on h100-sxm at tp 1")
            && e.contains("kv_cache_memory_bytes 70.00 GiB"),
        "{e}"
    );
    let e = err(&src("kv_cache_gib = 20").replace("[memory]\n", "[memory]\nengine = \"sglang\"\n"));
    assert!(e.starts_with("memory.kv_cache_gib: only with engine = \"vllm\""), "{e}");
    assert!(err(&src("kv_cache_gib = -1")).starts_with("memory.kv_cache_gib: must be in (0, 1e4] GiB"));
}
