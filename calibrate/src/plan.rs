//! Sweep plans: which shapes of which ops to measure for a model and its TP degrees.
//!
//! Token counts are dense where GEMM times change shape (small counts, where a GEMM streams its
//! weights, and tile edges: 63/64/65, 127/128/129, ...) and geometric beyond. Points come in
//! levels: level 0 is a coarse grid of every op, level 1 fills it in. A run measures level 0
//! first, so a deadline cuts the detail, not whole ops.

use servesim_sim::spec::ModelSpec;

/// The shape of one measurement (per GPU: heads and widths already divided by TP).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// c[m×n] = a[m×k] · w[k×n].
    Gemm {
        m: u64,
        k: u64,
        n: u64,
    },
    /// Fused residual add + RMSNorm of `tokens` rows.
    RmsNorm {
        tokens: u64,
        hidden: u64,
    },
    Rope {
        tokens: u64,
        q_heads: u64,
        kv_heads: u64,
        head_dim: u64,
    },
    KvWrite {
        tokens: u64,
        kv_heads: u64,
        head_dim: u64,
    },
    SiluMul {
        tokens: u64,
        d: u64,
    },
    /// One decode token per sequence over the given contexts.
    Decode {
        contexts: Vec<u64>,
        q_heads: u64,
        kv_heads: u64,
        head_dim: u64,
    },
    /// One prefill chunk over a cached prefix.
    Prefill {
        chunk: u64,
        cached: u64,
        q_heads: u64,
        kv_heads: u64,
        head_dim: u64,
    },
    /// Top-p sampling of `batch` rows of `vocab` logits.
    Sample {
        batch: u64,
        vocab: u64,
    },
}

impl Shape {
    /// A short description for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            Shape::Gemm { m, k, n } => format!("gemm {m}×{k}×{n}"),
            Shape::RmsNorm { tokens, hidden } => format!("rms_norm {tokens}×{hidden}"),
            Shape::Rope { tokens, q_heads, kv_heads, head_dim } => {
                format!("rope {tokens} tokens {q_heads}+{kv_heads}×{head_dim}")
            }
            Shape::KvWrite { tokens, kv_heads, head_dim } => format!("kv_write {tokens} tokens {kv_heads}×{head_dim}"),
            Shape::SiluMul { tokens, d } => format!("silu_mul {tokens}×{d}"),
            Shape::Decode { contexts, q_heads, kv_heads, .. } => {
                let sum: u64 = contexts.iter().sum();
                format!(
                    "decode batch {} mean context {} ({q_heads}/{kv_heads} heads)",
                    contexts.len(),
                    sum / contexts.len().max(1) as u64
                )
            }
            Shape::Prefill { chunk, cached, q_heads, kv_heads, .. } => {
                format!("prefill chunk {chunk} cached {cached} ({q_heads}/{kv_heads} heads)")
            }
            Shape::Sample { batch, vocab } => format!("sample {batch}×{vocab}"),
        }
    }
}

/// One point of a sweep: which op (Vidur's name) and TP degree it belongs to, and where it sits
/// on the op's axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub(crate) op: &'static str,
    pub(crate) tp: u32,
    pub(crate) x: Vec<f64>,
    pub(crate) shape: Shape,
    pub(crate) level: u8,
}

impl Point {
    /// The op this point measures (`attn_decode`, `mlp_up_proj`, ...).
    pub fn op(&self) -> &'static str {
        self.op
    }
}

/// How far a sweep reaches.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest token count of GEMMs and elementwise ops.
    pub max_tokens: u64,
    /// Longest context of attention.
    pub max_context: u64,
    /// Largest decode batch (and sampled sequences).
    pub max_batch: u64,
    /// Largest prefill chunk.
    pub max_chunk: u64,
    /// Most KV tokens one decode measurement may hold (batch × context).
    pub max_kv_tokens: u64,
}

impl Limits {
    /// What a GPU sweep covers: tokens 1..16384, contexts up to the model's (≤ 32k).
    pub fn gpu(model: &ModelSpec) -> Limits {
        Limits {
            max_tokens: 16384,
            max_context: model.max_context.min(32768),
            max_batch: 256,
            max_chunk: 8192,
            max_kv_tokens: 1 << 21,
        }
    }

    /// A CPU sweep: the same structure, shrunk to finish in seconds on a laptop.
    pub fn cpu(model: &ModelSpec) -> Limits {
        Limits {
            max_tokens: 1024,
            max_context: model.max_context.min(1024),
            max_batch: 32,
            max_chunk: 256,
            max_kv_tokens: 16384,
        }
    }
}

