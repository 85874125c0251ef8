//! `servesim scenario from-vllm -- <vllm serve args>` and `from-sglang -- <launch_server args>`:
//! an editable scenario from a real launch command.
//!
//! ```text
//!   vllm serve MODEL --tensor-parallel-size 4 --max-num-seqs 128 ...
//!        │ flags servesim understands → [model] [cluster] [scheduler] [memory] [cost]
//!        │ flags that change nothing it models (--port, --host, ...) → dropped
//!        └ anything else → named in one warning line on stderr
//! ```
//! The workload and SLO are placeholders to edit: a launch command does not say what traffic
//! the server sees. Flag names and defaults: vLLM `vllm/engine/arg_utils.py` (`EngineArgs`,
//! v0.11), SGLang `python/sglang/srt/server_args.py` (`ServerArgs`, v0.5).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use servesim_sim::scenario::{
    vllm_limits, vllm_settled_limits, EngineLimits, EngineVersion, ServingEngine, VLLM_LIMIT_RULES, VLLM_NEWEST_READ,
};
use servesim_sim::spec::{Dtype, GpuPreset, ModelPreset};

use crate::error::{CliError, Result};

mod speculative;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// A scenario from a `vllm serve` command line (everything after `--`).
    FromVllm(FromArgs),
    /// A scenario from a `python -m sglang.launch_server` command line (everything after `--`).
    FromSglang(FromArgs),
}

#[derive(clap::Args)]
pub(crate) struct FromArgs {
    /// The GPU the server runs on (a launch command does not say): a preset's name, or a TOML
    /// file with the keys of a scenario's [gpu] section for a GPU without a preset.
    #[arg(long)]
    gpu: String,
    /// Write the scenario here (refused if the file exists); default: stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The engine's version (`0.13.1`), for the defaults that changed with it: vLLM schedules
    /// asynchronously by default from 0.14 (and ran its V0 engine before 0.8, which servesim
    /// does not model: said on stderr). Default: a current release.
    #[arg(long)]
    engine_version: Option<String>,
    /// The model's Hugging Face `config.json` (or the checkpoint directory holding it), for a
    /// model no preset describes; without it a local checkpoint directory the command names, or
    /// the Hugging Face cache's copy of a Hub model (`HF_HUB_CACHE`, `HF_HOME`/hub,
    /// ~/.cache/huggingface/hub), is read.
    #[arg(long)]
    model_config: Option<PathBuf>,
    /// The drafts' mean acceptance length on your traffic (tokens per step, the bonus token
    /// included: vLLM's "Mean acceptance length", SGLang's "accept len"), for a command that
    /// drafts speculatively. Default: the command's forced one, else an assumption, said.
    #[arg(long, conflicts_with = "acceptance_rates")]
    acceptance_length: Option<f64>,
    /// The drafts' per-position acceptance rates on your traffic, comma-separated (vLLM's
    /// "Per-position acceptance rate: 0.74, 0.48, 0.26"), one per speculative token.
    #[arg(long, value_delimiter = ',')]
    acceptance_rates: Option<Vec<f64>>,
    /// The launch command's arguments (`vllm serve` may be included or left out).
    #[arg(last = true, required = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    Vllm,
    Sglang,
}

impl Engine {
    /// The library's name for the engine, whose rules and flag table it holds.
    fn serving(self) -> ServingEngine {
        match self {
            Engine::Vllm => ServingEngine::Vllm,
            Engine::Sglang => ServingEngine::Sglang,
        }
    }
}

/// What a flag is to servesim.
enum Flag {
    /// Takes a value, stored under this name.
    Value(&'static str),
    /// A switch, stored as "true" (or "false" for a `--no-` form).
    Switch(&'static str, bool),
    /// Changes nothing servesim models; takes a value or not.
    Ignored(bool),
    /// Takes one or more values, stored joined by spaces under this name.
    List(&'static str),
}

/// What `name` is to `engine`: the flag table of the library (`servesim_sim::scenario::launch`),
/// which the launch commands `plan` and `tune` write read too.
fn flag(engine: Engine, name: &str) -> Option<Flag> {
    use servesim_sim::scenario::launch::{self, FlagKind};
    let f = launch::flag(engine.serving(), name)?;
    Some(match f.kind {
        FlagKind::Value => Flag::Value(f.key),
        FlagKind::Switch(on) => Flag::Switch(f.key, on),
        FlagKind::Ignored(takes_value) => Flag::Ignored(takes_value),
        FlagKind::List => Flag::List(f.key),
    })
}

/// How `engine` spells the flag servesim stores under `key`, for errors that name it.
fn spelled(engine: Engine, key: &str) -> &'static str {
    servesim_sim::scenario::launch::spelling(engine.serving(), key, None).unwrap_or("the flag")
}

/// The flags of a command line, and the ones servesim does not understand.
fn parse_flags(engine: Engine, args: &[String]) -> Result<(BTreeMap<&'static str, String>, Vec<String>)> {
    let (words, env) = command_words(engine, args)?;
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let mut got = BTreeMap::new();
    let mut unknown = env_settings(engine, env, &mut got);
    let mut i = 0;
    while i < args.len() {
        let (name, inline) = match args[i].split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v.to_string())),
            _ => (args[i], None),
        };
        i += 1;
        if !name.starts_with('-') {
            // vLLM takes the model as its first positional argument.
            if engine == Engine::Vllm && !got.contains_key("model") {
                got.insert("model", name.to_string());
            } else {
                unknown.push(name.to_string());
            }
            continue;
        }
        let takes_value = |i: usize| args.get(i).is_some_and(|a| !a.starts_with("--"));
        match flag(engine, name) {
            Some(Flag::Value(key)) => {
                let v = match inline {
                    Some(v) => v,
                    None if takes_value(i) => {
                        i += 1;
                        args[i - 1].to_string()
                    }
                    None => return Err(CliError::input(format!("{name}: needs a value"))),
                };
                got.insert(key, v);
            }
            Some(Flag::Switch(key, on)) => {
                refuse_switch_value(engine, name, inline.as_deref())?;
                got.insert(key, on.to_string());
            }
            Some(Flag::List(key)) => {
                got.insert(key, list_values(name, inline, &args, &mut i)?);
            }
            Some(Flag::Ignored(value)) => {
                if !value {
                    refuse_switch_value(engine, name, inline.as_deref())?;
                }
                if value && inline.is_none() && takes_value(i) {
                    i += 1;
                }
            }
            None => {
                // An unknown flag's value (if it has one) goes with it.
                let mut shown = args[i - 1].to_string();
                if inline.is_none() && takes_value(i) {
                    shown = format!("{shown} {}", args[i]);
                    i += 1;
                }
                unknown.push(shown);
            }
        }
    }
    Ok((got, unknown))
}

/// The environment assignments pasted before a command that servesim reads, into `got`; the
/// others, which change nothing it models, returned. SGLang's `SGLANG_SIMULATE_ACC_LEN` forces
/// its drafts' acceptance length (sglang/srt/speculative/spec_utils.py at 0.5.23; off at 0 or
/// below).
fn env_settings(engine: Engine, env: Vec<String>, got: &mut BTreeMap<&'static str, String>) -> Vec<String> {
    let mut unknown = Vec::new();
    for e in env {
        match e.split_once('=') {
            Some(("SGLANG_SIMULATE_ACC_LEN", v)) if engine == Engine::Sglang => {
                if v.parse::<f64>().map_or(true, |x| x > 0.0) {
                    got.insert("simulated_acceptance", v.to_string());
                }
            }
            _ => unknown.push(e),
        }
    }
    unknown
}

