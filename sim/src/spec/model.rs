//! Model architectures. Every preset's numbers are copied from the model's published Hugging Face
//! `config.json` (named in the comment above it).

use super::Dtype;

/// The dimensions of a decoder-only transformer that decide its memory and compute cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// FFN intermediate size (per expert for MoE models).
    pub intermediate: u64,
    pub vocab: u64,
    /// Longest context (prompt + output) the model accepts (`max_position_embeddings`).
    pub max_context: u64,
    /// Number of experts per MoE layer; 1 for a dense model.
    pub experts: u64,
    /// Experts each token is routed to; 1 for a dense model.
    pub top_k: u64,
    /// Whether the input embedding and the LM head share weights.
    pub tied_embeddings: bool,
    pub weight_dtype: Dtype,
    pub kv_dtype: Dtype,
    /// The attention projections' weights (Q, K, V and output) when a checkpoint stores them
    /// otherwise than [`ModelSpec::attention_weight_dtype`]'s default.
    pub attention_dtype: Option<Dtype>,
    /// What differs from a plain transformer: latent attention, shared experts, dense layers
    /// of a MoE model, windowed layers, biases ([`Arch::PLAIN`] for none).
    pub arch: Arch,
}

/// The parts of a 2025–26 architecture that change its memory and cost; each is off in
/// [`Arch::PLAIN`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arch {
    /// Multi-head latent attention (DeepSeek-V2/V3/R1, Kimi-K2): the KV cache holds one latent
    /// vector and one RoPE key per token and layer, shared by every head.
    pub mla: Option<Mla>,
    /// Shared experts of a MoE layer (every token goes through them), each as wide as a routed
    /// expert (`intermediate`).
    pub shared_experts: u64,
    /// Layers of a MoE model whose FFN is dense (DeepSeek-V3: the first 3; Llama-4 Maverick:
    /// every other), each `dense_intermediate` wide.
    pub dense_layers: u64,
    pub dense_intermediate: u64,
    /// Layers that attend only to the last `window` tokens (gpt-oss: sliding windows of 128 on
    /// every other layer; Llama-4: chunks of 8192 on 3 layers of 4).
    pub window: Option<Window>,
    /// Biases on the Q, K, V and O projections, and on each expert's projections and the
    /// router (gpt-oss).
    pub biases: bool,
}

/// Multi-head latent attention's ranks (`q_lora_rank` 0: Q is projected directly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mla {
    pub q_lora_rank: u64,
    pub kv_lora_rank: u64,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

/// Windowed attention: `layers` layers see only the last `tokens` tokens (sliding window), or
/// with `chunked`, only the tokens of their own `tokens`-long chunk (Llama 4's chunked local
/// attention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub tokens: u64,
    pub layers: u64,
    pub chunked: bool,
}

impl Arch {
    pub const PLAIN: Arch =
        Arch { mla: None, shared_experts: 0, dense_layers: 0, dense_intermediate: 0, window: None, biases: false };
}

/// A preset: the published dimensions of a model.
#[derive(Clone)]
pub struct ModelPreset {
    pub(crate) name: &'static str,
    pub(crate) layers: u64,
    pub(crate) hidden: u64,
    pub(crate) heads: u64,
    pub(crate) kv_heads: u64,
    pub(crate) head_dim: u64,
    pub(crate) intermediate: u64,
    pub(crate) vocab: u64,
    pub(crate) max_context: u64,
    pub experts: u64,
    pub(crate) top_k: u64,
    pub(crate) tied_embeddings: bool,
    pub(crate) arch: Arch,
}

