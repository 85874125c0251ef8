//! `[model]` and `[gpu]`: a preset, optionally with numbers overridden, or every number given,
//! resolved into a [`ModelSpec`] or a [`GpuSpec`].

use serde::{Deserialize, Serialize};

use super::{Dtype, GpuPreset, GpuSpec, ModelSpec, GPU_PRESETS, MODEL_PRESETS};
use crate::config::{check, ConfigError};

/// `[model]`: a preset, optionally with dimensions overridden, or every dimension given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// One of the presets (llama-3-8b, llama-3-70b, ...). Without it, give every dimension.
    pub preset: Option<String>,
    pub name: Option<String>,
    /// bf16 (default), fp8, nvfp4 or mxfp4 (4-bit: the FFN weights; attention and
    /// embeddings stay bf16).
    pub weight_dtype: Option<Dtype>,
    /// The attention projections' weights (Q, K, V, output), where the checkpoint stores them
    /// otherwise: default the weight dtype, bf16 under a 4-bit one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_dtype: Option<Dtype>,
    /// bf16 (default), fp8 or nvfp4.
    pub kv_dtype: Option<Dtype>,
    pub layers: Option<u64>,
    pub hidden: Option<u64>,
    pub heads: Option<u64>,
    pub kv_heads: Option<u64>,
    pub head_dim: Option<u64>,
    pub intermediate: Option<u64>,
    pub vocab: Option<u64>,
    pub max_context: Option<u64>,
    /// MoE experts per layer (1 = dense, the default without a preset).
    pub experts: Option<u64>,
    /// Experts per token (1 = dense).
    pub top_k: Option<u64>,
    pub tied_embeddings: Option<bool>,
    /// Multi-head latent attention: `{ q_lora_rank, kv_lora_rank, qk_nope_head_dim,
    /// qk_rope_head_dim, v_head_dim }` (DeepSeek-V3: 1536, 512, 128, 64, 128).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mla: Option<MlaSection>,
    /// Shared experts of each MoE layer, each `intermediate` wide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_experts: Option<u64>,
    /// Layers of a MoE model with a dense FFN, and that FFN's width.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense_layers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense_intermediate: Option<u64>,
    /// Windowed attention: `{ tokens, layers }` (gpt-oss-120b: 128 tokens on 18 layers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowSection>,
    /// Biases on the attention projections, the experts and the router (gpt-oss).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub biases: Option<bool>,
}

/// `[model.mla]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSection {
    /// 0: Q is projected directly (DeepSeek-V2-Lite).
    #[serde(default)]
    pub q_lora_rank: u64,
    pub kv_lora_rank: u64,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

/// `[model.window]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSection {
    pub tokens: u64,
    pub layers: u64,
    /// Chunked local attention (each token sees its own `tokens`-long chunk) rather than a
    /// sliding window.
    #[serde(default)]
    pub chunked: bool,
}

/// `why`: why the name has no preset, where servesim knows ([`GpuPreset::why_none`]).
fn unknown_preset(path: &str, name: &str, known: Vec<&str>, why: Option<&str>) -> ConfigError {
    let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
    ConfigError::at(&format!("{path}.preset"), format!("unknown preset \"{name}\"{why}; known: {}", known.join(", ")))
}

fn required<T: Copy>(v: Option<T>, path: &str, key: &str) -> Result<T, ConfigError> {
    v.ok_or_else(|| ConfigError::at(&format!("{path}.{key}"), "required when no preset is given".into()))
}

/// The largest model servesim sizes, in parameters (today's largest have about 2·10¹²), and the
/// largest KV bytes per token: far past any real model, and far inside 64-bit arithmetic.
pub const MAX_PARAMS: f64 = 1e17;
pub const MAX_KV_BYTES_PER_TOKEN: f64 = 1e12;