/// The words of a command after the program and subcommand (which may be pasted with the
/// flags: `vllm serve`, `python -m vllm.entrypoints.openai.api_server`, `python -m
/// sglang.launch_server`, `sglang serve`), its config file read in ([`with_config_file`]); and
/// the environment assignments pasted before them (`CUDA_VISIBLE_DEVICES=0,1`), which change
/// nothing servesim reads.
fn command_words(engine: Engine, args: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let is_env = |a: &str| {
        a.split_once('=').is_some_and(|(name, _)| {
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let env: Vec<String> = args.iter().take_while(|a| is_env(a)).map(|a| a.to_string()).collect();
    args.drain(..env.len());
    let lead: &[&str] = match engine {
        Engine::Vllm => &["vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server"],
        Engine::Sglang => &["python", "python3", "-m", "sglang.launch_server", "sglang", "serve"],
    };
    while args.first().is_some_and(|a| lead.contains(a)) {
        args.remove(0);
    }
    Ok((with_config_file(engine, &args)?, env))
}

/// The command with its `--config FILE.yaml` read in, as the engine reads it: each key of the
/// file's mapping a flag (`true` the switch; `false` vLLM's `--no-` form where servesim knows
/// it, nothing in SGLang; a list its values; a mapping as JSON; else its text), placed so that
/// the command's own flags win — in vLLM after the model named first (`FlexibleArgumentParser.
/// _pull_args_from_config`, `vllm/utils/argparse_utils.py` at 0.34.0), in SGLang before every
/// flag (`ConfigArgumentMerger`, `sglang/srt/server_args_config_parser.py` at 0.5.15). Errors in
/// the engine's words.
fn with_config_file(engine: Engine, args: &[&str]) -> Result<Vec<String>> {
    // Both engines look for the word `--config` alone: `--config=FILE` is not read (and is named
    // as not understood).
    let at: Vec<usize> = (0..args.len()).filter(|&i| args[i] == "--config").collect();
    let mut out: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let Some(&i) = at.first() else { return Ok(out) };
    if at.len() > 1 {
        return Err(CliError::input(
            "--config: given more than once (the engine stops: \"More than one config file specified!\")",
        ));
    }
    let Some(&file) = args.get(i + 1) else {
        return Err(CliError::input("--config: needs a file (the engine stops: \"No config file specified!\")"));
    };
    let ext = Path::new(file).extension().and_then(|e| e.to_str()).unwrap_or("");
    if !ext.eq_ignore_ascii_case("yaml") && !ext.eq_ignore_ascii_case("yml") {
        return Err(CliError::input(format!("--config {file}: the engine reads only a .yaml or .yml config file")));
    }
    let text = crate::input::read_text(Path::new(file), "--config")?;
    let bad = |why: String| CliError::input(format!("--config {file}: {why}"));
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).map_err(|e| bad(e.to_string()))?;
    let mut flags = Vec::new();
    match docs.into_iter().next() {
        None | Some(yaml_rust2::Yaml::Null) => {}
        Some(yaml_rust2::Yaml::Hash(h)) => {
            for (k, v) in h {
                let key = k.as_str().ok_or_else(|| bad(format!("a key that is not a flag name: {k:?}")))?;
                flags.extend(config_flag(engine, key, &v).map_err(bad)?);
            }
        }
        Some(other) => return Err(bad(format!("not a mapping of flags to values: {other:?}"))),
    }
    out.drain(i..i + 2);
    let at = match engine {
        Engine::Vllm if out.first().is_some_and(|a| !a.starts_with('-')) => 1,
        _ => 0,
    };
    out.splice(at..at, flags);
    Ok(out)
}

/// One key of a config file as the engine's flags ([`with_config_file`]).
fn config_flag(engine: Engine, key: &str, v: &yaml_rust2::Yaml) -> std::result::Result<Vec<String>, String> {
    use yaml_rust2::Yaml;
    let name = format!("--{key}");
    Ok(match v {
        Yaml::Boolean(true) => vec![name],
        Yaml::Boolean(false) => match engine {
            Engine::Vllm if flag(engine, &format!("--no-{key}")).is_some() => vec![format!("--no-{key}")],
            _ => vec![],
        },
        Yaml::Array(items) if items.is_empty() => vec![],
        Yaml::Array(items) => {
            let mut w = vec![name];
            for item in items {
                w.push(yaml_text(item).ok_or_else(|| format!("{key}: a list item that is not a value: {item:?}"))?);
            }
            w
        }
        Yaml::Hash(_) => vec![name, yaml_json(v).to_string()],
        Yaml::Null => return Err(format!("{key}: no value")),
        other => vec![name, yaml_text(other).ok_or_else(|| format!("{key}: not a value: {other:?}"))?],
    })
}

/// A YAML scalar as Python's `str()` writes it (a float as written in the file).
fn yaml_text(v: &yaml_rust2::Yaml) -> Option<String> {
    use yaml_rust2::Yaml;
    match v {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(n) => Some(n.to_string()),
        Yaml::Boolean(b) => Some(if *b { "True" } else { "False" }.into()),
        _ => None,
    }
}

/// A YAML value as JSON (the engines `json.dumps` a mapping).
fn yaml_json(v: &yaml_rust2::Yaml) -> serde_json::Value {
    use serde_json::Value as J;
    use yaml_rust2::Yaml;
    match v {
        Yaml::Hash(h) => J::Object(h.iter().map(|(k, v)| (yaml_text(k).unwrap_or_default(), yaml_json(v))).collect()),
        Yaml::Array(a) => J::Array(a.iter().map(yaml_json).collect()),
        Yaml::Integer(n) => J::from(*n),
        Yaml::Real(s) => s.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(J::Null, J::Number),
        Yaml::Boolean(b) => J::Bool(*b),
        Yaml::String(s) => J::String(s.clone()),
        _ => J::Null,
    }
}

/// A list flag's values (argparse's `nargs="+"`): its inline one, else the words from `args[*i]`
/// up to the next flag (`*i` moved past them), joined by spaces.
fn list_values(name: &str, inline: Option<String>, args: &[&str], i: &mut usize) -> Result<String> {
    let mut words: Vec<&str> = inline.as_deref().into_iter().collect();
    while inline.is_none() && args.get(*i).is_some_and(|a| !a.starts_with("--")) {
        words.push(args[*i]);
        *i += 1;
    }
    if words.is_empty() {
        return Err(CliError::input(format!("{name}: needs one or more values")));
    }
    Ok(words.join(" "))
}

/// The weight and KV dtypes a command names (its flags, else its checkpoint's name), warning of
/// what servesim does not size.
fn dtypes(
    got: &BTreeMap<&'static str, String>,
    model_id: &str,
    preset: &ModelPreset,
    warn: &mut Vec<String>,
) -> (Option<&'static str>, Option<&'static str>) {
    let weight_dtype = match got.get("quantization").map(String::as_str) {
        None => None,
        Some("fp8" | "fbgemm_fp8" | "modelopt") => Some("fp8"),
        Some("mxfp4") => Some("mxfp4"),
        Some("modelopt_fp4" | "nvfp4") => Some("nvfp4"),
        Some(q) => {
            warn.push(format!("quantization {q:?} is not a weight format servesim sizes: bf16 weights assumed"));
            None
        }
    };
    // A checkpoint name says its own quantization when the flag does not.
    let lower = model_id.to_ascii_lowercase();
    let weight_dtype = weight_dtype.or(if preset.checkpoint_dtype() == Dtype::Mxfp4 {
        Some("mxfp4")
    } else if lower.contains("nvfp4") || lower.ends_with("-fp4") {
        Some("nvfp4")
    } else if lower.contains("fp8") || preset.checkpoint_dtype() == Dtype::Fp8 {
        Some("fp8")
    } else {
        None
    });
    let kv_dtype = match got.get("kv_cache_dtype").or(got.get("kv_dtype")).map(String::as_str) {
        None | Some("auto") => checkpoint_kv(model_id, weight_dtype, warn),
        Some("bfloat16" | "bf16" | "float16" | "fp16" | "half") => Some("bf16"),
        Some("fp8" | "fp8_e4m3" | "fp8_e5m2") => Some("fp8"),
        Some("fp4_e2m1" | "nvfp4") => Some("nvfp4"),
        Some(k) => {
            warn.push(format!("kv cache dtype {k:?} is not one servesim sizes: bf16 assumed"));
            None
        }
    };
    match got.get("dtype").map(String::as_str) {
        None | Some("auto" | "bfloat16" | "bf16" | "half" | "float16" | "fp16") => {}
        Some(d @ ("float32" | "float" | "fp32")) => warn.push(format!(
            "--dtype {d}: servesim sizes and prices unquantized weights as 16-bit; {d} weights take twice the memory \
             and bandwidth (write [model] weight_dtype by hand to model them as another format)"
        )),
        Some(d) => warn.push(format!("--dtype {d}: not a dtype servesim knows: 16-bit weights assumed")),
    }
    (weight_dtype, kv_dtype)
}

/// The KV cache dtype the engine picks under `--kv-cache-dtype auto`: the checkpoint's own
/// `kv_cache_quant_algo` (vLLM `vllm/utils/torch_utils.py` `resolve_kv_cache_dtype_string` at
/// vllm-project/vllm 959009b40; SGLang `ModelRunner.configure_kv_cache_dtype`), else the model's
/// dtype. A local checkpoint is read (`hf_quant_config.json`, else `config.json`'s
/// `quantization_config`: `kv_cache_quant_algo`, or llm-compressor's `kv_cache_scheme` of 8-bit
/// floats); a Hub name is not, and NVIDIA's ModelOpt checkpoints (`nvidia/…` in FP8 or NVFP4)
/// are assumed to quantize it, and the warning says so: all 21 such `hf_quant_config.json` in
/// aiconfigurator-core 0.12.0's `model_configs/` (Llama, Qwen3, DeepSeek, GLM, Kimi, MiniMax,
/// Gemma, Nemotron) set `kv_cache_quant_algo` FP8.
fn checkpoint_kv(model_id: &str, weight_dtype: Option<&'static str>, warn: &mut Vec<String>) -> Option<&'static str> {
    let dir = Path::new(model_id);
    if dir.is_dir() {
        for (file, pointer) in [("hf_quant_config.json", "/quantization"), ("config.json", "/quantization_config")] {
            let Ok(text) = std::fs::read_to_string(dir.join(file)) else { continue };
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
                warn.push(format!("{}: not JSON; its KV cache dtype is not read", dir.join(file).display()));
                continue;
            };
            let Some(q) = json.pointer(pointer) else { continue };
            let algo = q.get("kv_cache_quant_algo").and_then(|a| a.as_str()).map(str::to_ascii_lowercase);
            let scheme = q.get("kv_cache_scheme");
            let float8 = scheme.is_some_and(|s| {
                s.get("num_bits").and_then(|b| b.as_u64()) == Some(8)
                    && s.get("type").and_then(|t| t.as_str()) == Some("float")
            });
            if algo.as_deref() == Some("fp8") || float8 {
                warn.push(format!(
                    "KV cache fp8: {} quantizes it, and the engine follows the checkpoint under --kv-cache-dtype auto",
                    dir.join(file).display()
                ));
                return Some("fp8");
            }
            return None;
        }
        return None;
    }
    let nvidia = model_id.to_ascii_lowercase().starts_with("nvidia/");
    if nvidia && matches!(weight_dtype, Some("fp8" | "nvfp4")) {
        warn.push(format!(
            "KV cache fp8 assumed: NVIDIA's ModelOpt checkpoints such as {model_id} set kv_cache_quant_algo FP8 in \
             hf_quant_config.json, and the engine follows the checkpoint under --kv-cache-dtype auto; if yours sets \
             none, give --kv-cache-dtype bfloat16 (or a local checkpoint directory, which is read)"
        ));
        return Some("fp8");
    }
    None
}

/// The `[model]` dtype keys a command gives; where the KV dtype was read from the checkpoint
/// or assumed of it (`warn` says which), a comment above it says so too.
fn dtype_lines(weight_dtype: Option<&str>, kv_dtype: Option<&str>, warn: &[String]) -> String {
    let mut t = weight_dtype.map_or(String::new(), |w| format!("weight_dtype = \"{w}\"\n"));
    if let Some(k) = kv_dtype {
        for w in warn.iter().filter(|w| w.starts_with("KV cache fp8")) {
            t += &format!("# {w}\n");
        }
        t += &format!("kv_dtype = \"{k}\"\n");
    }
    t
}

/// A switch given a value (`--enable-mixed-chunk=false`): the engines' argparse switches take
/// none (`store_true`, and vLLM's `BooleanOptionalAction`, are `nargs=0`: argparse stops with
/// "ignored explicit argument"), so the engine would not start with it.
fn refuse_switch_value(engine: Engine, name: &str, inline: Option<&str>) -> Result<()> {
    let Some(v) = inline else { return Ok(()) };
    let (who, instead) = match engine {
        Engine::Vllm if name.starts_with("--no-") => {
            ("vllm serve", format!("{name}, or {}", name.replacen("--no-", "--", 1)))
        }
        Engine::Vllm => ("vllm serve", format!("{name}, or --no-{}", &name[2..])),
        Engine::Sglang => ("SGLang", format!("{name}, or leave it out")),
    };
    Err(CliError::input(format!(
        "{name}={v}: {who} takes no value for this switch (its argument parser stops with \"ignored explicit \
         argument '{v}'\"), so the engine would not start; write {instead}"
    )))
}

fn int(got: &BTreeMap<&str, String>, key: &str, flag_name: &str) -> Result<Option<u64>> {
    got.get(key)
        .map(|v| {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| CliError::input(format!("{flag_name}: not a whole number ≥ 1: {v:?}")))
        })
        .transpose()
}

/// Whether SGLang reads this `--chunked-prefill-size` as chunked prefill off: -1, or any value
/// ≤ 0 (`Scheduler.init_chunked_prefill`, `python/sglang/srt/managers/scheduler.py` at 0.5.15).
fn chunking_off(v: &str) -> bool {
    v.trim().parse::<i64>().is_ok_and(|n| n <= 0)
}

/// SGLang's `--chunked-prefill-size`. Off (-1), a prefill batch holds prompts up to
/// `--max-prefill-tokens` (16384 by default; `PrefillAdder`'s `rem_input_tokens`), which
/// becomes the batch budget, and SGLang's memory rule reserves for it in place of the chunk
/// (`_handle_gpu_memory_settings`, `server_args.py` at 0.5.15): said in a comment of `t`.
/// servesim still cuts a prompt longer than that budget, which SGLang runs whole as a batch's
/// first request.
fn sglang_chunk(got: &BTreeMap<&str, String>, t: &mut String) -> Result<Option<u64>> {
    let flag = spelled(Engine::Sglang, "max_num_batched_tokens");
    if !got.get("max_num_batched_tokens").is_some_and(|v| chunking_off(v)) {
        return int(got, "max_num_batched_tokens", flag);
    }
    let prefill = int(got, "max_prefill_tokens", "--max-prefill-tokens")?.unwrap_or(16384);
    *t += &format!(
        "# {flag} -1: chunked prefill off; a prefill batch holds up to --max-prefill-tokens {prefill} of prompt\n\
         # (a longer prompt, which SGLang runs whole, is cut at it here).\n"
    );
    Ok(Some(prefill))
}

/// vLLM's human-readable counts (`--max-model-len`, `--max-num-batched-tokens`): `25.6k` is
/// 25,600 and `1K` 1,024 (`human_readable_int`, `vllm/utils/argparse_utils.py` at 0.34.0: k, m,
/// g, t decimal, decimals allowed; K, M, G, T binary, whole numbers only), else a plain count.
fn vllm_int(got: &BTreeMap<&str, String>, key: &str, flag_name: &str) -> Result<Option<u64>> {
    let Some(v) = got.get(key) else { return Ok(None) };
    let t = v.trim();
    let bad = || CliError::input(format!("{flag_name}: not a whole number ≥ 1 (or one like 32k, 1M): {v:?}"));
    let Some(suffix) = t.chars().last().filter(|c| "kmgtKMGT".contains(*c)) else {
        return t.parse::<u64>().ok().filter(|&n| n >= 1).map(Some).ok_or_else(bad);
    };
    let number = &t[..t.len() - 1];
    let power = "kmgt".find(suffix.to_ascii_lowercase()).expect("a suffix") as i32 + 1;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let plain = number.split_once('.').map_or(digits(number), |(a, b)| digits(a) && digits(b));
    let n = if !plain {
        None
    } else if suffix.is_ascii_lowercase() {
        // Python's int(float(number) * 10**power): truncated, as here.
        number.parse::<f64>().ok().map(|x| x * 1000f64.powi(power)).filter(|x| *x < 2f64.powi(63)).map(|x| x as u64)
    } else if number.contains('.') {
        return Err(CliError::input(format!(
            "{flag_name} {v}: vLLM refuses decimals with a binary suffix (\"Decimals are not allowed with binary \
             suffixes like {suffix}. Did you mean to use {number}{} instead?\")",
            suffix.to_ascii_lowercase()
        )));
    } else {
        number.parse::<u64>().ok().and_then(|x| x.checked_mul(1u64 << (10 * power)))
    };
    n.filter(|&n| n >= 1).map(Some).ok_or_else(bad)
}

/// How a launch command lays its GPUs out.
struct Parallelism {
    /// GPUs per instance (TP, or every DP attention rank's).
    gpus: u64,
    dp_attention: u64,
    instances: u64,
    ep: bool,
    pp: u64,
}

/// The layout the command's TP, DP, PP and expert-parallel flags give, as the engine reads them.
fn parallelism(
    engine: Engine,
    got: &BTreeMap<&'static str, String>,
    preset: &ModelPreset,
    warn: &mut Vec<String>,
) -> Result<Parallelism> {
    let (tp_flag, dp_flag, pp_flag) = match engine {
        Engine::Vllm => ("--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size"),
        Engine::Sglang => ("--tp", "--dp", "--pp"),
    };
    let tp = int(got, "tp", tp_flag)?.unwrap_or(1);
    let dp = int(got, "dp", dp_flag)?.unwrap_or(1);
    let pp = int(got, "pp", pp_flag)?.unwrap_or(1);
    let moe = preset.experts > 1;
    // vLLM: --data-parallel-size on a MoE model is DP attention over dp × tp GPUs, each rank its
    // own engine core, all stepping together, the experts over all of them (a TP group of
    // dp × tp, or expert-parallel with --enable-expert-parallel: vLLM's docs/serving/
    // data_parallel_deployment.md); on a dense model DP replicas (instances).
    // SGLang: --tp is every GPU; --enable-dp-attention splits attention into --dp ranks.
    let (gpus, dp_attention, instances, ep) = match engine {
        Engine::Vllm => {
            let ep = got.get("ep").is_some_and(|v| v == "true");
            if dp > 1 && moe {
                (tp * dp, dp, 1, ep)
            } else {
                (tp, 1, dp, ep)
            }
        }
        Engine::Sglang => {
            let dpa = got.get("dp_attention").is_some_and(|v| v == "true");
            let ep = int(got, "ep_size", "--ep-size")?.is_some_and(|e| e > 1);
            if dpa {
                (tp, dp, 1, ep)
            } else {
                (tp, 1, dp, ep)
            }
        }
    };
    let ep = match (ep && !moe, engine) {
        // vLLM refuses the command: vllm/config/model.py, ModelConfig._verify_with_expert_parallelism
        // (vllm-project/vllm 18ec6629) raises when the model has no experts.
        (true, Engine::Vllm) => {
            return Err(CliError::input(format!(
                "vLLM refuses this command for {}, which has no experts: \"Number of experts in the model must be \
                 greater than 0 when expert parallelism is enabled.\" (vllm/config/model.py); drop \
                 --enable-expert-parallel",
                preset.name()
            )))
        }
        // SGLang's expert parallelism acts on its MoE layers only: nothing to do on a dense model.
        (true, Engine::Sglang) => {
            warn.push(format!(
                "--ep-size on {}, which has no experts: it changes nothing modelled, left out",
                preset.name()
            ));
            false
        }
        (false, _) => ep,
    };
    Ok(Parallelism { gpus, dp_attention, instances, ep, pp })
}

/// The `--gpu` argument: a preset's name, or a TOML file describing a GPU without a preset (its
/// `[gpu]` table, or the file's top level: the keys of a scenario's `[gpu]` section). Returns
/// the GPU and the lines of the scenario's `[gpu]` section.
fn gpu_of(gpu: &str) -> Result<(servesim_sim::spec::GpuSpec, String)> {
    if let Some(p) = GpuPreset::find(gpu) {
        return Ok((p.spec(), format!("preset = \"{}\"\n", p.spec().name)));
    }
    let path = Path::new(gpu);
    if !gpu.ends_with(".toml") || !path.exists() {
        let why = GpuPreset::why_none(gpu).map(|w| format!(" ({w})")).unwrap_or_default();
        return Err(CliError::input(format!(
            "--gpu: unknown preset \"{gpu}\"{why}; known: {} (or a GPU file: a .toml with the keys of a scenario's [gpu])",
            GpuPreset::names().join(", ")
        )));
    }
    let text = crate::input::read_text(path, "GPU file")?;
    let bad = |e: String| CliError::input(format!("--gpu {gpu}: {e}"));
    let table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let table = match table.get("gpu") {
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => return Err(bad("gpu: must be a table".into())),
        None => table,
    };
    let section = toml::to_string(&table).map_err(|e| bad(e.to_string()))?;
    // Read as a scenario would read it: the same keys, checks and defaults.
    let probe = format!(
        "[model]\npreset = \"llama-3-8b\"\n[workload]\nrequests = 1\narrival = {{ kind = \"poisson\", rate = 1 }}\n\
         prompt_tokens = {{ kind = \"fixed\", value = 1 }}\noutput_tokens = {{ kind = \"fixed\", value = 1 }}\n\
         [gpu]\n{section}"
    );
    let s = servesim_sim::Scenario::from_toml(&probe, "gpu").map_err(|e| bad(e.to_string()))?;
    Ok((s.groups[0].gpu.clone(), section))
}

/// The oldest vLLM release from which its default limits on `gpu` have been the newest
/// release's, and the limits of the release before it; `None` if every release servesim has
/// read chose the same.
fn vllm_limits_since(gpu: &servesim_sim::spec::GpuSpec) -> Option<(EngineVersion, EngineLimits)> {
    let newest = vllm_limits(gpu, None);
    let mut since = None;
    for &v in VLLM_LIMIT_RULES.iter().rev() {
        let limits = vllm_limits(gpu, Some(v));
        if limits != newest {
            return since.map(|s| (s, limits));
        }
        since = Some(v);
    }
    None
}

/// The `[scheduler]` limits of a command (each DP attention rank's), the engine's defaults on
/// this GPU (vLLM's at `version`, its newest release servesim has read without one, which
/// `warn` says where older releases chose otherwise) where it says nothing; and over how many
/// ranks SGLang shares its limits (1 without DP attention, or under vLLM, whose flags are each
/// engine core's).
fn limit_lines(
    engine: Engine,
    got: &BTreeMap<&'static str, String>,
    (gpu, version, context): (&servesim_sim::spec::GpuSpec, Option<EngineVersion>, u64),
    dp_attention: u64,
    warn: &mut Vec<String>,
) -> Result<(String, u64)> {
    let mut t = String::new();
    // The engine's own defaults on this GPU where the command says nothing.
    let mut limits = engine.serving().default_limits(gpu, version);
    if engine == Engine::Vllm {
        limits = vllm_defaults(got, (version, dp_attention), limits, (&mut t, warn))?;
    }
    let given = (
        int(got, "max_num_seqs", spelled(engine, "max_num_seqs"))?,
        match engine {
            Engine::Vllm => vllm_int(got, "max_num_batched_tokens", spelled(engine, "max_num_batched_tokens"))?,
            Engine::Sglang => sglang_chunk(got, &mut t)?,
        },
    );
    let chunk_off = engine == Engine::Sglang && got.get("max_num_batched_tokens").is_some_and(|v| chunking_off(v));
    if engine == Engine::Vllm && (given.0.is_none() || given.1.is_none()) {
        let (major, minor, patch) = version.unwrap_or(VLLM_NEWEST_READ);
        let assumed = if version.is_none() { ", the newest release servesim has read (assumed)" } else { "" };
        t += &format!(
            "# Where the command sets no limit: vLLM {major}.{minor}.{patch}'s default on this GPU{assumed}.\n"
        );
        if let (None, Some(((a, b, c), old))) = (version, vllm_limits_since(gpu)) {
            warn.push(format!(
                "--max-num-seqs / --max-num-batched-tokens not given: {} and {}, vLLM's defaults on this GPU from \
                 {a}.{b}.{c} (older releases: {} and {}); give --engine-version for an older vLLM",
                limits.max_num_seqs, limits.max_num_batched_tokens, old.max_num_seqs, old.max_num_batched_tokens
            ));
        }
    }
    // SGLang without --max-running-requests sizes it from each rank's KV pool at start, which
    // the scenario does once its memory is planned (engine = "sglang").
    let from_pool = engine == Engine::Sglang && given.0.is_none();
    let mut seqs = given.0.unwrap_or(limits.max_num_seqs as u64);
    let mut tokens = given.1.unwrap_or(limits.max_num_batched_tokens as u64);
    if engine == Engine::Vllm {
        (seqs, tokens) = vllm_limit_rule(got, limits, given, context, &mut t)?;
    }
    let sglang_ranks = if engine == Engine::Sglang && dp_attention > 1 { dp_attention } else { 1 };
    if dp_attention > 1 {
        t += "# The limits below are each DP attention rank's (each rank schedules its own requests).\n";
    }
    if sglang_ranks > 1 {
        // SGLang reads --chunked-prefill-size and --max-running-requests as the whole server's
        // and gives each DP attention rank its share (python/sglang/srt/server_args.py,
        // ServerArgs._handle_data_parallelism: chunked_prefill_size // dp_size, at 469c63e5;
        // the scheduler's max_running_requests // dp_size per worker).
        let running = if from_pool { String::new() } else { format!(" and --max-running-requests {seqs}") };
        t += &format!("# SGLang's --chunked-prefill-size {tokens}{running}, over {sglang_ranks} ranks.\n");
        let share = if chunk_off { tokens } else { (tokens / sglang_ranks).max(1) };
        (seqs, tokens) = ((seqs / sglang_ranks).max(1), share);
    }
    if from_pool {
        t += "# max_num_seqs: SGLang's own, from each rank's KV pool (min(pool / context length × 512 held\n\
              # between 2048 and 4096, pool / 2); 48 with a drafter in 0.4.6-0.5.12), set when the scenario is read.\n";
    } else {
        t += &format!("max_num_seqs = {seqs}\n");
    }
    t += &format!("max_num_batched_tokens = {tokens}\n");
    Ok((t, sglang_ranks))
}

/// vLLM's defaults on this GPU (`limits`) as the command's other flags change them, before they
/// are settled ([`vllm_limit_rule`]): 256 tokens for a low-latency all-to-all over `dp_ranks`
/// ([`batched_dp_moe`]), then both doubled by `--performance-mode throughput`
/// ([`throughput_mode`]); each said in `t`.
fn vllm_defaults(
    got: &BTreeMap<&'static str, String>,
    (version, dp_ranks): (Option<EngineVersion>, u64),
    mut limits: EngineLimits,
    (t, warn): (&mut String, &mut Vec<String>),
) -> Result<EngineLimits> {
    if batched_dp_moe(got, version, dp_ranks) {
        limits.max_num_batched_tokens = 256;
        *t += &format!(
            "# --all2all-backend {} with expert parallelism over DP ranks: vLLM's default budget is 256 tokens.\n",
            got["all2all_backend"]
        );
    }
    if throughput_mode(got, warn)? {
        let twice = |n: u32| n.saturating_mul(2);
        limits = EngineLimits {
            max_num_seqs: twice(limits.max_num_seqs),
            max_num_batched_tokens: twice(limits.max_num_batched_tokens),
        };
        *t += "# --performance-mode throughput: vLLM doubles its defaults below.\n";
    }
    Ok(limits)
}

/// Whether vLLM batches its DP ranks' MoE layers for a low-latency all-to-all
/// (`ParallelConfig.use_batched_dp_moe`, vllm/config/parallel.py, from 0.20.0; 0.19.1 has it
/// not): `--all2all-backend` deepep_low_latency or nixl_ep, expert parallelism and more than one
/// DP rank. Its default budget is then `DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`, 256
/// tokens (vllm/config/scheduler.py; `EngineArgs._set_default_args`, 0.20.0 to 0.34.0).
fn batched_dp_moe(got: &BTreeMap<&'static str, String>, version: Option<EngineVersion>, dp_ranks: u64) -> bool {
    let backend = got.get("all2all_backend").is_some_and(|b| b == "deepep_low_latency" || b == "nixl_ep");
    backend && got.get("ep").is_some_and(|e| e == "true") && dp_ranks > 1 && version.is_none_or(|v| v >= (0, 20, 0))
}

/// `[scheduler.prefix_cache]`: on unless the command turns it off (vLLM V1 and SGLang, its
/// radix cache, cache prefixes by default), with vLLM's CPU offloading ([`offload_line`]).
fn prefix_lines(got: &BTreeMap<&'static str, String>, tp: u64, warn: &mut Vec<String>) -> Result<String> {
    let prefix = got.get("prefix").is_none_or(|v| v == "true");
    Ok(format!("[scheduler.prefix_cache]\nenabled = {prefix}\n") + &offload_line(got, prefix, tp, warn)?)
}

/// vLLM's `--kv-offloading-size` (GiB, summed over an engine core's `tp` GPUs;
/// `CacheConfig.kv_offloading_size`, vllm/config/cache.py) with the `native` backend, vLLM's
/// `OffloadingConnector` (`VllmConfig._post_init_kv_transfer_config`, vllm/config/vllm.py at
/// 0.34.0), as the prefix cache's CPU tier, `cpu_gib` per GPU. An assumption, said in the file:
/// vLLM copies every computed block to the CPU and loads hits asynchronously, where the tier
/// keeps the blocks evicted from the GPU and adds each load to its iteration. The `lmcache`
/// backend (its own server's capacity) and a cache that is off are left out, in `warn`.
fn offload_line(got: &BTreeMap<&'static str, String>, prefix: bool, tp: u64, warn: &mut Vec<String>) -> Result<String> {
    let Some(size) = got.get("kv_offloading_size") else { return Ok(String::new()) };
    let gib = size.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
    let gib = gib.ok_or_else(|| CliError::input(format!("--kv-offloading-size: not a number of GiB ≥ 0: {size:?}")))?;
    match got.get("kv_offloading_backend").map_or("native", String::as_str) {
        "native" => {}
        "lmcache" => {
            warn.push("--kv-offloading-backend lmcache: left out (LMCache's own server holds the offloaded KV; its capacity is not in the command)".into());
            return Ok(String::new());
        }
        other => {
            return Err(CliError::input(format!("--kv-offloading-backend {other:?}: vLLM takes native or lmcache")))
        }
    }
    if !prefix {
        warn.push(format!("--kv-offloading-size {size}: left out, as servesim's CPU tier holds prefix-cache blocks and prefix caching is off"));
        return Ok(String::new());
    }
    let per_gpu = gib / tp.max(1) as f64;
    Ok(format!(
        "# --kv-offloading-size {size} GiB over {tp} GPU(s): vLLM's CPU offloading as this CPU tier (an assumption: vLLM\n\
         # copies every block and loads hits asynchronously; here the tier keeps evicted blocks, each load in its step).\n\
         cpu_gib = {per_gpu}\n"
    ))
}

/// Whether vLLM's `--max-model-len` is "auto" (or -1, as `human_readable_int_or_auto` reads it).
fn vllm_auto_len(got: &BTreeMap<&'static str, String>) -> bool {
    got.get("max_model_len").is_some_and(|v| v == "-1" || v.eq_ignore_ascii_case("auto"))
}

/// vLLM's `--watermark`: `SchedulerConfig.watermark`, a float in [0, 1) (vllm/config/scheduler.py,
/// 0.24.0 on).
fn vllm_watermark(got: &BTreeMap<&'static str, String>) -> Result<Option<f64>> {
    let Some(w) = got.get("watermark") else { return Ok(None) };
    let x = w.trim().parse::<f64>().ok().filter(|x| x.is_finite() && (0.0..1.0).contains(x));
    x.map(Some).ok_or_else(|| CliError::input(format!("--watermark: not a number in [0, 1): {w:?}")))
}

/// vLLM's flags that servesim reads and the release each came in, read off the sdists'
/// `vllm/engine/arg_utils.py` (absent from the release before): `--performance-mode` (0.16.0
/// has none), `--[no-]scheduler-reserve-full-isl` (0.18.1 none), `--watermark` (0.23.0 none),
/// `--[no-]long-prefill-token-threshold-adaptive` and `--max-num-active-seqs` (0.30.0 none),
/// `--prefill-schedule-interval` (0.23.0 none).
const VLLM_FLAGS_SINCE: &[(&str, &str, EngineVersion)] = &[
    ("performance_mode", "--performance-mode", (0, 17, 0)),
    ("reserve_full_isl", "--[no-]scheduler-reserve-full-isl", (0, 19, 0)),
    ("watermark", "--watermark", (0, 24, 0)),
    ("long_prefill_adaptive", "--[no-]long-prefill-token-threshold-adaptive", (0, 31, 0)),
    ("max_num_active_seqs", "--max-num-active-seqs", (0, 31, 0)),
    ("prefill_interval", "--prefill-schedule-interval", (0, 24, 0)),
];

/// A flag of [`VLLM_FLAGS_SINCE`] given to a vLLM `version` before it came is refused, as that
/// release's parser refuses it.
fn check_flag_releases(
    engine: Engine,
    got: &BTreeMap<&'static str, String>,
    version: Option<EngineVersion>,
) -> Result<()> {
    let Some((a, b, c)) = version.filter(|_| engine == Engine::Vllm) else { return Ok(()) };
    for &(key, flag, since) in VLLM_FLAGS_SINCE {
        if got.contains_key(key) && (a, b, c) < since {
            let (x, y, z) = since;
            return Err(CliError::input(format!(
                "{flag}: vLLM {a}.{b}.{c} has no such flag (it came in {x}.{y}.{z}): its parser refuses it"
            )));
        }
    }
    Ok(())
}

/// vLLM's `--performance-mode` (from 0.17.0, `VllmConfig.performance_mode`): whether it is
/// "throughput", which doubles the defaults of both limits (`EngineArgs._set_default_args`,
/// vllm/engine/arg_utils.py, alike in 0.17.0, 0.19.1 and 0.34.0); "interactivity" sizes CUDA
/// graphs and picks kernels for small batches, not modelled, which `warn` says. A value vLLM's
/// parser does not take is refused (the flag before 0.17: [`check_flag_releases`]).
fn throughput_mode(got: &BTreeMap<&'static str, String>, warn: &mut Vec<String>) -> Result<bool> {
    let Some(mode) = got.get("performance_mode") else { return Ok(false) };
    match mode.as_str() {
        "throughput" => Ok(true),
        "balanced" => Ok(false),
        "interactivity" => {
            warn.push(
                "--performance-mode interactivity: its CUDA graphs at every small batch and latency-oriented kernels \
                 are not modelled; the batch limits are vLLM's usual defaults"
                    .into(),
            );
            Ok(false)
        }
        other => Err(CliError::input(format!(
            "--performance-mode {other:?}: vLLM takes balanced, interactivity or throughput"
        ))),
    }
}

/// vLLM's limits as `vllm serve` settles them from those the command gives (`given`) and its
/// defaults (`limits`) for the command's `--max-model-len`, else the model's `context` (which
/// "auto" also is before it is fitted to the pool) ([`vllm_settled_limits`]): without chunked
/// prefill a budget not given becomes the context, `--max-num-seqs` not given is held to the
/// budget (each said in `t`), and a command vLLM refuses is refused with its message.
fn vllm_limit_rule(
    got: &BTreeMap<&'static str, String>,
    limits: EngineLimits,
    given: (Option<u64>, Option<u64>),
    context: u64,
    t: &mut String,
) -> Result<(u64, u64)> {
    let given_len = if vllm_auto_len(got) { None } else { vllm_int(got, "max_model_len", "--max-model-len")? };
    let context = given_len.unwrap_or(context);
    let chunked = got.get("chunked").is_none_or(|v| v == "true");
    let (seqs, tokens) = vllm_settled_limits(limits, given, chunked, context)
        .map_err(|e| CliError::input(format!("--max-num-batched-tokens / --max-num-seqs: {e}")))?;
    if given.1.is_none() && tokens != limits.max_num_batched_tokens as u64 {
        let why = if tokens > limits.max_num_batched_tokens as u64 {
            "raised to the context length: without chunked prefill a prompt is prefilled in one step"
        } else {
            "held to max_num_seqs × the context length"
        };
        *t += &format!("# max_num_batched_tokens: vLLM's default {}, {why}.\n", limits.max_num_batched_tokens);
    }
    if given.0.is_none() && seqs != limits.max_num_seqs as u64 {
        *t += &format!("# max_num_seqs: vLLM's default {}, held to max_num_batched_tokens.\n", limits.max_num_seqs);
    }
    Ok((seqs, tokens))
}

/// `--block-size` (`--page-size`) and `--max-model-len` (`--context-length`) as
/// `block_tokens` and `max_model_len`.
fn block_and_length_lines(engine: Engine, got: &BTreeMap<&'static str, String>) -> Result<String> {
    let mut t = String::new();
    if let Some(b) = int(got, "block_size", spelled(engine, "block_size"))? {
        t += &format!("block_tokens = {b}\n");
    }
    if engine == Engine::Vllm && got.get("chunked").is_some_and(|v| v == "false") {
        // Continuous batching keeps `scheduler.watermark`: vLLM V1's is its `--watermark` (none
        // by default, which `engine = "vllm"` sets).
        if let Some(w) = vllm_watermark(got)? {
            t += &format!("watermark = {w}\n");
        }
    }
    let flag = spelled(engine, "max_model_len");
    if engine == Engine::Vllm && vllm_auto_len(got) {
        // vLLM 0.34.0's human_readable_int_or_auto: -1 or "auto", the model's context shortened
        // to what the KV cache holds (vllm/v1/core/kv_cache_planning.py, _auto_fit_max_model_len).
        t += "# --max-model-len auto: the model's context, shortened to the longest request the KV cache holds.\n";
        t += "max_model_len = \"auto\"\n";
    } else if let Some(l) =
        if engine == Engine::Vllm { vllm_int(got, "max_model_len", flag)? } else { int(got, "max_model_len", flag)? }
    {
        t += &format!("max_model_len = {l}\n");
    }
    Ok(t)
}

/// SGLang's `--scheduler-recv-interval` as `recv_interval` (1, its default, writes nothing);
/// refused with DP attention over `ranks` > 1, which servesim does not simulate with it.
fn recv_line(got: &BTreeMap<&'static str, String>, ranks: u64) -> Result<String> {
    let Some(n) = int(got, "recv_interval", "--scheduler-recv-interval")?.filter(|&n| n > 1) else {
        return Ok(String::new());
    };
    if n > 1_000_000 {
        return Err(CliError::input(format!("--scheduler-recv-interval {n}: more than 1000000 iterations")));
    }
    if ranks > 1 {
        return Err(CliError::input(format!(
            "--scheduler-recv-interval {n} with --enable-dp-attention: servesim does not simulate a receive \
             interval with DP attention ranks (SGLang 70310f05 refuses it; later versions count across ranks)"
        )));
    }
    Ok(format!("# SGLang's --scheduler-recv-interval: while decoding, new requests are taken in every {n} iterations.\nrecv_interval = {n}\n"))
}

/// SGLang's scheduler settings: `--max-prefill-tokens`, the conservativeness (× 0.3 under DP
/// attention over `ranks` > 1, as SGLang's server_args sets it), `--enable-mixed-chunk`.
fn sglang_lines(got: &BTreeMap<&'static str, String>, ranks: u64) -> Result<String> {
    let mut t = String::new();
    if let Some(n) = int(got, "max_prefill_tokens", "--max-prefill-tokens")? {
        t += &format!("max_prefill_tokens = {n}\n");
    }
    let given = got.get("conservativeness").map(|c| {
        c.parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && (0.0..=100.0).contains(x))
            .ok_or_else(|| CliError::input(format!("--schedule-conservativeness: not a number in [0, 100]: {c:?}")))
    });
    let given = given.transpose()?;
    if ranks > 1 {
        // And DP attention makes the scheduler 0.3 × as conservative (the same function).
        let x = given.unwrap_or(1.0);
        t += &format!(
            "schedule_conservativeness = {} # --schedule-conservativeness {x} × 0.3 under DP attention\n",
            x * 0.3
        );
    } else if let Some(x) = given {
        t += &format!("schedule_conservativeness = {x}\n");
    }
    if got.get("mixed_chunk").is_some_and(|v| v == "true") {
        t += "mixed_chunk = true\n";
    }
    Ok(t)
}

