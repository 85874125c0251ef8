//! A launch command's speculative decoding as `[scheduler.speculative]`: vLLM's
//! `--speculative-config` (`SpeculativeConfig`, vllm/config/speculative.py at 0.11.2 and
//! 0.34.0) and SGLang's `--speculative-algorithm` with its step flags (`speculative_hook.py`
//! at 0.5.15).
//!
//! ```text
//!   method          draft (what each of the k proposals costs)            acceptance default
//!   mtp, NEXTN      the model's own MTP layer, run once per proposal      InferenceX's median
//!   eagle, eagle3   one decoder layer of the model's width (assumed)      InferenceX's median
//!   draft_model,    the named checkpoint, where a preset has it           InferenceX's median
//!    STANDALONE
//!   ngram, suffix   none: a lookup on the CPU (draft_cost_fraction = 0)   none: must be given
//! ```
//! The acceptance is the command's own where the engine is told to force it (vLLM's
//! `rejection_sample_method: synthetic`, SGLang's `SGLANG_SIMULATE_ACC_LEN`), else
//! `--acceptance-length` / `--acceptance-rates` (the numbers the engine logs on the user's
//! traffic), else an assumption said on stderr and in the file.

use std::collections::BTreeMap;

use servesim_sim::memory::EngineVersion;
use servesim_sim::spec::{ModelPreset, ModelSpec};

use super::Engine;
use crate::error::{CliError, Result};

/// The acceptance `scenario from-vllm` / `from-sglang` were given (`--acceptance-length`,
/// `--acceptance-rates`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Given {
    pub(crate) length: Option<f64>,
    pub(crate) rates: Option<Vec<f64>>,
}

/// Mean acceptance lengths (tokens per step, the bonus token included) at 1 to 8 proposed
/// tokens: the median of InferenceX's eleven golden curves for MTP and EAGLE-3 drafts
/// (SemiAnalysisAI/InferenceX, `golden_al_distribution/*.yaml` at 843c6254f, Apache-2.0:
/// DeepSeek-V4-Pro and Qwen3.5-397B MTP, GLM-5.2 MTP, Kimi-K2.5 and MiniMax-M3 EAGLE-3, thinking
/// on and off; SPEED-Bench's coding prompts, 4,096 output tokens, vLLM on B300). Their spread:
/// 1.78–1.93 at one token, 2.49–3.39 at three, 2.58–5.21 at eight.
const ASSUMED_LENGTH: [f64; 8] = [1.83, 2.46, 2.93, 3.24, 3.46, 3.57, 3.71, 3.77];

/// What proposes the tokens.
enum Draft {
    /// The model's multi-token-prediction layers (`layers` of them), run once per proposal.
    Mtp,
    /// An EAGLE head: one decoder layer fed the target's hidden states (`eagle3`: a draft
    /// vocabulary of its own).
    Eagle { eagle3: bool },
    /// A separate, smaller checkpoint (`Spec::draft_id`).
    Model,
    /// A lookup over the tokens seen (n-gram, suffix): no GPU work.
    Lookup,
}

/// A translated speculative decoding: its method's words, k, draft and the engine-forced
/// acceptance, if any.
struct Spec {
    method: String,
    /// The draft checkpoint the command names, if any.
    draft_id: Option<String>,
    k: Option<u64>,
    draft: Draft,
    forced_length: Option<f64>,
    forced_rates: Option<Vec<f64>>,
}

/// The `[scheduler.speculative]` table of the command's speculative decoding (empty without
/// one, or where it cannot be run, each reason a warning).
pub(crate) fn lines(
    engine: Engine,
    got: &BTreeMap<&'static str, String>,
    (preset, weight_dtype, kv_dtype): (&ModelPreset, Option<&str>, Option<&str>),
    given: &Given,
    warn: &mut Vec<String>,
) -> Result<String> {
    let spec = match engine {
        Engine::Vllm => vllm(got, warn)?,
        Engine::Sglang => sglang(got, preset, warn)?,
    };
    let Some(spec) = spec else { return Ok(String::new()) };
    let skip = |warn: &mut Vec<String>, why: String| {
        warn.push(format!("speculative decoding ({}) left out: {why}", spec.method));
        Ok(String::new())
    };
    let mtp = mtp_layers(preset, got);
    let k = match spec.k {
        Some(k) => k,
        None if matches!(spec.draft, Draft::Mtp) => mtp.unwrap_or(1),
        None => return skip(warn, "the command gives no number of speculative tokens".into()),
    };
    if !(1..=16).contains(&k) {
        return skip(warn, format!("{k} speculative tokens; servesim runs 1 to 16"));
    }
    let spec_model = ModelSpec::from_preset(preset, servesim_sim::spec::Dtype::Bf16, servesim_sim::spec::Dtype::Bf16);
    let draft = match draft_line(&spec, (preset, mtp), &spec_model, (weight_dtype, kv_dtype)) {
        Ok(d) => d,
        Err(why) => return skip(warn, why),
    };
    let acceptance = match acceptance_lines(&spec, k, given, engine) {
        Ok(a) => a,
        Err(why) => return skip(warn, why),
    };
    if let Some(w) = acceptance.1 {
        warn.push(w);
    }
    Ok(format!(
        "\n# Speculative decoding ({}): {k} token(s) proposed a step.\n[scheduler.speculative]\nk = {k}\n{}{draft}\n",
        spec.method, acceptance.0
    ))
}