pub const MODEL_PRESETS: &[ModelPreset] = &[
    // meta-llama/Meta-Llama-3-8B config.json: num_hidden_layers 32, hidden_size 4096,
    // num_attention_heads 32, num_key_value_heads 8, intermediate_size 14336, vocab_size 128256,
    // max_position_embeddings 8192.
    ModelPreset {
        name: "llama-3-8b",
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 128256,
        max_context: 8192,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Meta-Llama-3-70B config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
    // intermediate 28672, vocab 128256, max_position_embeddings 8192.
    ModelPreset {
        name: "llama-3-70b",
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 28672,
        vocab: 128256,
        max_context: 8192,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Llama-2-7b-hf config.json: 32 layers, hidden 4096, 32 heads (no GQA),
    // intermediate 11008, vocab 32000, max_position_embeddings 4096.
    ModelPreset {
        name: "llama-2-7b",
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 32,
        head_dim: 128,
        intermediate: 11008,
        vocab: 32000,
        max_context: 4096,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Llama-2-70b-hf config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
    // intermediate 28672, vocab 32000, max_position_embeddings 4096.
    ModelPreset {
        name: "llama-2-70b",
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 28672,
        vocab: 32000,
        max_context: 4096,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // codellama/CodeLlama-34b-hf config.json: 48 layers, hidden 8192, 64 heads, 8 KV heads,
    // intermediate 22016, vocab 32000, max_position_embeddings 16384.
    ModelPreset {
        name: "codellama-34b",
        layers: 48,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 22016,
        vocab: 32000,
        max_context: 16384,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // mistralai/Mistral-7B-Instruct-v0.2 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads,
    // intermediate 14336, vocab 32000, max_position_embeddings 32768, sliding_window null
    // (v0.1's 4096-token sliding window is not modelled; v0.2 has none).
    ModelPreset {
        name: "mistral-7b",
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 32000,
        max_context: 32768,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // Qwen/Qwen2.5-72B-Instruct config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
    // intermediate 29568, vocab 152064, max_position_embeddings 32768 (131072 only with YaRN).
    ModelPreset {
        name: "qwen2.5-72b",
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 29568,
        vocab: 152064,
        max_context: 32768,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads,
    // intermediate 14336 per expert, num_local_experts 8, num_experts_per_tok 2, vocab 32000,
    // max_position_embeddings 32768.
    ModelPreset {
        name: "mixtral-8x7b",
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 32000,
        max_context: 32768,
        experts: 8,
        top_k: 2,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Llama-3.1-8B config.json (as shipped in aiconfigurator-core 0.12.0's
    // model_configs): the llama-3-8b dimensions with max_position_embeddings 131072.
    ModelPreset {
        name: "llama-3.1-8b",
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 128256,
        max_context: 131072,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Llama-3.1-70B config.json: the llama-3-70b dimensions with
    // max_position_embeddings 131072.
    ModelPreset {
        name: "llama-3.1-70b",
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 28672,
        vocab: 128256,
        max_context: 131072,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // Qwen/Qwen3-32B config.json: 64 layers, hidden 5120, 64 heads, 8 KV heads, head_dim 128,
    // intermediate 25600, vocab 151936, max_position_embeddings 40960, untied embeddings (its
    // per-head QK norms are elementwise work, priced with the other norms).
    ModelPreset {
        name: "qwen3-32b",
        layers: 64,
        hidden: 5120,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 25600,
        vocab: 151936,
        max_context: 40960,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // Qwen/Qwen3-8B config.json (as shipped in ai-dynamo/aiconfigurator 095f58a51,
    // aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-8B_config.json): 36 layers,
    // hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 12288, vocab 151936,
    // max_position_embeddings 40960, untied embeddings; per-head QK norms as for qwen3-32b.
    ModelPreset {
        name: "qwen3-8b",
        layers: 36,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 12288,
        vocab: 151936,
        max_context: 40960,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // Qwen/Qwen3-30B-A3B config.json (ai-dynamo/aiconfigurator 095f58a51,
    // model_configs/Qwen--Qwen3-30B-A3B_config.json): 48 layers, hidden 2048, 32 heads, 4 KV
    // heads, head_dim 128, moe_intermediate_size 768 per expert, num_experts 128,
    // num_experts_per_tok 8, every layer sparse (decoder_sparse_step 1, no mlp_only_layers), no
    // shared expert, vocab 151936, max_position_embeddings 40960, untied; per-head QK norms as
    // for qwen3-32b.
    ModelPreset {
        name: "qwen3-30b-a3b",
        layers: 48,
        hidden: 2048,
        heads: 32,
        kv_heads: 4,
        head_dim: 128,
        intermediate: 768,
        vocab: 151936,
        max_context: 40960,
        experts: 128,
        top_k: 8,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // Qwen/Qwen3-235B-A22B config.json (same source, Qwen--Qwen3-235B-A22B_config.json): 94
    // layers, hidden 4096, 64 heads, 4 KV heads, head_dim 128, moe_intermediate_size 1536 per
    // expert, 128 experts, 8 per token, every layer sparse, no shared expert, vocab 151936,
    // max_position_embeddings 40960, untied.
    ModelPreset {
        name: "qwen3-235b-a22b",
        layers: 94,
        hidden: 4096,
        heads: 64,
        kv_heads: 4,
        head_dim: 128,
        intermediate: 1536,
        vocab: 151936,
        max_context: 40960,
        experts: 128,
        top_k: 8,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Meta-Llama-3.1-405B config.json (ai-dynamo/aiconfigurator 095f58a51,
    // model_configs/meta-llama--Meta-Llama-3.1-405B_config.json): 126 layers, hidden 16384,
    // 128 heads (head_dim 16384 / 128 = 128), 8 KV heads, intermediate 53248, vocab 128256,
    // max_position_embeddings 131072, untied embeddings.
    ModelPreset {
        name: "llama-3.1-405b",
        layers: 126,
        hidden: 16384,
        heads: 128,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 53248,
        vocab: 128256,
        max_context: 131072,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // meta-llama/Llama-3.3-70B-Instruct config.json: the llama-3.1-70b dimensions (80 layers,
    // hidden 8192, 64 heads, 8 KV heads, intermediate 28672, vocab 128256,
    // max_position_embeddings 131072, untied); a newer post-training of the same network.
    ModelPreset {
        name: "llama-3.3-70b",
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 28672,
        vocab: 128256,
        max_context: 131072,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
    // deepseek-ai/DeepSeek-V3 config.json (ai-dynamo/aiconfigurator 095f58a51,
    // model_configs/deepseek-ai--DeepSeek-V3_config.json): 61 layers, hidden 7168, 128 heads,
    // MLA with q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
    // v_head_dim 128 (head_dim here: the 192-wide query/key head); n_routed_experts 256,
    // num_experts_per_tok 8, n_shared_experts 1, moe_intermediate_size 2048;
    // first_k_dense_replace 3 dense layers of intermediate_size 18432; vocab 129280,
    // max_position_embeddings 163840, untied. The multi-token-prediction layer
    // (num_nextn_predict_layers 1, the 14B that make the checkpoint 685B) is left out.
    ModelPreset {
        name: "deepseek-v3",
        layers: 61,
        hidden: 7168,
        heads: 128,
        kv_heads: 128,
        head_dim: 192,
        intermediate: 2048,
        vocab: 129280,
        max_context: 163840,
        experts: 256,
        top_k: 8,
        tied_embeddings: false,
        arch: DEEPSEEK_V3_ARCH,
    },
    // deepseek-ai/DeepSeek-R1 config.json (same source, deepseek-ai--DeepSeek-R1_config.json):
    // the DeepSeek-V3 network, every dimension equal.
    ModelPreset {
        name: "deepseek-r1",
        layers: 61,
        hidden: 7168,
        heads: 128,
        kv_heads: 128,
        head_dim: 192,
        intermediate: 2048,
        vocab: 129280,
        max_context: 163840,
        experts: 256,
        top_k: 8,
        tied_embeddings: false,
        arch: DEEPSEEK_V3_ARCH,
    },
    // moonshotai/Kimi-K2-Instruct config.json (same source,
    // moonshotai--Kimi-K2-Instruct_config.json): the DeepSeek-V3 layout with 64 heads, 384
    // routed experts (8 per token, 1 shared, 2048 wide), first_k_dense_replace 1, vocab
    // 163840, max_position_embeddings 131072, untied, no MTP layer.
    ModelPreset {
        name: "kimi-k2",
        layers: 61,
        hidden: 7168,
        heads: 64,
        kv_heads: 64,
        head_dim: 192,
        intermediate: 2048,
        vocab: 163840,
        max_context: 131072,
        experts: 384,
        top_k: 8,
        tied_embeddings: false,
        arch: Arch { dense_layers: 1, ..DEEPSEEK_V3_ARCH },
    },
    // openai/gpt-oss-120b config.json (same source, openai--gpt-oss-120b_config.json): 36
    // layers, hidden 2880, 64 heads of 64, 8 KV heads, 128 experts of intermediate 2880, 4 per
    // token, vocab 201088, max_position_embeddings 131072, untied; layer_types alternate
    // sliding_attention (sliding_window 128) and full_attention, so 18 layers are windowed;
    // attention_bias true, and the experts and router carry biases. Published as MXFP4 experts
    // with bf16 attention (quantization_config), so `weight_dtype = "mxfp4"` is the checkpoint.
    ModelPreset {
        name: "gpt-oss-120b",
        layers: 36,
        hidden: 2880,
        heads: 64,
        kv_heads: 8,
        head_dim: 64,
        intermediate: 2880,
        vocab: 201088,
        max_context: 131072,
        experts: 128,
        top_k: 4,
        tied_embeddings: false,
        arch: Arch { window: Some(Window { tokens: 128, layers: 18, chunked: false }), biases: true, ..Arch::PLAIN },
    },
    // openai/gpt-oss-20b config.json (same source): as gpt-oss-120b with 24 layers (12
    // windowed) and 32 experts.
    ModelPreset {
        name: "gpt-oss-20b",
        layers: 24,
        hidden: 2880,
        heads: 64,
        kv_heads: 8,
        head_dim: 64,
        intermediate: 2880,
        vocab: 201088,
        max_context: 131072,
        experts: 32,
        top_k: 4,
        tied_embeddings: false,
        arch: Arch { window: Some(Window { tokens: 128, layers: 12, chunked: false }), biases: true, ..Arch::PLAIN },
    },
    // meta-llama/Llama-4-Scout-17B-16E-Instruct config.json (same source), text_config: 48
    // layers, hidden 5120, 40 heads, 8 KV heads, head_dim 128, 16 experts of intermediate 8192,
    // 1 per token, plus one shared expert of the same width, interleave_moe_layer_step 1 (every
    // layer MoE), vocab 202048, max_position_embeddings 10485760, untied. attention_chunk_size
    // 8192: the RoPE layers attend within chunks of 8192 tokens and every 4th layer (NoPE) to
    // the whole context (Hugging Face transformers' Llama4TextConfig, no_rope_layer_interval 4),
    // so 36 layers are windowed. (AIConfigurator 095f58a51 sdk/utils.py assumes every other
    // layer, 24.) The vision encoder is left out.
    ModelPreset {
        name: "llama-4-scout",
        layers: 48,
        hidden: 5120,
        heads: 40,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 8192,
        vocab: 202048,
        max_context: 10485760,
        experts: 16,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch {
            shared_experts: 1,
            window: Some(Window { tokens: 8192, layers: 36, chunked: true }),
            ..Arch::PLAIN
        },
    },
    // meta-llama/Llama-4-Maverick-17B-128E-Instruct config.json (same source): as Scout with
    // 128 experts on every other layer (interleave_moe_layer_step 2) and dense layers of
    // intermediate_size_mlp 16384 between them, max_position_embeddings 1048576.
    ModelPreset {
        name: "llama-4-maverick",
        layers: 48,
        hidden: 5120,
        heads: 40,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 8192,
        vocab: 202048,
        max_context: 1048576,
        experts: 128,
        top_k: 1,
        tied_embeddings: false,
        arch: Arch {
            shared_experts: 1,
            dense_layers: 24,
            dense_intermediate: 16384,
            window: Some(Window { tokens: 8192, layers: 36, chunked: true }),
            ..Arch::PLAIN
        },
    },
    // MiniMaxAI/MiniMax-M2.5 config.json (same source, MiniMaxAI--MiniMax-M2.5_config.json;
    // architectures MiniMaxM2ForCausalLM): 62 layers, hidden 3072, 48 heads of 128, 8 KV heads,
    // 256 experts of intermediate 1536, 8 per token, no shared expert (shared_intermediate_size
    // 0), every layer full attention (attn_type_list all 1), vocab 200064,
    // max_position_embeddings 196608, untied. Published in block-scaled FP8
    // (quantization_config: fp8, weight_block_size [128, 128]). Its MTP modules are not loaded.
    ModelPreset {
        name: "minimax-m2.5",
        layers: 62,
        hidden: 3072,
        heads: 48,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 1536,
        vocab: 200064,
        max_context: 196608,
        experts: 256,
        top_k: 8,
        tied_embeddings: false,
        arch: Arch::PLAIN,
    },
];

/// DeepSeek-V3's MLA, shared expert and three dense layers.
const DEEPSEEK_V3_ARCH: Arch = Arch {
    mla: Some(Mla {
        q_lora_rank: 1536,
        kv_lora_rank: 512,
        qk_nope_head_dim: 128,
        qk_rope_head_dim: 64,
        v_head_dim: 128,
    }),
    shared_experts: 1,
    dense_layers: 3,
    dense_intermediate: 18432,
    window: None,
    biases: false,
};

/// Checkpoint names (the last part of a Hugging Face id, lowercased, suffixes such as
/// `-instruct` or `-fp8` removed) that are another preset's network.
const CHECKPOINT_ALIASES: &[(&str, &str)] = &[
    ("meta-llama-3-8b", "llama-3-8b"),
    ("meta-llama-3-70b", "llama-3-70b"),
    ("meta-llama-3.1-8b", "llama-3.1-8b"),
    ("meta-llama-3.1-70b", "llama-3.1-70b"),
    ("meta-llama-3.1-405b", "llama-3.1-405b"),
    ("llama-4-scout-17b-16e", "llama-4-scout"),
    ("llama-4-maverick-17b-128e", "llama-4-maverick"),
    // DeepSeek-V3.1 (and -Terminus): the DeepSeek-V3 network, every dimension of its config.json
    // equal (nvidia--DeepSeek-V3.1-NVFP4_config.json in aiconfigurator-core 0.12.0's
    // model_configs/, beside deepseek-ai--DeepSeek-V3_config.json), published in FP8 as V3 is.
    ("deepseek-v3.1", "deepseek-v3"),
    // Kimi-K2.5: a vision encoder beside Kimi-K2's network, its text_config equal to Kimi-K2's
    // in every dimension but the context (moonshotai--Kimi-K2.5_config.json beside
    // moonshotai--Kimi-K2-Instruct_config.json in aiconfigurator-core 0.12.0's model_configs/);
    // the encoder (27 layers of width 1,152, about 0.4B parameters) is left out.
    ("kimi-k2.5", "kimi-k2"),
];

/// Checkpoints of a preset's network whose config.json gives a longer context than the preset's,
/// as vLLM derives it (`_get_and_verify_max_len`): Qwen's 2507 releases of Qwen3
/// (`max_position_embeddings` 262,144, "natively" in their cards), and Kimi-K2.5 (yarn × 64 of
/// 4,096 = 262,144, against Kimi-K2's × 32).
/// Each entry: a part of the checkpoint's name, the presets it applies to, the context.
const CHECKPOINT_CONTEXTS: &[(&str, &[&str], u64)] =
    &[("-2507", &["qwen3-30b-a3b", "qwen3-235b-a22b"], 262_144), ("kimi-k2.5", &["kimi-k2"], 262_144)];

/// What a checkpoint mapped to a preset has that the preset does not model.
const CHECKPOINT_NOTES: &[(&str, &str)] = &[(
    "kimi-k2.5",
    "its vision encoder (27 layers of width 1,152, about 0.4B parameters) is left out, and Moonshot's own \
         checkpoint ships its routed experts in INT4 (compressed-tensors, groups of 32), which servesim does not \
         size: give the weight dtype you serve (NVIDIA's NVFP4 checkpoint is sized as such)",
)];

/// Each preset's Hugging Face checkpoint, the one its dimensions were read from (the comment
/// above each preset), as a launch command names it.
const CHECKPOINTS: &[(&str, &str)] = &[
    ("llama-3-8b", "meta-llama/Meta-Llama-3-8B-Instruct"),
    ("llama-3-70b", "meta-llama/Meta-Llama-3-70B-Instruct"),
    ("llama-2-7b", "meta-llama/Llama-2-7b-chat-hf"),
    ("llama-2-70b", "meta-llama/Llama-2-70b-chat-hf"),
    ("codellama-34b", "codellama/CodeLlama-34b-Instruct-hf"),
    ("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.2"),
    ("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct"),
    ("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
    ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
    ("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct"),
    ("qwen3-32b", "Qwen/Qwen3-32B"),
    ("qwen3-8b", "Qwen/Qwen3-8B"),
    ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    ("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"),
    ("llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct"),
    ("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct"),
    ("deepseek-v3", "deepseek-ai/DeepSeek-V3"),
    ("deepseek-r1", "deepseek-ai/DeepSeek-R1"),
    ("kimi-k2", "moonshotai/Kimi-K2-Instruct"),
    ("gpt-oss-120b", "openai/gpt-oss-120b"),
    ("gpt-oss-20b", "openai/gpt-oss-20b"),
    ("llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E-Instruct"),
    ("llama-4-maverick", "meta-llama/Llama-4-Maverick-17B-128E-Instruct"),
    ("minimax-m2.5", "MiniMaxAI/MiniMax-M2.5"),
];

/// Suffixes of checkpoint names that do not change the network (post-training, quantized
/// copies, dates), removed before matching.
const CHECKPOINT_SUFFIXES: &[&str] = &[
    "-instruct",
    "-chat",
    "-hf",
    "-base",
    "-fp8",
    "-fp4",
    "-nvfp4",
    "-fp8-dynamic",
    "-2507",
    "-0324",
    "-0528",
    "-terminus",
    "-v0.1",
    "-v0.2",
    "-v0.3",
];

impl ModelPreset {
    pub fn find(name: &str) -> Option<&'static ModelPreset> {
        MODEL_PRESETS.iter().find(|p| p.name == name)
    }

    /// The preset of a checkpoint named as engines take it (`meta-llama/Llama-3.1-8B-Instruct`,
    /// `nvidia/DeepSeek-R1-FP4`, `openai/gpt-oss-120b`), if servesim has its network; a distilled
    /// or otherwise different network (`DeepSeek-R1-Distill-Llama-70B`) is not matched.
    pub fn for_checkpoint(id: &str) -> Option<&'static ModelPreset> {
        let mut name = id.trim_end_matches('/').rsplit('/').next()?.to_ascii_lowercase();
        while let Some(s) = CHECKPOINT_SUFFIXES.iter().find(|s| name.ends_with(**s)) {
            name.truncate(name.len() - s.len());
        }
        let name = CHECKPOINT_ALIASES.iter().find(|(a, _)| *a == name).map_or(name.as_str(), |(_, p)| *p);
        ModelPreset::find(name)
    }

    /// The context of a checkpoint [`ModelPreset::for_checkpoint`] maps to a preset, where its
    /// config.json's differs from the preset's ([`CHECKPOINT_CONTEXTS`]).
    pub fn checkpoint_context(id: &str) -> Option<u64> {
        let preset = ModelPreset::for_checkpoint(id)?.name;
        let name = id.trim_end_matches('/').rsplit('/').next()?.to_ascii_lowercase();
        CHECKPOINT_CONTEXTS
            .iter()
            .find(|(part, presets, _)| name.contains(part) && presets.contains(&preset))
            .map(|(_, _, c)| *c)
    }

    /// What the checkpoint `id` has beyond its preset's network, in words, where it has some.
    pub fn checkpoint_note(id: &str) -> Option<&'static str> {
        let name = id.trim_end_matches('/').rsplit('/').next()?.to_ascii_lowercase();
        CHECKPOINT_NOTES.iter().find(|(part, _)| name.contains(part)).map(|(_, n)| *n)
    }

    /// This preset with another context (a checkpoint's, [`ModelPreset::checkpoint_context`]).
    pub fn with_max_context(&self, max_context: u64) -> ModelPreset {
        ModelPreset { max_context, ..self.clone() }
    }

    pub fn max_context(&self) -> u64 {
        self.max_context
    }

    pub fn names() -> Vec<&'static str> {
        MODEL_PRESETS.iter().map(|p| p.name).collect()
    }

    /// The Hugging Face checkpoint a launch command names for this preset (its published
    /// instruct or chat model where there is one).
    pub fn checkpoint(&self) -> Option<&'static str> {
        CHECKPOINTS.iter().find(|(p, _)| *p == self.name).map(|(_, c)| *c)
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The weight format of the published checkpoint (`checkpoint()`): DeepSeek-V3/R1,
    /// Kimi-K2 and MiniMax-M2.5 ship block-scaled FP8 (config.json `quantization_config`: `fp8`,
    /// `weight_block_size` [128, 128]), gpt-oss MXFP4 experts with bf16 attention; the others
    /// bf16.
    pub fn checkpoint_dtype(&self) -> Dtype {
        match self.name {
            "deepseek-v3" | "deepseek-r1" | "kimi-k2" | "minimax-m2.5" => Dtype::Fp8,
            "gpt-oss-120b" | "gpt-oss-20b" => Dtype::Mxfp4,
            _ => Dtype::Bf16,
        }
    }
}

/// The largest model dimension accepted anywhere one is read (scenario `[model]`, a profile's
/// `meta.model`): 2^40, so that no single size is absurd; their products are bounded apart.
pub const MAX_DIMENSION: u64 = 1 << 40;

impl ModelSpec {
    pub fn from_preset(p: &ModelPreset, weight_dtype: Dtype, kv_dtype: Dtype) -> ModelSpec {
        ModelSpec {
            name: p.name.to_string(),
            layers: p.layers,
            hidden: p.hidden,
            heads: p.heads,
            kv_heads: p.kv_heads,
            head_dim: p.head_dim,
            intermediate: p.intermediate,
            vocab: p.vocab,
            max_context: p.max_context,
            experts: p.experts,
            top_k: p.top_k,
            tied_embeddings: p.tied_embeddings,
            weight_dtype,
            kv_dtype,
            attention_dtype: None,
            arch: p.arch,
        }
    }

    /// The layer kinds of this model that servesim's own calibration does not measure (its
    /// kernels run plain decoder layers), named for an error; `None` for a plain transformer.
    /// Kernel databases cover every kind (`servesim-aic`).
    pub fn unprofiled_layers(&self) -> Option<&'static str> {
        let a = &self.arch;
        if a.mla.is_some() {
            Some("multi-head latent attention")
        } else if a.window.is_some() {
            Some("windowed attention layers")
        } else if a.shared_experts > 0 {
            Some("shared experts")
        } else if self.moe_layers() > 0 && a.dense_layers > 0 {
            Some("dense layers in a MoE model")
        } else if a.biases {
            Some("projection biases")
        } else {
            None
        }
    }

    /// Parameters of one attention block: Q, K, V and O projections (with their biases, if
    /// any); under MLA the low-rank Q and KV projections, their norms, and O.
    pub fn attn_params_per_layer(&self) -> u64 {
        if let Some(a) = self.arch.mla {
            let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
            let q = match a.q_lora_rank {
                0 => self.hidden * self.heads * qk,
                r => self.hidden * r + r + r * self.heads * qk,
            };
            let kv = self.hidden * (a.kv_lora_rank + a.qk_rope_head_dim)
                + a.kv_lora_rank
                + a.kv_lora_rank * self.heads * (a.qk_nope_head_dim + a.v_head_dim);
            return q + kv + self.heads * a.v_head_dim * self.hidden;
        }
        let q = self.heads * self.head_dim;
        let kv = self.kv_heads * self.head_dim;
        let bias = if self.arch.biases { q + 2 * kv + self.hidden } else { 0 };
        self.hidden * (q + 2 * kv) + q * self.hidden + bias
    }

    /// Parameters of one expert's gated MLP (gate, up, down, and their biases if any).
    pub fn expert_params(&self) -> u64 {
        let bias = if self.arch.biases { 2 * self.intermediate + self.hidden } else { 0 };
        3 * self.hidden * self.intermediate + bias
    }

    /// Layers whose FFN is a MoE layer (0 for a dense model).
    pub fn moe_layers(&self) -> u64 {
        if self.experts > 1 {
            self.layers.saturating_sub(self.arch.dense_layers)
        } else {
            0
        }
    }

    /// Width of the dense FFN layers: `intermediate` for a dense model, `dense_intermediate`
    /// for the dense layers of a MoE model.
    pub fn dense_ffn_width(&self) -> u64 {
        if self.experts > 1 {
            self.arch.dense_intermediate
        } else {
            self.intermediate
        }
    }

    /// FFN parameters of one MoE layer: every routed expert, the shared experts, the router.
    fn moe_ffn_params(&self) -> u64 {
        let router = self.hidden * self.experts + if self.arch.biases { self.experts } else { 0 };
        (self.experts + self.arch.shared_experts) * self.expert_params() + router
    }

    /// Parameters of all FFNs (experts, shared experts, routers, dense MLPs): the part a 4-bit
    /// weight format quantizes.
    pub fn ffn_params(&self) -> u64 {
        let dense = self.layers - self.moe_layers();
        self.moe_layers() * self.moe_ffn_params() + dense * 3 * self.hidden * self.dense_ffn_width()
    }

    /// Embedding plus LM head (one matrix if tied).
    pub fn embedding_params(&self) -> u64 {
        let one = self.vocab * self.hidden;
        if self.tied_embeddings {
            one
        } else {
            2 * one
        }
    }

    /// Total parameter count (llama-3-8b: 8,030,261,248).
    pub fn params(&self) -> u64 {
        self.layers * (self.attn_params_per_layer() + 2 * self.hidden)
            + self.ffn_params()
            + self.embedding_params()
            + self.hidden
    }

    /// Parameters one token goes through: attention, its top-k and the shared experts, the
    /// dense layers, the LM head (the published "active" count; embeddings left out).
    pub fn active_params(&self) -> u64 {
        let moe = if self.moe_layers() > 0 {
            let router = self.hidden * self.experts;
            self.moe_layers() * ((self.top_k + self.arch.shared_experts) * self.expert_params() + router)
        } else {
            0
        };
        let dense = (self.layers - self.moe_layers()) * 3 * self.hidden * self.dense_ffn_width();
        self.layers * (self.attn_params_per_layer() + 2 * self.hidden) + moe + dense + self.vocab * self.hidden
    }

    /// Bytes of all weights. bf16 and fp8 store every weight so; a 4-bit format (NVFP4,
    /// MXFP4) stores the FFN weights (experts, shared experts, routers, dense MLPs) in 4 bits
    /// with its scales, and attention, embeddings and the LM head in bf16 — as the published
    /// checkpoints do (openai/gpt-oss-120b config.json `modules_to_not_convert`: self_attn,
    /// router, embed_tokens, lm_head; nvidia/DeepSeek-V3.1-NVFP4 hf_quant_config.json
    /// `exclude_modules`: lm_head and the attention projections).
    /// With an `attention_dtype`, the attention projections are stored in it instead.
    pub fn weight_bytes(&self) -> u64 {
        let attn = self.layers * self.attn_params_per_layer();
        self.weight_dtype.bytes_for(self.ffn_params())
            + self.attention_weight_dtype().bytes_for(attn)
            + self.other_weight_dtype().bytes_for(self.params() - self.ffn_params() - attn)
    }

    /// The dtype of the weights outside the FFN and the attention projections (embeddings, LM
    /// head, norms): the weight dtype, or bf16 under a 4-bit format ([`ModelSpec::weight_bytes`]
    /// says why).
    pub fn other_weight_dtype(&self) -> Dtype {
        let d = self.weight_dtype;
        if d.is_4bit() {
            Dtype::Bf16
        } else {
            d
        }
    }

    /// The dtype of the attention projections: `attention_dtype`, else
    /// [`ModelSpec::other_weight_dtype`].
    pub fn attention_weight_dtype(&self) -> Dtype {
        self.attention_dtype.unwrap_or(self.other_weight_dtype())
    }

    /// Weight bytes each GPU holds under tensor parallelism `tp`: every matrix is split `tp`
    /// ways (the vocabulary-parallel embedding and LM head included); norms are replicated but
    /// negligible, so they are split too.
    pub fn weight_bytes_per_gpu(&self, tp: u64) -> u64 {
        self.weight_bytes().div_ceil(tp)
    }

    /// Weight bytes each GPU holds when attention is data parallel over `dp` ranks of
    /// `tp / dp` GPUs: attention weights split `tp / dp` ways, FFNs and embeddings `tp` ways
    /// ([`Self::weight_bytes_per_gpu`] when `dp` is 1).
    pub fn weight_bytes_per_gpu_dp(&self, tp: u64, dp: u64) -> u64 {
        if dp <= 1 {
            return self.weight_bytes_per_gpu(tp);
        }
        let other = self.other_weight_dtype();
        let attn = self.params() - self.ffn_params() - self.embedding_params();
        let projections = self.layers * self.attn_params_per_layer();
        let attn_bytes = self.attention_weight_dtype().bytes_for(projections) + other.bytes_for(attn - projections);
        (self.weight_dtype.bytes_for(self.ffn_params()) + other.bytes_for(self.embedding_params())).div_ceil(tp)
            + attn_bytes.div_ceil(tp / dp)
    }

    /// The layers of one pipeline stage of `layers` layers, for what scales with them (KV bytes
    /// per token): windowed layers in proportion (gpt-oss alternates them), a MoE model's
    /// dense layers on the first stage.
    pub fn pipeline_stage(&self, layers: u64) -> ModelSpec {
        let mut s = self.clone();
        let all = self.layers.max(1);
        s.layers = layers;
        s.arch.dense_layers = self.arch.dense_layers.min(layers);
        if let Some(w) = &mut s.arch.window {
            w.layers = ((w.layers * layers) as f64 / all as f64).round() as u64;
        }
        s
    }

    /// KV heads each GPU stores under TP: heads are split across GPUs, and replicated when
    /// there are fewer KV heads than GPUs (as vLLM does).
    pub fn kv_heads_per_gpu(&self, tp: u64) -> u64 {
        (self.kv_heads / tp).max(1)
    }

    /// Elements of K and V one layer stores per token: 2 × KV heads × head_dim, or under MLA
    /// the latent and the RoPE key (kv_lora_rank + qk_rope_head_dim: 576 for DeepSeek-V3).
    fn kv_elements_per_layer(&self, kv_heads: u64) -> u64 {
        match self.arch.mla {
            Some(a) => a.kv_lora_rank + a.qk_rope_head_dim,
            None => 2 * kv_heads * self.head_dim,
        }
    }

    /// Layers that attend to the whole context (every layer but the windowed ones).
    pub fn full_attention_layers(&self) -> u64 {
        self.layers - self.arch.window.map_or(0, |w| w.layers.min(self.layers))
    }

    /// KV-cache bytes per token of the whole model, over its full-attention layers (windowed
    /// layers hold a bounded number of tokens per sequence: [`Self::window_kv_bytes_per_token`]).
    /// 2 (K and V) × layers × kv_heads × head_dim × bytes per element; llama-3-8b bf16:
    /// 131,072 B; DeepSeek-V3 bf16: 61 × 576 × 2 = 70,272 B.
    pub fn kv_bytes_per_token(&self) -> u64 {
        self.kv_dtype.bytes_for(self.full_attention_layers() * self.kv_elements_per_layer(self.kv_heads))
    }

    /// KV-cache bytes per token held by each GPU under TP. MLA's latent is shared by all heads,
    /// so every GPU of a TP group holds all of it (as vLLM and SGLang do without DP attention).
    pub fn kv_bytes_per_token_per_gpu(&self, tp: u64) -> u64 {
        let per_layer = self.kv_elements_per_layer(self.kv_heads_per_gpu(tp));
        self.kv_dtype.bytes_for(self.full_attention_layers() * per_layer)
    }

    /// KV bytes per token of the windowed layers, per GPU under TP (0 without windows).
    pub fn window_kv_bytes_per_token_per_gpu(&self, tp: u64) -> u64 {
        let layers = self.layers - self.full_attention_layers();
        self.kv_dtype.bytes_for(layers * self.kv_elements_per_layer(self.kv_heads_per_gpu(tp)))
    }
}

/// Layers of each pipeline stage, first to last: vLLM's `get_pp_indices` without
/// `VLLM_PP_LAYER_PARTITION` (vllm/distributed/utils.py, vllm-project/vllm 5a6541db): ⌊L / pp⌋
/// each, the remainder one more each to the stages before the last, from the back.
pub fn stage_layers(layers: u64, pp: u64) -> Vec<u64> {
    let pp = pp.max(1);
    let mut parts = vec![layers / pp; pp as usize];
    let rest = (layers % pp) as usize;
    // `for i in range(2, remaining_layers + 2): partitions[-i] += 1`
    for i in 2..rest + 2 {
        let n = parts.len();
        parts[n - i] += 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> ModelSpec {
        ModelSpec::from_preset(ModelPreset::find(name).unwrap(), Dtype::Bf16, Dtype::Bf16)
    }

    #[test]
    fn the_attention_projections_take_their_own_dtype() {
        // llama-3.1-70b: FFN 80 × 3 × 8192 × 28,672 = 56,371,445,760 parameters; attention
        // projections 80 × (2 × 8192² + 2 × 8192 × 1024) = 12,079,595,520; the rest (embeddings,
        // LM head, norms) 2,102,665,216. NVFP4 stores 32 elements in 18 bytes.
        let mut m = ModelSpec::from_preset(ModelPreset::find("llama-3.1-70b").unwrap(), Dtype::Nvfp4, Dtype::Fp8);
        let (ffn, attn, rest) = (56_371_445_760u64, 12_079_595_520u64, 2_102_665_216u64);
        assert_eq!((m.ffn_params(), m.layers * m.attn_params_per_layer()), (ffn, attn));
        assert_eq!(m.params(), ffn + attn + rest);
        // By default a 4-bit model keeps attention in bf16 (the gpt-oss and DeepSeek checkpoints).
        assert_eq!(m.attention_weight_dtype(), Dtype::Bf16);
        assert_eq!(m.weight_bytes(), ffn * 18 / 32 + (attn + rest) * 2);
        m.attention_dtype = Some(Dtype::Nvfp4);
        assert_eq!(m.weight_bytes(), (ffn + attn) * 18 / 32 + rest * 2);
        assert_eq!(m.weight_bytes(), 42_709_041_152);
        // FP8 weights with bf16 attention; without the key, every weight in FP8.
        m.weight_dtype = Dtype::Fp8;
        m.attention_dtype = Some(Dtype::Bf16);
        assert_eq!(m.weight_bytes(), ffn + attn * 2 + rest);
        m.attention_dtype = None;
        assert_eq!(m.weight_bytes(), ffn + attn + rest);
    }

    #[test]
    fn parameter_counts_match_published_sizes() {
        // Published parameter counts (Hugging Face model cards / safetensors metadata).
        let cases = [
            ("llama-3-8b", 8_030_261_248u64),
            ("llama-3-70b", 70_553_706_496),
            ("llama-2-7b", 6_738_415_616),
            ("llama-2-70b", 68_976_648_192),
            ("mistral-7b", 7_241_732_096),
            ("mixtral-8x7b", 46_702_792_704),
        ];
        for (name, expected) in cases {
            assert_eq!(preset(name).params(), expected, "{name}");
        }
        // Qwen2.5-72B has QKV biases (~0.3M params) that we leave out; CodeLlama-34B is 33.7B.
        let q = preset("qwen2.5-72b").params() as f64;
        assert!((q / 72.7e9 - 1.0).abs() < 0.01, "{q}");
        let c = preset("codellama-34b").params() as f64;
        assert!((c / 33.74e9 - 1.0).abs() < 0.01, "{c}");
        // Llama-3.1-405B by hand: per layer q and o 2 × 16384², k and v 2 × 16384 × 1024, MLP
        // 3 × 16384 × 53248, norms 2 × 16384 = 3,187,703,808; × 126 + embeddings 2 × 128256 ×
        // 16384 + the final norm = 405,853,388,800, its published count.
        assert_eq!(preset("llama-3.1-405b").params(), 405_853_388_800);
        // Qwen3-8B: 8,190,726,144 by the same rule; its published 8,190,735,360 adds the
        // per-head QK norms (36 layers × 2 × 128 = 9,216), left out here.
        assert_eq!(preset("qwen3-8b").params(), 8_190_726_144);
        assert_eq!(8_190_735_360 - preset("qwen3-8b").params(), 36 * 2 * 128);
        // Qwen3-235B-A22B by hand: per layer q and o 2 × 4096 × 8192, k and v 2 × 4096 × 512
        // (71,303,168), 128 experts × 3 × 4096 × 1536 (2,415,919,104), the router 4096 × 128,
        // norms 2 × 4096 = 2,487,754,752; × 94 + embeddings 2 × 151936 × 4096 + the final norm
        // = 235,093,610,496 ("235B in total" on its model card; QK norms, 94 × 256, left out).
        assert_eq!(preset("qwen3-235b-a22b").params(), 235_093_610_496);
        // Qwen3-30B-A3B by the same rule: 623,120,384 per layer × 48 + 2 × 151936 × 2048 + 2048
        // = 30,532,110,336 ("30.5B").
        assert_eq!(preset("qwen3-30b-a3b").params(), 30_532_110_336);
        for (name, published) in [("qwen3-235b-a22b", 235e9), ("qwen3-30b-a3b", 30.5e9)] {
            let p = preset(name).params() as f64;
            assert!((p / published - 1.0).abs() < 0.01, "{name}: {p}");
        }
    }

    #[test]
    fn models_of_2026_match_a_hand_count_and_their_published_sizes() {
        // DeepSeek-V3 by hand. MLA per layer: q_a 7168 × 1536 + its norm 1536, q_b 1536 × 128 ×
        // 192, kv_a 7168 × 576 + its norm 512, kv_b 512 × 128 × 256, o 128 × 128 × 7168 =
        // 187,107,328; + 2 norms. 3 dense layers of 3 × 7168 × 18432; 58 MoE layers of (256 + 1)
        // experts × 3 × 7168 × 2048 + the router 7168 × 256; embeddings 2 × 129280 × 7168.
        let attn = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168;
        assert_eq!(preset("deepseek-v3").attn_params_per_layer(), attn);
        let total = 61 * (attn + 2 * 7168)
            + 3 * 3 * 7168 * 18432
            + 58 * (257 * 3 * 7168 * 2048 + 7168 * 256)
            + 2 * 129280 * 7168
            + 7168;
        assert_eq!(preset("deepseek-v3").params(), total);
        assert_eq!(total, 671_026_404_352);
        assert_eq!(preset("deepseek-r1").params(), total);
        // gpt-oss-120b by hand: attention q 2880 × 4096, k and v 2880 × 512, o 4096 × 2880 with
        // biases (4096 + 2 × 512 + 2880); 128 experts of 3 × 2880 × 2880 + biases 2 × 2880 +
        // 2880; router 2880 × 128 + 128.
        let attn = 2880 * 4096 + 2 * 2880 * 512 + 4096 * 2880 + 4096 + 2 * 512 + 2880;
        let expert = 3 * 2880 * 2880 + 3 * 2880;
        let total = 36 * (attn + 2 * 2880 + 128 * expert + 2880 * 128 + 128) + 2 * 201088 * 2880 + 2880;
        assert_eq!(preset("gpt-oss-120b").params(), total);
        // Llama-4-Maverick by hand: 24 MoE layers of (128 + 1 shared) × 3 × 5120 × 8192 + the
        // router, 24 dense of 3 × 5120 × 16384; attention 2 × 5120² + 2 × 5120 × 1024.
        let attn = 2 * 5120 * 5120 + 2 * 5120 * 1024;
        let total = 48 * (attn + 2 * 5120)
            + 24 * (129 * 3 * 5120 * 8192 + 5120 * 128)
            + 24 * 3 * 5120 * 16384
            + 2 * 202048 * 5120
            + 5120;
        assert_eq!(preset("llama-4-maverick").params(), total);
        // Published totals and active counts (OpenAI's gpt-oss model card, table 1: 116.83B and
        // 5.13B, 20.91B and 3.61B; DeepSeek-V3's README: 671B, 37B activated; Meta's Llama 4 card:
        // Maverick 400B, 17B active; Kimi-K2's README: 1T, 32B activated). Meta's active count
        // includes the input embedding (16.14B + 1.03B); OpenAI's, DeepSeek's and Moonshot's do
        // not (DeepSeek-V3 with it would be 37.55B).
        let close = |name: &str, ours: u64, published: f64, tol: f64| {
            let e = ours as f64 / published - 1.0;
            assert!(e.abs() < tol, "{name}: {ours} vs {published:e} ({:+.2}%)", 100.0 * e);
        };
        // `half`: half a unit of the published active count's last digit.
        for (name, total, active, half, embedded) in [
            ("gpt-oss-120b", 116.83e9, 5.13e9, 0.005e9, false),
            ("gpt-oss-20b", 20.91e9, 3.61e9, 0.005e9, false),
            ("deepseek-v3", 671e9, 37e9, 0.5e9, false),
            ("llama-4-maverick", 400e9, 17e9, 0.5e9, true),
        ] {
            let m = preset(name);
            close(name, m.params(), total, 0.01);
            let emb = if embedded { m.vocab * m.hidden } else { 0 };
            close(name, m.active_params() + emb, active, half / active);
        }
        // Rounded figures: Kimi-K2 "1T" (1.026e12 by hand) and "32B activated"; Llama-4-Scout
        // 109B counts its vision encoder, which is left out here (107.8B).
        assert_eq!((preset("kimi-k2").params() as f64 / 1e12).round(), 1.0);
        close("kimi-k2", preset("kimi-k2").active_params(), 32e9, 0.5e9 / 32e9);
        close("llama-4-scout", preset("llama-4-scout").params(), 109e9, 0.015);
        // MiniMax-M2.5's card: "230B total parameters with 10B active" (228.7B and 10.4B here).
        close("minimax-m2.5", preset("minimax-m2.5").params(), 230e9, 0.01);
        close("minimax-m2.5", preset("minimax-m2.5").active_params(), 10e9, 0.5e9 / 10e9);
        // Llama-3.3-70B is Llama-3.1-70B's network.
        assert_eq!(preset("llama-3.3-70b").params(), preset("llama-3.1-70b").params());
    }

    #[test]
    fn four_bit_weights_keep_attention_and_embeddings_in_bf16() {
        let mut m = preset("gpt-oss-120b");
        m.weight_dtype = Dtype::Mxfp4;
        let ffn = m.ffn_params();
        // MXFP4: 17 bytes per 32 values; the rest 2 bytes each.
        assert_eq!(m.weight_bytes(), (ffn * 17).div_ceil(32) + 2 * (m.params() - ffn));
        m.weight_dtype = Dtype::Nvfp4;
        assert_eq!(m.weight_bytes(), (ffn * 18).div_ceil(32) + 2 * (m.params() - ffn));
        m.weight_dtype = Dtype::Fp8;
        assert_eq!(m.weight_bytes(), m.params());
    }

    #[test]
    fn latent_and_windowed_kv_by_hand() {
        // MLA: one 512-wide latent and one 64-wide RoPE key per layer, shared by all heads, so
        // every GPU of a TP group holds all of it.
        let d = preset("deepseek-r1");
        assert_eq!(d.kv_bytes_per_token(), 61 * 576 * 2);
        assert_eq!(d.kv_bytes_per_token_per_gpu(8), 61 * 576 * 2);
        let mut f = d.clone();
        f.kv_dtype = Dtype::Fp8;
        assert_eq!(f.kv_bytes_per_token(), 61 * 576);
        // gpt-oss-120b: 18 full-attention layers are paged; the 18 windowed ones apart.
        let g = preset("gpt-oss-120b");
        assert_eq!(g.kv_bytes_per_token(), 18 * 2 * 8 * 64 * 2);
        assert_eq!(g.window_kv_bytes_per_token_per_gpu(1), 18 * 2 * 8 * 64 * 2);
        assert_eq!(g.kv_bytes_per_token_per_gpu(2), 18 * 2 * 4 * 64 * 2);
        // Llama-4: 12 global (NoPE) layers of 48.
        assert_eq!(preset("llama-4-scout").kv_bytes_per_token(), 12 * 2 * 8 * 128 * 2);
    }

    #[test]
    fn every_preset_names_a_checkpoint_that_maps_back_to_it() {
        for p in MODEL_PRESETS {
            let c = p.checkpoint().unwrap_or_else(|| panic!("{} has no checkpoint", p.name));
            assert_eq!(ModelPreset::for_checkpoint(c).map(|q| q.name), Some(p.name), "{c}");
        }
        assert_eq!(CHECKPOINTS.len(), MODEL_PRESETS.len(), "one checkpoint per preset, none extra");
    }

    #[test]
    fn checkpoints_map_to_their_network() {
        let of = |id: &str| ModelPreset::for_checkpoint(id).map(|p| p.name);
        assert_eq!(of("meta-llama/Llama-3.1-8B-Instruct"), Some("llama-3.1-8b"));
        assert_eq!(of("meta-llama/Meta-Llama-3-70B-Instruct"), Some("llama-3-70b"));
        assert_eq!(of("nvidia/Llama-3.1-70B-Instruct-FP8"), Some("llama-3.1-70b"));
        assert_eq!(of("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"), Some("qwen3-235b-a22b"));
        assert_eq!(of("deepseek-ai/DeepSeek-R1-0528"), Some("deepseek-r1"));
        assert_eq!(of("nvidia/DeepSeek-R1-NVFP4"), Some("deepseek-r1"));
        assert_eq!(of("openai/gpt-oss-120b"), Some("gpt-oss-120b"));
        assert_eq!(of("meta-llama/Llama-4-Scout-17B-16E-Instruct"), Some("llama-4-scout"));
        assert_eq!(of("mistralai/Mixtral-8x7B-Instruct-v0.1"), Some("mixtral-8x7b"));
        assert_eq!(of("/models/llama-3.1-8b/"), Some("llama-3.1-8b"));
        // DeepSeek-V3.1's config.json has V3's every dimension.
        assert_eq!(of("nvidia/DeepSeek-V3.1-NVFP4"), Some("deepseek-v3"));
        assert_eq!(of("deepseek-ai/DeepSeek-V3.1-Terminus"), Some("deepseek-v3"));
        // Kimi-K2.5's text_config has Kimi-K2's every dimension but the context, which its
        // checkpoint name keeps (checkpoint_context).
        assert_eq!(of("moonshotai/Kimi-K2.5"), Some("kimi-k2"));
        assert_eq!(ModelPreset::checkpoint_context("moonshotai/Kimi-K2.5"), Some(262_144));
        assert_eq!(ModelPreset::checkpoint_context("Qwen/Qwen3-30B-A3B-Instruct-2507"), Some(262_144));
        // Only Qwen3's 2507 releases: a Llama fine-tune of that name keeps Llama's context.
        assert_eq!(of("someone/Llama-3.1-8B-Instruct-2507"), Some("llama-3.1-8b"));
        assert_eq!(ModelPreset::checkpoint_context("someone/Llama-3.1-8B-Instruct-2507"), None);
        assert_eq!(of("MiniMaxAI/MiniMax-M2.5"), Some("minimax-m2.5"));
        // Different networks (V3.2: sparse attention).
        assert_eq!(of("deepseek-ai/DeepSeek-R1-Distill-Llama-70B"), None);
        assert_eq!(of("deepseek-ai/DeepSeek-V3.2-Exp"), None);
    }

    #[test]
    fn kv_bytes_per_token() {
        assert_eq!(preset("llama-3-8b").kv_bytes_per_token(), 131_072);
        assert_eq!(preset("llama-2-7b").kv_bytes_per_token(), 524_288);
        assert_eq!(preset("llama-3-70b").kv_bytes_per_token(), 327_680);
        // 2 × layers × KV heads × head_dim × 2 bytes.
        assert_eq!(preset("qwen3-8b").kv_bytes_per_token(), 2 * 36 * 8 * 128 * 2);
        assert_eq!(preset("llama-3.1-405b").kv_bytes_per_token(), 2 * 126 * 8 * 128 * 2);
        assert_eq!(preset("qwen3-235b-a22b").kv_bytes_per_token(), 2 * 94 * 4 * 128 * 2);
        assert_eq!(preset("qwen3-30b-a3b").kv_bytes_per_token(), 2 * 48 * 4 * 128 * 2);
        let mut fp8 = preset("llama-3-8b");
        fp8.kv_dtype = Dtype::Fp8;
        assert_eq!(fp8.kv_bytes_per_token(), 65_536);
        // 8 KV heads over TP 8: one each; over TP 16 replicated, still one each.
        assert_eq!(preset("llama-3-70b").kv_bytes_per_token_per_gpu(8), 327_680 / 8);
        assert_eq!(preset("llama-3-70b").kv_bytes_per_token_per_gpu(16), 327_680 / 8);
    }
}
