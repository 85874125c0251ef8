//! The engines' launch flags ↔ scenario keys, in one table read both ways: `scenario
//! from-vllm` / `from-sglang` parse a launch command with it, and `plan` / `tune` write the
//! recommended configuration's launch command and Kubernetes manifest ([`Deployment`]) with it.
//!
//! ```text
//!   vllm serve MODEL --max-num-seqs 128 ──flag()──► key "max_num_seqs" ──► [scheduler] max_num_seqs
//!   [scheduler] max_num_seqs = 128 ──spelling()──► --max-num-seqs 128 ──► launch command, manifest
//! ```
//! Flag names: vLLM `vllm/engine/arg_utils.py` (`EngineArgs`, v0.11), SGLang
//! `python/sglang/srt/server_args.py` (`ServerArgs`, v0.5), TensorRT-LLM
//! `tensorrt_llm/commands/serve.py` (`trtllm-serve`'s click options).

use serde::{Deserialize, Serialize};

use super::ServingEngine;
use crate::instance::InstanceGroup;
use crate::spec::{Dtype, ModelPreset, ModelSpec};

/// What a flag is to servesim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagKind {
    /// Takes a value, stored under the flag's key.
    Value,
    /// A switch, stored as "true" (or "false" for a `--no-` / `--disable-` form).
    Switch(bool),
    /// Changes nothing servesim models; takes a value (`true`) or not.
    Ignored(bool),
    /// Takes one or more values (argparse's `nargs="+"`), stored as the words joined by spaces.
    List,
}

/// One flag of one or more engines: its spellings (the first is the one servesim writes), the
/// key servesim stores it under, and its kind.
#[derive(Debug)]
pub struct LaunchFlag {
    pub engines: &'static [ServingEngine],
    pub names: &'static [&'static str],
    pub key: &'static str,
    pub kind: FlagKind,
}

const V: &[ServingEngine] = &[ServingEngine::Vllm];
const S: &[ServingEngine] = &[ServingEngine::Sglang];
const T: &[ServingEngine] = &[ServingEngine::Trtllm];
const VS: &[ServingEngine] = &[ServingEngine::Vllm, ServingEngine::Sglang];

