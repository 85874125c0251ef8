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
}

/// A preset: the published dimensions of a model.
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
    },
];

impl ModelPreset {
    pub fn find(name: &str) -> Option<&'static ModelPreset> {
        MODEL_PRESETS.iter().find(|p| p.name == name)
    }

    pub fn names() -> Vec<&'static str> {
        MODEL_PRESETS.iter().map(|p| p.name).collect()
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
        }
    }

    /// Parameters of one attention block: Q, K, V and O projections.
    pub fn attn_params_per_layer(&self) -> u64 {
        let q = self.heads * self.head_dim;
        let kv = self.kv_heads * self.head_dim;
        self.hidden * (q + 2 * kv) + q * self.hidden
    }

    /// Parameters of one expert's gated MLP (gate, up, down).
    pub fn expert_params(&self) -> u64 {
        3 * self.hidden * self.intermediate
    }

    /// Parameters of one decoder layer: attention, every expert's MLP, the MoE router, two norms.
    pub fn params_per_layer(&self) -> u64 {
        let router = if self.experts > 1 { self.hidden * self.experts } else { 0 };
        self.attn_params_per_layer() + self.experts * self.expert_params() + router + 2 * self.hidden
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
        self.layers * self.params_per_layer() + self.embedding_params() + self.hidden
    }

    /// Weight bytes each GPU holds under tensor parallelism `tp`: every matrix is split `tp`
    /// ways (the vocabulary-parallel embedding and LM head included); norms are replicated but
    /// negligible, so they are split too.
    pub fn weight_bytes_per_gpu(&self, tp: u64) -> u64 {
        (self.params() * self.weight_dtype.bytes()).div_ceil(tp)
    }

    /// KV heads each GPU stores under TP: heads are split across GPUs, and replicated when
    /// there are fewer KV heads than GPUs (as vLLM does).
    pub fn kv_heads_per_gpu(&self, tp: u64) -> u64 {
        (self.kv_heads / tp).max(1)
    }

    /// KV-cache bytes per token of the whole model: 2 (K and V) × layers × kv_heads × head_dim
    /// × bytes per element. llama-3-8b bf16: 131,072 B.
    pub fn kv_bytes_per_token(&self) -> u64 {
        2 * self.layers * self.kv_heads * self.head_dim * self.kv_dtype.bytes()
    }

    /// KV-cache bytes per token held by each GPU under TP.
    pub fn kv_bytes_per_token_per_gpu(&self, tp: u64) -> u64 {
        2 * self.layers * self.kv_heads_per_gpu(tp) * self.head_dim * self.kv_dtype.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> ModelSpec {
        ModelSpec::from_preset(ModelPreset::find(name).unwrap(), Dtype::Bf16, Dtype::Bf16)
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