/// The model's MTP layers: its config.json's `num_nextn_predict_layers` where it was read, else
/// a preset's: DeepSeek-V3 and R1 ship one; none of the other presets has any.
fn mtp_layers(preset: &ModelPreset, got: &BTreeMap<&'static str, String>) -> Option<u64> {
    match got.get("mtp_layers") {
        Some(n) => n.parse().ok().filter(|&n| n > 0),
        None => matches!(preset.name(), "deepseek-v3" | "deepseek-r1").then_some(1),
    }
}

/// vLLM's `--speculative-config` JSON with 0.34's `--spec-method`, `--spec-model` and
/// `--spec-tokens` merged in (`EngineArgs.create_speculative_config`, vllm/engine/arg_utils.py
/// at 0.34.0), read as `SpeculativeConfig.__post_init__` reads it (vllm/config/speculative.py at
/// 0.11.2 and 0.34.0): an MTP-type method is `mtp`; a `model` of "ngram" is the n-gram method; an
/// EAGLE checkpoint is recognised by "eagle-" / "eagle3" in its name; another draft checkpoint is
/// `draft_model`.
fn vllm(got: &BTreeMap<&'static str, String>, warn: &mut Vec<String>) -> Result<Option<Spec>> {
    let Some(c) = merged_config(got)? else { return Ok(None) };
    let config = got.get("speculative").map_or("{}", String::as_str);
    let bad = |why: String| CliError::input(format!("--speculative-config {config}: {why}"));
    let text = |key: &str| c.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let model = text("model");
    let k = match c.get("num_speculative_tokens") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.as_u64().filter(|&k| k >= 1).ok_or_else(|| {
            bad(format!("num_speculative_tokens: expected a whole number greater than zero, got {v}"))
        })?),
    };
    let method = vllm_method(&c);
    let draft = match method.as_str() {
        "mtp" => Draft::Mtp,
        "eagle" | "eagle3" => Draft::Eagle { eagle3: method == "eagle3" },
        "ngram" | "ngram_gpu" | "suffix" => Draft::Lookup,
        "draft_model" => match model {
            Some(_) => Draft::Model,
            None => return Err(bad("method draft_model names no draft \"model\"".into())),
        },
        other => {
            warn.push(format!(
                "speculative decoding ({other}) left out: not a method servesim models (mtp, eagle, eagle3, \
                 draft_model, ngram, ngram_gpu, suffix); write [scheduler.speculative] by hand"
            ));
            return Ok(None);
        }
    };
    let (forced_length, forced_rates) = synthetic(&c, &bad)?;
    Ok(Some(Spec { method, draft_id: model, k, draft, forced_length, forced_rates }))
}

/// The method vLLM resolves from the merged config.
fn vllm_method(c: &serde_json::Map<String, serde_json::Value>) -> String {
    let text = |key: &str| c.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let lower = text("model").unwrap_or_default().to_ascii_lowercase();
    match text("method") {
        Some(m) if m.ends_with("_mtp") => "mtp".to_string(),
        Some(m) if m == "[ngram]" => "ngram".to_string(),
        Some(m) => m,
        None if matches!(lower.as_str(), "ngram" | "[ngram]") => "ngram".into(),
        None if lower.contains("eagle3") => "eagle3".into(),
        None if lower.contains("eagle-") => "eagle".into(),
        None => "draft_model".into(),
    }
}

/// Whether vLLM `version` schedules asynchronously with the command's speculative method:
/// `(by default, given --async-scheduling)`, `None` without speculative decoding. Read in
/// vllm/config/vllm.py of the 0.11.2, 0.14.0, 0.19.1, 0.27.0, 0.31.0, 0.33.0 and 0.34.0
/// releases (a release between two read is taken as the earlier one's): EAGLE-type methods
/// (mtp, eagle, eagle3) allow it throughout; a draft model from 0.27 when given and from 0.31 by
/// default; an n-gram or suffix lookup on the CPU only from 0.34 (0.33 with the V1 model runner
/// still turns it off).
pub(crate) fn vllm_async(got: &BTreeMap<&'static str, String>, version: EngineVersion) -> Option<(String, bool, bool)> {
    let c = merged_config(got).ok()??;
    let method = vllm_method(&c);
    let (default, given) = match method.as_str() {
        "mtp" | "eagle" | "eagle3" => (true, true),
        "draft_model" => (version >= (0, 31, 0), version >= (0, 27, 0)),
        "ngram_gpu" => (version >= (0, 19, 0), version >= (0, 19, 0)),
        _ => (version >= (0, 34, 0), version >= (0, 34, 0)),
    };
    Some((method, default, given))
}