/// `[scheduler.batching]`: with chunked prefill vLLM V1's scheduler (running requests first,
/// then waiting ones, in one token budget) or SGLang's (prefill batches first; its settings
/// over `sglang_ranks`), else continuous batching; vLLM's long-prefill threshold.
fn batching_lines(
    engine: Engine,
    got: &BTreeMap<&'static str, String>,
    (dp_attention, version): (u64, Option<EngineVersion>),
    warn: &mut Vec<String>,
) -> Result<String> {
    let sglang_ranks = if engine == Engine::Sglang && dp_attention > 1 { dp_attention } else { 1 };
    let chunked = got.get("chunked").is_none_or(|v| v == "true");
    let mut t = match (chunked, engine) {
        (true, Engine::Vllm) => "[scheduler.batching]\nkind = \"vllm-v1\"\n",
        (true, Engine::Sglang) => "[scheduler.batching]\nkind = \"sglang\"\n",
        (false, _) => "[scheduler.batching]\nkind = \"continuous\"\n",
    }
    .to_string();
    if chunked && engine == Engine::Sglang {
        t += &sglang_lines(got, sglang_ranks)?;
    }
    // 0 is vLLM's "no threshold", servesim's default too.
    let threshold = match got.get("long_prefill").map(String::as_str) {
        Some("0") => None,
        _ => int(got, "long_prefill", "--long-prefill-token-threshold")?,
    };
    if let Some(n) = threshold {
        if chunked && engine == Engine::Vllm {
            t += &format!("long_prefill_token_threshold = {n}\n");
        }
    }
    // --scheduler-reserve-full-isl (vLLM 0.19.0 on; its default there, and the version's
    // default where the command says nothing, `engine_version`).
    if let Some(v) = got.get("reserve_full_isl").filter(|_| chunked && engine == Engine::Vllm) {
        t += &format!("reserve_full_isl = {v}\n");
    }
    if got.get("long_prefill_adaptive").is_some_and(|v| v == "true") && chunked && engine == Engine::Vllm {
        t += "long_prefill_token_threshold_adaptive = true\n";
    }
    if let Some(x) = vllm_watermark(got)?.filter(|_| chunked && engine == Engine::Vllm) {
        t += &format!("watermark = {x}\n");
    }
    t += &cadence_line(got, (chunked, dp_attention, version), warn)?;
    if let Some(n) = int(got, "max_num_active_seqs", "--max-num-active-seqs")? {
        if chunked {
            t += &format!("max_num_active_seqs = {n}\n");
        } else {
            warn.push(format!(
                "--max-num-active-seqs {n}: left out, as servesim's batching without chunked prefill has no admission \
                 limit apart from --max-num-seqs"
            ));
        }
    }
    Ok(t + &queue_lines(got, chunked, warn)?)
}

/// SGLang's `--enable-priority-scheduling` (`ServerArgs`, python/sglang/srt/server_args.py,
/// 0.5.3 to 0.5.15): its waiting queue sorted by priority, then arrival
/// (`SchedulePolicy._sort_by_priority_and_fcfs`, managers/schedule_policy.py, 0.5.15), as
/// servesim's priority queue ranks classes; and, unless `--disable-priority-preemption`, its
/// preemption of running requests for a waiting one of a priority more than
/// `--priority-scheduling-preemption-threshold` (10) higher (`PrefillAdder.preempt_to_schedule`)
/// as the batching's `priority_preemption_threshold`. `warn` says which end SGLang serves first.
fn sglang_priority(got: &BTreeMap<&'static str, String>, warn: &mut Vec<String>) -> Result<String> {
    let first = if got.contains_key("sglang_low_first") { "lowest" } else { "highest" };
    warn.push(format!(
        "--enable-priority-scheduling: SGLang serves the {first} priority values first; servesim serves class 0 first: \
         give the requests SGLang would run first class 0 (the placeholder workload has one class)"
    ));
    let threshold = got.get("sglang_preemption_threshold").map(String::as_str).unwrap_or("10");
    let threshold = threshold.parse::<i64>().map_err(|_| {
        CliError::input(format!("--priority-scheduling-preemption-threshold: not a whole number: {threshold:?}"))
    })?;
    let preemption = if got.contains_key("sglang_no_preemption") {
        String::new()
    } else {
        format!("priority_preemption_threshold = {threshold}\n")
    };
    Ok(preemption + "\n[scheduler.queue]\nkind = \"priority\"\n")
}

/// vLLM's `--prefill-schedule-interval` (0.24.0 on) as vLLM applies it to one engine core
/// (`Scheduler.__init__`, `local_prefill_interval`, vllm/v1/core/sched/scheduler.py): its own
/// cadence from 0.33.0, each dense DP replica its own; left out, and said, where it changes
/// nothing (before 0.33 an engine alone runs prefill every step) or where servesim does not
/// model it (the DP coordinator's cadence over DP attention ranks; batching without chunked
/// prefill).
fn cadence_line(
    got: &BTreeMap<&'static str, String>,
    (chunked, dp_attention, version): (bool, u64, Option<EngineVersion>),
    warn: &mut Vec<String>,
) -> Result<String> {
    let Some(n) = int(got, "prefill_interval", "--prefill-schedule-interval")?.filter(|&n| n > 1) else {
        return Ok(String::new());
    };
    let from = servesim_sim::scenario::VLLM_LOCAL_PREFILL_CADENCE_FROM;
    let why = match version {
        _ if dp_attention > 1 => {
            "vLLM's DP coordinator paces the DP ranks' prefill together, which servesim does not model".into()
        }
        Some(v) if v < from => format!(
            "vLLM {}.{}.{} paces prefill only across DP ranks (an engine alone runs prefill every step until {}.{}.{})",
            v.0, v.1, v.2, from.0, from.1, from.2
        ),
        _ if !chunked => "servesim's batching without chunked prefill has no prefill cadence".into(),
        _ => return Ok(format!("prefill_schedule_interval = {n}\n")),
    };
    warn.push(format!("--prefill-schedule-interval {n}: left out: {why}"));
    Ok(String::new())
}

/// `[scheduler.queue]` from vLLM's `--scheduling-policy` (`SchedulerConfig.policy`,
/// vllm/config/scheduler.py: "fcfs", the default, or "priority", in 0.16.0 and 0.34.0): a
/// request's `priority` is its class, which the placeholder workload does not vary (`warn`);
/// without chunked prefill servesim's batching preempts the last admitted, which `warn` says.
fn queue_lines(got: &BTreeMap<&'static str, String>, chunked: bool, warn: &mut Vec<String>) -> Result<String> {
    if got.get("sglang_priority").is_some_and(|v| v == "true") {
        return sglang_priority(got, warn);
    }
    match got.get("scheduling_policy").map(String::as_str) {
        None | Some("fcfs") => Ok(String::new()),
        Some("priority") => {
            warn.push(
                "--scheduling-policy priority: a request's priority is its class (0 first); the placeholder workload \
                 has one: give yours `class_weights`, or a trace with a `class` column"
                    .into(),
            );
            if !chunked {
                warn.push(
                    "--scheduling-policy priority without chunked prefill: the queue is ranked by priority, but \
                     servesim's batching without chunked prefill preempts the last admitted request, not vLLM's \
                     lowest-priority one"
                        .into(),
                );
            }
            Ok("\n[scheduler.queue]\nkind = \"priority\"\n".into())
        }
        Some(other) => Err(CliError::input(format!("--scheduling-policy {other:?}: vLLM takes fcfs or priority"))),
    }
}

/// `[scheduler.cpu]`: whether the engine overlaps its CPU work with the GPU's: as the command says
/// (`--async-scheduling`, `--no-async-scheduling`), else the version's default with `pp`
/// pipeline stages ([`ServingEngine::schedules_async_by_default`]: vLLM from 0.14), the newest
/// release servesim has read assumed without a version, which `warn` says. None for SGLang.
fn cpu_lines(
    engine: Engine,
    got: &BTreeMap<&'static str, String>,
    (version, pp): (Option<EngineVersion>, u32),
    warn: &mut Vec<String>,
) -> Result<String> {
    if engine == Engine::Sglang {
        return Ok(String::new());
    }
    // The speculative method's say on it: (method, by default, when given) at the release.
    let spec = speculative::vllm_async(got, version.unwrap_or(VLLM_NEWEST_READ));
    let (on, why) = match (got.get("async"), version) {
        (Some(v), Some(ver)) if v == "true" && pp > 1 && ver < (0, 16, 0) => {
            return Err(CliError::input(format!(
                "--async-scheduling with --pipeline-parallel-size {pp}: vLLM {}.{}.{} refuses it (\"Async scheduling \
                 is not yet compatible with pipeline_parallel_size > 1\", vllm/config/vllm.py; allowed from 0.16.0)",
                ver.0, ver.1, ver.2
            )));
        }
        (Some(v), ver) if v == "true" && spec.as_ref().is_some_and(|s| !s.2) => {
            let (method, ..) = spec.expect("checked");
            let ver = ver.unwrap_or(VLLM_NEWEST_READ);
            return Err(CliError::input(format!(
                "--async-scheduling with {method}-based speculative decoding: vLLM {}.{}.{} refuses it (\"Currently, \
                 async scheduling is only supported with EAGLE/MTP kind of speculative decoding\", vllm/config/vllm.py)",
                ver.0, ver.1, ver.2
            )));
        }
        (Some(v), _) => {
            (v == "true", if v == "true" { "--async-scheduling" } else { "--no-async-scheduling" }.to_string())
        }
        (None, Some(v)) => match spec {
            Some((method, false, _)) if ServingEngine::Vllm.schedules_async_by_default(v, pp) => {
                (false, format!("vLLM {}.{}.{}'s default: off with {method}-based speculative decoding", v.0, v.1, v.2))
            }
            _ => (
                ServingEngine::Vllm.schedules_async_by_default(v, pp),
                format!("vLLM {}.{}.{}'s default", v.0, v.1, v.2),
            ),
        },
        (None, None) => {
            warn.push(
                "asynchronous scheduling assumed on, vLLM's default from 0.14; give --engine-version for an older \
                 vLLM, or --no-async-scheduling"
                    .into(),
            );
            (true, "assumed: vLLM's default from 0.14; give --engine-version for an older one".to_string())
        }
    };
    Ok(if on {
        format!("[scheduler.cpu]\n# Asynchronous scheduling ({why}): each step's CPU work overlaps the GPU's.\noverlap = true\n")
    } else {
        format!("[scheduler.cpu]\n# No asynchronous scheduling ({why}): each step's CPU work and the GPU's in turn.\noverlap = false\n")
    })
}

