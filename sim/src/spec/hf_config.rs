//! A network from a Hugging Face `config.json`, for a checkpoint no preset describes: the
//! families whose every dimension servesim models from the keys below, and no other.
//!
//! | `architectures` | FFN |
//! |---|---|
//! | `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen2ForCausalLM`, `Qwen3ForCausalLM` | dense, `intermediate_size` |
//! | `Qwen3MoeForCausalLM` | `num_experts` of `moe_intermediate_size`, `num_experts_per_tok` routed, every layer |
//! | `MixtralForCausalLM`, `MiniMaxM2ForCausalLM` (MiniMax-M2, M2.1, M2.5, M2.7), `GptOssForCausalLM` | `num_local_experts` of `intermediate_size`, `num_experts_per_tok` routed; gpt-oss's biases |
//! | `Glm4MoeForCausalLM` (GLM-4.5, 4.6, 4.7) | `n_routed_experts` of `moe_intermediate_size`, `num_experts_per_tok` routed, `n_shared_experts` beside them; the first `first_k_dense_replace` layers dense (`intermediate_size`) |
//! | `DeepseekV2ForCausalLM`, `DeepseekV3ForCausalLM` (DeepSeek-V3/R1/V3.1, Kimi-K2) | latent attention (`q_lora_rank`, `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`); `n_routed_experts` of `moe_intermediate_size`, `num_experts_per_tok` routed, `n_shared_experts` beside them; the first `first_k_dense_replace` layers dense (`intermediate_size`) |
//! | `EagleLlamaForCausalLM`, `Eagle3LlamaForCausalLM`, `LlamaForCausalLMEagle3` | an EAGLE draft head: dense Llama layers, the vocabulary its `draft_vocab_size` where given (vLLM's registry, vllm/model_executor/models/registry.py at 0.11.2) |
//!
//! `head_dim` is the config's where it gives one (Qwen3-32B: 128, not 5120 / 64), else
//! `hidden_size / num_attention_heads`; `num_key_value_heads` defaults to the heads. Where
//! `layer_types` is given, its `sliding_attention` layers see the last `sliding_window` tokens
//! (gpt-oss: every other layer); otherwise a Mistral or Mixtral `sliding_window` windows every
//! layer, and Qwen2's only with `use_sliding_window`, which is refused (its `max_window_layers`
//! split is not modelled). Architectures with linear-attention, Mamba or sparse-attention
//! layers (Qwen3.5, Qwen3-Next, Nemotron-H, DeepSeek-V3.2, GLM-5) and vision-language
//! checkpoints are refused, each with its reason. The context is vLLM's
//! (`_get_and_verify_max_len`, `vllm/config/model.py` at 0.11.2): `max_position_embeddings`,
//! times `rope_scaling.factor` except for `llama3`, `su` and `longrope` scaling (a `yarn` one
//! from `original_max_position_embeddings`); a window does not bound it (vLLM bounds it only
//! with `--disable-sliding-window`).

use serde_json::Value;

use super::model::{Arch, Mla, ModelPreset, Window};

const DENSE: &[&str] = &[
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "EagleLlamaForCausalLM",
    "Eagle3LlamaForCausalLM",
    "LlamaForCausalLMEagle3",
];
const MOE: &[&str] =
    &["Qwen3MoeForCausalLM", "MixtralForCausalLM", "MiniMaxM2ForCausalLM", "GptOssForCausalLM", "Glm4MoeForCausalLM"];
const LATENT: &[&str] = &["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"];