/// The `--speculative-config` JSON with the shorthand flags merged in, its keys' dashes as
/// underscores (`create_speculative_config`); `None` without either.
fn merged_config(got: &BTreeMap<&'static str, String>) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
    let shorthand = [
        ("spec_method", "--spec-method", "method"),
        ("spec_model", "--spec-model", "model"),
        ("spec_tokens", "--spec-tokens", "num_speculative_tokens"),
    ];
    if !got.contains_key("speculative") && shorthand.iter().all(|(k, ..)| !got.contains_key(k)) {
        return Ok(None);
    }
    let config = got.get("speculative").map_or("{}", String::as_str);
    let bad = |why: String| CliError::input(format!("--speculative-config {config}: {why}"));
    let c: serde_json::Value = serde_json::from_str(config).map_err(|e| bad(format!("not JSON: {e}")))?;
    let mut c: serde_json::Map<String, serde_json::Value> = c
        .as_object()
        .ok_or_else(|| bad("not a JSON object".into()))?
        .iter()
        .map(|(k, v)| (k.replace('-', "_"), v.clone()))
        .collect();
    for (key, flag, field) in shorthand {
        if let Some(v) = got.get(key) {
            if c.contains_key(field) {
                return Err(CliError::input(format!(
                    "{flag} and --speculative-config['{field}'] are mutually exclusive"
                )));
            }
            let v = match v.parse::<u64>() {
                Ok(n) if field == "num_speculative_tokens" => serde_json::Value::from(n),
                _ => serde_json::Value::from(v.as_str()),
            };
            c.insert(field.into(), v);
        }
    }
    Ok(Some(c))
}

/// The acceptance vLLM's synthetic rejection sampling forces: exactly one of its length and its
/// rates, which vLLM refuses without it (`SpeculativeConfig.__post_init__`,
/// `_resolve_synthetic_acceptance_rates`, vllm/config/speculative.py at 0.34.0).
fn synthetic(
    c: &serde_json::Map<String, serde_json::Value>,
    bad: &dyn Fn(String) -> CliError,
) -> Result<(Option<f64>, Option<Vec<f64>>)> {
    let text = |key: &str| c.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let synthetic = text("rejection_sample_method").as_deref() == Some("synthetic");
    let forced_length = match c.get("synthetic_acceptance_length") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.as_f64().ok_or_else(|| bad(format!("synthetic_acceptance_length: not a number: {v}")))?),
    };
    let forced_rates = match c.get("synthetic_acceptance_rates") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_array()
                .and_then(|a| a.iter().map(serde_json::Value::as_f64).collect::<Option<Vec<f64>>>())
                .ok_or_else(|| bad(format!("synthetic_acceptance_rates: not a list of numbers: {v}")))?,
        ),
    };
    let forced = forced_length.is_some() || forced_rates.is_some();
    if synthetic && forced_length.is_some() == forced_rates.is_some() {
        return Err(bad("rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates or \
                        synthetic_acceptance_length"
            .into()));
    }
    if !synthetic && forced {
        return Err(bad("synthetic_acceptance_rates / synthetic_acceptance_length are only valid with \
                        rejection_sample_method='synthetic'"
            .into()));
    }
    Ok((forced_length, forced_rates))
}

/// SGLang's `--speculative-algorithm` and its flags. Without `--speculative-num-steps` SGLang
/// picks (steps, topk, draft tokens) itself (`_auto_choose_speculative_params`,
/// `arg_groups/speculative_hook.py` at 0.5.15): (5, 4, 8) for `LlamaForCausalLM`, (3, 1, 4)
/// otherwise and for STANDALONE. A tree of drafts (topk above 1) is not modelled.
fn sglang(got: &BTreeMap<&'static str, String>, preset: &ModelPreset, warn: &mut Vec<String>) -> Result<Option<Spec>> {
    let Some(alg) = got.get("speculative") else { return Ok(None) };
    let method = alg.to_ascii_uppercase();
    let draft = match method.as_str() {
        "NEXTN" => Draft::Mtp,
        "EAGLE" | "EAGLE3" => match got.get("spec_draft") {
            None => Draft::Mtp,
            Some(_) => Draft::Eagle { eagle3: method == "EAGLE3" },
        },
        "STANDALONE" => match got.get("spec_draft") {
            Some(_) => Draft::Model,
            None => {
                warn.push("speculative decoding (STANDALONE) left out: no --speculative-draft-model-path".into());
                return Ok(None);
            }
        },
        "NGRAM" => Draft::Lookup,
        _ => {
            warn.push(format!(
                "speculative decoding ({alg}) left out: not an algorithm servesim models (EAGLE, EAGLE3, NEXTN, \
                 STANDALONE, NGRAM)"
            ));
            return Ok(None);
        }
    };
    let int = |key: &str, flag: &str| -> Result<Option<u64>> {
        got.get(key)
            .map(|v| v.parse::<u64>().map_err(|_| CliError::input(format!("{flag} {v}: not a whole number"))))
            .transpose()
    };
    let steps = int("spec_steps", "--speculative-num-steps")?;
    let topk = int("spec_topk", "--speculative-eagle-topk")?.unwrap_or(1);
    if topk > 1 {
        warn.push(format!(
            "speculative decoding ({method}) left out: --speculative-eagle-topk {topk} drafts a tree, which servesim \
             does not model (a chain: topk 1)"
        ));
        return Ok(None);
    }
    let forced_length = match got.get("simulated_acceptance") {
        Some(v) => {
            Some(v.parse::<f64>().map_err(|_| CliError::input(format!("SGLANG_SIMULATE_ACC_LEN={v}: not a number")))?)
        }
        None => None,
    };
    // SGLang's own choice without --speculative-num-steps: a tree of 5 steps × 4 for the Llama
    // architecture, a chain of 3 for the others servesim has.
    let llama = preset.name().starts_with("llama-") && !preset.name().starts_with("llama-4")
        || preset.name() == "codellama-34b";
    if steps.is_none() && llama && method != "STANDALONE" && method != "NGRAM" {
        warn.push(format!(
            "speculative decoding ({method}) left out: without --speculative-num-steps SGLang drafts a tree of 5 \
             steps × 4 for LlamaForCausalLM, which servesim does not model (give --speculative-num-steps N \
             --speculative-eagle-topk 1 for a chain)"
        ));
        return Ok(None);
    }
    let k = steps.unwrap_or(3);
    if steps.is_none() {
        warn.push(format!("speculative decoding ({method}): SGLang's own choice assumed, 3 steps of 1 draft token"));
    }
    let draft_id = got.get("spec_draft").cloned();
    Ok(Some(Spec { method, draft_id, k: Some(k), draft, forced_length, forced_rates: None }))
}