const fn value(engines: &'static [ServingEngine], names: &'static [&'static str], key: &'static str) -> LaunchFlag {
    LaunchFlag { engines, names, key, kind: FlagKind::Value }
}
const fn switch(
    engines: &'static [ServingEngine],
    name: &'static [&'static str],
    key: &'static str,
    on: bool,
) -> LaunchFlag {
    LaunchFlag { engines, names: name, key, kind: FlagKind::Switch(on) }
}
const fn list(engines: &'static [ServingEngine], names: &'static [&'static str], key: &'static str) -> LaunchFlag {
    LaunchFlag { engines, names, key, kind: FlagKind::List }
}
const fn ignored(engines: &'static [ServingEngine], names: &'static [&'static str], takes_value: bool) -> LaunchFlag {
    LaunchFlag { engines, names, key: "", kind: FlagKind::Ignored(takes_value) }
}

/// Every flag servesim reads or writes.
pub const FLAGS: &[LaunchFlag] = &[
    value(V, &["--model"], "model"),
    value(V, &["--tensor-parallel-size", "-tp"], "tp"),
    value(V, &["--pipeline-parallel-size", "-pp"], "pp"),
    value(V, &["--data-parallel-size", "-dp"], "dp"),
    switch(V, &["--enable-expert-parallel"], "ep", true),
    switch(V, &["--no-enable-expert-parallel"], "ep", false),
    value(V, &["--max-num-seqs"], "max_num_seqs"),
    value(V, &["--max-num-batched-tokens"], "max_num_batched_tokens"),
    value(V, &["--gpu-memory-utilization"], "gpu_memory_utilization"),
    value(V, &["--kv-cache-memory-bytes"], "kv_cache_memory_bytes"),
    value(V, &["--num-gpu-blocks-override"], "kv_blocks"),
    switch(V, &["--disable-hybrid-kv-cache-manager"], "hybrid_off", true),
    switch(V, &["--disable-sliding-window"], "no_window", true),
    switch(V, &["--no-disable-hybrid-kv-cache-manager"], "hybrid_off", false),
    switch(V, &["--enable-chunked-prefill"], "chunked", true),
    switch(V, &["--no-enable-chunked-prefill"], "chunked", false),
    switch(V, &["--enable-prefix-caching"], "prefix", true),
    switch(V, &["--no-enable-prefix-caching"], "prefix", false),
    value(VS, &["--kv-cache-dtype"], "kv_dtype"),
    value(V, &["--block-size"], "block_size"),
    value(V, &["--max-model-len"], "max_model_len"),
    value(V, &["--quantization", "-q"], "quantization"),
    value(S, &["--quantization"], "quantization"),
    switch(V, &["--async-scheduling"], "async", true),
    switch(V, &["--no-async-scheduling"], "async", false),
    value(VS, &["--dtype"], "dtype"),
    value(V, &["--long-prefill-token-threshold"], "long_prefill"),
    value(V, &["--performance-mode"], "performance_mode"),
    value(V, &["--watermark"], "watermark"),
    value(V, &["--max-num-active-seqs"], "max_num_active_seqs"),
    value(V, &["--scheduling-policy"], "scheduling_policy"),
    value(V, &["--prefill-schedule-interval"], "prefill_interval"),
    switch(V, &["--long-prefill-token-threshold-adaptive"], "long_prefill_adaptive", true),
    switch(V, &["--no-long-prefill-token-threshold-adaptive"], "long_prefill_adaptive", false),
    value(V, &["--kv-offloading-size"], "kv_offloading_size"),
    value(V, &["--kv-offloading-backend"], "kv_offloading_backend"),
    switch(V, &["--scheduler-reserve-full-isl"], "reserve_full_isl", true),
    switch(V, &["--no-scheduler-reserve-full-isl"], "reserve_full_isl", false),
    value(V, &["--all2all-backend"], "all2all_backend"),
    value(V, &["--speculative-config", "-sc"], "speculative"),
    value(V, &["--spec-method"], "spec_method"),
    value(V, &["--spec-model"], "spec_model"),
    value(V, &["--spec-tokens"], "spec_tokens"),
    ignored(
        V,
        &[
            "--host",
            "--port",
            "--served-model-name",
            "--api-key",
            "--tokenizer",
            "--download-dir",
            "--seed",
            "--uvicorn-log-level",
            "--chat-template",
            "--revision",
        ],
        true,
    ),
    ignored(V, &["--trust-remote-code", "--disable-log-requests", "--disable-log-stats"], false),
    value(S, &["--model-path", "--model"], "model"),
    value(S, &["--tp", "--tp-size", "--tensor-parallel-size"], "tp"),
    value(S, &["--pp-size", "--pp"], "pp"),
    value(S, &["--dp", "--dp-size", "--data-parallel-size"], "dp"),
    switch(S, &["--enable-dp-attention"], "dp_attention", true),
    value(S, &["--ep-size", "--ep", "--expert-parallel-size"], "ep_size"),
    value(S, &["--max-running-requests"], "max_num_seqs"),
    value(S, &["--chunked-prefill-size"], "max_num_batched_tokens"),
    value(S, &["--mem-fraction-static"], "mem_fraction_static"),
    value(S, &["--max-total-tokens"], "max_total_tokens"),
    value(S, &["--swa-full-tokens-ratio"], "swa_full_tokens_ratio"),
    switch(S, &["--disable-hybrid-swa-memory"], "hybrid_off", true),
    value(S, &["--cuda-graph-max-bs"], "cuda_graph_max_bs"),
    list(S, &["--cuda-graph-bs"], "cuda_graph_bs"),
    value(S, &["--max-prefill-tokens"], "max_prefill_tokens"),
    value(S, &["--schedule-conservativeness"], "conservativeness"),
    switch(S, &["--enable-priority-scheduling"], "sglang_priority", true),
    switch(S, &["--schedule-low-priority-values-first"], "sglang_low_first", true),
    switch(S, &["--disable-priority-preemption"], "sglang_no_preemption", true),
    value(S, &["--priority-scheduling-preemption-threshold"], "sglang_preemption_threshold"),
    switch(S, &["--enable-mixed-chunk"], "mixed_chunk", true),
    value(S, &["--scheduler-recv-interval"], "recv_interval"),
    switch(S, &["--disable-radix-cache"], "prefix", false),
    value(S, &["--page-size"], "block_size"),
    value(S, &["--context-length"], "max_model_len"),
    value(S, &["--speculative-algorithm"], "speculative"),
    value(S, &["--speculative-num-steps"], "spec_steps"),
    value(S, &["--speculative-eagle-topk"], "spec_topk"),
    value(S, &["--speculative-num-draft-tokens"], "spec_draft_tokens"),
    value(S, &["--speculative-draft-model-path", "--speculative-draft-model"], "spec_draft"),
    ignored(
        S,
        &[
            "--host",
            "--port",
            "--served-model-name",
            "--api-key",
            "--tokenizer-path",
            "--random-seed",
            "--log-level",
            "--chat-template",
            "--revision",
        ],
        true,
    ),
    ignored(S, &["--trust-remote-code", "--enable-metrics"], false),
    // CUDA graphs off: not priced, and said so (`scenario from-vllm` / `from-sglang`).
    switch(V, &["--enforce-eager"], "eager", true),
    switch(V, &["--no-enforce-eager"], "eager", false),
    switch(S, &["--disable-cuda-graph"], "eager", true),
    value(T, &["--tp_size"], "tp"),
    value(T, &["--pp_size"], "pp"),
    value(T, &["--max_batch_size"], "max_num_seqs"),
    value(T, &["--max_num_tokens"], "max_num_batched_tokens"),
];

/// The flag `name` is to `engine`, if servesim knows it.
pub fn flag(engine: ServingEngine, name: &str) -> Option<&'static LaunchFlag> {
    FLAGS.iter().find(|f| f.engines.contains(&engine) && f.names.contains(&name))
}

/// How `engine` spells the flag that sets `key` (a value flag; with `on`, the switch that sets
/// it so). `None`: the engine has no such flag.
pub fn spelling(engine: ServingEngine, key: &str, on: Option<bool>) -> Option<&'static str> {
    FLAGS
        .iter()
        .find(|f| {
            f.engines.contains(&engine)
                && f.key == key
                && match on {
                    None => f.kind == FlagKind::Value,
                    Some(on) => f.kind == FlagKind::Switch(on),
                }
        })
        .map(|f| f.names[0])
}