/// Token counts up to `max` with their level.
pub fn token_grid(max: u64) -> Vec<(u64, u8)> {
    let mut pts = std::collections::BTreeMap::new();
    let mut p = 1u64;
    while p <= max {
        pts.insert(p, 0u8);
        if p >= 2 && p * 3 / 2 <= max {
            pts.entry(p * 3 / 2).or_insert(0);
        }
        p *= 2;
    }
    let mut fill = |v: u64| {
        if (1..=max).contains(&v) {
            pts.entry(v).or_insert(1);
        }
    };
    (1..=16).for_each(&mut fill);
    (32..=256).step_by(16).for_each(&mut fill);
    (320..=2048).step_by(64).for_each(&mut fill);
    (2304..=max.max(2304)).step_by(256).for_each(&mut fill);
    // Both sides of each tile edge.
    let mut e = 64;
    while e <= max {
        fill(e - 1);
        fill(e + 1);
        e *= 2;
    }
    pts.into_iter().collect()
}

fn geometric(from: u64, max: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut p = from;
    while p <= max {
        v.push(p);
        p *= 2;
    }
    v
}

/// The sweep for `model` at each TP degree, level 0 first. Ops whose shapes do not depend on
/// TP (the norms, sampling) are planned for every degree; the runner measures equal shapes once.
pub fn plan(model: &ModelSpec, tps: &[u32], limits: &Limits) -> Vec<Point> {
    let mut out = Vec::new();
    let (h, hd, vocab) = (model.hidden, model.head_dim, model.vocab);
    for &tp in tps {
        let t = tp as u64;
        let qh = model.heads / t;
        let kvh = model.kv_heads.div_ceil(t);
        let inter = model.intermediate / t;
        for &(n, level) in &token_grid(limits.max_tokens) {
            let x = vec![n as f64];
            let mut push = |op: &'static str, shape: Shape| out.push(Point { op, tp, x: x.clone(), shape, level });
            push("input_layernorm", Shape::RmsNorm { tokens: n, hidden: h });
            push("attn_pre_proj", Shape::Gemm { m: n, k: h, n: (qh + 2 * kvh) * hd });
            push("attn_rope", Shape::Rope { tokens: n, q_heads: qh, kv_heads: kvh, head_dim: hd });
            push("attn_kv_cache_save", Shape::KvWrite { tokens: n, kv_heads: kvh, head_dim: hd });
            push("attn_post_proj", Shape::Gemm { m: n, k: qh * hd, n: h });
            push("post_attention_layernorm", Shape::RmsNorm { tokens: n, hidden: h });
            push("mlp_up_proj", Shape::Gemm { m: n, k: h, n: 2 * inter });
            push("mlp_act", Shape::SiluMul { tokens: n, d: inter });
            push("mlp_down_proj", Shape::Gemm { m: n, k: inter, n: h });
        }
        let batches: Vec<u64> = token_grid(limits.max_batch).into_iter().map(|(b, _)| b).collect();
        for (i, &b) in batches.iter().enumerate() {
            let level = if b.is_power_of_two() { 0 } else { 1 };
            out.push(Point {
                op: "lm_head",
                tp,
                x: vec![b as f64],
                shape: Shape::Gemm { m: b, k: h, n: vocab / t },
                level,
            });
            if i % 2 == 0 || b.is_power_of_two() {
                out.push(Point {
                    op: "sample",
                    tp,
                    x: vec![b as f64],
                    shape: Shape::Sample { batch: b, vocab },
                    level,
                });
            }
        }
        let contexts: Vec<u64> = {
            let mut c = geometric(16, limits.max_context);
            c.extend(geometric(48, limits.max_context));
            c.sort_unstable();
            c
        };
        for b in geometric(1, limits.max_batch) {
            for &c in &contexts {
                if b * c > limits.max_kv_tokens {
                    continue;
                }
                let level = if c.is_power_of_two() && (b == 1 || b.trailing_zeros() % 2 == 0) { 0 } else { 1 };
                let shape = Shape::Decode { contexts: vec![c; b as usize], q_heads: qh, kv_heads: kvh, head_dim: hd };
                out.push(Point { op: "attn_decode", tp, x: vec![b as f64, c as f64], shape, level });
            }
        }
        // Mixed-length batches, to check reading the table at the mean context.
        for (i, b) in geometric(4, limits.max_batch).into_iter().enumerate() {
            let mut ctxs: Vec<u64> = (0..b)
                .map(|j| {
                    // Log-uniform over [16, max_context), deterministic.
                    let u = ((j * 2654435761 + i as u64 * 40503) % 1000) as f64 / 1000.0;
                    (16.0 * (limits.max_context as f64 / 16.0).powf(u)) as u64
                })
                .collect();
            let total: u64 = ctxs.iter().sum();
            if total > limits.max_kv_tokens {
                let f = limits.max_kv_tokens as f64 / total as f64;
                ctxs.iter_mut().for_each(|c| *c = ((*c as f64 * f) as u64).max(1));
            }
            let mean = ctxs.iter().sum::<u64>() as f64 / b as f64;
            let shape = Shape::Decode { contexts: ctxs, q_heads: qh, kv_heads: kvh, head_dim: hd };
            out.push(Point { op: "attn_decode_mixed", tp, x: vec![b as f64, mean], shape, level: 1 });
        }
        // Powers of two, and 1.5× each (level 1): attention grows quadratically with the chunk,
        // and a grid twice as coarse leaves interpolation errors of tens of percent.
        let with_halves = |v: Vec<u64>, max: u64| -> Vec<u64> {
            let mut out: Vec<u64> = v.iter().flat_map(|&x| [x, x * 3 / 2]).filter(|&x| x <= max).collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        let max_chunk = limits.max_chunk.min(limits.max_context);
        let chunks: Vec<u64> = with_halves(geometric(16, max_chunk), max_chunk);
        let cached_grid: Vec<u64> =
            std::iter::once(0).chain(with_halves(geometric(128, limits.max_context), limits.max_context)).collect();
        for &chunk in &chunks {
            for &cached in &cached_grid {
                if chunk + cached > limits.max_context {
                    continue;
                }
                let level = if chunk.is_power_of_two()
                    && chunk.trailing_zeros() % 2 == 0
                    && (cached == 0 || (cached.is_power_of_two() && cached.trailing_zeros() % 2 == 1))
                {
                    0
                } else {
                    1
                };
                let shape = Shape::Prefill { chunk, cached, q_heads: qh, kv_heads: kvh, head_dim: hd };
                out.push(Point { op: "attn_prefill", tp, x: vec![chunk as f64, cached as f64], shape, level });
            }
        }
    }
    out.sort_by_key(|p| p.level);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use servesim_sim::spec::{Dtype, ModelPreset};

    #[test]
    fn token_grid_is_dense_at_small_counts_and_tile_edges() {
        let g: Vec<u64> = token_grid(16384).into_iter().map(|(n, _)| n).collect();
        assert!((1..=16).all(|n| g.contains(&n)));
        for e in [64u64, 128, 256, 512, 1024, 2048, 4096, 8192] {
            assert!(g.contains(&(e - 1)) && g.contains(&e) && g.contains(&(e + 1)), "edge {e}");
        }
        assert_eq!(*g.last().unwrap(), 16384);
        assert!(g.windows(2).all(|w| w[0] < w[1]));
        let coarse = token_grid(16384).into_iter().filter(|(_, l)| *l == 0).count();
        assert!(coarse < 35 && g.len() > 100, "{coarse} coarse of {}", g.len());
    }

    #[test]
    fn plan_shapes_follow_the_tp_shards() {
        let m = ModelSpec::from_preset(ModelPreset::find("llama-3-70b").unwrap(), Dtype::Bf16, Dtype::Bf16);
        let p = plan(&m, &[8], &Limits::gpu(&m));
        let qkv = p.iter().find(|p| p.op == "attn_pre_proj" && p.x == vec![1.0]).unwrap();
        // 64/8 query heads + 2 × 8/8 KV heads of 128.
        assert_eq!(qkv.shape, Shape::Gemm { m: 1, k: 8192, n: 1280 });
        let down = p.iter().find(|p| p.op == "mlp_down_proj" && p.x == vec![1.0]).unwrap();
        assert_eq!(down.shape, Shape::Gemm { m: 1, k: 3584, n: 8192 });
        assert!(p.windows(2).all(|w| w[0].level <= w[1].level), "level 0 first");
        assert!(p.iter().all(|p| match &p.shape {
            Shape::Decode { contexts, .. } => contexts.iter().sum::<u64>() <= Limits::gpu(&m).max_kv_tokens,
            Shape::Prefill { chunk, cached, .. } => chunk + cached <= 8192,
            _ => true,
        }));
        assert!(p.iter().any(|p| p.op == "attn_decode_mixed"));
    }
}