impl ModelSection {
    pub fn resolve(&self, path: &str) -> Result<ModelSpec, ConfigError> {
        let wd = self.weight_dtype.unwrap_or(Dtype::Bf16);
        let kd = self.kv_dtype.unwrap_or(Dtype::Bf16);
        let mut m = match &self.preset {
            Some(p) => {
                let preset = MODEL_PRESETS
                    .iter()
                    .find(|x| x.name == p)
                    .ok_or_else(|| unknown_preset(path, p, MODEL_PRESETS.iter().map(|x| x.name).collect(), None))?;
                ModelSpec::from_preset(preset, wd, kd)
            }
            None => self.custom(path, wd, kd)?,
        };
        if let Some(n) = &self.name {
            m.name = n.clone();
        }
        m.attention_dtype = self.attention_dtype;
        macro_rules! over {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { m.$f = v; } )* };
        }
        over!(
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            max_context,
            experts,
            top_k,
            tied_embeddings
        );
        if let Some(a) = self.mla {
            for (key, v) in [
                ("kv_lora_rank", a.kv_lora_rank),
                ("qk_nope_head_dim", a.qk_nope_head_dim),
                ("qk_rope_head_dim", a.qk_rope_head_dim),
                ("v_head_dim", a.v_head_dim),
            ] {
                check((1..=1 << 20).contains(&v), &format!("{path}.mla"), key, "must be in [1, 2^20]", v)?;
            }
            check(
                a.q_lora_rank <= 1 << 20,
                &format!("{path}.mla"),
                "q_lora_rank",
                "must be in [0, 2^20]",
                a.q_lora_rank,
            )?;
            m.arch.mla = Some(super::model::Mla {
                q_lora_rank: a.q_lora_rank,
                kv_lora_rank: a.kv_lora_rank,
                qk_nope_head_dim: a.qk_nope_head_dim,
                qk_rope_head_dim: a.qk_rope_head_dim,
                v_head_dim: a.v_head_dim,
            });
        }
        if let Some(v) = self.shared_experts {
            check(v <= 1 << 20, path, "shared_experts", "must be in [0, 2^20]", v)?;
            m.arch.shared_experts = v;
        }
        if let Some(v) = self.dense_layers {
            m.arch.dense_layers = v;
        }
        if let Some(v) = self.dense_intermediate {
            check(v <= super::MAX_DIMENSION, path, "dense_intermediate", "must be in [0, 2^40]", v)?;
            m.arch.dense_intermediate = v;
        }
        if let Some(w) = self.window {
            let p = format!("{path}.window");
            check((1..=super::MAX_DIMENSION).contains(&w.tokens), &p, "tokens", "must be in [1, 2^40]", w.tokens)?;
            m.arch.window = Some(super::model::Window { tokens: w.tokens, layers: w.layers, chunked: w.chunked });
        }
        if let Some(v) = self.biases {
            m.arch.biases = v;
        }
        for (key, v) in [
            ("layers", m.layers),
            ("hidden", m.hidden),
            ("heads", m.heads),
            ("kv_heads", m.kv_heads),
            ("head_dim", m.head_dim),
            ("intermediate", m.intermediate),
            ("vocab", m.vocab),
            ("max_context", m.max_context),
            ("experts", m.experts),
            ("top_k", m.top_k),
        ] {
            check((1..=super::MAX_DIMENSION).contains(&v), path, key, "must be in [1, 2^40]", v)?;
        }
        // Products of the dimensions (parameters, KV bytes) must stay far inside 64 bits: sizes
        // near 2^32 each would otherwise wrap around silently.
        let f = |x: u64| x as f64;
        let mla = m.arch.mla.map_or(0.0, |a| {
            let qk = f(a.qk_nope_head_dim + a.qk_rope_head_dim);
            f(m.hidden) * f(a.q_lora_rank)
                + f(a.q_lora_rank.max(m.hidden)) * f(m.heads) * qk
                + f(m.hidden) * f(a.kv_lora_rank + a.qk_rope_head_dim)
                + f(a.kv_lora_rank) * f(m.heads) * f(a.qk_nope_head_dim + a.v_head_dim)
                + f(m.heads) * f(a.v_head_dim) * f(m.hidden)
        });
        let params = f(m.layers)
            * (f(m.hidden) * f(m.head_dim) * (2.0 * f(m.heads) + 2.0 * f(m.kv_heads))
                + mla
                + (f(m.experts) + f(m.arch.shared_experts)) * 3.0 * f(m.hidden) * f(m.intermediate)
                + 3.0 * f(m.hidden) * f(m.arch.dense_intermediate))
            + 2.0 * f(m.vocab) * f(m.hidden);
        check(
            params <= MAX_PARAMS,
            path,
            "layers",
            &format!("with these dimensions the model has about {params:.3e} parameters; at most {MAX_PARAMS:.0e} can be sized"),
            m.layers,
        )?;
        let kv = 2.0 * f(m.layers) * f(m.kv_heads) * f(m.head_dim) * 4.0;
        check(
            kv <= MAX_KV_BYTES_PER_TOKEN,
            path,
            "kv_heads",
            &format!(
                "with these dimensions a token's KV takes about {kv:.3e} bytes; at most {MAX_KV_BYTES_PER_TOKEN:.0e}"
            ),
            m.kv_heads,
        )?;
        check(m.heads % m.kv_heads == 0, path, "kv_heads", &format!("must divide heads ({})", m.heads), m.kv_heads)?;
        check(m.top_k <= m.experts, path, "top_k", &format!("must be ≤ experts ({})", m.experts), m.top_k)?;
        let dl = m.arch.dense_layers;
        check(dl <= m.layers, path, "dense_layers", &format!("must be ≤ layers ({})", m.layers), dl)?;
        if m.experts > 1 && dl > 0 {
            check(m.arch.dense_intermediate >= 1, path, "dense_intermediate", "must be ≥ 1 with dense_layers", 0)?;
        }
        if let Some(w) = m.arch.window {
            let p = format!("{path}.window");
            let msg = format!("must be < layers ({}): at least one layer attends to the whole context", m.layers);
            check(w.layers < m.layers, &p, "layers", &msg, w.layers)?;
        }
        check(
            m.kv_dtype != Dtype::Mxfp4,
            path,
            "kv_dtype",
            "mxfp4 is a weight format; KV caches are bf16, fp8 or nvfp4",
            m.kv_dtype.name(),
        )?;
        Ok(m)
    }

    /// A model without a preset: every dimension given.
    fn custom(&self, path: &str, wd: Dtype, kd: Dtype) -> Result<ModelSpec, ConfigError> {
        Ok(ModelSpec {
            name: self.name.clone().unwrap_or_else(|| "custom".into()),
            layers: required(self.layers, path, "layers")?,
            hidden: required(self.hidden, path, "hidden")?,
            heads: required(self.heads, path, "heads")?,
            kv_heads: required(self.kv_heads, path, "kv_heads")?,
            head_dim: required(self.head_dim, path, "head_dim")?,
            intermediate: required(self.intermediate, path, "intermediate")?,
            vocab: required(self.vocab, path, "vocab")?,
            max_context: required(self.max_context, path, "max_context")?,
            experts: 1,
            top_k: 1,
            tied_embeddings: false,
            weight_dtype: wd,
            kv_dtype: kd,
            attention_dtype: None,
            arch: super::Arch::PLAIN,
        })
    }

    /// The section with every dimension written out (for the resolved scenario).
    pub fn from_spec(m: &ModelSpec) -> ModelSection {
        ModelSection {
            preset: None,
            name: Some(m.name.clone()),
            weight_dtype: Some(m.weight_dtype),
            attention_dtype: m.attention_dtype,
            kv_dtype: Some(m.kv_dtype),
            layers: Some(m.layers),
            hidden: Some(m.hidden),
            heads: Some(m.heads),
            kv_heads: Some(m.kv_heads),
            head_dim: Some(m.head_dim),
            intermediate: Some(m.intermediate),
            vocab: Some(m.vocab),
            max_context: Some(m.max_context),
            experts: Some(m.experts),
            top_k: Some(m.top_k),
            tied_embeddings: Some(m.tied_embeddings),
            mla: m.arch.mla.map(|a| MlaSection {
                q_lora_rank: a.q_lora_rank,
                kv_lora_rank: a.kv_lora_rank,
                qk_nope_head_dim: a.qk_nope_head_dim,
                qk_rope_head_dim: a.qk_rope_head_dim,
                v_head_dim: a.v_head_dim,
            }),
            shared_experts: (m.arch.shared_experts > 0).then_some(m.arch.shared_experts),
            dense_layers: (m.arch.dense_layers > 0).then_some(m.arch.dense_layers),
            dense_intermediate: (m.arch.dense_intermediate > 0).then_some(m.arch.dense_intermediate),
            window: m.arch.window.map(|w| WindowSection { tokens: w.tokens, layers: w.layers, chunked: w.chunked }),
            biases: m.arch.biases.then_some(true),
        }
    }
}