/// One server's launch command: the program and its arguments, each a separate word.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchCommand {
    /// The program (`vllm serve`, `python3 -m sglang.launch_server`, `trtllm-serve`).
    pub program: Vec<String>,
    /// Its arguments, the model's checkpoint first.
    pub args: Vec<String>,
    /// What the command cannot say (a format that needs its own checkpoint, a setting the engine
    /// takes from a file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What a command must add for the speculative decoding simulated, `k` tokens proposed a step:
/// the scenario does not record the draft's method or checkpoint, so no flag is written.
fn speculative_note(engine: ServingEngine, k: u32) -> String {
    let how = match engine {
        ServingEngine::Vllm => format!("--speculative-config '{{\"method\": \"mtp\" (or eagle3, draft_model, ...), \"num_speculative_tokens\": {k}}}'"),
        ServingEngine::Sglang => format!(
            "--speculative-algorithm NEXTN (or EAGLE3, STANDALONE, ...) --speculative-num-steps {k} \
             --speculative-eagle-topk 1 --speculative-num-draft-tokens {}",
            k + 1
        ),
        ServingEngine::Trtllm => format!("speculative_config (decoding_type MTP or Eagle, max_draft_len {k}) in the --extra_llm_api_options file"),
    };
    format!("speculative decoding, {k} tokens proposed a step: add the draft you simulated, {how}; the scenario does not record its method or checkpoint")
}