/// `[memory]`: the engine's own rule sizes the KV cache (memory::plan_memory) with the command's
/// memory fraction, unless the command pins the block count; SGLang's default fraction follows
/// the release, whose assumption without one `warn` says.
fn memory_lines(
    (engine, engine_name): (Engine, &str),
    got: &BTreeMap<&'static str, String>,
    version: Option<EngineVersion>,
    warn: &mut Vec<String>,
) -> Result<String> {
    let blocks = int(got, "kv_blocks", "--num-gpu-blocks-override")?;
    let sized_by_sglang = engine == Engine::Sglang && !got.contains_key("mem_fraction_static") && blocks.is_none();
    if sized_by_sglang && version.is_none() {
        let (a, b, c) = servesim_sim::memory::SGLANG_NEWEST_READ;
        warn.push(format!(
            "SGLang's default mem_fraction_static assumed as {a}.{b}.{c}'s, the newest release servesim has read \
             (its rule changed in 0.4.8, 0.5.3 and 0.5.10); give --engine-version for another"
        ));
    }
    let mut t = format!("\n[memory]\nengine = \"{engine_name}\"\n");
    let fraction = |key: &str, flag: &str, hi_open: bool| -> Result<Option<f64>> {
        let Some(u) = got.get(key) else { return Ok(None) };
        u.parse().ok().filter(|x: &f64| *x > 0.0 && (*x < 1.0 || (!hi_open && *x == 1.0))).map(Some).ok_or_else(|| {
            CliError::input(format!("{flag}: not a number in (0, 1{}: {u:?}", if hi_open { ")" } else { "]" }))
        })
    };
    if let Some(x) = fraction("gpu_memory_utilization", "--gpu-memory-utilization", false)? {
        t += &format!("gpu_memory_utilization = {x}\n");
    }
    if let Some(x) = fraction("mem_fraction_static", "--mem-fraction-static", true)? {
        t += &format!("mem_fraction_static = {x}\n");
    }
    // SGLang's default fraction keeps memory for the graphs' largest batch: the largest of
    // --cuda-graph-bs where given, as ServerArgs takes it, else --cuda-graph-max-bs.
    if let Some(n) = cuda_graph_max_bs(got)? {
        t += &format!("cuda_graph_max_bs = {n}\n");
    }
    if let Some(b) = vllm_int(got, "kv_cache_memory_bytes", "--kv-cache-memory-bytes")? {
        t += &format!("kv_cache_gib = {}\n", b as f64 / (1u64 << 30) as f64);
    }
    if got.get("hybrid_off").is_some_and(|v| v == "true") {
        t += if engine == Engine::Vllm {
            "disable_hybrid_kv_cache_manager = true\n"
        } else {
            "disable_hybrid_swa_memory = true\n"
        };
    }
    if let Some(x) = fraction("swa_full_tokens_ratio", "--swa-full-tokens-ratio", false)? {
        t += &format!("swa_full_tokens_ratio = {x}\n");
    }
    if let Some(n) = int(got, "max_total_tokens", "--max-total-tokens")? {
        t += &format!("max_total_tokens = {n}\n");
    }
    if let Some(n) = blocks {
        t += &format!("kv_blocks = {n}\n");
    }
    Ok(t)
}

/// The largest batch SGLang's CUDA graphs capture by the command: the largest of
/// `--cuda-graph-bs` where given (`ServerArgs._handle_gpu_memory_settings`: `cuda_graph_max_bs =
/// max(cuda_graph_bs)`), else `--cuda-graph-max-bs`.
fn cuda_graph_max_bs(got: &BTreeMap<&'static str, String>) -> Result<Option<u64>> {
    let Some(list) = got.get("cuda_graph_bs") else {
        return int(got, "cuda_graph_max_bs", spelled(Engine::Sglang, "cuda_graph_max_bs"));
    };
    let sizes = list.split(' ').map(|w| w.parse::<u64>().ok().filter(|&n| n >= 1));
    let sizes: Option<Vec<u64>> = sizes.collect();
    sizes
        .and_then(|s| s.into_iter().max())
        .map(Some)
        .ok_or_else(|| CliError::input(format!("--cuda-graph-bs: not whole numbers ≥ 1: {list:?}")))
}

/// `--engine-version`: (major, minor, patch) ([`ServingEngine::version`]), and what `warn` must
/// say of it: a vLLM before 0.8 ran V0, which servesim does not model; an SGLang before 0.4.8
/// gets 0.4.8's memory and chunking rules.
fn engine_version(engine: Engine, v: Option<&str>, warn: &mut Vec<String>) -> Result<Option<EngineVersion>> {
    let Some(v) = v else { return Ok(None) };
    let version = ServingEngine::version(v)
        .ok_or_else(|| CliError::input(format!("--engine-version {v:?}: expected a version such as 0.14.1")))?;
    match engine {
        Engine::Vllm if version < (0, 8, 0) => warn.push(format!(
            "vLLM {}.{} runs its V0 engine by default (V1 is the default from 0.8.0, vllm-project/vllm PR #13726), \
             whose scheduler servesim does not model: this scenario has V1's rules (vllm-v1 batching, V1's limits)",
            version.0, version.1
        )),
        Engine::Sglang if version < (0, 4, 8) => warn.push(format!(
            "SGLang {}.{}.{}: its memory fraction and chunked prefill defaults are not modelled before 0.4.8, \
             whose are used",
            version.0, version.1, version.2
        )),
        Engine::Sglang | Engine::Vllm => {}
    }
    Ok(Some(version))
}

/// The network a command's model names, and the lines of its `[model]` section: a preset's, or
/// one read from a `config.json` ([`servesim_sim::spec::preset_from_hf_config`]) — `model_config`,
/// else the checkpoint directory `model_id` names, else the Hugging Face cache under `hub`. A
/// `config.json`'s `quantization_config.quant_method` stands for `--quantization` where the
/// command gives none, as the engines take it from the checkpoint.
fn model_of(
    model_id: &str,
    model_config: Option<&Path>,
    hub: &Option<PathBuf>,
    got: &mut BTreeMap<&'static str, String>,
    warn: &mut Vec<String>,
) -> Result<(&'static ModelPreset, String)> {
    if model_config.is_none() {
        if let Some(p) = ModelPreset::for_checkpoint(model_id) {
            let windowed =
                servesim_sim::spec::ModelSpec::from_preset(p, Dtype::Bf16, Dtype::Bf16).arch.window.is_some();
            if windowed && got.get("no_window").is_some_and(|v| v == "true") {
                warn.push(format!(
                    "--disable-sliding-window: not applied to the preset {}, whose windowed layers are kept; write \
                     [model] by hand to run them as full attention",
                    p.name()
                ));
            }
            if let Some(n) = ModelPreset::checkpoint_note(model_id) {
                warn.push(format!("{model_id} runs as the preset {}: {n}", p.name()));
            }
            let lines = format!("preset = \"{}\"\n", p.name());
            return Ok(match ModelPreset::checkpoint_context(model_id).filter(|&c| c != p.max_context()) {
                Some(c) => (
                    &*Box::leak(Box::new(p.with_max_context(c))),
                    format!("{lines}# {model_id}'s config.json gives a context of {c} tokens.\nmax_context = {c}\n"),
                ),
                None => (p, lines),
            });
        }
    }
    let local = Path::new(model_id).join("config.json");
    let file = match model_config {
        Some(p) if p.is_dir() => p.join("config.json"),
        Some(p) => p.to_path_buf(),
        None if local.is_file() => local,
        None => hub.as_deref().and_then(|h| hub_config(h, model_id)).ok_or_else(|| {
            CliError::input(format!(
                "model {model_id:?}: no servesim preset has its network, and no config.json of it was found (a local \
                 checkpoint directory, or the Hugging Face cache{}); known presets: {}; or give --model-config \
                 with its config.json, or write [model] by hand",
                hub.as_ref().map(|h| format!(" at {}", h.display())).unwrap_or_default(),
                ModelPreset::names().join(", ")
            ))
        })?,
    };
    let text = crate::input::read_text(&file, "--model-config")?;
    let name: &'static str =
        Box::leak(model_id.trim_end_matches('/').rsplit('/').next().unwrap_or(model_id).to_string().into_boxed_str());
    let mut preset = servesim_sim::spec::preset_from_hf_config(&text, name)
        .map_err(|e| CliError::input(format!("{}: {e}", file.display())))?;
    servesim_sim::spec::without_sliding_window(&mut preset, got.get("no_window").is_some_and(|v| v == "true"))
        .map_err(|e| CliError::input(format!("{}: {e}", file.display())))?;
    let preset: &'static ModelPreset = Box::leak(Box::new(preset));
    config_settings(&text, got);
    warn.push(format!("the network of {model_id} read from {} (no preset has it)", file.display()));
    let lines = model_lines(preset).map_err(|e| CliError::input(format!("{}: {e}", file.display())))?;
    Ok((preset, format!("# The network from {}: no preset has it.\n{lines}", file.display())))
}

/// What a config.json says beside the network, into `got`: its `quantization_config` as the
/// command's `--quantization` where the command gives none, whether its FP8 is block-scaled
/// (`weight_block_size`, [`block_fp8`]), and its MTP layers (`num_nextn_predict_layers`), a
/// speculative draft's.
fn config_settings(text: &str, got: &mut BTreeMap<&'static str, String>) {
    let Ok(j) = serde_json::from_str::<serde_json::Value>(text) else { return };
    let quant = j.pointer("/quantization_config/quant_method").and_then(|m| m.as_str()).map(str::to_ascii_lowercase);
    let block = j.pointer("/quantization_config/weight_block_size").is_some_and(|b| !b.is_null());
    if block && quant.as_deref() == Some("fp8") {
        got.insert("fp8_block", "true".into());
    }
    // llm-compressor's checkpoints name their weights' format in their config groups.
    let quant = match (quant.as_deref(), j.pointer("/quantization_config/config_groups")) {
        (Some("compressed-tensors"), Some(groups)) => {
            let (format, block) = compressed_tensors(groups);
            if block {
                got.insert("fp8_block", "true".into());
            }
            Some(format)
        }
        _ => quant,
    };
    got.insert("config_read", "true".into());
    if let Some(q) = quant.filter(|_| !got.contains_key("quantization")) {
        got.insert("quantization", q);
    }
    if let Some(n) = j.get("num_nextn_predict_layers").and_then(serde_json::Value::as_u64) {
        got.insert("mtp_layers", n.to_string());
    }
}

/// The weight format of a `compressed-tensors` checkpoint's config groups (llm-compressor,
/// `quantization_config.config_groups.*.weights`): 8-bit floats are `fp8` (block-scaled with
/// `strategy` "block"), 4-bit floats NVFP4; anything else, or groups that disagree, is named
/// as it is (and bf16 assumed, with a warning).
fn compressed_tensors(groups: &serde_json::Value) -> (String, bool) {
    let schemes: Vec<(u64, String, String)> = groups
        .as_object()
        .into_iter()
        .flat_map(|g| g.values())
        .filter_map(|g| g.get("weights"))
        .map(|w| {
            let text = |k: &str| w.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
            (w.get("num_bits").and_then(|b| b.as_u64()).unwrap_or(0), text("type"), text("strategy"))
        })
        .collect();
    match schemes.first() {
        Some(first) if schemes.iter().all(|s| s == first) => match (first.0, first.1.as_str()) {
            (8, "float") => ("fp8".into(), first.2 == "block"),
            (4, "float") => ("nvfp4".into(), false),
            (bits, kind) => (format!("compressed-tensors {bits}-bit {kind}"), false),
        },
        _ => ("compressed-tensors".into(), false),
    }
}

/// The `[model]` keys of a network read from config.json, its window and latent attention
/// inline (so that the keys written after them stay in `[model]`).
fn model_lines(preset: &ModelPreset) -> std::result::Result<String, toml::ser::Error> {
    let spec = servesim_sim::spec::ModelSpec::from_preset(preset, Dtype::Bf16, Dtype::Bf16);
    let section = servesim_sim::spec::ModelSection {
        weight_dtype: None,
        kv_dtype: None,
        window: None,
        mla: None,
        ..servesim_sim::spec::ModelSection::from_spec(&spec)
    };
    let mut lines = toml::to_string(&section)?;
    if let Some(w) = spec.arch.window {
        lines += &format!("window = {{ tokens = {}, layers = {} }}\n", w.tokens, w.layers);
    }
    if let Some(m) = spec.arch.mla {
        lines += &format!("mla = {}\n", inline_mla(&m));
    }
    Ok(lines)
}

/// Latent attention's ranks as an inline table.
fn inline_mla(m: &servesim_sim::spec::Mla) -> String {
    format!(
        "{{ q_lora_rank = {}, kv_lora_rank = {}, qk_nope_head_dim = {}, qk_rope_head_dim = {}, v_head_dim = {} }}",
        m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim
    )
}

/// CUDA graphs turned off (vLLM's `--enforce-eager`, SGLang's `--disable-cuda-graph`, the flag
/// table's `eager`): a warning of its own.
fn eager_warning(engine: Engine, got: &BTreeMap<&'static str, String>, warn: &mut Vec<String>) {
    if got.get("eager").is_some_and(|v| v == "true") {
        let f = servesim_sim::scenario::launch::spelling(engine.serving(), "eager", Some(true)).unwrap_or("the flag");
        warn.push(format!(
            "{f}: CUDA graphs off; servesim prices each step as the kernel database measured it, under CUDA graphs: \
             the kernel launches eager mode adds to every step (most felt at small batches) are not priced, so its \
             decode is predicted faster than it will run"
        ));
    }
}

/// A checkpoint's `config.json`: in the local directory `model_id` names, else in the Hugging
/// Face cache's snapshot of a Hub name.
fn config_file(model_id: &str) -> Option<PathBuf> {
    let local = Path::new(model_id).join("config.json");
    if local.is_file() {
        return Some(local);
    }
    hub_cache().and_then(|h| hub_config(&h, model_id))
}

/// The Hugging Face hub cache: `HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub.
fn hub_cache() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// A Hub model's `config.json` in the cache at `hub`: the snapshot `refs/main` names, else the
/// first snapshot (by name) that has one.
fn hub_config(hub: &Path, model_id: &str) -> Option<PathBuf> {
    let (org, name) = model_id.split_once('/')?;
    if name.contains('/') || org.is_empty() || name.is_empty() {
        return None;
    }
    let repo = hub.join(format!("models--{org}--{name}"));
    let main = std::fs::read_to_string(repo.join("refs").join("main")).ok();
    if let Some(c) = main.map(|r| repo.join("snapshots").join(r.trim()).join("config.json")).filter(|c| c.is_file()) {
        return Some(c);
    }
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(repo.join("snapshots")).ok()?.flatten().map(|e| e.path()).collect();
    snaps.sort();
    snaps.into_iter().map(|d| d.join("config.json")).find(|c| c.is_file())
}

/// The scenario text of a launch command, and the warnings (flags not understood, settings
/// not modelled).
#[cfg(test)]
fn scenario(engine: Engine, gpu: &str, args: &[String], version: Option<&str>) -> Result<(String, Vec<String>)> {
    scenario_with(engine, gpu, args, version, None)
}

/// [`scenario`], the model's network read from `model_config` where no preset has it.
#[cfg(test)]
fn scenario_with(
    engine: Engine,
    gpu: &str,
    args: &[String],
    version: Option<&str>,
    model_config: Option<&Path>,
) -> Result<(String, Vec<String>)> {
    scenario_given(engine, gpu, args, (version, model_config), &speculative::Given::default())
}

/// [`scenario_with`], with the drafts' acceptance given (`--acceptance-length`,
/// `--acceptance-rates`).
fn scenario_given(
    engine: Engine,
    gpu: &str,
    args: &[String],
    (version, model_config): (Option<&str>, Option<&Path>),
    acceptance: &speculative::Given,
) -> Result<(String, Vec<String>)> {
    let mut warn = Vec::new();
    let version = engine_version(engine, version, &mut warn)?;
    let (mut got, unknown) = parse_flags(engine, args)?;
    eager_warning(engine, &got, &mut warn);
    check_flag_releases(engine, &got, version)?;
    if !unknown.is_empty() {
        warn.push(format!("not understood, left out: {}", unknown.join(", ")));
    }
    let (gpu, gpu_section) = gpu_of(gpu)?;
    let model_id = got.get("model").ok_or_else(|| CliError::input("the command names no model"))?.clone();
    let (preset, model_section) = model_of(&model_id, model_config, &hub_cache(), &mut got, &mut warn)?;
    let model_id = model_id.as_str();
    let Parallelism { gpus, dp_attention, instances, ep, pp } = parallelism(engine, &got, preset, &mut warn)?;
    let (weight_dtype, kv_dtype) = dtypes(&got, model_id, preset, &mut warn);
    let mut t = String::new();
    let engine_name = if engine == Engine::Vllm { "vllm" } else { "sglang" };
    t += &format!(
        "# From a {engine_name} launch command (servesim scenario from-{engine_name}):\n#   {}\n",
        args.join(" ")
    );
    t += "# The workload and the SLO below are placeholders: put in your traffic and targets.\n";
    t +=
        &format!("name = \"{}-{}\"\nseed = 1\n# The engine's rules are the defaults of what this file leaves out.\nengine = \"{engine_name}\"\n{}\n[model]\n{model_section}", engine_name, preset.name(), version.map_or(String::new(), |(a, b, c)| format!("engine_version = \"{a}.{b}.{c}\"\n")));
    t += &dtype_lines(weight_dtype, kv_dtype, &warn);
    t += &format!("\n[gpu]\n{gpu_section}\n[cluster]\ninstances = {instances}\ntp = {gpus}\n");
    // The engine's own balancer across its DP replicas: vLLM's lowest 4 × waiting + running
    // (router `vllm-dp`); SGLang's data-parallel controller round-robin by default
    // (`--load-balance-method round_robin`).
    if instances > 1 {
        let router = if engine == Engine::Vllm { "vllm-dp" } else { "round-robin" };
        t += &format!("router = {{ kind = \"{router}\" }}\n");
    }
    if dp_attention > 1 {
        t += &format!("dp_attention = {dp_attention}\n");
    }
    if ep {
        t += "ep = true\n";
    }
    if pp > 1 {
        t += &format!("pp = {pp}\n");
    }
    t += "\n[scheduler]\n";
    let (lines, sglang_ranks) =
        limit_lines(engine, &got, (&gpu, version, preset.max_context()), dp_attention, &mut warn)?;
    t += &lines;
    t += &block_and_length_lines(engine, &got)?;
    t += &recv_line(&got, sglang_ranks)?;
    t += &batching_lines(engine, &got, (dp_attention, version), &mut warn)?;
    t += &prefix_lines(&got, gpus / dp_attention.max(1), &mut warn)?;
    t += &speculative::lines(engine, &got, (preset, weight_dtype, kv_dtype), acceptance, &mut warn)?;
    t += &cpu_lines(engine, &got, (version, pp as u32), &mut warn)?;
    t += &memory_lines((engine, engine_name), &got, version, &mut warn)?;
    let mark = if block_fp8(&got, (model_id, preset), weight_dtype, &mut warn) { COST_MARK_BLOCK } else { COST_MARK };
    t += &format!("\n[cost]\n{mark}\noverhead = \"{engine_name}\"\n");
    t += "\n# Placeholder traffic: replace with yours (or `workload fit --trace` of a request log).\n\
          [workload]\nduration_s = 120\narrival = { kind = \"poisson\", rate = 5 }\n\
          prompt_tokens = { kind = \"lognormal\", median = 1000, p99 = 6000, max = 8000 }\n\
          output_tokens = { kind = \"lognormal\", median = 300, p99 = 1500, max = 2048 }\n\n\
          [slo]\nttft_ms = 2000\ntpot_ms = 100\nattainment = 0.99\n";
    Ok((t, warn))
}