/// Architectures servesim knows of and does not model, with why: a layer whose state is not a
/// KV cache of every token, or whose attention reads only some of them.
const UNMODELLED: &[(&[&str], &str)] = &[
    (
        &[
            "Qwen3NextForCausalLM",
            "Qwen3_5ForCausalLM",
            "Qwen3_5MoeForCausalLM",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
        ],
        "Gated DeltaNet linear-attention layers beside the full-attention ones: their fixed-size state is not a \
         KV cache, and servesim does not model it",
    ),
    (
        &[
            "NemotronHForCausalLM",
            "FalconH1ForCausalLM",
            "JambaForCausalLM",
            "GraniteMoeHybridForCausalLM",
            "MiniMaxText01ForCausalLM",
            "MiniMaxM1ForCausalLM",
        ],
        "Mamba or lightning-attention layers beside the attention ones: their fixed-size state is not a KV \
         cache, and servesim does not model it",
    ),
    (
        &["DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "MiniMaxM3ForCausalLM"],
        "sparse attention (an indexer chooses which cached tokens each query reads), which servesim does not model",
    ),
];

/// The network `config.json` (`text`) describes, named `name`, or why servesim cannot model it.
pub fn preset_from_hf_config(text: &str, name: &'static str) -> Result<ModelPreset, String> {
    let c: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let arch = architecture(&c)?;
    let int = |key: &str| -> Result<u64, String> {
        match c.get(key) {
            Some(v) => v.as_u64().filter(|&n| n >= 1).ok_or_else(|| format!("{key}: not a whole number ≥ 1: {v}")),
            None => Err(format!("{key}: missing (needed for {arch})")),
        }
    };
    let opt = |key: &str| -> Result<Option<u64>, String> {
        match c.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => int(key).map(Some),
        }
    };
    if LATENT.contains(&arch) {
        return latent(&c, name, &int, &opt);
    }
    let (hidden, heads) = (int("hidden_size")?, int("num_attention_heads")?);
    let head_dim = match opt("head_dim")? {
        Some(d) => d,
        None if hidden.is_multiple_of(heads) => hidden / heads,
        None => return Err(format!("hidden_size {hidden} is not a multiple of num_attention_heads {heads}")),
    };
    let ffn = ffn_of(arch, &c, &int, &opt)?;
    let layers = int("num_hidden_layers")?;
    let window = window_of(arch, &c, layers, &opt)?;
    let context = context(&c, &opt)?;
    Ok(ModelPreset {
        name,
        layers,
        hidden,
        heads,
        kv_heads: opt("num_key_value_heads")?.unwrap_or(heads),
        head_dim,
        intermediate: ffn.intermediate,
        // An EAGLE-3 head's logits cover its own, smaller vocabulary.
        vocab: opt("draft_vocab_size")?.map_or_else(|| int("vocab_size"), Ok)?,
        max_context: context,
        experts: ffn.experts,
        top_k: ffn.top_k,
        tied_embeddings: c.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(false),
        arch: Arch {
            window,
            shared_experts: ffn.shared,
            dense_layers: ffn.dense_layers,
            dense_intermediate: ffn.dense_intermediate,
            // gpt-oss: biases on the attention projections, the experts and the router.
            biases: arch == "GptOssForCausalLM",
            ..Arch::PLAIN
        },
    })
}

/// The first of `architectures` servesim models, or why there is none: an architecture it
/// knows it cannot model is named with the reason, a vision-language one (a `vision_config`) as
/// such.
fn architecture(c: &Value) -> Result<&str, String> {
    let archs: Vec<&str> = c
        .get("architectures")
        .and_then(Value::as_array)
        .map_or(vec![], |a| a.iter().filter_map(Value::as_str).collect());
    if let Some(&arch) = archs.iter().find(|a| DENSE.contains(a) || MOE.contains(a) || LATENT.contains(a)) {
        return Ok(arch);
    }
    if let Some((arch, why)) =
        archs.iter().find_map(|a| UNMODELLED.iter().find(|(names, _)| names.contains(a)).map(|(_, why)| (a, why)))
    {
        return Err(format!("{arch}: {why}"));
    }
    let known = [DENSE, MOE, LATENT].concat().join(", ");
    if c.get("vision_config").is_some() {
        return Err(format!(
            "architectures {archs:?}: a vision-language checkpoint, whose vision encoder (its weights, the engine's \
             multimodal memory profiling) servesim does not model; servesim reads {known}; write [model] by hand \
             from its text_config"
        ));
    }
    Err(format!("architectures {archs:?}: not one servesim models from config.json ({known}); write [model] by hand"))
}

/// A network's FFN: its routed experts (1 of 1 for a dense one), each `intermediate` wide, the
/// shared experts beside them, and the dense layers of a MoE model.
struct Ffn {
    experts: u64,
    top_k: u64,
    intermediate: u64,
    shared: u64,
    dense_layers: u64,
    dense_intermediate: u64,
}