/// The `draft` / `draft_cost_fraction` line, or why it cannot be written.
fn draft_line(
    spec: &Spec,
    (preset, mtp): (&ModelPreset, Option<u64>),
    m: &ModelSpec,
    (weight_dtype, kv_dtype): (Option<&str>, Option<&str>),
) -> std::result::Result<String, String> {
    let dtypes = weight_dtype.map_or(String::new(), |w| format!(", weight_dtype = \"{w}\""))
        + &kv_dtype.map_or(String::new(), |k| format!(", kv_dtype = \"{k}\""));
    if let Some((file, keys)) = read_draft(spec) {
        return Ok(format!("# The draft, from {}.\ndraft = {{ {keys}{dtypes} }}\n", file.display()));
    }
    Ok(match &spec.draft {
        Draft::Mtp => {
            let layers = mtp.ok_or_else(|| {
                format!(
                    "{} has no multi-token-prediction layers servesim knows of (DeepSeek-V3 and R1 have one; a \
                     config.json's num_nextn_predict_layers is read)",
                    preset.name()
                )
            })?;
            // A preset by name; a network read from config.json by its dimensions, its layers
            // all MoE (the MTP layer's FFN is).
            let network = match ModelPreset::find(preset.name()) {
                Some(p) => format!("preset = \"{}\"", p.name()),
                None => {
                    let mut moe = m.clone();
                    moe.arch.dense_layers = 0;
                    format!("name = \"{}-mtp\", {}", m.name, inline_dims(&moe))
                }
            };
            format!(
                "# The draft: the model's own MTP layer, run once per proposed token, its weights and KV beside the\n\
                 # model's.\ndraft = {{ {network}, layers = {layers}, dense_layers = 0{dtypes} }}\n"
            )
        }
        Draft::Eagle { eagle3 } => assumed_eagle(m, *eagle3, &dtypes),
        Draft::Model => {
            let id = spec.draft_id.as_deref().unwrap_or_default();
            let p = ModelPreset::for_checkpoint(id).ok_or_else(|| {
                format!(
                    "no servesim preset has the draft model {id:?}, and no config.json of it was found (a local \
                     directory or the Hugging Face cache); write draft = {{ ... }} by hand"
                )
            })?;
            format!("draft = {{ preset = \"{}\"{dtypes} }}\n", p.name())
        }
        Draft::Lookup => {
            "# The proposals are a lookup over the tokens seen: no GPU work.\ndraft_cost_fraction = 0\n".into()
        }
    })
}

/// An EAGLE head whose checkpoint was not found, assumed: one decoder layer as wide as the
/// model, a dense FFN as wide as a token's in the model, EAGLE-3's own vocabulary.
fn assumed_eagle(m: &ModelSpec, eagle3: bool, dtypes: &str) -> String {
    // The FFN a token goes through in one of the model's layers.
    let ffn = if m.experts > 1 && m.arch.dense_intermediate > 0 {
        m.arch.dense_intermediate
    } else {
        m.intermediate * m.top_k.max(1) + m.intermediate * m.arch.shared_experts
    };
    let vocab = if eagle3 { 32_000.min(m.vocab) } else { m.vocab };
    format!(
        "# The draft, assumed (no config.json of it was found): an EAGLE head of one decoder layer as wide\n\
         # as the model ({}, a dense FFN as wide as a token's in the model), the head{} shared with it.\n\
         draft = {{ layers = 1, hidden = {}, heads = {}, kv_heads = {}, head_dim = {}, intermediate = {ffn}, \
         vocab = {vocab}, max_context = {}, tied_embeddings = true{dtypes} }}\n",
        m.hidden,
        if eagle3 { "'s 32,000-token draft vocabulary (the EAGLE-3 heads' own)" } else { "" },
        m.hidden,
        m.heads,
        m.kv_heads,
        m.head_dim,
        m.max_context,
    )
}