/// Where the cost source's lines go in the scenario text ([`priced`] fills it).
const COST_MARK: &str = "# {cost source}";
/// [`COST_MARK`] for block-scaled FP8 weights, which the kernel database prices as `fp8-block`.
const COST_MARK_BLOCK: &str = "# {cost source: fp8-block}";

/// Whether FP8 weights are block-scaled, as the database prices them (`fp8_block` GEMMs and
/// MoE): the checkpoint's config.json gives `quantization_config.weight_block_size`
/// ([`config_settings`]); a preset's own FP8 checkpoint is (DeepSeek-V3/R1, Kimi-K2,
/// MiniMax-M2.5: [`ModelPreset::checkpoint_dtype`]); or the Hub name is one of Qwen's own FP8
/// releases, which are (an assumption, said: Qwen3-32B-FP8, Qwen3-30B-A3B-FP8 and
/// Qwen3-235B-A22B-FP8 give [128, 128] in aiconfigurator-core 0.12.0's `model_configs/`).
fn block_fp8(
    got: &BTreeMap<&'static str, String>,
    (model_id, preset): (&str, &ModelPreset),
    weight_dtype: Option<&str>,
    warn: &mut Vec<String>,
) -> bool {
    if weight_dtype != Some("fp8") || got.get("quantization").is_some_and(|q| q != "fp8") {
        return false;
    }
    let config_read = got.contains_key("config_read");
    if got.contains_key("fp8_block") || (!config_read && preset.checkpoint_dtype() == Dtype::Fp8) {
        return true;
    }
    let lower = model_id.to_ascii_lowercase();
    let qwen = lower.starts_with("qwen/") && lower.ends_with("-fp8") && !config_read;
    if qwen {
        warn.push(format!(
            "{model_id}: block-scaled FP8 weights assumed ([128, 128] blocks, as Qwen's FP8 releases ship), priced \
             as the kernel database's fp8-block"
        ));
    }
    qwen
}

/// The scenario `text` priced from AIConfigurator's kernel database where it has this GPU,
/// engine and model (a slice shipped with servesim, or the database `SERVESIM_AIC_DATA` or an
/// installed `aiconfigurator-core` holds), else by the roofline, the file saying why; with a
/// line for stderr saying which. Either way the scenario loads as written, files resolved from
/// `dir` (where it is written).
fn priced(text: &str, engine: Engine, gpu: &str, dir: &Path) -> Result<(String, String)> {
    let framework = match engine {
        Engine::Vllm => "vllm",
        Engine::Sglang => "sglang",
    };
    let load = |t: &str| crate::scenario_file::validated(t, "from-command", dir);
    let system = GpuPreset::find(gpu).and_then(|p| p.database_system);
    let (mark, weights) =
        if text.contains(COST_MARK_BLOCK) { (COST_MARK_BLOCK, ", weights = \"fp8-block\"") } else { (COST_MARK, "") };
    let why = match system {
        None => format!("the kernel database has no system for the GPU {gpu}"),
        Some(system) => {
            let db = text.replace(
                mark,
                &format!(
                    "# Iteration times from NVIDIA AIConfigurator's measured kernels ({framework} on {system});\n\
                     # what the database lacks is priced by the roofline, and every run says how much.\n\
                     database = {{ framework = \"{framework}\"{weights} }}"
                ),
            );
            match load(&db) {
                Ok(_) => {
                    return Ok((db, format!("cost: AIConfigurator's kernel database ({framework} on {system})")));
                }
                Err(e) => e.to_string().replace(['\n', '\r'], " "),
            }
        }
    };
    let roof = text.replace(
        mark,
        &format!("# Iteration times from the roofline (the GPU's datasheet), not measured kernels:\n# {why}."),
    );
    load(&roof).map_err(|e| CliError::input(format!("the scenario from this command is refused: {e}")))?;
    Ok((roof, format!("cost: the roofline, not measured kernels: {why}")))
}