/// The FFN `arch`'s config.json gives:
/// - Qwen3-MoE: `num_experts` of `moe_intermediate_size`, every layer (`mlp_only_layers` or a
///   `decoder_sparse_step` other than 1 refused).
/// - Mixtral, MiniMax-M2 and gpt-oss: `num_local_experts` of `intermediate_size`; MiniMax's
///   `shared_intermediate_size` other than 0 refused.
/// - GLM-4.5/4.6/4.7 (`Glm4MoeForCausalLM`): `n_routed_experts` of `moe_intermediate_size`,
///   `n_shared_experts` beside them, the first `first_k_dense_replace` layers dense
///   (`intermediate_size`), as vLLM's `Glm4MoE` builds them (vllm/model_executor/models/glm4_moe.py
///   at 0.11.2).
fn ffn_of(
    arch: &str,
    c: &Value,
    int: &dyn Fn(&str) -> Result<u64, String>,
    opt: &dyn Fn(&str) -> Result<Option<u64>, String>,
) -> Result<Ffn, String> {
    let routed = |experts, top_k, intermediate| Ffn {
        experts,
        top_k,
        intermediate,
        shared: 0,
        dense_layers: 0,
        dense_intermediate: 0,
    };
    Ok(match arch {
        "Qwen3MoeForCausalLM" => {
            let dense = c.get("mlp_only_layers").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
            if dense || opt("decoder_sparse_step")?.is_some_and(|s| s != 1) {
                return Err("mlp_only_layers / decoder_sparse_step: dense layers among the MoE ones are not read \
                            from config.json; write [model] by hand (dense_layers, dense_intermediate)"
                    .into());
            }
            routed(int("num_experts")?, int("num_experts_per_tok")?, int("moe_intermediate_size")?)
        }
        "MiniMaxM2ForCausalLM" if c.get("shared_intermediate_size").and_then(Value::as_u64).is_some_and(|n| n > 0) => {
            return Err("shared_intermediate_size: a MiniMax shared expert is not read from config.json; write \
                        [model] by hand (shared_experts)"
                .into())
        }
        "MixtralForCausalLM" | "MiniMaxM2ForCausalLM" | "GptOssForCausalLM" => {
            routed(int("num_local_experts")?, int("num_experts_per_tok")?, int("intermediate_size")?)
        }
        "Glm4MoeForCausalLM" => Ffn {
            shared: opt("n_shared_experts")?.unwrap_or(0),
            dense_layers: opt("first_k_dense_replace")?.unwrap_or(0),
            dense_intermediate: int("intermediate_size")?,
            ..routed(int("n_routed_experts")?, int("num_experts_per_tok")?, int("moe_intermediate_size")?)
        },
        _ => routed(1, 1, int("intermediate_size")?),
    })
}

/// DeepSeek-V2/V3's layout: latent attention (every head shares the latent, so KV heads are the
/// heads, each of `qk_nope_head_dim + qk_rope_head_dim`), the routed experts with the shared ones
/// beside them, the first `first_k_dense_replace` layers dense; `moe_layer_freq` other than 1 is
/// refused. Its multi-token-prediction layers (`num_nextn_predict_layers`) are not part of the
/// network: vLLM loads them only as a speculative draft.
fn latent(
    c: &Value,
    name: &'static str,
    int: &dyn Fn(&str) -> Result<u64, String>,
    opt: &dyn Fn(&str) -> Result<Option<u64>, String>,
) -> Result<ModelPreset, String> {
    if opt("moe_layer_freq")?.is_some_and(|f| f != 1) {
        return Err("moe_layer_freq: MoE layers other than every layer after the dense ones are not read from \
                    config.json; write [model] by hand"
            .into());
    }
    // Keys that may be 0 or null: Q projected directly (DeepSeek-V2-Lite), no shared expert, no
    // dense layer.
    let zero = |key: &str| c.get(key).and_then(Value::as_u64).unwrap_or(0);
    let (heads, nope, rope) = (int("num_attention_heads")?, int("qk_nope_head_dim")?, int("qk_rope_head_dim")?);
    let mla = Mla {
        q_lora_rank: zero("q_lora_rank"),
        kv_lora_rank: int("kv_lora_rank")?,
        qk_nope_head_dim: nope,
        qk_rope_head_dim: rope,
        v_head_dim: int("v_head_dim")?,
    };
    Ok(ModelPreset {
        name,
        layers: int("num_hidden_layers")?,
        hidden: int("hidden_size")?,
        heads,
        kv_heads: heads,
        head_dim: nope + rope,
        intermediate: int("moe_intermediate_size")?,
        vocab: int("vocab_size")?,
        max_context: context(c, opt)?,
        experts: int("n_routed_experts")?,
        top_k: int("num_experts_per_tok")?,
        tied_embeddings: c.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(false),
        arch: Arch {
            mla: Some(mla),
            shared_experts: zero("n_shared_experts"),
            dense_layers: zero("first_k_dense_replace"),
            dense_intermediate: int("intermediate_size")?,
            ..Arch::PLAIN
        },
    })
}