/// A network's `[model]` dimensions as inline keys (from `hidden` on): MoE experts, shared
/// experts, dense layers and latent attention where it has them.
fn inline_dims(m: &ModelSpec) -> String {
    let mut t = format!(
        "hidden = {}, heads = {}, kv_heads = {}, head_dim = {}, intermediate = {}, vocab = {}, max_context = {}, \
         tied_embeddings = {}",
        m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab, m.max_context, m.tied_embeddings
    );
    if m.experts > 1 {
        t += &format!(", experts = {}, top_k = {}", m.experts, m.top_k);
    }
    if m.arch.shared_experts > 0 {
        t += &format!(", shared_experts = {}", m.arch.shared_experts);
    }
    if m.arch.dense_layers > 0 {
        t += &format!(", dense_layers = {}, dense_intermediate = {}", m.arch.dense_layers, m.arch.dense_intermediate);
    }
    if let Some(a) = m.arch.mla {
        t += &format!(", mla = {}", super::inline_mla(&a));
    }
    t
}

/// The draft checkpoint's network, read from its config.json (a local directory, or the
/// Hugging Face cache's snapshot): the file and the `[model]`-like keys, inline. A preset's
/// checkpoint is not read (its preset is used).
fn read_draft(spec: &Spec) -> Option<(std::path::PathBuf, String)> {
    let id = spec.draft_id.as_deref()?;
    match spec.draft {
        Draft::Eagle { .. } => {}
        Draft::Model if ModelPreset::for_checkpoint(id).is_none() => {}
        _ => return None,
    }
    let file = super::config_file(id)?;
    let text = std::fs::read_to_string(&file).ok()?;
    let preset = servesim_sim::spec::preset_from_hf_config(&text, "draft").ok()?;
    let m = ModelSpec::from_preset(&preset, servesim_sim::spec::Dtype::Bf16, servesim_sim::spec::Dtype::Bf16);
    let keys = format!("layers = {}, {}", m.layers, inline_dims(&m));
    Some((file, keys))
}

/// The acceptance line (and its comment), with a warning where it is assumed; or why none can
/// be written.
fn acceptance_lines(
    spec: &Spec,
    k: u64,
    given: &Given,
    engine: Engine,
) -> std::result::Result<(String, Option<String>), String> {
    let rates = |r: &[f64]| r.iter().map(|x| format!("{x}")).collect::<Vec<_>>().join(", ");
    let forced = if engine == Engine::Vllm {
        "the command's synthetic rejection sampling, which forces it"
    } else {
        "SGLANG_SIMULATE_ACC_LEN, which makes SGLang accept this many"
    };
    if let Some(r) = &spec.forced_rates {
        return Ok((format!("# From {forced}.\nacceptance_rates = [{}]\n", rates(r)), None));
    }
    if let Some(l) = spec.forced_length {
        return Ok((format!("# From {forced}.\nacceptance_length = {l}\n"), None));
    }
    if let Some(r) = &given.rates {
        return Ok((format!("# --acceptance-rates: measured.\nacceptance_rates = [{}]\n", rates(r)), None));
    }
    if let Some(l) = given.length {
        return Ok((format!("# --acceptance-length: measured.\nacceptance_length = {l}\n"), None));
    }
    if matches!(spec.draft, Draft::Lookup) {
        return Err("an n-gram or suffix lookup accepts as much as the outputs repeat the prompts, which only your \
                    traffic says: give --acceptance-length (or --acceptance-rates) from the engine's log"
            .into());
    }
    let l = ASSUMED_LENGTH[(k as usize).min(8) - 1];
    let why = format!(
        "acceptance_length {l} at {k} speculative token(s) assumed: the median of InferenceX's measured MTP and EAGLE-3 curves \
         (SPEED-Bench coding; 1.78–1.93 at one token, 2.58–5.21 at eight). Your drafts on your traffic differ: give \
         --acceptance-length from the engine's log (vLLM: \"Mean acceptance length\"; SGLang: \"accept len\")"
    );
    Ok((format!("# {}.\nacceptance_length = {l}\n", why.replace(". ", ".\n# ")), Some(why)))
}