/// The `[model]` section of a TOML text (a file holding only it, or a scenario), resolved;
/// errors name the line and the key.
pub fn model_from_toml(src: &str) -> Result<ModelSpec, ConfigError> {
    #[derive(Deserialize)]
    struct File {
        model: ModelSection,
    }
    crate::config::parse::<File>(src)?.model.resolve("model")
}

/// The `[gpu]` section of a TOML text (a custom GPU), resolved; errors name the line and key.
pub fn gpu_from_toml(src: &str) -> Result<GpuSpec, ConfigError> {
    #[derive(Deserialize)]
    struct File {
        gpu: GpuSection,
    }
    crate::config::parse::<File>(src)?.gpu.resolve("gpu")
}

/// `[gpu]`: a preset, optionally with numbers overridden, or every number given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSection {
    /// A GPU preset (`servesim memory --help` lists them), or a kernel database system name.
    pub(crate) preset: Option<String>,
    pub(crate) name: Option<String>,
    /// Dense bf16 TFLOP/s.
    pub(crate) bf16_tflops: Option<f64>,
    /// Dense fp8 TFLOP/s (omit or 0 for none).
    pub(crate) fp8_tflops: Option<f64>,
    /// Dense fp4 TFLOP/s (omit or 0 for none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fp4_tflops: Option<f64>,
    /// Memory bandwidth, GB/s.
    pub(crate) hbm_gb_per_s: Option<f64>,
    /// Memory capacity, GiB.
    pub(crate) memory_gib: Option<f64>,
    /// Memory as CUDA reports it, GiB (vLLM's "Free memory on device (free/TOTAL GiB)"), used by
    /// `memory.engine = "vllm" | "sglang"`. Default: the preset's where known, else memory_gib.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) visible_gib: Option<f64>,
    /// GPU-to-GPU bandwidth per direction, GB/s.
    pub(crate) interconnect_gb_per_s: Option<f64>,
    /// Host link bandwidth per direction, GB/s.
    pub(crate) pcie_gb_per_s: Option<f64>,
    /// Whether the GPUs talk over NVLink (default: when the interconnect is faster than the host
    /// link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nvlink: Option<bool>,
    /// Network bandwidth per GPU per direction between nodes, GB/s: what a pipeline stage
    /// sends over when the instance spans nodes. Default: the preset's node (AIConfigurator's
    /// system yaml), else 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) network_gb_per_s: Option<f64>,
}