/// The windowed layers config.json gives `arch`: where it lists `layer_types`, its
/// `sliding_attention` layers (gpt-oss: every other) see the last `sliding_window` tokens and
/// any type but those and `full_attention` is refused; else Mistral's and Mixtral's
/// `sliding_window` windows every layer. Qwen2's `use_sliding_window` (over
/// `max_window_layers`) and MiniMax's lightning-attention layers (0 in `attn_type_list`) are
/// refused.
fn window_of(
    arch: &str,
    c: &Value,
    layers: u64,
    opt: &dyn Fn(&str) -> Result<Option<u64>, String>,
) -> Result<Option<Window>, String> {
    let window = |layers| -> Result<Option<Window>, String> {
        let tokens = opt("sliding_window")?.ok_or("sliding_window: missing (needed for sliding_attention layers)")?;
        Ok(Some(Window { tokens, layers, chunked: false }))
    };
    if let Some(types) = c.get("layer_types").and_then(Value::as_array) {
        let mut sliding = 0;
        for t in types {
            match t.as_str() {
                Some("full_attention") => {}
                Some("sliding_attention") => sliding += 1,
                _ => return Err(format!("layer_types: a {t} layer, which servesim does not model from config.json")),
            }
        }
        if types.len() as u64 != layers {
            return Err(format!("layer_types: {} entries for num_hidden_layers {layers}", types.len()));
        }
        return if sliding == 0 { Ok(None) } else { window(sliding) };
    }
    let lightning = c.get("attn_type_list").and_then(Value::as_array).is_some_and(|l| l.iter().any(|t| t == 0));
    match arch {
        "MiniMaxM2ForCausalLM" if lightning => {
            Err("attn_type_list: lightning (linear) attention layers, which servesim does not model".into())
        }
        "MistralForCausalLM" | "MixtralForCausalLM" if opt("sliding_window")?.is_some() => window(layers),
        "Qwen2ForCausalLM" if c.get("use_sliding_window").and_then(Value::as_bool) == Some(true) => {
            Err("use_sliding_window: Qwen2's sliding window over max_window_layers is not modelled; write [model] \
                 by hand ([model.window])"
                .into())
        }
        _ => Ok(None),
    }
}

/// vLLM's `--disable-sliding-window` (`disable`) on a network read from its config.json: every
/// layer attends fully and the context is capped at the window (`_get_and_verify_max_len`,
/// vllm/config/model.py at 0.11.2). Without it, a window on every layer (Mistral-7B-v0.1) is
/// refused: servesim models windows beside full-attention layers only.
pub fn without_sliding_window(preset: &mut ModelPreset, disable: bool) -> Result<(), String> {
    let Some(w) = preset.arch.window else { return Ok(()) };
    if disable {
        preset.arch.window = None;
        preset.max_context = preset.max_context.min(w.tokens);
    } else if w.layers >= preset.layers {
        return Err(format!(
            "sliding_window {} on every layer: servesim models windowed layers beside full-attention ones only; \
             vLLM's --disable-sliding-window (full attention, the context capped at the window) is modelled",
            w.tokens
        ));
    }
    Ok(())
}