#[cfg(test)]
mod tests {
    use super::super::{scenario, scenario_given, Engine};
    use super::Given;
    use servesim_sim::spec::ModelPreset;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// The `[scheduler.speculative]` table of a command's scenario (which must load), and the
    /// warnings about speculative decoding.
    fn table(engine: Engine, cmd: &str, given: &Given) -> (String, Vec<String>) {
        let (text, warn) = scenario_given(engine, "h200", &args(cmd), (None, None), given).unwrap();
        servesim_sim::Scenario::from_toml(&text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let table = text
            .split("[scheduler.speculative]\n")
            .nth(1)
            .map(|t| {
                t.split("\n\n").next().unwrap().lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n")
            })
            .unwrap_or_default();
        (table, warn.into_iter().filter(|w| w.contains("speculative") || w.contains("acceptance")).collect())
    }

    const R1: &str = "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8";

    /// vLLM's MTP: `deepseek_mtp` is `mtp` (`SpeculativeConfig.__post_init__`, vllm/config/
    /// speculative.py at 0.11.2), its draft the model's one MTP layer, its k the
    /// `num_speculative_tokens` (else the layer's n_predict, 1); the acceptance assumed from
    /// InferenceX's curves (the median at 3 tokens, 2.93) and said.
    #[test]
    fn vllms_mtp_drafts_with_the_models_own_layer() {
        let (t, w) = table(
            Engine::Vllm,
            &format!("{R1} --speculative-config {{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":3}}"),
            &Given::default(),
        );
        assert_eq!(
            t,
            "k = 3\nacceptance_length = 2.93\ndraft = { preset = \"deepseek-r1\", layers = 1, dense_layers = 0, weight_dtype = \"fp8\" }"
        );
        assert!(w.len() == 1 && w[0].starts_with("acceptance_length 2.93 at 3 speculative token(s) assumed"), "{w:?}");
        let (t, _) =
            table(Engine::Vllm, &format!("{R1} --speculative-config {{\"method\":\"mtp\"}}"), &Given::default());
        assert!(t.starts_with("k = 1\nacceptance_length = 1.83\n"), "{t}");
        // Measured on the user's traffic: no assumption.
        let (t, w) = table(
            Engine::Vllm,
            &format!("{R1} --spec-method mtp --spec-tokens 2"),
            &Given { length: Some(2.4), rates: None },
        );
        assert!(t.starts_with("k = 2\nacceptance_length = 2.4\n") && w.is_empty(), "{t} {w:?}");
        let (t, _) = table(
            Engine::Vllm,
            &format!("{R1} --spec-method mtp --spec-tokens 2"),
            &Given { length: None, rates: Some(vec![0.8, 0.5]) },
        );
        assert!(t.starts_with("k = 2\nacceptance_rates = [0.8, 0.5]\n"), "{t}");
        // A model without MTP layers: left out, and said.
        let (t, w) = table(Engine::Vllm, "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config {\"method\":\"mtp\",\"num_speculative_tokens\":1}", &Given::default());
        assert!(t.is_empty() && w[0].contains("llama-3.1-8b has no multi-token-prediction layers"), "{w:?}");
        // With DP attention ranks too: each rank drafts for its own batch, the ranks in step.
        let (t, _) = table(Engine::Vllm, &format!("{R1} --data-parallel-size 8 --tensor-parallel-size 1 --enable-expert-parallel --spec-method mtp --spec-tokens 1"), &Given::default());
        assert!(t.starts_with("k = 1\nacceptance_length = 1.83\ndraft = { preset = \"deepseek-r1\""), "{t}");
    }