pub(crate) fn run(a: Args) -> Result<()> {
    let (engine, f) = match a.command {
        Cmd::FromVllm(f) => (Engine::Vllm, f),
        Cmd::FromSglang(f) => (Engine::Sglang, f),
    };
    let given = speculative::Given { length: f.acceptance_length, rates: f.acceptance_rates };
    let (text, warn) =
        scenario_given(engine, &f.gpu, &f.args, (f.engine_version.as_deref(), f.model_config.as_deref()), &given)?;
    // The scenario must load as written: what it says is what a run would use.
    let dir = f.out.as_deref().and_then(Path::parent).filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (text, cost) = priced(&text, engine, &f.gpu, dir)?;
    errln!("{cost}");
    for w in &warn {
        errln!("warning: {w}");
    }
    match &f.out {
        Some(p) if p.exists() => {
            Err(CliError::input(format!("--out {}: exists; choose another name or remove it", p.display())))
        }
        Some(p) => {
            crate::atomic::write(p, text)?;
            Ok(())
        }
        None => {
            out!("{text}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn scenario_of(engine: Engine, gpu: &str, cmd: &str) -> (servesim_sim::Scenario, Vec<String>) {
        let (text, warn) = scenario(engine, gpu, &args(cmd), None).unwrap();
        (servesim_sim::Scenario::from_toml(&text, "t").unwrap_or_else(|e| panic!("{e}\n{text}")), warn)
    }

    #[test]
    fn the_kv_cache_under_auto_is_the_checkpoints() {
        let kv = |engine, cmd: &str| {
            let (s, warn) = scenario_of(engine, "h200", cmd);
            (s.model.kv_dtype.name(), warn.into_iter().filter(|w| w.contains("KV cache")).collect::<Vec<_>>())
        };
        // NVIDIA's ModelOpt checkpoints by name: FP8 assumed, and said.
        let (d, w) = kv(Engine::Vllm, "vllm serve nvidia/Llama-3.3-70B-Instruct-FP8");
        assert_eq!(d, "fp8");
        assert!(w.len() == 1 && w[0].starts_with("KV cache fp8 assumed: NVIDIA's ModelOpt checkpoints"), "{w:?}");
        // The written file says it too, above the key.
        let (text, _) = scenario(Engine::Vllm, "h200", &args("nvidia/Llama-3.3-70B-Instruct-FP8"), None).unwrap();
        assert!(text.contains(&format!("# {}\nkv_dtype = \"fp8\"\n", w[0])), "{text}");
        assert_eq!(kv(Engine::Sglang, "--model-path nvidia/Llama-3.1-8B-Instruct-FP4 --tp 1").0, "fp8");
        assert_eq!(kv(Engine::Vllm, "nvidia/DeepSeek-R1-FP4 --tensor-parallel-size 8").0, "fp8");
        // Given by the flag, bf16 included, or another publisher's checkpoint: no assumption.
        for (engine, cmd) in [
            (Engine::Vllm, "nvidia/Llama-3.3-70B-Instruct-FP8 --kv-cache-dtype bfloat16"),
            (Engine::Vllm, "meta-llama/Llama-3.1-70B-Instruct --quantization fp8"),
            (Engine::Vllm, "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"),
            (Engine::Sglang, "--model-path nvidia/Llama-3.3-70B-Instruct-FP8 --kv-cache-dtype bf16"),
        ] {
            assert_eq!(kv(engine, cmd), ("bf16", vec![]), "{cmd}");
        }
        // A local checkpoint is read: ModelOpt's hf_quant_config.json, or config.json's
        // quantization_config (llm-compressor's kv_cache_scheme of 8-bit floats).
        let dir = std::env::temp_dir().join(format!("servesim-kv-{}", std::process::id()));
        for (file, body, want) in [
            ("hf_quant_config.json", r#"{"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}"#, "fp8"),
            ("hf_quant_config.json", r#"{"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": null}}"#, "bf16"),
            (
                "config.json",
                r#"{"quantization_config": {"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"}}}"#,
                "fp8",
            ),
            ("config.json", r#"{"architectures": ["LlamaForCausalLM"]}"#, "bf16"),
        ] {
            let ckpt = dir.join("Llama-3.1-8B-Instruct");
            let _ = std::fs::remove_dir_all(&ckpt);
            std::fs::create_dir_all(&ckpt).unwrap();
            std::fs::write(ckpt.join(file), body).unwrap();
            let (d, w) = kv(Engine::Vllm, &format!("vllm serve {}", ckpt.display()));
            assert_eq!(d, want, "{file}: {body}");
            assert_eq!(w.len(), usize::from(want == "fp8"), "{w:?}");
            if want == "fp8" {
                assert!(w[0].contains(&ckpt.join(file).display().to_string()), "{w:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_vllm_command_becomes_the_scenario_it_describes() {
        let (s, warn) = scenario_of(
            Engine::Vllm,
            "h100-sxm",
            "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-num-seqs 128 \
             --max-num-batched-tokens=4096 --gpu-memory-utilization 0.85 --kv-cache-dtype fp8 --block-size 32 \
             --max-model-len 16384 --no-enable-prefix-caching --port 8000 --trust-remote-code --foo-bar 3 --enforce-eager \
             --num-gpu-blocks-override 3000",
        );
        let g = &s.groups[0];
        assert_eq!((s.model.name.as_str(), g.tp, g.count), ("llama-3.1-70b", 4, 1));
        assert_eq!(
            (g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens, g.memory.block_tokens),
            (128, 4096, 32)
        );
        assert_eq!(g.max_model_len, 16384);
        assert_eq!(s.model.kv_dtype.name(), "fp8");
        assert_eq!(g.memory.kv_blocks, 3000);
        assert!(!g.scheduler.prefix_cache.enabled);
        assert!(s.resolved_toml().contains("gpu_memory_utilization = 0.85"));
        // vLLM V1's scheduler, its prefill threshold taken from the command.
        let (v1, _) = scenario_of(
            Engine::Vllm,
            "h100-sxm",
            "meta-llama/Llama-3.1-8B-Instruct --long-prefill-token-threshold 512",
        );
        let r = v1.resolved_toml();
        assert!(r.starts_with("name = \"vllm-llama-3.1-8b\"\nseed = 1\nengine = \"vllm\""), "{r}");
        assert!(r.contains("kind = \"vllm-v1\"\nlong_prefill_token_threshold = 512"), "{r}");
        // vLLM's own memory rule, unless the command pins the block count (as this one does).
        assert!(s.resolved_toml().contains("engine = \"vllm\""));
        let (free, _) = scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct");
        let servesim_rule = servesim_sim::memory::MemoryEngine::Servesim;
        assert_ne!(free.groups[0].memory.terms.as_ref().map_or(servesim_rule, |t| t.engine), servesim_rule);
        // One warning line naming every flag not understood, with its value; and the version's
        // default assumed where the command gives no --engine-version.
        // --enforce-eager has a warning of its own (cuda_graphs_off_is_named_as_not_priced).
        assert!(warn[0].starts_with("--enforce-eager: CUDA graphs off"), "{warn:?}");
        assert_eq!(warn[1], "not understood, left out: --foo-bar 3");
        assert!(warn.len() == 3 && warn[2].starts_with("asynchronous scheduling assumed on"), "{warn:?}");
    }

    /// `vllm serve` settles the limits it is not given from those it is
    /// (`EngineArgs._set_default_args`, vllm/engine/arg_utils.py, 0.11.2 and 0.34.0): without
    /// chunked prefill its budget is the context, so a prompt of 20,000 tokens is served, not
    /// refused as longer than the default 8,192; a small budget holds the sequences; a command
    /// vLLM refuses to start is refused.
    #[test]
    fn vllms_limits_are_settled_as_vllm_serve_settles_them() {
        let (s, _) =
            scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct --no-enable-chunked-prefill");
        let sch = &s.groups[0].scheduler;
        assert_eq!((sch.max_num_seqs, sch.max_num_batched_tokens, s.groups[0].max_model_len), (1024, 131_072, 131_072));
        let text = scenario(
            Engine::Vllm,
            "h100-sxm",
            &args("meta-llama/Llama-3.1-8B-Instruct --no-enable-chunked-prefill"),
            None,
        )
        .unwrap()
        .0;
        assert!(text.contains("# max_num_batched_tokens: vLLM's default 8192, raised to the context length"), "{text}");
        let mut doc: toml::Table = toml::from_str(&s.resolved_toml()).unwrap();
        let workload = "requests = 2\narrival = { kind = \"poisson\", rate = 1 }\n\
                        prompt_tokens = { kind = \"fixed\", value = 20000 }\noutput_tokens = { kind = \"fixed\", value = 4 }";
        doc.insert("workload".into(), toml::Value::Table(toml::from_str(workload).unwrap()));
        let run = servesim_sim::engine::run(&servesim_sim::Scenario::from_toml(&doc.to_string(), "t").unwrap());
        assert_eq!((run.summary.requests.finished, run.summary.requests.rejected), (2, 0));
        let (s, _) =
            scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens 512");
        assert_eq!((s.groups[0].scheduler.max_num_seqs, s.groups[0].scheduler.max_num_batched_tokens), (512, 512));
        let err = |cmd: &str| scenario(Engine::Vllm, "h100-sxm", &args(cmd), None).unwrap_err().to_string();
        let e = err("meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 10000");
        assert!(
            e.contains("\"max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs (10000).\""),
            "{e}"
        );
        let e = err("meta-llama/Llama-3.1-8B-Instruct --no-enable-chunked-prefill --max-num-batched-tokens 8192");
        assert!(e.contains("\"max_num_batched_tokens (8192) is smaller than max_model_len (131072)."), "{e}");
        // --performance-mode throughput (0.17.0 on) doubles the defaults it is not given: 2 × 1024
        // sequences, and a given budget stays.
        let limits_on = |gpu: &str, cmd: &str| {
            let (s, _) = scenario_of(Engine::Vllm, gpu, cmd);
            (s.groups[0].scheduler.max_num_seqs, s.groups[0].scheduler.max_num_batched_tokens)
        };
        let limits = |cmd: &str| limits_on("h100-sxm", cmd);
        assert_eq!(limits("meta-llama/Llama-3.1-8B-Instruct --performance-mode throughput"), (2048, 16_384));
        let cmd = "meta-llama/Llama-3.1-8B-Instruct --performance-mode throughput --max-num-batched-tokens 4096";
        assert_eq!(limits(cmd), (2048, 4096));
        assert_eq!(limits("meta-llama/Llama-3.1-8B-Instruct --performance-mode balanced"), (1024, 8192));
        let e = err("meta-llama/Llama-3.1-8B-Instruct --performance-mode fast");
        assert!(e.contains("vLLM takes balanced, interactivity or throughput"), "{e}");
        let e = scenario(
            Engine::Vllm,
            "h100-sxm",
            &args("meta-llama/Llama-3.1-8B-Instruct --performance-mode throughput"),
            Some("0.16.0"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--performance-mode: vLLM 0.16.0 has no such flag (it came in 0.17.0)"), "{e}");
        // A low-latency all-to-all with expert parallelism over DP ranks (0.20.0 on): a budget of
        // 256 tokens, the sequences held to it; the default backend keeps the usual defaults.
        let dp = "deepseek-ai/DeepSeek-R1 --data-parallel-size 8 --enable-expert-parallel";
        assert_eq!(limits_on("h200", &format!("{dp} --all2all-backend deepep_low_latency")), (256, 256));
        let both = format!("{dp} --all2all-backend nixl_ep --performance-mode throughput");
        assert_eq!(limits_on("h200", &both), (512, 512));
        assert_eq!(limits_on("h200", &format!("{dp} --all2all-backend allgather_reducescatter")), (1024, 8192));
        let old = scenario(
            Engine::Vllm,
            "h200",
            &args(&format!("{dp} --all2all-backend deepep_low_latency")),
            Some("0.19.1"),
        );
        let old = servesim_sim::Scenario::from_toml(&old.unwrap().0, "t").unwrap();
        assert_eq!(
            (old.groups[0].scheduler.max_num_seqs, old.groups[0].scheduler.max_num_batched_tokens),
            (1024, 8192)
        );
        // --watermark (0.24.0 on) is vLLM V1's own watermark; before 0.24 the flag is refused.
        let (s, _) = scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct --watermark 0.05");
        assert!(
            s.resolved_toml().contains("long_prefill_token_threshold = 0\nwatermark = 0.05"),
            "{}",
            s.resolved_toml()
        );
        let old = scenario(
            Engine::Vllm,
            "h100-sxm",
            &args("meta-llama/Llama-3.1-8B-Instruct --watermark 0.05"),
            Some("0.23.0"),
        );
        assert!(old.unwrap_err().to_string().contains("--watermark: vLLM 0.23.0 has no such flag (it came in 0.24.0)"));
        assert!(err("meta-llama/Llama-3.1-8B-Instruct --watermark 1")
            .contains("--watermark: not a number in [0, 1): \"1\""));
        // Without chunked prefill (continuous batching) the watermark is vLLM V1's: none, or its own.
        let resolved = |cmd: &str| scenario_of(Engine::Vllm, "h100-sxm", cmd).0.resolved_toml();
        let nc = "meta-llama/Llama-3.1-8B-Instruct --no-enable-chunked-prefill";
        assert!(resolved(nc).contains("\nwatermark = 0.0\n"), "{}", resolved(nc));
        assert!(resolved(&format!("{nc} --watermark 0.05")).contains("\nwatermark = 0.05\n"));
        // --kv-offloading-size (GiB over the engine core's TP GPUs) as the prefix cache's CPU tier.
        let (s, _) =
            scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct -tp 2 --kv-offloading-size 64");
        assert!(s.resolved_toml().contains("cpu_gib = 32.0"), "{}", s.resolved_toml());
        let (s, warn) = scenario_of(
            Engine::Vllm,
            "h100-sxm",
            "meta-llama/Llama-3.1-8B-Instruct --kv-offloading-size 64 --kv-offloading-backend lmcache",
        );
        assert!(!s.resolved_toml().contains("cpu_gib = 64") && warn.iter().any(|w| w.contains("lmcache: left out")));
        let (_, warn) = scenario_of(
            Engine::Vllm,
            "h100-sxm",
            "meta-llama/Llama-3.1-8B-Instruct --kv-offloading-size 64 --no-enable-prefix-caching",
        );
        assert!(warn.iter().any(|w| w.contains("--kv-offloading-size 64: left out")), "{warn:?}");
        assert!(err("meta-llama/Llama-3.1-8B-Instruct --kv-offloading-size -1").contains("not a number of GiB ≥ 0"));
        // --long-prefill-token-threshold-adaptive (0.31.0 on) goes to vLLM V1's scheduler.
        let cmd = "meta-llama/Llama-3.1-8B-Instruct --long-prefill-token-threshold 512 --long-prefill-token-threshold-adaptive";
        assert!(scenario_of(Engine::Vllm, "h100-sxm", cmd)
            .0
            .resolved_toml()
            .contains("long_prefill_token_threshold_adaptive = true"));
        // --no-scheduler-reserve-full-isl goes to the scheduler as written.
        let (s, _) =
            scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct --no-scheduler-reserve-full-isl");
        assert!(
            s.resolved_toml()
                .contains("kind = \"vllm-v1\"\nlong_prefill_token_threshold = 0\nreserve_full_isl = false"),
            "{}",
            s.resolved_toml()
        );
    }

    #[test]
    fn from_vllm_reads_the_scheduling_policy_and_the_admission_limit() {
        let m = "meta-llama/Llama-3.1-8B-Instruct";
        let resolved = |cmd: &str| scenario_of(Engine::Vllm, "h100-sxm", &format!("{m} {cmd}")).0.resolved_toml();
        let err =
            |cmd: &str, v| scenario(Engine::Vllm, "h100-sxm", &args(&format!("{m} {cmd}")), v).unwrap_err().to_string();
        // --scheduling-policy (SchedulerConfig.policy, vllm/config/scheduler.py: "fcfs" or
        // "priority", 0.16.0 and 0.34.0): priority is the queue's, and the class the priority.
        assert!(resolved("--scheduling-policy priority").contains("[scheduler.queue]\nkind = \"priority\""));
        assert!(resolved("--scheduling-policy fcfs").contains("[scheduler.queue]\nkind = \"fcfs\""));
        let (_, warn) = scenario_of(Engine::Vllm, "h100-sxm", &format!("{m} --scheduling-policy priority"));
        assert!(warn.iter().any(|w| w.starts_with("--scheduling-policy priority: a request's priority is its class")));
        assert!(
            err("--scheduling-policy lifo", None).contains("--scheduling-policy \"lifo\": vLLM takes fcfs or priority")
        );
        let nc = format!("{m} --scheduling-policy priority --no-enable-chunked-prefill");
        let (_, warn) = scenario_of(Engine::Vllm, "h100-sxm", &nc);
        assert!(warn.iter().any(|w| w.contains("preempts the last admitted request, not vLLM's")), "{warn:?}");
        // --max-num-active-seqs (0.31.0 on): admission into running, --max-num-seqs kept for the
        // runner (and the memory); above it vLLM refuses to start, and so does 0.30.0's parser.
        let r = resolved("--max-num-seqs 256 --max-num-active-seqs 64");
        assert!(r.contains("max_num_seqs = 256") && r.contains("max_num_active_seqs = 64"), "{r}");
        let (text, _) =
            scenario(Engine::Vllm, "h100-sxm", &args(&format!("{m} --max-num-active-seqs 2048")), None).unwrap();
        let e = servesim_sim::Scenario::from_toml(&text, "t").unwrap_err().to_string();
        assert!(e.contains("\"max_num_active_seqs (2048) cannot be greater than max_num_seqs (1024).\""), "{e}");
        let e = err("--max-num-active-seqs 64", Some("0.30.0"));
        assert!(e.contains("--max-num-active-seqs: vLLM 0.30.0 has no such flag (it came in 0.31.0)"), "{e}");
        let (s, warn) =
            scenario_of(Engine::Vllm, "h100-sxm", &format!("{m} --no-enable-chunked-prefill --max-num-active-seqs 64"));
        assert!(!s.resolved_toml().contains("max_num_active_seqs"));
        assert!(warn.iter().any(|w| w.starts_with("--max-num-active-seqs 64: left out")), "{warn:?}");
        // --prefill-schedule-interval (0.24.0 on) paces an engine alone from 0.33.0 (each dense
        // DP replica too); before, and with DP attention, it is left out and said.
        let at = |cmd: &str, v| {
            let (text, warn) = scenario(Engine::Vllm, "h100-sxm", &args(&format!("{m} {cmd}")), v).unwrap();
            (text.contains("prefill_schedule_interval = 4"), warn.join("\n"))
        };
        assert!(at("--prefill-schedule-interval 4", None).0);
        assert!(at("--prefill-schedule-interval 4 --data-parallel-size 2", Some("0.33.0")).0);
        let (written, warn) = at("--prefill-schedule-interval 4", Some("0.32.0"));
        assert!(
            !written
                && warn.contains(
                    "--prefill-schedule-interval 4: left out: vLLM 0.32.0 paces prefill only across DP ranks"
                ),
            "{warn}"
        );
        let e = err("--prefill-schedule-interval 4", Some("0.23.0"));
        assert!(e.contains("--prefill-schedule-interval: vLLM 0.23.0 has no such flag (it came in 0.24.0)"), "{e}");
        let dp = "--prefill-schedule-interval 4 -tp 1 --data-parallel-size 8 --enable-expert-parallel";
        let (text, warn) =
            scenario(Engine::Vllm, "h200", &args(&format!("deepseek-ai/DeepSeek-R1 {dp}")), None).unwrap();
        assert!(
            !text.contains("prefill_schedule_interval") && warn.iter().any(|w| w.contains("DP coordinator")),
            "{warn:?}"
        );
    }

    #[test]
    fn from_sglang_reads_priority_scheduling_and_its_preemption() {
        // `--enable-priority-scheduling` sorts SGLang's waiting queue by priority, then arrival
        // (`_sort_by_priority_and_fcfs`, managers/schedule_policy.py, 0.5.15).
        let m = "--model-path meta-llama/Llama-3.1-8B-Instruct --enable-priority-scheduling";
        let (s, warn) = scenario_of(Engine::Sglang, "h100-sxm", m);
        assert!(s.resolved_toml().contains("[scheduler.queue]\nkind = \"priority\""), "{}", s.resolved_toml());
        assert!(warn.iter().any(|w| w.contains("SGLang serves the highest priority values first")), "{warn:?}");
        // Its preemption, on unless --disable-priority-preemption (`PrefillAdder.preempt_to_schedule`).
        assert!(s.resolved_toml().contains("priority_preemption_threshold = 10"), "{}", s.resolved_toml());
        let (s, _) =
            scenario_of(Engine::Sglang, "h100-sxm", &format!("{m} --priority-scheduling-preemption-threshold 2"));
        assert!(s.resolved_toml().contains("priority_preemption_threshold = 2"));
        let (s, warn) = scenario_of(
            Engine::Sglang,
            "h100-sxm",
            &format!("{m} --schedule-low-priority-values-first --disable-priority-preemption"),
        );
        assert!(warn.iter().any(|w| w.contains("serves the lowest priority values first")), "{warn:?}");
        assert!(!s.resolved_toml().contains("priority_preemption_threshold"));
        let e = scenario(
            Engine::Sglang,
            "h100-sxm",
            &args(&format!("{m} --priority-scheduling-preemption-threshold x")),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--priority-scheduling-preemption-threshold: not a whole number: \"x\""), "{e}");
        // Without it the queue is SGLang's FCFS.
        let (s, _) = scenario_of(Engine::Sglang, "h100-sxm", "--model-path meta-llama/Llama-3.1-8B-Instruct");
        assert!(s.resolved_toml().contains("[scheduler.queue]\nkind = \"fcfs\""));
    }

    #[test]
    fn switches_are_read_as_the_engines_parsers_read_them() {
        // argparse's store_true and BooleanOptionalAction take no value: the engine refuses
        // `--flag=false`, and so does servesim, saying what to write instead.
        let err = |engine, cmd: &str| scenario(engine, "h100-sxm", &args(cmd), None).unwrap_err().to_string();
        let e = err(Engine::Vllm, "meta-llama/Llama-3.1-8B-Instruct --async-scheduling=false");
        assert!(
            e.contains("--async-scheduling=false: vllm serve takes no value")
                && e.ends_with("or --no-async-scheduling"),
            "{e}"
        );
        let e = err(Engine::Sglang, "--model-path meta-llama/Llama-3.1-8B-Instruct --enable-mixed-chunk=false");
        assert!(e.contains("--enable-mixed-chunk=false: SGLang takes no value") && e.contains("leave it out"), "{e}");
        let e = err(Engine::Vllm, "meta-llama/Llama-3.1-8B-Instruct --trust-remote-code=true");
        assert!(e.contains("--trust-remote-code=true"), "{e}");
        // The negative forms, and the last of repeated flags wins (argparse's rule).
        let (s, _) = scenario_of(
            Engine::Vllm,
            "h100-sxm",
            "meta-llama/Llama-3.1-8B-Instruct --async-scheduling --no-async-scheduling --max-num-seqs 8 --max-num-seqs=16",
        );
        assert!(!s.resolved_toml().contains("overlap = true"), "{}", s.resolved_toml());
        assert_eq!(s.groups[0].scheduler.max_num_seqs, 16);
        let (s, _) = scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct --async-scheduling");
        assert!(s.resolved_toml().contains("overlap = true"));
        // A dtype servesim does not model is named, not dropped.
        let (_, warn) = scenario_of(
            Engine::Vllm,
            "h100-sxm",
            "meta-llama/Llama-3.1-8B-Instruct --dtype float32 --no-async-scheduling",
        );
        assert_eq!(warn.len(), 1, "{warn:?}");
        assert!(
            warn[0].starts_with("--dtype float32: servesim sizes and prices unquantized weights as 16-bit"),
            "{warn:?}"
        );
        let (_, warn) =
            scenario_of(Engine::Sglang, "h100-sxm", "--model-path meta-llama/Llama-3.1-8B-Instruct --dtype bfloat16");
        // Only the memory fraction's release, assumed without --engine-version.
        assert!(warn.iter().all(|w| w.starts_with("SGLang's default mem_fraction_static assumed")), "{warn:?}");
    }

    /// Without --max-running-requests the scenario leaves max_num_seqs to SGLang's rule on the
    /// pool it plans: Qwen3-32B on one H100 under 0.5.8, 19,024 tokens (`servesim memory
    /// --model qwen3-32b --gpu h100-sxm --engine sglang --engine-version 0.5.8`) at its 40,960
    /// context: ⌊19,024 / 40,960 × 512⌋ = 237, held up to 2048, under 9,512. With DP attention
    /// each rank's own pool: DeepSeek-R1 over 8 H200 ranks under 0.5.9, at its 163,840 context.
    #[test]
    fn from_sglang_leaves_the_running_requests_to_sglangs_rule() {
        let cmd = "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 1";
        let (text, _) = scenario(Engine::Sglang, "h100-sxm", &args(cmd), Some("0.5.8")).unwrap();
        assert!(!text.contains("max_num_seqs ="), "{text}");
        let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
        assert_eq!((s.groups[0].memory.kv_blocks * 16, s.groups[0].scheduler.max_num_seqs), (19_024, 2048));
        let (s, _) = scenario_of(Engine::Sglang, "h100-sxm", &format!("{cmd} --max-running-requests 8"));
        assert_eq!(s.groups[0].scheduler.max_num_seqs, 8);
        // --cuda-graph-max-bs enters SGLang's default fraction: 32 graphs' batch in place of 256
        // frees 448 MiB of its reserve under 0.5.9, 0.835 → 0.841 (memory::tests).
        let fraction = |extra: &str| {
            let (text, _) =
                scenario(Engine::Sglang, "h100-sxm", &args(&format!("{cmd}{extra}")), Some("0.5.9")).unwrap();
            let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
            s.groups[0].memory.terms.as_ref().map(|t| t.fraction)
        };
        assert_eq!((fraction(""), fraction(" --cuda-graph-max-bs 32")), (Some(0.835), Some(0.841)));
        // --cuda-graph-bs, a list, gives the largest of its sizes and wins over the maximum, as
        // SGLang's ServerArgs sets it.
        assert_eq!(fraction(" --cuda-graph-bs 1 2 4 32 --cuda-graph-max-bs 256"), Some(0.841));
        for (bad, says) in [
            (" --cuda-graph-bs --tp 1", "--cuda-graph-bs: needs one or more values"),
            (" --cuda-graph-bs 1 x", "--cuda-graph-bs: not whole numbers ≥ 1: \"1 x\""),
        ] {
            let e = scenario(Engine::Sglang, "h100-sxm", &args(&format!("{cmd}{bad}")), None).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let dp = "--model-path deepseek-ai/DeepSeek-R1 --tp 8 --dp 8 --enable-dp-attention";
        let (text, _) = scenario(Engine::Sglang, "h200", &args(dp), Some("0.5.9")).unwrap();
        assert!(text.contains("# SGLang's --chunked-prefill-size 8192, over 8 ranks."), "{text}");
        let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
        // 149,840 blocks of 16 over 8 ranks: 299,680 tokens each, ⌊936.5⌋ held up to 2048.
        assert_eq!((s.groups[0].memory.kv_blocks / 8 * 16, s.groups[0].scheduler.max_num_seqs), (299_680, 2048));
    }

    /// InferenceX's DeepSeek-R1 FP8 B200 TP 4 command (SemiAnalysisAI/InferenceX 12ba0ae07,
    /// benchmarks/single_node/dsr1_fp8_b200.sh) as a user would paste it: its receive interval,
    /// limits, memory fraction and FP8 cache are what the scenario runs, and launched again the
    /// interval comes back.
    #[test]
    fn from_sglang_reads_the_receive_interval() {
        let (s, _) = scenario_of(
            Engine::Sglang,
            "b200",
            "python3 -m sglang.launch_server --model-path=deepseek-ai/DeepSeek-R1-0528 --tensor-parallel-size=4 \
             --data-parallel-size=1 --cuda-graph-max-bs 32 --max-running-requests 32 --mem-fraction-static 0.95 \
             --kv-cache-dtype fp8_e4m3 --chunked-prefill-size 8192 --max-prefill-tokens 8192 \
             --scheduler-recv-interval 10 --disable-radix-cache --ep-size 1",
        );
        let g = &s.groups[0];
        assert_eq!(
            (g.scheduler.recv_interval, g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens),
            (10, 32, 8192)
        );
        assert_eq!(s.model.kv_dtype.name(), "fp8");
        let cmd = servesim_sim::scenario::LaunchCommand::of(servesim_sim::scenario::ServingEngine::Sglang, g, &s.model);
        assert!(cmd.args.join(" ").contains("--scheduler-recv-interval 10"), "{:?}", cmd.args);
        let vllm = servesim_sim::scenario::LaunchCommand::of(servesim_sim::scenario::ServingEngine::Vllm, g, &s.model);
        assert!(
            vllm.notes
                .iter()
                .any(|n| n == "simulated with SGLang's --scheduler-recv-interval 10, which vllm does not have"),
            "{:?}",
            vllm.notes
        );
        // 1 is SGLang's default: nothing written. With DP attention: refused, naming the flag.
        let (one, _) = scenario_of(
            Engine::Sglang,
            "h100-sxm",
            "--model-path meta-llama/Llama-3.1-8B-Instruct --scheduler-recv-interval 1",
        );
        assert_eq!(one.groups[0].scheduler.recv_interval, 1);
        let e = scenario(
            Engine::Sglang,
            "h200",
            &args(
                "--model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention --scheduler-recv-interval 30",
            ),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--scheduler-recv-interval 30 with --enable-dp-attention"), "{e}");
        let e = scenario(
            Engine::Sglang,
            "h100-sxm",
            &args("--model-path meta-llama/Llama-3.1-8B-Instruct --scheduler-recv-interval 0"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--scheduler-recv-interval: not a whole number ≥ 1: \"0\""), "{e}");
    }

    #[test]
    fn data_parallel_moe_is_dp_attention_and_dense_dp_is_replicas() {
        let (s, _) = scenario_of(
            Engine::Vllm,
            "h200",
            "deepseek-ai/DeepSeek-R1 --tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel",
        );
        let g = &s.groups[0];
        assert_eq!((g.tp, g.layout.dp_attention, g.layout.ep, g.count), (8, 8, true, 1));
        assert_eq!(s.model.weight_dtype.name(), "fp8");
        let (d, _) = scenario_of(Engine::Vllm, "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct -dp 3");
        assert_eq!((d.groups[0].tp, d.groups[0].count), (1, 3));
        // Behind vLLM's own DP balancer.
        assert!(d.resolved_toml().contains("kind = \"vllm-dp\""), "{}", d.resolved_toml());
        let (sg, warn) = scenario_of(
            Engine::Sglang,
            "h200",
            "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention \
             --ep-size 8 --mem-fraction-static 0.8 --chunked-prefill-size 16384 --max-running-requests 512 --disable-radix-cache \
             --max-prefill-tokens 4096 --schedule-conservativeness 0.5 --enable-mixed-chunk",
        );
        let g = &sg.groups[0];
        assert_eq!((g.tp, g.layout.dp_attention, g.layout.ep), (8, 8, true));
        // SGLang gives each of the 8 ranks its share of the server's limits (chunked_prefill_size
        // // dp_size, max_running_requests // dp_size) and 0.3 × the conservativeness.
        assert_eq!((g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens), (64, 2048));
        assert!(!g.scheduler.prefix_cache.enabled);
        assert!(warn.is_empty(), "{warn:?}");
        let r = sg.resolved_toml();
        assert!(
            r.contains(
                "kind = \"sglang\"\nmax_prefill_tokens = 4096\nschedule_conservativeness = 0.15\nmixed_chunk = true\n"
            ),
            "{r}"
        );
        assert!(r.contains("dp_balance = \"round-robin\""), "{r}");
        // Launched again from the scenario: the server's limits, its DP and EP flags.
        let cmd =
            servesim_sim::scenario::LaunchCommand::of(servesim_sim::scenario::ServingEngine::Sglang, g, &sg.model)
                .args
                .join(" ");
        assert!(
            cmd.contains("--tp 8 --max-running-requests 512 --chunked-prefill-size 16384")
                && cmd.contains("--dp 8 --enable-dp-attention --ep-size 8"),
            "{cmd}"
        );
        // vLLM: DP on a MoE model is DP attention with or without expert parallelism (the
        // experts then a TP group of dp × tp), each engine core with the command's own limits.
        let (v, _) = scenario_of(
            Engine::Vllm,
            "h200",
            "deepseek-ai/DeepSeek-R1 --tensor-parallel-size 2 --data-parallel-size 4 --max-num-seqs 64",
        );
        let g = &v.groups[0];
        assert_eq!((g.tp, g.layout.dp_attention, g.layout.ep, g.count, g.scheduler.max_num_seqs), (8, 4, false, 1, 64));
        assert!(v.resolved_toml().contains("dp_balance = \"vllm-dp\""));
        let cmd = servesim_sim::scenario::LaunchCommand::of(servesim_sim::scenario::ServingEngine::Vllm, g, &v.model)
            .args
            .join(" ");
        assert!(
            cmd.contains("--tensor-parallel-size 2 --max-num-seqs 64") && cmd.contains("--data-parallel-size 4"),
            "{cmd}"
        );
        // SGLang's rule with its fraction, not vLLM's utilisation.
        let t = sg.groups[0].memory.terms.as_ref().unwrap();
        assert_eq!((t.engine.name(), t.fraction), ("sglang", 0.8));
    }

    /// Expert parallelism on a dense model: vLLM refuses the command
    /// (vllm/config/model.py, `ModelConfig._verify_with_expert_parallelism`, vllm-project/vllm
    /// 18ec6629: "Number of experts in the model must be greater than 0 ..."), and so does
    /// servesim, in vLLM's words; SGLang's `--ep-size` acts on MoE layers only: left out with a note.
    #[test]
    fn expert_parallelism_on_a_dense_model_is_read_as_the_engines_read_it() {
        let e = scenario(
            Engine::Vllm,
            "h100-sxm",
            &args("meta-llama/Llama-3.1-8B-Instruct --enable-expert-parallel --data-parallel-size 2"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("vLLM refuses this command for llama-3.1-8b") && e.contains("Number of experts"), "{e}");
        let (s, warn) =
            scenario_of(Engine::Sglang, "h100-sxm", "--model-path meta-llama/Llama-3.1-8B-Instruct --tp 2 --ep-size 2");
        assert_eq!((s.groups[0].tp, s.groups[0].layout.ep), (2, false));
        let others = warn.iter().filter(|w| !w.starts_with("SGLang's default mem_fraction_static assumed"));
        assert_eq!(others.count(), 1, "{warn:?}");
    }

    #[test]
    fn unknown_models_gpus_and_bad_values_are_named() {
        let e = |engine, gpu, cmd| scenario(engine, gpu, &args(cmd), None).unwrap_err().to_string();
        assert!(e(Engine::Vllm, "h100-sxm", "org/Some-Other-Model")
            .contains("model \"org/Some-Other-Model\": no servesim preset"));
        assert!(e(Engine::Vllm, "h9000", "openai/gpt-oss-20b").contains("--gpu: unknown preset \"h9000\""));
        // A GPU users ask for whose figures NVIDIA does not publish: why, and what to do.
        let a10g = e(Engine::Vllm, "a10g", "openai/gpt-oss-20b");
        assert!(
            a10g.contains("unknown preset \"a10g\" (AWS's A10G has no NVIDIA datasheet") && a10g.contains("\"a10\""),
            "{a10g}"
        );
        assert!(!e(Engine::Vllm, "h9000", "openai/gpt-oss-20b").contains("datasheet"));
        assert!(e(Engine::Vllm, "h100-sxm", "openai/gpt-oss-20b --max-num-seqs lots")
            .contains("--max-num-seqs: not a whole number ≥ 1: \"lots\""));
        assert!(
            e(Engine::Vllm, "h100-sxm", "openai/gpt-oss-20b --max-num-seqs").contains("--max-num-seqs: needs a value")
        );
        // An SGLang value is named as SGLang spells it, not as vLLM does.
        for (flag, says) in [
            ("--max-running-requests 0", "--max-running-requests: not a whole number ≥ 1: \"0\""),
            ("--chunked-prefill-size x", "--chunked-prefill-size: not a whole number ≥ 1: \"x\""),
            ("--page-size 0", "--page-size: not a whole number ≥ 1: \"0\""),
            ("--context-length -5", "--context-length: not a whole number ≥ 1: \"-5\""),
        ] {
            let cmd = args(&format!("--model-path Qwen/Qwen3-8B {flag}"));
            let got = scenario(Engine::Sglang, "h100-sxm", &cmd, None).unwrap_err().to_string();
            assert!(got.contains(says), "{got}");
        }
        assert!(e(Engine::Sglang, "h100-sxm", "--tp 2").contains("names no model"));
        assert!(e(Engine::Sglang, "h100-sxm", "--model-path meta-llama/Llama-3.1-8B-Instruct --mem-fraction-static 1")
            .contains("--mem-fraction-static: not a number in (0, 1): \"1\""));
    }

    #[test]
    fn vllms_human_readable_counts_are_read_as_vllm_reads_them() {
        // vllm/utils/argparse_utils.py at 0.34.0: k, m, g, t are powers of 1000 (decimals allowed,
        // truncated by int()); K, M, G, T powers of 1024.
        let limits = |flags: &str| {
            let (s, _) = scenario_of(Engine::Vllm, "h100-sxm", &format!("meta-llama/Llama-3.1-8B-Instruct {flags}"));
            (s.groups[0].max_model_len, s.groups[0].scheduler.max_num_batched_tokens)
        };
        assert_eq!(limits("--max-model-len 32k --max-num-batched-tokens 16K"), (32_000, 16_384));
        assert_eq!(limits("--max-model-len=25.6k --max-num-batched-tokens 0.5k"), (25_600, 500));
        assert_eq!(limits("--max-model-len 2K"), (2048, 8192));
        let e = |flags: &str| {
            let cmd = args(&format!("meta-llama/Llama-3.1-8B-Instruct {flags}"));
            scenario(Engine::Vllm, "h100-sxm", &cmd, None).unwrap_err().to_string()
        };
        assert!(e("--max-model-len 1.5K").contains(
            "--max-model-len 1.5K: vLLM refuses decimals with a binary suffix (\"Decimals are not allowed with binary \
             suffixes like K. Did you mean to use 1.5k instead?\")"
        ));
        for bad in ["k", "1x", "-2k", "1e3", "0k", "99999999999T"] {
            let got = e(&format!("--max-num-batched-tokens {bad}"));
            assert!(
                got.contains(&format!(
                    "--max-num-batched-tokens: not a whole number ≥ 1 (or one like 32k, 1M): \"{bad}\""
                )),
                "{got}"
            );
        }
        // SGLang's --context-length is a plain count.
        let cmd = args("--model-path meta-llama/Llama-3.1-8B-Instruct --context-length 32k");
        let got = scenario(Engine::Sglang, "h100-sxm", &cmd, None).unwrap_err().to_string();
        assert!(got.contains("--context-length: not a whole number ≥ 1: \"32k\""), "{got}");
    }

    #[test]
    fn a_vllm_command_whose_context_the_kv_cache_cannot_hold_is_refused_as_vllm_refuses_it() {
        // Llama-3.1-70B over two H100s at vLLM's defaults: its 131,072-token context needs 20 GiB
        // of KV cache per GPU, and the pool holds a few thousand tokens; vLLM stops at start-up.
        let (text, _) =
            scenario(Engine::Vllm, "h100-sxm", &args("meta-llama/Llama-3.1-70B-Instruct -tp 2"), None).unwrap();
        let got = servesim_sim::Scenario::from_toml(&text, "t").unwrap_err().to_string();
        assert!(
            got.contains("vLLM does not start with max_model_len 131072")
                && got.contains("(20.00 GiB KV cache is needed"),
            "{got}"
        );
        // --max-model-len auto (or -1): the longest request the pool holds, all blocks but vLLM's
        // null block.
        for auto in ["auto", "-1", "AUTO"] {
            let (s, _) = scenario_of(
                Engine::Vllm,
                "h100-sxm",
                &format!("meta-llama/Llama-3.1-70B-Instruct -tp 2 --max-model-len {auto}"),
            );
            let g = &s.groups[0];
            assert_eq!(g.max_model_len, (g.memory.kv_blocks - 1) * 16, "{auto}");
        }
        // And on two H200s the whole context fits.
        let (s, _) = scenario_of(Engine::Vllm, "h200", "meta-llama/Llama-3.1-70B-Instruct -tp 2 --max-model-len auto");
        assert_eq!(s.groups[0].max_model_len, 131_072);
    }

    #[test]
    fn sglangs_chunked_prefill_off_is_a_prefill_batch_of_max_prefill_tokens() {
        let of = |flags: &str| {
            let cmd = format!("--model-path meta-llama/Llama-3.1-8B-Instruct {flags}");
            let (s, _) = scenario_of(Engine::Sglang, "h100-sxm", &cmd);
            (s.groups[0].scheduler.max_num_batched_tokens, s.groups[0].memory.kv_bytes as f64 / (1u64 << 30) as f64)
        };
        let (chunk, kv_chunked) = of("--chunked-prefill-size 8192");
        assert_eq!(chunk, 8192);
        // SGLang 0.5.15 reserves 1.5 MB per token of the chunk, or of --max-prefill-tokens with
        // chunking off (server_args.py, _handle_gpu_memory_settings): 1.5 × (16384 − 8192) MB
        // = 12 GiB more, out of the KV cache (to the 0.001 the fraction is rounded to: 0.08 GiB).
        for off in ["-1", "0", "-5"] {
            let (budget, kv) = of(&format!("--chunked-prefill-size {off}"));
            assert_eq!(budget, 16384, "{off}");
            assert!((kv_chunked - kv - 12.0).abs() < 0.1, "{kv_chunked} {kv}");
        }
        let (budget, kv) = of("--chunked-prefill-size -1 --max-prefill-tokens 32768");
        assert_eq!(budget, 32768);
        assert!((kv_chunked - kv - 36.0).abs() < 0.1, "{kv_chunked} {kv}");
        // The comment says what is kept and what is not.
        let (text, _) = scenario(
            Engine::Sglang,
            "h100-sxm",
            &args("--model-path meta-llama/Llama-3.1-8B-Instruct --chunked-prefill-size -1"),
            None,
        )
        .unwrap();
        assert!(text.contains("# --chunked-prefill-size -1: chunked prefill off; a prefill batch holds up to --max-prefill-tokens 16384"), "{text}");
    }

    /// A checkpoint directory `name` under `tmp` holding `config` as its config.json; its path.
    fn checkpoint_dir(tmp: &Path, name: &str, config: &str) -> String {
        let dir = tmp.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), config).unwrap();
        dir.display().to_string()
    }

    /// Qwen/Qwen2.5-7B-Instruct's config.json (the keys servesim reads): no preset has it.
    const QWEN25_7B: &str = r#"{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
        "intermediate_size": 18944, "max_position_embeddings": 32768, "num_attention_heads": 28,
        "num_hidden_layers": 28, "num_key_value_heads": 4, "sliding_window": 131072,
        "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 152064}"#;

    /// Mistral-7B-v0.1's config.json windows every layer (sliding_window 4096): refused, as
    /// servesim models windows beside full-attention layers only, unless vLLM's
    /// --disable-sliding-window runs every layer fully with the context capped at the window
    /// (`_get_and_verify_max_len`, vllm/config/model.py at 0.11.2).
    #[test]
    fn a_config_json_window_on_every_layer_is_refused_unless_vllm_disables_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my-mistral");
        std::fs::create_dir_all(&dir).unwrap();
        let mistral = QWEN25_7B
            .replace("Qwen2ForCausalLM", "MistralForCausalLM")
            .replace("\"sliding_window\": 131072", "\"sliding_window\": 4096");
        std::fs::write(dir.join("config.json"), &mistral).unwrap();
        let cmd = |extra: &str| args(&format!("{} {extra}", dir.display()));
        let e = scenario_with(Engine::Vllm, "h100-sxm", &cmd(""), None, None).unwrap_err().to_string();
        assert!(e.contains("sliding_window 4096 on every layer") && e.contains("--disable-sliding-window"), "{e}");
        let (text, warn) =
            scenario_with(Engine::Vllm, "h100-sxm", &cmd("--disable-sliding-window"), None, None).unwrap();
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!((s.model.arch.window, s.model.max_context), (None, 4096));
        // A preset's windows are kept, and the flag says so.
        let (_, warn) = scenario_with(
            Engine::Vllm,
            "h100-sxm",
            &args("openai/gpt-oss-120b -tp 8 --disable-sliding-window"),
            None,
            None,
        )
        .unwrap();
        assert!(warn.iter().any(|w| w.contains("not applied to the preset gpt-oss-120b")), "{warn:?}");
    }

    /// Qwen's 2507 releases of Qwen3 keep the network of their preset and give a context of
    /// 262,144 (`max_position_embeddings`; the originals 40,960): a 131,072-token
    /// `--max-model-len` is the user's to set, not refused, and the scenario says the context.
    /// Kimi-K2.5 runs as Kimi-K2's network, its vision encoder said to be left out.
    #[test]
    fn a_checkpoints_own_context_goes_with_its_preset() {
        let cmd = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 -tp 8 --max-model-len 131072";
        let (s, _) = scenario_of(Engine::Vllm, "h200", cmd);
        assert_eq!((s.model.max_context, s.groups[0].max_model_len), (262_144, 131_072));
        let (text, _) = scenario(Engine::Vllm, "h200", &args(cmd), None).unwrap();
        assert!(text.contains("preset = \"qwen3-235b-a22b\"\n# Qwen/Qwen3-235B-A22B-Instruct-2507-FP8's config.json gives a context of 262144 tokens.\nmax_context = 262144\n"), "{text}");
        let (s, _) = scenario_of(Engine::Vllm, "h200", "Qwen/Qwen3-235B-A22B-FP8 -tp 8");
        assert_eq!(s.model.max_context, 40_960);
        let (_, warn) = scenario(Engine::Vllm, "b200", &args("nvidia/Kimi-K2.5-NVFP4 -tp 8"), None).unwrap();
        assert!(warn.iter().any(|w| w.contains("runs as the preset kimi-k2: its vision encoder")), "{warn:?}");
    }

    /// Block-scaled FP8 (`quantization_config.weight_block_size`, as MiniMax-M2.5's config.json
    /// in aiconfigurator-core 0.12.0's `model_configs/` gives it) is the database's fp8-block;
    /// FP8 without blocks, or quantized online by `--quantization fp8`, is not. Qwen's own FP8
    /// releases are assumed block-scaled, and that is said.
    #[test]
    fn block_scaled_fp8_is_priced_as_the_databases_fp8_block() {
        let tmp = tempfile::tempdir().unwrap();
        let minimax = |dir: &str, quant: &str| {
            let config = format!(
                r#"{{"architectures": ["MiniMaxM2ForCausalLM"], "head_dim": 128, "hidden_size": 3072,
                "intermediate_size": 1536, "max_position_embeddings": 196608, "num_attention_heads": 48,
                "num_experts_per_tok": 8, "num_hidden_layers": 62, "num_key_value_heads": 8,
                "num_local_experts": 256, "vocab_size": 200064, "quantization_config": {quant}}}"#
            );
            checkpoint_dir(tmp.path(), dir, &config)
        };
        let block = minimax("MiniMax-M2.5", r#"{"quant_method": "fp8", "weight_block_size": [128, 128]}"#);
        let tensor = minimax("MiniMax-per-tensor", r#"{"quant_method": "fp8", "weight_block_size": null}"#);
        let of = |cmd: &str| scenario_with(Engine::Vllm, "h200", &args(cmd), None, None).unwrap();
        let (text, _) = of(&format!("{block} -tp 8"));
        assert!(text.contains(COST_MARK_BLOCK) && text.contains("weight_dtype = \"fp8\""), "{text}");
        let (text, _) = of(&format!("{tensor} -tp 8"));
        assert!(text.contains(COST_MARK) && !text.contains(COST_MARK_BLOCK), "{text}");
        let (text, warn) = of("Qwen/Qwen3-32B-FP8");
        assert!(text.contains(COST_MARK_BLOCK), "{text}");
        assert!(warn.iter().any(|w| w.contains("block-scaled FP8 weights assumed")), "{warn:?}");
        // A preset's own FP8 checkpoint: MiniMax-M2.5 ships block-scaled.
        let (text, _) = of("MiniMaxAI/MiniMax-M2.5 -tp 4");
        assert!(text.contains("preset = \"minimax-m2.5\"") && text.contains(COST_MARK_BLOCK), "{text}");
        let (text, _) = of("Qwen/Qwen3-32B --quantization fp8");
        assert!(!text.contains(COST_MARK_BLOCK) && text.contains("weight_dtype = \"fp8\""), "{text}");
        // Priced by the roofline (no database for a custom GPU), the mark leaves nothing behind.
        let (text, _) = of(&format!("{block} -tp 8"));
        let (priced_text, cost) = priced(&text, Engine::Vllm, "my-gpu", tmp.path()).unwrap();
        assert!(cost.starts_with("cost: the roofline") && !priced_text.contains("{cost source"), "{priced_text}");
    }

    /// llm-compressor's `compressed-tensors` checkpoints name their weights in config groups: 8-bit
    /// floats per channel are fp8 (RedHatAI's `-FP8-dynamic` releases), per 128 × 128 block the
    /// database's fp8-block, 4-bit floats NVFP4; 4-bit ints (W4A16) are named and bf16 assumed.
    #[test]
    fn compressed_tensors_weights_are_read_from_their_config_groups() {
        let tmp = tempfile::tempdir().unwrap();
        let of = |name: &str, weights: &str| {
            let quant = format!(
                r#", "quantization_config": {{"quant_method": "compressed-tensors", "config_groups":
                {{"group_0": {{"targets": ["Linear"], "weights": {weights}}}}}, "ignore": ["lm_head"]}}}}"#
            );
            let dir =
                checkpoint_dir(tmp.path(), name, &(QWEN25_7B.trim_end().trim_end_matches('}').to_string() + &quant));
            scenario_with(Engine::Vllm, "h100-sxm", &args(&dir), None, None).unwrap()
        };
        let (text, _) = of("channel", r#"{"num_bits": 8, "type": "float", "strategy": "channel"}"#);
        assert!(text.contains("weight_dtype = \"fp8\"") && text.contains(COST_MARK), "{text}");
        let (text, _) =
            of("block", r#"{"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}"#);
        assert!(text.contains("weight_dtype = \"fp8\"") && text.contains(COST_MARK_BLOCK), "{text}");
        let (text, _) =
            of("nvfp4", r#"{"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}"#);
        assert!(text.contains("weight_dtype = \"nvfp4\""), "{text}");
        let (text, warn) = of("w4a16", r#"{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}"#);
        assert!(!text.contains("weight_dtype"), "{text}");
        assert!(warn.iter().any(|w| w.contains("\"compressed-tensors 4-bit int\" is not a weight format")), "{warn:?}");
    }

    #[test]
    fn a_model_without_a_preset_is_read_from_its_config_json() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("Qwen2.5-7B-Instruct");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), QWEN25_7B).unwrap();
        let load = |text: &str| servesim_sim::Scenario::from_toml(text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"));
        // A local checkpoint directory the command names.
        let cmd = args(&format!("{} --max-model-len 16k", dir.display()));
        let (text, warn) = scenario_with(Engine::Vllm, "h100-sxm", &cmd, None, None).unwrap();
        let s = load(&text);
        let m = &s.model;
        assert_eq!(
            (m.name.as_str(), m.layers, m.heads, m.kv_heads, m.head_dim),
            ("Qwen2.5-7B-Instruct", 28, 28, 4, 128)
        );
        assert_eq!((m.intermediate, m.vocab, m.max_context, m.experts), (18944, 152064, 32768, 1));
        // By hand, in bf16: per layer attention 3584 × (3584 + 2 × 512) + 3584², FFN 3 × 3584 ×
        // 18944, two norms of 3584; a final norm, and embeddings and head 2 × 152064 × 3584.
        let per_layer = 3584 * (3584 + 2 * 512) + 3584 * 3584 + 3 * 3584 * 18944 + 2 * 3584;
        assert_eq!(m.weight_bytes(), 2 * (28 * per_layer + 3584 + 2 * 152064 * 3584));
        assert!(warn.iter().any(|w| w.contains("read from") && w.contains("no preset has it")), "{warn:?}");
        // The Hugging Face cache's snapshot for a Hub name, where refs/main points.
        let hub = tmp.path().join("hub");
        let snap = hub.join("models--Qwen--Qwen2.5-7B-Instruct/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(hub.join("models--Qwen--Qwen2.5-7B-Instruct/refs")).unwrap();
        std::fs::write(hub.join("models--Qwen--Qwen2.5-7B-Instruct/refs/main"), "abc123\n").unwrap();
        std::fs::write(snap.join("config.json"), QWEN25_7B).unwrap();
        assert_eq!(hub_config(&hub, "Qwen/Qwen2.5-7B-Instruct"), Some(snap.join("config.json")));
        assert_eq!(hub_config(&hub, "Qwen/Qwen2.5-14B-Instruct"), None);
        let (mut got, mut warn) = (BTreeMap::new(), vec![]);
        let (p, _) = model_of("Qwen/Qwen2.5-7B-Instruct", None, &Some(hub.clone()), &mut got, &mut warn).unwrap();
        assert_eq!((p.name(), p.experts), ("Qwen2.5-7B-Instruct", 1));
        // Nowhere: the error says where it looked and what to give.
        let e = model_of("Qwen/Qwen2.5-14B-Instruct", None, &Some(hub.clone()), &mut got, &mut warn)
            .err()
            .expect("an error");
        let e = e.to_string();
        assert!(
            e.contains("no config.json of it was found")
                && e.contains(&hub.display().to_string())
                && e.contains("--model-config"),
            "{e}"
        );
        // A checkpoint quantized to FP8 sizes FP8 weights, as the engine reads its quant_method.
        let fp8 = tmp.path().join("fp8");
        std::fs::create_dir_all(&fp8).unwrap();
        let q =
            QWEN25_7B.replace("\"vocab_size\"", "\"quantization_config\": {\"quant_method\": \"fp8\"}, \"vocab_size\"");
        std::fs::write(fp8.join("config.json"), q).unwrap();
        let (text, _) =
            scenario_with(Engine::Sglang, "h100-sxm", &args(&format!("--model-path {}", fp8.display())), None, None)
                .unwrap();
        assert_eq!(load(&text).model.weight_dtype, Dtype::Fp8);
        // --model-config names the file even for a preset's checkpoint; one servesim cannot read is named.
        let gemma = tmp.path().join("gemma.json");
        std::fs::write(&gemma, r#"{"architectures": ["Gemma3ForConditionalGeneration"]}"#).unwrap();
        let cmd = args("meta-llama/Llama-3.1-8B-Instruct");
        let e = scenario_with(Engine::Vllm, "h100-sxm", &cmd, None, Some(&gemma)).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: architectures [\"Gemma3ForConditionalGeneration\"]: not one", gemma.display())),
            "{e}"
        );
        let e = scenario_with(Engine::Vllm, "h100-sxm", &cmd, None, Some(&tmp.path().join("none.json"))).unwrap_err();
        assert!(e.to_string().contains("none.json"), "{e}");
    }

    #[test]
    fn cuda_graphs_off_is_named_as_not_priced() {
        let (_, warn) = scenario(
            Engine::Vllm,
            "h100-sxm",
            &args("meta-llama/Llama-3.1-8B-Instruct --enforce-eager --port 1"),
            None,
        )
        .unwrap();
        assert!(warn.iter().any(|w| w.starts_with("--enforce-eager: CUDA graphs off")), "{warn:?}");
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let cmd = args("--model-path meta-llama/Llama-3.1-8B-Instruct --disable-cuda-graph");
        let (_, warn) = scenario(Engine::Sglang, "h100-sxm", &cmd, None).unwrap();
        assert!(warn.iter().any(|w| w.starts_with("--disable-cuda-graph: CUDA graphs off")), "{warn:?}");
        let (_, warn) = scenario(Engine::Vllm, "h100-sxm", &args("meta-llama/Llama-3.1-8B-Instruct"), None).unwrap();
        assert!(!warn.iter().any(|w| w.contains("CUDA graphs off")), "{warn:?}");
    }

    #[test]
    fn a_config_file_is_read_as_the_engine_reads_it() {
        let tmp = tempfile::tempdir().unwrap();
        let file = |name: &str, body: &str| {
            let p = tmp.path().join(name);
            std::fs::write(&p, body).unwrap();
            p.display().to_string()
        };
        let yaml = file(
            "c.yaml",
            "max-num-seqs: 128\nmax-num-batched-tokens: 4096\nenable-prefix-caching: false\nkv-cache-dtype: fp8\n\
             gpu-memory-utilization: 0.85\ncompilation-config:\n  cudagraph_capture_sizes: [1, 2]\n",
        );
        // vLLM: the file's flags after the model, the command's own after them (they win).
        let cmd = format!("meta-llama/Llama-3.1-8B-Instruct --config {yaml} --max-num-seqs 512");
        let (s, warn) = scenario_of(Engine::Vllm, "h100-sxm", &cmd);
        let g = &s.groups[0];
        assert_eq!((g.scheduler.max_num_seqs, g.scheduler.max_num_batched_tokens), (512, 4096));
        assert!(!g.scheduler.prefix_cache.enabled);
        assert_eq!(s.model.kv_dtype, Dtype::Fp8);
        assert_eq!(g.memory.terms.as_ref().unwrap().fraction, 0.85);
        let json = "--compilation-config {\"cudagraph_capture_sizes\":[1,2]}";
        assert!(warn.iter().any(|w| w.contains(json)), "{warn:?}");
        let expanded = |engine, cmd: &str| {
            let a = args(cmd);
            with_config_file(engine, &a.iter().map(String::as_str).collect::<Vec<_>>()).unwrap()
        };
        // The model named in the file (no model first): the file's flags lead.
        let m = file("m.yaml", "model: Qwen/Qwen3-8B\nenable-prefix-caching: false\nswap-space: [4]\n");
        assert_eq!(
            expanded(Engine::Vllm, &format!("--config {m} -tp 2")),
            args("--model Qwen/Qwen3-8B --no-enable-prefix-caching --swap-space 4 -tp 2")
        );
        // SGLang: before every flag; a false switch is left out.
        let sg = file("s.yml", "tp: 2\nenable-mixed-chunk: false\ndisable-radix-cache: true\n");
        assert_eq!(
            expanded(Engine::Sglang, &format!("--model-path m --config {sg} --tp 4")),
            args("--tp 2 --disable-radix-cache --model-path m --tp 4")
        );
        // `--config=FILE` is not read by either engine: named as not understood.
        let (_, warn) =
            scenario_of(Engine::Vllm, "h100-sxm", &format!("meta-llama/Llama-3.1-8B-Instruct --config={yaml}"));
        assert!(warn.iter().any(|w| w.contains(&format!("not understood, left out: --config={yaml}"))), "{warn:?}");
        // Errors name the file and say what the engine does.
        let e = |cmd: &str| scenario(Engine::Vllm, "h100-sxm", &args(cmd), None).unwrap_err().to_string();
        assert!(e(&format!("m --config {yaml} --config {yaml}")).contains("More than one config file specified!"));
        assert!(e("m --config").contains("No config file specified!"));
        let json_file = file("c.json", "{}");
        assert!(e(&format!("m --config {json_file}")).contains("reads only a .yaml or .yml config file"));
        let list = file("l.yaml", "- a\n- b\n");
        assert!(
            e(&format!("m --config {list}")).contains(&format!("--config {list}: not a mapping of flags to values"))
        );
        let broken = file("b.yaml", "a: [1, 2\n");
        assert!(e(&format!("m --config {broken}")).starts_with(&format!("--config {broken}: ")));
        let null = file("n.yaml", "max-num-seqs:\n");
        assert!(e(&format!("m --config {null}")).contains("max-num-seqs: no value"));
        assert!(e(&format!("m --config {}", tmp.path().join("none.yaml").display())).contains("none.yaml"));
    }

    #[test]
    fn vllms_kv_cache_memory_bytes_is_the_kv_cache() {
        // 20G is 20 GiB (a binary suffix): 10,240 blocks of 2 MiB.
        let cmd = "meta-llama/Llama-3.1-8B-Instruct --kv-cache-memory-bytes 20G --gpu-memory-utilization 0.3";
        let (s, _) = scenario_of(Engine::Vllm, "h100-sxm", cmd);
        assert_eq!(s.groups[0].memory.kv_blocks, 10_240);
        let (text, _) = scenario(Engine::Vllm, "h100-sxm", &args(cmd), None).unwrap();
        assert!(text.contains("kv_cache_gib = 20\n"), "{text}");
    }

    /// gpt-oss on 8 H100s: its sliding windows draw on the pool (vLLM's hybrid KV cache manager)
    /// unless the command turns that manager off, when all 36 layers are stored as full
    /// attention: blocks twice as large, half as many.
    #[test]
    fn vllms_hybrid_kv_cache_manager_can_be_turned_off() {
        let cmd = "openai/gpt-oss-120b -tp 8";
        let (on, warn) = scenario_of(Engine::Vllm, "h100-sxm", cmd);
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let (off, warn) = scenario_of(Engine::Vllm, "h100-sxm", &format!("{cmd} --disable-hybrid-kv-cache-manager"));
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let (a, b) = (&on.groups[0].memory, &off.groups[0].memory);
        assert_eq!((a.window.map(|w| w.tokens), b.window), (Some(128), None));
        assert_eq!((a.kv_bytes, b.kv_bytes_per_token), (b.kv_bytes, 2 * a.kv_bytes_per_token));
        assert_eq!(b.kv_blocks, a.kv_bytes / (16 * b.kv_bytes_per_token));
        let (text, _) =
            scenario(Engine::Vllm, "h100-sxm", &args(&format!("{cmd} --disable-hybrid-kv-cache-manager")), None)
                .unwrap();
        assert!(text.contains("disable_hybrid_kv_cache_manager = true\n"), "{text}");
        let (text, _) = scenario(Engine::Vllm, "h100-sxm", &args(cmd), None).unwrap();
        assert!(!text.contains("hybrid"), "{text}");
    }

    /// SGLang's --swa-full-tokens-ratio sizes gpt-oss's windowed pool beside the full one:
    /// 0.5 leaves the full-attention pool 1.8 ÷ 1.5 times the default's (to the page).
    #[test]
    fn sglangs_swa_full_tokens_ratio_sizes_the_windowed_pool() {
        let cmd = "--model-path openai/gpt-oss-120b --tp 8";
        let (a, _) = scenario_of(Engine::Sglang, "h200", cmd);
        let (b, warn) = scenario_of(Engine::Sglang, "h200", &format!("{cmd} --swa-full-tokens-ratio 0.5"));
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let (a, b) = (&a.groups[0].memory, &b.groups[0].memory);
        let ratio = b.kv_tokens() as f64 / a.kv_tokens() as f64;
        assert!((ratio - 1.8 / 1.5).abs() < 1e-4, "{ratio}");
        let (text, _) =
            scenario(Engine::Sglang, "h200", &args(&format!("{cmd} --swa-full-tokens-ratio 0.5")), None).unwrap();
        assert!(text.contains("swa_full_tokens_ratio = 0.5\n"), "{text}");
        let e =
            scenario(Engine::Sglang, "h200", &args(&format!("{cmd} --swa-full-tokens-ratio 1.5")), None).unwrap_err();
        assert!(e.to_string().contains("--swa-full-tokens-ratio: not a number in (0, 1]"), "{e}");
        // --disable-hybrid-swa-memory: all 36 layers in one pool, twice the bytes a token.
        let (c, warn) = scenario_of(Engine::Sglang, "h200", &format!("{cmd} --disable-hybrid-swa-memory"));
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let c = &c.groups[0].memory;
        assert_eq!((c.kv_bytes_per_token, c.swa_tokens), (2 * a.kv_bytes_per_token, 0));
        let (text, _) =
            scenario(Engine::Sglang, "h200", &args(&format!("{cmd} --disable-hybrid-swa-memory")), None).unwrap();
        assert!(text.contains("disable_hybrid_swa_memory = true\n"), "{text}");
    }

    #[test]
    fn sglangs_max_total_tokens_is_the_pools_cap() {
        let cmd = "--model-path meta-llama/Llama-3.1-8B-Instruct --max-total-tokens 100000";
        let (s, warn) = scenario_of(Engine::Sglang, "h100-sxm", cmd);
        assert_eq!(s.groups[0].memory.kv_blocks, 6250);
        assert!(!warn.iter().any(|w| w.contains("not understood")), "{warn:?}");
        let cmd = args("--model-path meta-llama/Llama-3.1-8B-Instruct --max-total-tokens lots");
        let e = scenario(Engine::Sglang, "h100-sxm", &cmd, None).unwrap_err().to_string();
        assert!(e.contains("--max-total-tokens: not a whole number ≥ 1: \"lots\""), "{e}");
    }

    #[test]
    fn the_engines_entry_points_are_taken_off_the_command() {
        for (engine, cmd) in [
            (Engine::Vllm, "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64"),
            (Engine::Vllm, "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64"),
            (Engine::Sglang, "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --max-running-requests 64"),
            (Engine::Sglang, "sglang serve --model-path meta-llama/Llama-3.1-8B-Instruct --max-running-requests 64"),
        ] {
            let (s, warn) = scenario_of(engine, "h100-sxm", cmd);
            assert_eq!((s.model.name.as_str(), s.groups[0].scheduler.max_num_seqs), ("llama-3.1-8b", 64), "{cmd}");
            assert!(!warn.iter().any(|w| w.contains("not understood")), "{cmd}: {warn:?}");
        }
        // Environment assignments pasted before the program are left out, and said so.
        let cmd = "CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2";
        let (s, warn) = scenario_of(Engine::Vllm, "h100-sxm", cmd);
        assert_eq!((s.model.name.as_str(), s.groups[0].tp), ("llama-3.1-8b", 2));
        assert!(
            warn.iter().any(|w| w == "not understood, left out: CUDA_VISIBLE_DEVICES=0,1, VLLM_USE_V1=1"),
            "{warn:?}"
        );
    }

    #[test]
    fn vllms_asynchronous_scheduling_follows_the_engine_version() {
        // vLLM schedules asynchronously by default from 0.14 (vllm-project/vllm PR #27614); the
        // command's own flag wins over the version's default.
        let overlap = |cmd: &str, version: Option<&str>| {
            let (text, warn) = scenario(Engine::Vllm, "h100-sxm", &args(cmd), version).unwrap();
            let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
            let assumed = warn.iter().any(|w| w.starts_with("asynchronous scheduling assumed on"));
            (s.resolved_toml().contains("overlap = true"), assumed)
        };
        let m = "meta-llama/Llama-3.1-8B-Instruct";
        assert_eq!(overlap(m, None), (true, true));
        assert_eq!(overlap(m, Some("0.13.1")), (false, false));
        assert_eq!(overlap(m, Some("0.14.0")), (true, false));
        assert_eq!(overlap(m, Some("v0.15.0rc1")), (true, false));
        assert_eq!(overlap(&format!("{m} --no-async-scheduling"), None), (false, false));
        assert_eq!(overlap(&format!("{m} --no-async-scheduling"), Some("0.18.0")), (false, false));
        assert_eq!(overlap(&format!("{m} --async-scheduling"), Some("0.12.0")), (true, false));
        // A version that is not one: the flag and the value.
        let e = scenario(Engine::Vllm, "h100-sxm", &args(m), Some("latest")).unwrap_err().to_string();
        assert!(e.contains("--engine-version \"latest\": expected a version such as 0.14.1"), "{e}");
        // SGLang's memory fraction follows the release (server_args.py of each sdist; the
        // figures by hand in memory::tests): H100, TP 1, chunk 8192: 0.874 in 0.5.2, 0.835 in
        // 0.5.9, 0.830 from 0.5.10 — the newest read without a version, which is said.
        let fraction = |cmd: &str, v: Option<&str>| {
            let (text, warn) = scenario(Engine::Sglang, "h100-sxm", &args(cmd), v).unwrap();
            let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
            let assumed =
                warn.iter().any(|w| w.starts_with("SGLang's default mem_fraction_static assumed as 0.5.15's"));
            (s.groups[0].memory.terms.as_ref().unwrap().fraction, assumed)
        };
        let sg = format!("--model-path {m}");
        assert_eq!(fraction(&sg, Some("0.5.2")), (0.874, false));
        assert_eq!(fraction(&sg, Some("0.5.9")), (0.835, false));
        assert_eq!(fraction(&sg, None), (0.830, true));
        // The command's own fraction: nothing assumed.
        assert_eq!(fraction(&format!("{sg} --mem-fraction-static 0.8"), None), (0.8, false));
        // A smaller chunk reserves less (0.5.9: 512 + 1.5 × 4096 + 512 + 128 = 7,296 MiB, then
        // the 10 GiB floor of a GPU above 60 GiB: 0.874).
        assert_eq!(fraction(&format!("{sg} --chunked-prefill-size 4096"), Some("0.5.9")), (0.874, false));
        // Before 0.4.8: 0.4.8's rules, said.
        let (_, warn) = scenario(Engine::Sglang, "h100-sxm", &args(&sg), Some("0.4.6")).unwrap();
        assert!(warn.iter().any(|w| w.starts_with("SGLang 0.4.6: its memory fraction")), "{warn:?}");
        // Before 0.8 vLLM ran V0 by default: said, once, and not for 0.8 itself.
        let v0 = |v: &str| {
            let (_, warn) = scenario(Engine::Vllm, "h100-sxm", &args(m), Some(v)).unwrap();
            warn.iter().filter(|w| w.contains("V0 engine by default")).count()
        };
        assert_eq!((v0("0.7.3"), v0("0.8.0"), v0("0.14.0")), (1, 0, 0));
    }

    #[test]
    fn vllms_default_limits_follow_the_engine_version() {
        // vllm/engine/arg_utils.py of each release's sdist: on a B200, 256 sequences and 2048
        // tokens in 0.8.4 (its rule named the H100 and H200 only), 1024 and 8192 from 0.8.5,
        // 16384 tokens from 0.28.0.
        let m = "meta-llama/Llama-3.1-8B-Instruct";
        let limits = |gpu: &str, cmd: &str, version: Option<&str>| {
            let (text, warn) = scenario(Engine::Vllm, gpu, &args(cmd), version).unwrap();
            let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
            let sch = &s.groups[0].scheduler;
            let warned = warn.iter().any(|w| w.starts_with("--max-num-seqs / --max-num-batched-tokens not given"));
            (sch.max_num_seqs, sch.max_num_batched_tokens, warned)
        };
        assert_eq!(limits("b200", m, Some("0.8.4")), (256, 2048, false));
        assert_eq!(limits("b200", m, Some("0.19.0")), (1024, 8192, false));
        assert_eq!(limits("b200", m, Some("0.28.1")), (1024, 16384, false));
        // Without a version, the newest release read, and the warning says from when.
        assert_eq!(limits("b200", m, None), (1024, 16384, true));
        let (_, warn) = scenario(Engine::Vllm, "b200", &args(m), None).unwrap();
        assert!(
            warn.iter().any(|w| w
                .contains("1024 and 16384, vLLM's defaults on this GPU from 0.28.0 (older releases: 1024 and 8192)")),
            "{warn:?}"
        );
        // On an H100 every release since 0.8.0 chose the same: nothing to warn of.
        assert_eq!(limits("h100-sxm", m, None), (1024, 8192, false));
        // The command's own limits win, and with both given nothing is assumed.
        assert_eq!(
            limits("b200", &format!("{m} --max-num-seqs 64 --max-num-batched-tokens 4096"), None),
            (64, 4096, false)
        );
        assert_eq!(limits("b200", &format!("{m} --max-num-seqs 64"), Some("0.8.4")), (64, 2048, false));
        // The scenario records the release, which its resolve reads again.
        let (text, _) = scenario(Engine::Vllm, "b200", &args(m), Some("v0.8.4")).unwrap();
        assert!(text.contains("engine = \"vllm\"\nengine_version = \"0.8.4\"\n"), "{text}");
    }

    #[test]
    fn asynchronous_scheduling_with_pipeline_stages_as_each_vllm_release_takes_it() {
        // 0.14: off by default with pipeline stages, refused when asked for; 0.16.0: allowed
        // (vllm/config/vllm.py of each release's sdist).
        let m = "meta-llama/Llama-3.1-8B-Instruct -pp 2";
        let overlap = |cmd: &str, version: &str| {
            let (text, _) = scenario(Engine::Vllm, "h100-sxm", &args(cmd), Some(version)).unwrap();
            let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap();
            s.resolved_toml().contains("overlap = true")
        };
        assert!(!overlap(m, "0.14.1"));
        assert!(overlap(m, "0.16.0"));
        assert!(overlap(&format!("{m} --async-scheduling"), "0.16.0"));
        let e = scenario(Engine::Vllm, "h100-sxm", &args(&format!("{m} --async-scheduling")), Some("0.14.1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--async-scheduling with --pipeline-parallel-size 2: vLLM 0.14.1 refuses it"), "{e}");
    }
}