impl GpuSection {
    /// A section naming a preset, nothing overridden.
    pub fn preset(name: &str) -> GpuSection {
        GpuSection { preset: Some(name.to_string()), ..GpuSection::default() }
    }

    pub fn resolve(&self, path: &str) -> Result<GpuSpec, ConfigError> {
        let mut g = match &self.preset {
            Some(p) => super::GpuPreset::find(p)
                .ok_or_else(|| {
                    unknown_preset(
                        path,
                        p,
                        GPU_PRESETS.iter().map(|x| x.name).collect(),
                        GpuPreset::why_none(p).as_deref(),
                    )
                })?
                .spec(),
            None => GpuSpec {
                name: self.name.clone().unwrap_or_else(|| "custom".into()),
                bf16_flops: required(self.bf16_tflops, path, "bf16_tflops")? * 1e12,
                fp8_flops: None,
                fp4_flops: None,
                hbm_bytes_per_s: required(self.hbm_gb_per_s, path, "hbm_gb_per_s")? * 1e9,
                memory_bytes: (required(self.memory_gib, path, "memory_gib")? * super::GIB) as u64,
                visible_bytes: None,
                interconnect_bytes_per_s: required(self.interconnect_gb_per_s, path, "interconnect_gb_per_s")? * 1e9,
                pcie_bytes_per_s: required(self.pcie_gb_per_s, path, "pcie_gb_per_s")? * 1e9,
                nvlink: false,
                network_bytes_per_s: None,
            },
        };
        let custom = self.preset.is_none();
        let pos = |key: &str, v: Option<f64>| -> Result<(), ConfigError> {
            match v {
                Some(x) => check(x.is_finite() && x > 0.0 && x < 1e9, path, key, "must be > 0", x),
                None => Ok(()),
            }
        };
        pos("bf16_tflops", self.bf16_tflops)?;
        pos("hbm_gb_per_s", self.hbm_gb_per_s)?;
        pos("memory_gib", self.memory_gib)?;
        pos("visible_gib", self.visible_gib)?;
        pos("interconnect_gb_per_s", self.interconnect_gb_per_s)?;
        pos("pcie_gb_per_s", self.pcie_gb_per_s)?;
        pos("network_gb_per_s", self.network_gb_per_s)?;
        for (key, v) in [("fp8_tflops", self.fp8_tflops), ("fp4_tflops", self.fp4_tflops)] {
            if let Some(f) = v {
                check(f.is_finite() && (0.0..1e9).contains(&f), path, key, "must be ≥ 0", f)?;
            }
        }
        if let Some(n) = &self.name {
            g.name = n.clone();
        }
        if let Some(x) = self.bf16_tflops {
            g.bf16_flops = x * 1e12;
        }
        if let Some(x) = self.fp8_tflops {
            g.fp8_flops = (x > 0.0).then_some(x * 1e12);
        }
        if let Some(x) = self.fp4_tflops {
            g.fp4_flops = (x > 0.0).then_some(x * 1e12);
        }
        if let Some(x) = self.hbm_gb_per_s {
            g.hbm_bytes_per_s = x * 1e9;
        }
        if let Some(x) = self.memory_gib {
            g.memory_bytes = (x * super::GIB) as u64;
            // A preset's CUDA total belongs to its capacity.
            g.visible_bytes = None;
        }
        if let Some(x) = self.visible_gib {
            let v = (x * super::GIB) as u64;
            check(v <= g.memory_bytes, path, "visible_gib", "must not exceed memory_gib", x)?;
            g.visible_bytes = Some(v);
        }
        if let Some(x) = self.interconnect_gb_per_s {
            g.interconnect_bytes_per_s = x * 1e9;
        }
        if let Some(x) = self.pcie_gb_per_s {
            g.pcie_bytes_per_s = x * 1e9;
        }
        if let Some(x) = self.network_gb_per_s {
            g.network_bytes_per_s = Some(x * 1e9);
        }
        match self.nvlink {
            Some(v) => g.nvlink = v,
            None if custom => g.nvlink = g.interconnect_bytes_per_s > g.pcie_bytes_per_s,
            None => {}
        }
        Ok(g)
    }

    pub fn from_spec(g: &GpuSpec) -> GpuSection {
        GpuSection {
            preset: None,
            name: Some(g.name.clone()),
            bf16_tflops: Some(g.bf16_flops / 1e12),
            fp8_tflops: Some(g.fp8_flops.unwrap_or(0.0) / 1e12),
            fp4_tflops: g.fp4_flops.map(|f| f / 1e12),
            hbm_gb_per_s: Some(g.hbm_bytes_per_s / 1e9),
            memory_gib: Some(g.memory_bytes as f64 / super::GIB),
            visible_gib: g.visible_bytes.map(|v| v as f64 / super::GIB),
            interconnect_gb_per_s: Some(g.interconnect_bytes_per_s / 1e9),
            pcie_gb_per_s: Some(g.pcie_bytes_per_s / 1e9),
            nvlink: Some(g.nvlink),
            network_gb_per_s: g.network_bytes_per_s.map(|b| b / 1e9),
        }
    }
}