    /// vLLM's synthetic rejection sampling forces the acceptance (InferenceX's recipes:
    /// `"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3.24`): taken as
    /// it is. An EAGLE-3 head is one layer of the model's width with a 32,000-token vocabulary.
    #[test]
    fn a_forced_acceptance_is_the_commands_own() {
        let cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config {\"method\":\"eagle3\",\"model\":\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\",\"num_speculative_tokens\":4,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":3.1}";
        let (t, w) = table(Engine::Vllm, cmd, &Given { length: Some(2.0), rates: None });
        assert_eq!(
            t,
            "k = 4\nacceptance_length = 3.1\ndraft = { layers = 1, hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, \
             intermediate = 14336, vocab = 32000, max_context = 131072, tied_embeddings = true }"
        );
        assert!(w.is_empty(), "{w:?}");
        let rates =
            cmd.replace("\"synthetic_acceptance_length\":3.1", "\"synthetic_acceptance_rates\":[0.9,0.7,0.5,0.3]");
        assert!(table(Engine::Vllm, &rates, &Given::default())
            .0
            .starts_with("k = 4\nacceptance_rates = [0.9, 0.7, 0.5, 0.3]\n"));
        // Without `synthetic` vLLM refuses them; with it, it needs exactly one.
        for (from, to, says) in [
            (
                "\"rejection_sample_method\":\"synthetic\",",
                "",
                "are only valid with rejection_sample_method='synthetic'",
            ),
            (",\"synthetic_acceptance_length\":3.1", "", "requires exactly one of"),
        ] {
            let e = scenario(Engine::Vllm, "h200", &args(&cmd.replace(from, to)), None).unwrap_err().to_string();
            assert!(e.starts_with("--speculative-config {") && e.contains(says), "{e}");
        }
        // No acceptance given: assumed, and said.
        let (t, w) = table(
            Engine::Vllm,
            &cmd.replace(",\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":3.1", ""),
            &Given::default(),
        );
        assert!(t.contains("acceptance_length = 3.24") && w[0].contains("assumed"), "{t} {w:?}");
    }

    /// A draft checkpoint on disk is read from its config.json: an EAGLE-3 head (vLLM's
    /// `LlamaForCausalLMEagle3`, one layer, logits over its `draft_vocab_size`), or a small model
    /// no preset has.
    #[test]
    fn a_draft_on_disk_is_read_from_its_config() {
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("EAGLE3-LLaMA3.1-Instruct-8B");
        std::fs::create_dir(&head).unwrap();
        std::fs::write(
            head.join("config.json"),
            r#"{"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
                "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
                "draft_vocab_size": 32000, "max_position_embeddings": 2048}"#,
        )
        .unwrap();
        let cmd = format!(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config {{\"model\":\"{}\",\"num_speculative_tokens\":2}}",
            head.display()
        );
        let (t, _) = table(Engine::Vllm, &cmd, &Given { length: Some(2.2), rates: None });
        assert_eq!(
            t,
            "k = 2\nacceptance_length = 2.2\ndraft = { layers = 1, hidden = 4096, heads = 32, kv_heads = 8, head_dim = \
             128, intermediate = 14336, vocab = 32000, max_context = 2048, tied_embeddings = false }"
        );
        let small = dir.path().join("tiny-qwen");
        std::fs::create_dir(&small).unwrap();
        std::fs::write(
            small.join("config.json"),
            r#"{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "intermediate_size": 3072, "head_dim": 128,
                "num_attention_heads": 16, "num_key_value_heads": 8, "num_hidden_layers": 28, "vocab_size": 151936,
                "max_position_embeddings": 40960, "tie_word_embeddings": true}"#,
        )
        .unwrap();
        let cmd = format!(
            "vllm serve Qwen/Qwen3-32B --speculative-config {{\"method\":\"draft_model\",\"model\":\"{}\",\"num_speculative_tokens\":4}}",
            small.display()
        );
        let (t, w) = table(Engine::Vllm, &cmd, &Given::default());
        assert!(t.ends_with("draft = { layers = 28, hidden = 1024, heads = 16, kv_heads = 8, head_dim = 128, intermediate = 3072, vocab = 151936, max_context = 40960, tied_embeddings = true }"), "{t}");
        assert!(w[0].contains("assumed"), "{w:?}");
        // Not on disk and no preset: left out, and said.
        let (t, w) = table(Engine::Vllm, "vllm serve Qwen/Qwen3-32B --speculative-config {\"method\":\"draft_model\",\"model\":\"Qwen/Qwen3-0.6B\",\"num_speculative_tokens\":4}", &Given::default());
        assert!(t.is_empty() && w[0].contains("no servesim preset has the draft model \"Qwen/Qwen3-0.6B\""), "{w:?}");
    }

    /// A DeepSeek-architecture checkpoint no preset names (a fine-tune of DeepSeek-V3 on disk,
    /// its config.json V3's) is read from its config.json, latent attention
    /// inline in `[model]`; its MTP layers from `num_nextn_predict_layers`, the draft written as
    /// one layer of that network. Without MTP layers (Kimi-K2's 0) MTP is left out.
    #[test]
    fn a_deepseek_config_on_disk_drafts_with_its_mtp_layer() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("deepseek-finetune");
        std::fs::create_dir(&ckpt).unwrap();
        // DeepSeek-V3's config.json keys (sim/src/spec/testdata), its FP8 quantization_config.
        let config = include_str!("../../../sim/src/spec/testdata/deepseek-v3.config.json").replace(
            r#""tie_word_embeddings": false,"#,
            r#""tie_word_embeddings": false, "quantization_config": {"quant_method": "fp8"},"#,
        );
        std::fs::write(ckpt.join("config.json"), &config).unwrap();
        let cmd = format!(
            "vllm serve {} -tp 8 --speculative-config {{\"method\":\"mtp\",\"num_speculative_tokens\":2}}",
            ckpt.display()
        );
        let (text, _) = scenario_given(Engine::Vllm, "h200", &args(&cmd), (None, None), &Given::default()).unwrap();
        let s = servesim_sim::Scenario::from_toml(&text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"));
        // The network is DeepSeek-V3's: the KV a token (576 × 2 B × 61 layers), the weights.
        let v3 = servesim_sim::spec::ModelSpec::from_preset(
            ModelPreset::find("deepseek-v3").unwrap(),
            s.model.weight_dtype,
            s.model.kv_dtype,
        );
        assert_eq!(
            (s.model.kv_bytes_per_token(), s.model.weight_bytes()),
            (v3.kv_bytes_per_token(), v3.weight_bytes())
        );
        assert!(text.contains("mla = { q_lora_rank = 1536, kv_lora_rank = 512, qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 128 }\n"), "{text}");
        let (t, _) = table(Engine::Vllm, &cmd, &Given::default());
        assert!(
            t.contains("draft = { name = \"deepseek-finetune-mtp\", hidden = 7168,")
                && t.contains("layers = 1, dense_layers = 0, weight_dtype = \"fp8\""),
            "{t}"
        );
        std::fs::write(
            ckpt.join("config.json"),
            config.replace(r#""num_nextn_predict_layers": 1"#, r#""num_nextn_predict_layers": 0"#),
        )
        .unwrap();
        let (t, w) = table(Engine::Vllm, &cmd, &Given::default());
        assert!(t.is_empty() && w[0].contains("deepseek-finetune has no multi-token-prediction layers"), "{w:?}");
    }

    /// vLLM turns its default asynchronous scheduling off for the speculative methods it cannot
    /// overlap, and refuses `--async-scheduling` with them, release by release
    /// (vllm/config/vllm.py at 0.14.0, 0.19.1, 0.27.0, 0.31.0 and 0.34.0).
    #[test]
    fn vllms_async_scheduling_follows_the_speculative_method() {
        let given = Given { length: Some(1.5), rates: None };
        let overlap = |cmd: &str, version: &str| -> std::result::Result<bool, String> {
            let (text, _) = scenario_given(Engine::Vllm, "h200", &args(cmd), (Some(version), None), &given)
                .map_err(|e| e.to_string())?;
            Ok(text.contains("overlap = true"))
        };
        let ngram =
            "vllm serve Qwen/Qwen3-32B --speculative-config {\"method\":\"ngram\",\"num_speculative_tokens\":3}";
        let draft = "vllm serve meta-llama/Llama-3.1-70B-Instruct --speculative-config \
                     {\"method\":\"draft_model\",\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"num_speculative_tokens\":3}";
        let mtp = "vllm serve deepseek-ai/DeepSeek-R1 -tp 8 --speculative-config {\"method\":\"mtp\",\"num_speculative_tokens\":1}";
        for (cmd, version, want) in [
            (ngram, "0.14.0", false),
            (ngram, "0.33.0", false),
            (ngram, "0.34.0", true),
            (draft, "0.27.0", false),
            (draft, "0.31.0", true),
            (mtp, "0.14.0", true),
            ("vllm serve Qwen/Qwen3-32B", "0.14.0", true),
        ] {
            assert_eq!(overlap(cmd, version), Ok(want), "{cmd} at {version}");
        }
        let e = overlap(&format!("{ngram} --async-scheduling"), "0.19.1").unwrap_err();
        assert!(
            e.starts_with("--async-scheduling with ngram-based speculative decoding: vLLM 0.19.1 refuses it"),
            "{e}"
        );
        assert_eq!(overlap(&format!("{draft} --async-scheduling"), "0.27.0"), Ok(true));
    }

    /// An n-gram lookup costs no GPU time and has no acceptance to assume; the engine's shorthand
    /// flags clash with the JSON as vLLM says (`create_speculative_config`, vllm/engine/
    /// arg_utils.py at 0.34.0).
    #[test]
    fn an_ngram_lookup_needs_the_users_acceptance() {
        let cmd = "vllm serve Qwen/Qwen3-32B --speculative-config {\"method\":\"ngram\",\"num_speculative_tokens\":4}";
        let (t, w) = table(Engine::Vllm, cmd, &Given::default());
        assert!(t.is_empty() && w[0].starts_with("speculative decoding (ngram) left out: an n-gram"), "{w:?}");
        let (t, _) = table(Engine::Vllm, cmd, &Given { length: Some(1.6), rates: None });
        assert_eq!(t, "k = 4\nacceptance_length = 1.6\ndraft_cost_fraction = 0");
        let e = scenario(Engine::Vllm, "h200", &args(&format!("{cmd} --spec-tokens 3")), None).unwrap_err().to_string();
        assert!(
            e.contains("--spec-tokens and --speculative-config['num_speculative_tokens'] are mutually exclusive"),
            "{e}"
        );
        let e = scenario(
            Engine::Vllm,
            "h200",
            &args("vllm serve Qwen/Qwen3-32B --speculative-config {method:ngram}"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--speculative-config {method:ngram}: not JSON"), "{e}");
        let (t, w) = table(
            Engine::Vllm,
            "vllm serve Qwen/Qwen3-32B --speculative-config {\"method\":\"medusa\",\"num_speculative_tokens\":2}",
            &Given::default(),
        );
        assert!(t.is_empty() && w[0].contains("(medusa) left out: not a method servesim models"), "{w:?}");
    }

    /// SGLang: NEXTN (and EAGLE without a draft path) on DeepSeek runs its MTP layer; its steps
    /// are k with topk 1, its own choice (3, 1, 4) without them (`_auto_choose_speculative_params`,
    /// arg_groups/speculative_hook.py at 0.5.15); SGLANG_SIMULATE_ACC_LEN forces the acceptance
    /// length (spec_utils.py at 0.5.23); a tree (topk 4) is left out.
    #[test]
    fn sglangs_steps_and_forced_acceptance() {
        let base =
            "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp 8 --speculative-algorithm";
        let (t, w) = table(Engine::Sglang, &format!("SGLANG_SIMULATE_ACC_LEN=2.5 {base} EAGLE --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3"), &Given::default());
        assert!(
            t.starts_with("k = 2\nacceptance_length = 2.5\ndraft = { preset = \"deepseek-r1\", layers = 1,"),
            "{t}"
        );
        assert!(w.is_empty(), "{w:?}");
        let (t, w) = table(Engine::Sglang, &format!("{base} NEXTN"), &Given::default());
        assert!(t.starts_with("k = 3\nacceptance_length = 2.93\n"), "{t}");
        assert!(w.iter().any(|w| w.contains("SGLang's own choice assumed, 3 steps")), "{w:?}");
        let (t, w) = table(
            Engine::Sglang,
            &format!(
                "{base} EAGLE --speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
            ),
            &Given::default(),
        );
        assert!(t.is_empty() && w[0].contains("--speculative-eagle-topk 4 drafts a tree"), "{w:?}");
        let llama = "--model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 \
                     --speculative-draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B";
        let (t, w) = table(Engine::Sglang, llama, &Given::default());
        assert!(t.is_empty() && w[0].contains("SGLang drafts a tree of 5 steps × 4 for LlamaForCausalLM"), "{w:?}");
        let (t, w) = table(Engine::Sglang, &format!("{llama} --speculative-num-steps 3"), &Given::default());
        assert!(t.starts_with("k = 3\nacceptance_length = 2.93\ndraft = { layers = 1, hidden = 4096,"), "{t}");
        assert!(w.len() == 1 && w[0].contains("assumed"), "{w:?}");
    }
}