/// vLLM's derived context: `max_position_embeddings` (else the other keys vLLM reads), scaled
/// by `rope_scaling` as `_get_and_verify_max_len` scales it.
fn context(c: &Value, opt: &dyn Fn(&str) -> Result<Option<u64>, String>) -> Result<u64, String> {
    let keys = [
        "max_position_embeddings",
        "n_positions",
        "max_seq_len",
        "seq_length",
        "model_max_length",
        "max_target_positions",
        "max_sequence_length",
        "max_seq_length",
        "seq_len",
    ];
    let mut len = None;
    for k in keys {
        if let Some(n) = opt(k)? {
            len = Some(len.map_or(n, |l: u64| l.min(n)));
        }
    }
    // Cohere's model_max_length overrides the others.
    if let Some(n) = opt("model_max_length")? {
        len = Some(n);
    }
    let Some(mut len) = len else {
        return Err(format!("no context length: none of {} is given", keys.join(", ")));
    };
    if let Some(r) = c.get("rope_scaling").filter(|r| r.is_object()) {
        let kind = r.get("rope_type").or(r.get("type")).and_then(Value::as_str).unwrap_or("default");
        let factor = r.get("factor").and_then(Value::as_f64).unwrap_or(1.0);
        if !matches!(kind, "su" | "longrope" | "llama3") {
            if kind == "yarn" {
                len = r.get("original_max_position_embeddings").and_then(Value::as_u64).unwrap_or(len);
            }
            if !(factor.is_finite() && (1.0..=1e6).contains(&factor)) {
                return Err(format!("rope_scaling.factor: not a number in [1, 1e6]: {factor}"));
            }
            len = (len as f64 * factor) as u64;
        }
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Dtype, ModelSpec, MODEL_PRESETS};

    /// meta-llama/Llama-3.1-8B-Instruct's config.json (the keys servesim reads) gives the preset's
    /// network exactly.
    const LLAMA_31_8B: &str = r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 131072, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "rope_scaling": {"factor": 8.0,
        "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
        "rope_type": "llama3"}, "tie_word_embeddings": false, "vocab_size": 128256}"#;

    #[test]
    fn a_presets_config_gives_the_presets_network() {
        let p = preset_from_hf_config(LLAMA_31_8B, "x").unwrap();
        let preset = MODEL_PRESETS.iter().find(|p| p.name == "llama-3.1-8b").unwrap();
        let spec = |p: &ModelPreset| {
            let mut s = ModelSpec::from_preset(p, Dtype::Bf16, Dtype::Bf16);
            s.name = String::new();
            s
        };
        assert_eq!(spec(&p), spec(preset));
    }

    /// deepseek-ai/DeepSeek-V3's and moonshotai/Kimi-K2-Instruct's config.json (the keys servesim
    /// reads, as aiconfigurator-core 0.12.0 ships them in `model_configs/`) give their presets'
    /// networks exactly: latent attention, the shared expert, the dense layers (3 and 1), the
    /// context yarn makes of 4,096 × 40 and × 32.
    #[test]
    fn deepseek_v3_and_kimi_k2_configs_give_their_presets() {
        // The keys servesim reads, in testdata/ (read by from-vllm's tests too).
        let v3 = include_str!("testdata/deepseek-v3.config.json");
        let k2 = v3
            .replace(
                r#""num_attention_heads": 128, "n_routed_experts": 256"#,
                r#""num_attention_heads": 64, "n_routed_experts": 384"#,
            )
            .replace(r#""first_k_dense_replace": 3"#, r#""first_k_dense_replace": 1"#)
            .replace(
                r#""vocab_size": 129280, "max_position_embeddings": 163840"#,
                r#""vocab_size": 163840, "max_position_embeddings": 131072"#,
            )
            .replace(r#""factor": 40"#, r#""factor": 32.0"#);
        let spec = |p: &ModelPreset| {
            let mut s = ModelSpec::from_preset(p, Dtype::Fp8, Dtype::Bf16);
            s.name = String::new();
            s
        };
        for (text, preset) in [(v3.to_string(), "deepseek-v3"), (k2.clone(), "kimi-k2")] {
            let p = preset_from_hf_config(&text, "x").unwrap();
            assert_eq!(spec(&p), spec(MODEL_PRESETS.iter().find(|p| p.name == preset).unwrap()), "{preset}");
        }
        // Kimi-K2.5's text_config (the same source) is Kimi-K2's network but for its context, yarn
        // × 64 of 4,096: the kimi-k2 preset with the context its checkpoint name is given.
        let k25 = k2.replace(r#""max_position_embeddings": 131072"#, r#""max_position_embeddings": 262144"#);
        let k25 = k25.replace(r#""factor": 32.0"#, r#""factor": 64.0"#);
        let p = preset_from_hf_config(&k25, "x").unwrap();
        let kimi = ModelPreset::for_checkpoint("moonshotai/Kimi-K2.5").unwrap();
        assert_eq!(kimi.name, "kimi-k2");
        let context = ModelPreset::checkpoint_context("nvidia/Kimi-K2.5-NVFP4").unwrap();
        assert_eq!((p.max_context, context), (262_144, 262_144));
        assert_eq!(spec(&p), spec(&kimi.with_max_context(context)));
        assert!(ModelPreset::checkpoint_note("moonshotai/Kimi-K2.5").unwrap().contains("vision encoder"));
        assert_eq!(ModelPreset::checkpoint_context("moonshotai/Kimi-K2-Instruct"), None);
        let e =
            preset_from_hf_config(&v3.replace(r#""moe_layer_freq": 1"#, r#""moe_layer_freq": 2"#), "x").err().unwrap();
        assert!(e.starts_with("moe_layer_freq: MoE layers other than every layer"), "{e}");
    }

    #[test]
    fn qwen3_moe_qwen2_and_mistral_by_hand() {
        // Qwen/Qwen3-30B-A3B: 128 experts of 768, 8 routed, head_dim 128 (not 2048 / 32).
        let qwen3 = r#"{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "head_dim": 128,
            "moe_intermediate_size": 768, "intermediate_size": 6144, "num_experts": 128,
            "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
            "max_position_embeddings": 40960, "num_attention_heads": 32, "num_hidden_layers": 48,
            "num_key_value_heads": 4, "vocab_size": 151936, "tie_word_embeddings": false,
            "rope_scaling": null, "sliding_window": null, "use_sliding_window": false}"#;
        let p = preset_from_hf_config(qwen3, "x").unwrap();
        assert_eq!((p.experts, p.top_k, p.intermediate, p.head_dim, p.kv_heads), (128, 8, 768, 128, 4));
        let preset = MODEL_PRESETS.iter().find(|p| p.name == "qwen3-30b-a3b").unwrap();
        let a = ModelSpec::from_preset(&p, Dtype::Bf16, Dtype::Bf16);
        let b = ModelSpec::from_preset(preset, Dtype::Bf16, Dtype::Bf16);
        assert_eq!(a.weight_bytes(), b.weight_bytes());
        // Qwen/Qwen2.5-7B-Instruct: 28 layers, 28 heads of 128 (3584 / 28), 4 KV heads, tied
        // no; with YaRN ×4 from 32768 its context is 131,072, as vLLM derives it.
        let qwen25 = r#"{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
            "intermediate_size": 18944, "max_position_embeddings": 32768, "num_attention_heads": 28,
            "num_hidden_layers": 28, "num_key_value_heads": 4, "vocab_size": 152064,
            "tie_word_embeddings": false, "use_sliding_window": false, "sliding_window": 131072}"#;
        let p = preset_from_hf_config(qwen25, "x").unwrap();
        assert_eq!((p.layers, p.head_dim, p.max_context, p.arch.window), (28, 128, 32768, None));
        let yarn = qwen25.replace(
            "\"tie_word_embeddings\"",
            "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}, \"tie_word_embeddings\"",
        );
        assert_eq!(preset_from_hf_config(&yarn, "x").unwrap().max_context, 131_072);
        // mistralai/Mistral-7B-v0.1: a 4096-token window on all 32 layers; the context stays 32,768.
        let mistral = r#"{"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
            "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 8, "sliding_window": 4096, "vocab_size": 32000}"#;
        let p = preset_from_hf_config(mistral, "x").unwrap();
        assert_eq!(p.arch.window, Some(Window { tokens: 4096, layers: 32, chunked: false }));
        assert_eq!(p.max_context, 32768);
    }

    /// openai/gpt-oss-120b's config.json (the keys servesim reads, as aiconfigurator-core 0.12.0
    /// ships it in `model_configs/`) gives the preset's network exactly: 128 experts of 2,880, 4
    /// routed, `layer_types` alternating full and sliding attention (18 windows of 128), biases,
    /// and the context yarn makes of 4,096 × 32; with 24 layers and 32 experts, gpt-oss-20b's.
    #[test]
    fn gpt_oss_configs_give_their_presets() {
        let types = |n: usize| {
            let t: Vec<&str> =
                (0..n).map(|i| if i % 2 == 0 { "\"sliding_attention\"" } else { "\"full_attention\"" }).collect();
            t.join(", ")
        };
        let config = |layers: usize, experts: u64| {
            format!(
                r#"{{"architectures": ["GptOssForCausalLM"], "attention_bias": true, "experts_per_token": 4,
                "head_dim": 64, "hidden_size": 2880, "intermediate_size": 2880, "layer_types": [{}],
                "max_position_embeddings": 131072, "num_attention_heads": 64, "num_experts_per_tok": 4,
                "num_hidden_layers": {layers}, "num_key_value_heads": 8, "num_local_experts": {experts},
                "rope_scaling": {{"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false}},
                "sliding_window": 128, "tie_word_embeddings": false, "vocab_size": 201088}}"#,
                types(layers)
            )
        };
        let spec = |p: &ModelPreset| {
            let mut s = ModelSpec::from_preset(p, Dtype::Mxfp4, Dtype::Bf16);
            s.name = String::new();
            s
        };
        for (layers, experts, preset) in [(36, 128, "gpt-oss-120b"), (24, 32, "gpt-oss-20b")] {
            let p = preset_from_hf_config(&config(layers, experts), "x").unwrap();
            assert_eq!(spec(&p), spec(MODEL_PRESETS.iter().find(|p| p.name == preset).unwrap()), "{preset}");
        }
        // A sliding layer needs its window.
        let e = preset_from_hf_config(&config(24, 32).replace(r#""sliding_window": 128,"#, ""), "x").err().unwrap();
        assert_eq!(e, "sliding_window: missing (needed for sliding_attention layers)");
        let e = preset_from_hf_config(
            &config(24, 32).replace(r#""num_hidden_layers": 24"#, r#""num_hidden_layers": 23"#),
            "x",
        );
        assert_eq!(e.err().unwrap(), "layer_types: 24 entries for num_hidden_layers 23");
    }

    /// MiniMaxAI/MiniMax-M2.5's config.json (as aiconfigurator-core 0.12.0 ships it) and
    /// zai-org/GLM-4.5's (its published keys) by hand:
    /// - MiniMax-M2.5: per layer, attention 3,072 × 6,144 × 2 + 3,072 × 1,024 × 2 = 44,040,192,
    ///   two norms 6,144, 256 experts × 3 × 3,072 × 1,536 = 3,623,878,656, a router 786,432; 62
    ///   such, the untied embeddings 2 × 200,064 × 3,072 and the final norm: 228,689,304,576
    ///   (MiniMax's card: 230B). KV 62 × 2 × 8 × 128 × 2 B = 253,952 B a token.
    /// - GLM-4.5: attention 5,120 × 12,288 × 2 + 5,120 × 1,024 × 2 = 136,314,880 and norms 10,240
    ///   on 92 layers; 89 MoE layers of (160 + 1 shared) × 3 × 5,120 × 1,536 and a router
    ///   819,200; 3 dense of 3 × 5,120 × 12,288; embeddings 2 × 151,552 × 5,120; the final norm:
    ///   352,796,472,320 (the card: 355B; its MTP layer, ~4B, is left out). Active: 9 experts a MoE
    ///   layer and the LM head, 32,854,958,080 (the card: 32B).
    #[test]
    fn minimax_m2_and_glm_4_5_by_hand() {
        let minimax = r#"{"architectures": ["MiniMaxM2ForCausalLM"], "attn_type_list": [1, 1],
            "head_dim": 128, "hidden_size": 3072, "intermediate_size": 1536,
            "max_position_embeddings": 196608, "num_attention_heads": 48, "num_experts_per_tok": 8,
            "num_hidden_layers": 62, "num_key_value_heads": 8, "num_local_experts": 256,
            "shared_intermediate_size": 0, "tie_word_embeddings": false, "vocab_size": 200064,
            "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}"#;
        let p = preset_from_hf_config(minimax, "x").unwrap();
        let m = ModelSpec::from_preset(&p, Dtype::Bf16, Dtype::Bf16);
        assert_eq!((m.params(), m.kv_bytes_per_token(), m.arch.window), (228_689_304_576, 253_952, None));
        assert_eq!(p.max_context, 196_608);
        let preset = MODEL_PRESETS.iter().find(|p| p.name == "minimax-m2.5").unwrap();
        let named = |p: &ModelPreset| {
            let mut s = ModelSpec::from_preset(p, Dtype::Fp8, Dtype::Bf16);
            s.name = String::new();
            s
        };
        assert_eq!(named(&p), named(preset), "the minimax-m2.5 preset is its config.json's network");
        let glm = r#"{"architectures": ["Glm4MoeForCausalLM"], "attention_bias": true,
            "first_k_dense_replace": 3, "head_dim": 128, "hidden_size": 5120, "intermediate_size": 12288,
            "max_position_embeddings": 131072, "moe_intermediate_size": 1536, "n_routed_experts": 160,
            "n_shared_experts": 1, "num_attention_heads": 96, "num_experts_per_tok": 8,
            "num_hidden_layers": 92, "num_key_value_heads": 8, "num_nextn_predict_layers": 1,
            "partial_rotary_factor": 0.5, "tie_word_embeddings": false, "vocab_size": 151552}"#;
        let p = preset_from_hf_config(glm, "x").unwrap();
        let m = ModelSpec::from_preset(&p, Dtype::Bf16, Dtype::Bf16);
        assert_eq!((m.params(), m.active_params()), (352_796_472_320, 32_854_958_080));
        assert_eq!((m.arch.shared_experts, m.arch.dense_layers, m.arch.dense_intermediate), (1, 3, 12288));
        // A shared expert MiniMax gives is not read; nor are lightning-attention layers (0).
        let e = |t: &str| preset_from_hf_config(t, "x").err().expect("an error");
        assert!(e(&minimax.replace(r#""shared_intermediate_size": 0"#, r#""shared_intermediate_size": 1536"#))
            .starts_with("shared_intermediate_size: a MiniMax shared expert is not read"));
        assert!(e(&minimax.replace("[1, 1]", "[0, 1]")).starts_with("attn_type_list: lightning (linear) attention"));
    }

    #[test]
    fn what_cannot_be_read_is_named() {
        let e = |t: &str| preset_from_hf_config(t, "x").err().expect("an error");
        assert!(e("{").starts_with("not JSON"));
        assert!(e(r#"{"architectures": ["Gemma3ForCausalLM"]}"#)
            .starts_with("architectures [\"Gemma3ForCausalLM\"]: not one servesim models from config.json"));
        // Known and not modelled: each says why.
        assert!(e(r#"{"architectures": ["Qwen3_5MoeForConditionalGeneration"], "vision_config": {}}"#)
            .starts_with("Qwen3_5MoeForConditionalGeneration: Gated DeltaNet linear-attention layers"));
        assert!(
            e(r#"{"architectures": ["GlmMoeDsaForCausalLM"]}"#).starts_with("GlmMoeDsaForCausalLM: sparse attention")
        );
        assert!(e(r#"{"architectures": ["NemotronHForCausalLM"]}"#).starts_with("NemotronHForCausalLM: Mamba"));
        assert!(e(r#"{"architectures": ["Qwen3VLForConditionalGeneration"], "vision_config": {}}"#)
            .starts_with("architectures [\"Qwen3VLForConditionalGeneration\"]: a vision-language checkpoint"));
        let linear = LLAMA_31_8B.replace("\"vocab_size\"", "\"layer_types\": [\"linear_attention\"], \"vocab_size\"");
        assert_eq!(
            e(&linear),
            "layer_types: a \"linear_attention\" layer, which servesim does not model from config.json"
        );
        assert!(e(r#"{}"#).starts_with("architectures []: not one"));
        let no_layers = LLAMA_31_8B.replace("\"num_hidden_layers\": 32,", "");
        assert_eq!(e(&no_layers), "num_hidden_layers: missing (needed for LlamaForCausalLM)");
        let bad = LLAMA_31_8B.replace("\"num_hidden_layers\": 32", "\"num_hidden_layers\": -3");
        assert_eq!(e(&bad), "num_hidden_layers: not a whole number ≥ 1: -3");
        let bad = LLAMA_31_8B.replace("\"hidden_size\": 4096", "\"hidden_size\": 4097");
        assert_eq!(e(&bad), "hidden_size 4097 is not a multiple of num_attention_heads 32");
        let bad =
            LLAMA_31_8B.replace("\"rope_type\": \"llama3\"", "\"rope_type\": \"dynamic\"").replace("8.0", "1e300");
        assert!(e(&bad).starts_with("rope_scaling.factor: not a number in [1, 1e6]"), "{}", e(&bad));
    }
}