/// The flags of a group's DP attention ranks and expert parallelism, as each engine spells
/// them (vLLM: `--data-parallel-size` on a MoE model is DP attention, docs/serving/
/// data_parallel_deployment.md; SGLang: `--dp` with `--enable-dp-attention`, `--ep-size`).
fn dp_flags(engine: ServingEngine, g: &InstanceGroup, args: &mut Vec<String>, notes: &mut Vec<String>) {
    let dp = g.layout.dp_attention;
    let words: Vec<String> = match engine {
        ServingEngine::Vllm => {
            let mut w = Vec::new();
            if dp > 1 {
                w.extend(["--data-parallel-size".to_string(), dp.to_string()]);
            }
            if g.layout.ep {
                w.push("--enable-expert-parallel".into());
            }
            w
        }
        ServingEngine::Sglang => {
            let mut w = Vec::new();
            if dp > 1 {
                w.extend(["--dp".to_string(), dp.to_string(), "--enable-dp-attention".into()]);
            }
            if g.layout.ep {
                w.extend(["--ep-size".to_string(), g.tp.to_string()]);
            }
            w
        }
        ServingEngine::Trtllm => {
            if dp > 1 || g.layout.ep {
                notes.push(format!(
                    "{}: set enable_attention_dp and moe_expert_parallel_size in the --extra_llm_api_options file",
                    if dp > 1 { format!("DP attention over {dp} ranks") } else { "expert parallelism".into() }
                ));
            }
            Vec::new()
        }
    };
    args.extend(words);
}

/// SGLang's `--scheduler-recv-interval` where the group receives every few iterations (a note
/// for the engines without it); and vLLM's admission flags ([`admission_flags`]).
fn scheduler_flags(engine: ServingEngine, g: &InstanceGroup, args: &mut Vec<String>, notes: &mut Vec<String>) {
    admission_flags(engine, g, args);
    let recv = g.scheduler.recv_interval;
    if recv <= 1 {
        return;
    }
    match spelling(engine, "recv_interval", None) {
        Some(flag) => args.extend([flag.to_string(), recv.to_string()]),
        None => notes.push(format!(
            "simulated with SGLang's --scheduler-recv-interval {recv}, which {} does not have",
            engine.name()
        )),
    }
}

impl LaunchCommand {
    /// The command that runs `g` of a scenario of `model` under `engine`, with every limit
    /// servesim simulated written out (so the engine runs what was simulated, whatever its
    /// version's defaults): TP and PP, `max_num_seqs`, `max_num_batched_tokens`, prefix caching,
    /// and the weight and KV formats where they are not the checkpoint's own.
    pub fn of(engine: ServingEngine, g: &InstanceGroup, model: &ModelSpec) -> LaunchCommand {
        let preset = ModelPreset::find(&model.name);
        let checkpoint = preset.and_then(|p| p.checkpoint()).unwrap_or(&model.name).to_string();
        let (program, mut args): (&[&str], Vec<String>) = match engine {
            ServingEngine::Vllm => (&["vllm", "serve"], vec![checkpoint]),
            ServingEngine::Sglang => {
                (&["python3", "-m", "sglang.launch_server"], vec!["--model-path".into(), checkpoint])
            }
            ServingEngine::Trtllm => (&["trtllm-serve"], vec![checkpoint]),
        };
        let mut notes = vec![];
        let mut put = |key: &str, v: String| {
            if let Some(f) = spelling(engine, key, None) {
                args.extend([f.to_string(), v]);
            }
        };
        // DP attention: vLLM runs --data-parallel-size engine cores of --tensor-parallel-size
        // GPUs each; SGLang splits its --tp GPUs into --dp attention ranks and reads its limits
        // as the whole server's, each rank taking its share ([`dp_flags`]).
        let dp = g.layout.dp_attention.max(1);
        let (tp, limits) = match engine {
            ServingEngine::Vllm => (g.tp / dp, 1),
            ServingEngine::Sglang => (g.tp, dp),
            ServingEngine::Trtllm => (g.tp, 1),
        };
        put("tp", tp.to_string());
        if g.layout.pp > 1 {
            put("pp", g.layout.pp.to_string());
        }
        put("max_num_seqs", (g.scheduler.max_num_seqs as u64 * limits).to_string());
        put("max_num_batched_tokens", (g.scheduler.max_num_batched_tokens as u64 * limits).to_string());
        let published = preset.map_or(Dtype::Bf16, |p| p.checkpoint_dtype());
        match model.weight_dtype {
            d if d == published => {}
            Dtype::Fp8 if engine != ServingEngine::Trtllm => put("quantization", "fp8".into()),
            d => notes.push(format!(
                "weights in {}: serve a {} checkpoint of the model (the engine does not quantize to it when loading)",
                d.name(),
                d.name()
            )),
        }
        let kv = g.scheduler.kv_cache.model(model).kv_dtype;
        if kv != Dtype::Bf16 {
            match engine {
                ServingEngine::Vllm => put("kv_dtype", kv.name().into()),
                ServingEngine::Sglang => {
                    put("kv_dtype", if kv == Dtype::Fp8 { "fp8_e4m3".into() } else { kv.name().into() })
                }
                ServingEngine::Trtllm => notes.push(format!(
                    "KV cache in {}: set kv_cache_config.dtype in the --extra_llm_api_options file",
                    kv.name()
                )),
            }
        }
        dp_flags(engine, g, &mut args, &mut notes);
        scheduler_flags(engine, g, &mut args, &mut notes);
        if let Some(sp) = &g.scheduler.speculative {
            notes.push(speculative_note(engine, sp.k));
        }
        let prefix = g.scheduler.prefix_cache.enabled;
        match spelling(engine, "prefix", Some(prefix)) {
            Some(f) => args.push(f.to_string()),
            None if engine == ServingEngine::Trtllm => notes.push(format!(
                "prefix caching {}: set kv_cache_config.enable_block_reuse in the --extra_llm_api_options file",
                if prefix { "on" } else { "off" }
            )),
            None => {} // SGLang's radix cache is on unless disabled.
        }
        LaunchCommand { program: program.iter().map(|s| s.to_string()).collect(), args, notes }
    }

    /// Adds `words` at the end (a pool's disaggregation flags, a port).
    pub fn with(mut self, words: &[&str]) -> LaunchCommand {
        self.args.extend(words.iter().map(|s| s.to_string()));
        self
    }

    /// The command as one shell line, words quoted where the shell would split or expand them.
    pub fn line(&self) -> String {
        self.program.iter().chain(&self.args).map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
    }
}

/// vLLM's `--max-num-active-seqs` and `--scheduling-policy priority`, where the group's
/// scheduler has an admission limit or a queue ranked by priority; SGLang's
/// `--enable-priority-scheduling` with its preemption's threshold, or without it
/// (`--disable-priority-preemption`).
fn admission_flags(engine: ServingEngine, g: &InstanceGroup, args: &mut Vec<String>) {
    let by_priority = g.scheduler.queue.priority().is_some();
    match engine {
        ServingEngine::Vllm => {
            if let Some(n) = g.scheduler.batching.active_seqs() {
                args.extend(["--max-num-active-seqs".to_string(), n.to_string()]);
            }
            if by_priority {
                args.extend(["--scheduling-policy".into(), "priority".into()]);
            }
        }
        ServingEngine::Sglang if by_priority => {
            args.push("--enable-priority-scheduling".into());
            match g.scheduler.batching.priority_preemption() {
                Some(t) => args.extend(["--priority-scheduling-preemption-threshold".into(), t.to_string()]),
                None => args.push("--disable-priority-preemption".into()),
            }
        }
        _ => {}
    }
}

/// `w` as one shell word: as is when it holds only safe characters, else single-quoted.
fn shell_word(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
