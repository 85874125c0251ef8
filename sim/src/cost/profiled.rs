//! The profiled cost model: iteration times from measured per-op tables.
//!
//! ```text
//!   per layer:  input_layernorm, attn_pre_proj, attn_rope, attn_kv_cache_save,
//!               attn_prefill(chunk, cached) · attn_decode(batch, context), attn_post_proj,
//!               post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj, add,
//!               2 × all_reduce(tokens × hidden × 2 bytes) when TP > 1
//!   per step:   emb(tokens), lm_head(sampled), sample(sampled),
//!               CPU: schedule + sampler_e2e + prepare_inputs_e2e + process_model_outputs (batch)
//! ```
//! Op names are Vidur's, so its profiles import unchanged. An op group the profile lacks
//! (all-reduce in a one-GPU calibration, CPU overheads in a kernel calibration, attention
//! measured for another geometry) falls back to the roofline model's estimate, kernel launches
//! included; [`Profiled::fallbacks`] lists them. Measured ops add no launch cost: their times
//! were taken around the launches.
//!
//! Every lookup is a binary search in a table, so an iteration costs O(log points) whatever the
//! batch holds. A batch of several prefills is read as `k` prefills of the mean chunk over the
//! mean cached length, scaled by the ratio of the batch's causal query-key pairs to those `k`
//! mean prefills' (exact for one prefill, or for equal ones).

use super::profile::{Axis, Curve, ModelDims, OpTable, Profile, PROFILE_FORMAT_VERSION};
use super::{BatchShape, CostModel, Roofline, RooflineParams};
use crate::spec::{GpuSpec, ModelSpec};
use crate::time::SimTime;

/// Per-layer ops over the layer's token count, and whether each belongs to the elementwise group.
const LAYER_GEMMS: [(&str, &str); 4] = [
    ("attn_pre_proj", "qkv_proj"),
    ("attn_post_proj", "o_proj"),
    ("mlp_up_proj", "gate_up_proj"),
    ("mlp_down_proj", "down_proj"),
];
const LAYER_ELEMENTWISE: [&str; 6] =
    ["input_layernorm", "attn_rope", "attn_kv_cache_save", "post_attention_layernorm", "mlp_act", "add"];
const CPU_OPS: [&str; 4] = ["schedule", "sampler_e2e", "prepare_inputs_e2e", "process_model_outputs"];

/// Every op name the profiled model reads, with the axes its table must have.
pub const KNOWN_OPS: &[(&str, &[Axis])] = &[
    ("input_layernorm", &[Axis::Tokens]),
    ("attn_pre_proj", &[Axis::Tokens]),
    ("attn_rope", &[Axis::Tokens]),
    ("attn_kv_cache_save", &[Axis::Tokens]),
    ("attn_post_proj", &[Axis::Tokens]),
    ("post_attention_layernorm", &[Axis::Tokens]),
    ("mlp_up_proj", &[Axis::Tokens]),
    ("mlp_act", &[Axis::Tokens]),
    ("mlp_down_proj", &[Axis::Tokens]),
    ("add", &[Axis::Tokens]),
    ("emb", &[Axis::Tokens]),
    ("attn_prefill", &[Axis::Chunk, Axis::Cached]),
    ("attn_decode", &[Axis::Batch, Axis::Context]),
    ("all_reduce", &[Axis::Bytes]),
    ("lm_head", &[Axis::Tokens]),
    ("sample", &[Axis::Batch]),
    ("schedule", &[Axis::Batch]),
    ("sampler_e2e", &[Axis::Batch]),
    ("prepare_inputs_e2e", &[Axis::Batch]),
    ("process_model_outputs", &[Axis::Batch]),
];

/// One op's contribution to an iteration, for breakdowns.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfiledOp {
    pub name: &'static str,
    pub seconds: f64,
    /// False when the roofline model stood in for an op the profile lacks.
    pub measured: bool,
}

/// Profiled cost model for one instance: a model on `tp` GPUs.
#[derive(Clone, Debug)]
pub struct Profiled {
    model: ModelSpec,
    tp: u64,
    roofline: Roofline,
    gemms: [Option<Curve>; 4],
    elementwise: Vec<(&'static str, Curve)>,
    emb: Option<Curve>,
    prefill: Option<Curve>,
    decode: Option<Curve>,
    all_reduce: Option<Curve>,
    lm_head: Option<Curve>,
    sample: Option<Curve>,
    cpu: Vec<(&'static str, Curve)>,
    fallbacks: Vec<String>,
}

impl Profiled {
    /// Checks `profile` against the model and TP degree and builds the lookup tables. The error
    /// is one line saying what does not match.
    pub fn new(
        model: ModelSpec,
        gpu: GpuSpec,
        tp: u64,
        params: RooflineParams,
        profile: &Profile,
    ) -> Result<Profiled, String> {
        if profile.format_version != PROFILE_FORMAT_VERSION {
            return Err(format!(
                "profile format version {} is not supported (this servesim reads {PROFILE_FORMAT_VERSION})",
                profile.format_version
            ));
        }
        let dims = &profile.meta.model;
        if !dims.same_shapes(&model) {
            return Err(format!(
                "the profile was measured for {} (hidden {}, heads {}, kv_heads {}, head_dim {}, intermediate {}, \
                 vocab {}); the scenario's model {} has hidden {}, heads {}, kv_heads {}, head_dim {}, intermediate {}, vocab {}",
                dims.name,
                dims.hidden,
                dims.heads,
                dims.kv_heads,
                dims.head_dim,
                dims.intermediate,
                dims.vocab,
                model.name,
                model.hidden,
                model.heads,
                model.kv_heads,
                model.head_dim,
                model.intermediate,
                model.vocab
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &profile.ops {
            t.check()?;
            if !seen.insert((t.name.clone(), t.tp)) {
                return Err(format!("op {} appears twice for tp {:?}", t.name, t.tp));
            }
            if let Some((_, axes)) = KNOWN_OPS.iter().find(|(n, _)| *n == t.name) {
                if t.axes != *axes {
                    let want: Vec<&str> = axes.iter().map(|a| a.name()).collect();
                    let got: Vec<&str> = t.axes.iter().map(|a| a.name()).collect();
                    return Err(format!("op {} must have axes {want:?}, got {got:?}", t.name));
                }
            }
        }
        let tp32 = tp as u32;
        let has_tp = profile.ops.iter().any(|t| t.tp == Some(tp32));
        if !has_tp {
            return Err(format!(
                "the profile has no ops measured at TP {tp} (it has TP {:?}); calibrate with --tp {tp} or set cluster.tp",
                profile.meta.tp
            ));
        }
        let find = |name: &str| -> Option<&OpTable> {
            profile
                .ops
                .iter()
                .find(|t| t.name == name && t.tp == Some(tp32))
                .or_else(|| profile.ops.iter().find(|t| t.name == name && t.tp.is_none()))
        };
        let curve = |name: &str| find(name).map(Curve::from_table);
        let mut fallbacks = Vec::new();

        // Attention depends only on the per-GPU heads: a table measured on another model or TP
        // degree serves when those match (Vidur's attention was measured for one geometry).
        let ours = ModelDims::from_spec(&model).attention_per_gpu(tp);
        let attention = |name: &str, fallbacks: &mut Vec<String>| -> Option<Curve> {
            let geometry = |t: &OpTable| t.dims.as_ref().unwrap_or(dims).attention_per_gpu(t.tp.map_or(tp, u64::from));
            let tables: Vec<&OpTable> = profile.ops.iter().filter(|t| t.name == name).collect();
            let exact = tables.iter().find(|t| t.tp == Some(tp32) && geometry(t) == ours);
            match exact.or_else(|| tables.iter().find(|t| geometry(t) == ours)) {
                Some(t) => Some(Curve::from_table(t)),
                None => {
                    match tables.first() {
                        Some(t) => {
                            let theirs = geometry(t);
                            fallbacks.push(format!(
                                "{name} (measured for {} query / {} KV heads of {} per GPU; this model has {} / {} / {} at TP {tp})",
                                theirs.0, theirs.1, theirs.2, ours.0, ours.1, ours.2
                            ));
                        }
                        None => fallbacks.push(name.to_string()),
                    }
                    None
                }
            }
        };
        let prefill = attention("attn_prefill", &mut fallbacks);
        let decode = attention("attn_decode", &mut fallbacks);

        let gemms = LAYER_GEMMS.map(|(n, _)| curve(n));
        for ((n, _), c) in LAYER_GEMMS.iter().zip(&gemms) {
            if c.is_none() {
                fallbacks.push((*n).to_string());
            }
        }
        if model.experts > 1 {
            fallbacks.push("mlp_up_proj, mlp_down_proj (mixture of experts: routed experts from the roofline)".into());
        }
        let elementwise: Vec<(&'static str, Curve)> =
            LAYER_ELEMENTWISE.iter().filter_map(|n| curve(n).map(|c| (*n, c))).collect();
        if elementwise.is_empty() {
            fallbacks.push("elementwise ops (norms, rope, kv write, act, add)".into());
        }
        let all_reduce = if tp > 1 {
            // Vidur measures all-reduce by GPU count, not by model: any TP-tagged table of this
            // degree will do.
            let c = curve("all_reduce");
            if c.is_none() {
                fallbacks.push("all_reduce".into());
            }
            c
        } else {
            None
        };
        let lm_head = curve("lm_head");
        if lm_head.is_none() {
            fallbacks.push("lm_head".into());
        }
        let cpu: Vec<(&'static str, Curve)> = CPU_OPS.iter().filter_map(|n| curve(n).map(|c| (*n, c))).collect();
        if cpu.is_empty() {
            fallbacks.push("CPU overhead (cost.cpu_overhead_base_us, cost.cpu_overhead_per_seq_us)".into());
        }
        let roofline = Roofline::new(model.clone(), gpu, tp, params);
        Ok(Profiled {
            gemms,
            elementwise,
            emb: curve("emb"),
            prefill,
            decode,
            all_reduce,
            lm_head,
            sample: curve("sample"),
            cpu,
            fallbacks,
            model,
            tp,
            roofline,
        })
    }

    /// Op groups the roofline model stands in for, in words.
    pub fn fallbacks(&self) -> &[String] {
        &self.fallbacks
    }

    /// Every op's time over the whole iteration.
    pub fn breakdown(&self, b: &BatchShape) -> Vec<ProfiledOp> {
        let mut out = Vec::with_capacity(20);
        if b.is_empty() {
            return out;
        }
        let layers = self.model.layers as f64;
        let n = b.tokens() as f64;
        let launch = self.roofline.params().kernel_launch_us * 1e-6;
        // The roofline breakdown is computed only when some op needs it.
        let mut roof: Option<Vec<super::OpTime>> = None;
        let mut roof_s = |name: &str| -> f64 {
            let ops = roof.get_or_insert_with(|| self.roofline.breakdown(b));
            ops.iter().find(|o| o.name == name).map_or(0.0, |o| o.seconds)
        };
        let ms = 1e-3;

        for (i, (vidur, ours)) in LAYER_GEMMS.iter().enumerate() {
            let moe = self.model.experts > 1 && i >= 2;
            match (&self.gemms[i], moe) {
                (Some(c), false) => {
                    out.push(ProfiledOp { name: vidur, seconds: layers * c.eval_at(&[n]) * ms, measured: true })
                }
                _ if moe && i == 3 => {}
                _ => {
                    let name = if moe { "moe_experts" } else { ours };
                    let s = roof_s(name) + layers * launch;
                    out.push(ProfiledOp { name: vidur, seconds: s, measured: false });
                }
            }
        }
        if self.elementwise.is_empty() {
            out.push(ProfiledOp {
                name: "elementwise",
                seconds: roof_s("elementwise") + layers * 5.0 * launch,
                measured: false,
            });
        }
        for (name, c) in &self.elementwise {
            out.push(ProfiledOp { name, seconds: layers * c.eval_at(&[n]) * ms, measured: true });
        }
        if b.prefill_tokens > 0 {
            let s = match &self.prefill {
                Some(c) => {
                    let k = b.prefill_seqs.max(1) as f64;
                    let chunk = b.prefill_tokens as f64 / k;
                    let cached = b.prefill_cached_tokens as f64 / k;
                    let pairs = chunk * cached + chunk * (chunk + 1.0) / 2.0;
                    let scale = if pairs > 0.0 { b.prefill_attn_pairs / (k * pairs) } else { 1.0 };
                    layers * k * c.eval_at(&[chunk, cached]) * scale * ms
                }
                None => roof_s("attn_prefill") + layers * launch,
            };
            out.push(ProfiledOp { name: "attn_prefill", seconds: s, measured: self.prefill.is_some() });
        }
        if b.decode_seqs > 0 {
            let s = match &self.decode {
                Some(c) => {
                    let batch = b.decode_seqs as f64;
                    layers * c.eval_at(&[batch, b.decode_context_tokens as f64 / batch]) * ms
                }
                None => roof_s("attn_decode") + layers * launch,
            };
            out.push(ProfiledOp { name: "attn_decode", seconds: s, measured: self.decode.is_some() });
        }
        if self.tp > 1 {
            let s = match &self.all_reduce {
                Some(c) => 2.0 * layers * c.eval_at(&[n * self.model.hidden as f64 * 2.0]) * ms,
                None => roof_s("allreduce") + 2.0 * layers * launch,
            };
            out.push(ProfiledOp { name: "all_reduce", seconds: s, measured: self.all_reduce.is_some() });
        }
        if let Some(c) = &self.emb {
            out.push(ProfiledOp { name: "emb", seconds: c.eval_at(&[n]) * ms, measured: true });
        }
        if b.sampled_seqs > 0 {
            let sampled = b.sampled_seqs as f64;
            let s = match &self.lm_head {
                Some(c) => c.eval_at(&[sampled]) * ms,
                None => roof_s("lm_head") + launch,
            };
            out.push(ProfiledOp { name: "lm_head", seconds: s, measured: self.lm_head.is_some() });
            if let Some(c) = &self.sample {
                out.push(ProfiledOp { name: "sample", seconds: c.eval_at(&[sampled]) * ms, measured: true });
            }
        }
        if self.cpu.is_empty() {
            out.push(ProfiledOp { name: "cpu_overhead", seconds: self.roofline.cpu_overhead_s(b), measured: false });
        }
        let seqs = b.seqs() as f64;
        for (name, c) in &self.cpu {
            out.push(ProfiledOp { name, seconds: c.eval_at(&[seqs]) * ms, measured: true });
        }
        out
    }

    /// Iteration time in seconds, before rounding to integer nanoseconds.
    pub fn iteration_seconds(&self, b: &BatchShape) -> f64 {
        self.breakdown(b).iter().map(|o| o.seconds).sum()
    }
}

impl CostModel for Profiled {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        let ns = (self.iteration_seconds(b) * 1e9).ceil();
        let ns = if ns.is_finite() { ns.min(u64::MAX as f64 / 4.0) } else { u64::MAX as f64 / 4.0 };
        SimTime((ns as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::profile::{Interp, ProfileMeta};
    use crate::spec::{Dtype, GpuPreset, ModelPreset};

    fn llama8b() -> ModelSpec {
        ModelSpec::from_preset(ModelPreset::find("llama-3-8b").unwrap(), Dtype::Bf16, Dtype::Bf16)
    }

    fn table(name: &str, tp: Option<u32>, axes: Vec<Axis>, points: Vec<Vec<f64>>) -> OpTable {
        OpTable { name: name.into(), tp, axes, interp: Interp::Linear, points, dims: None, heldout: vec![] }
    }

    /// A profile where every token op costs `tokens / 1000` ms, attention and CPU ops simple lines.
    fn profile(tp: u32) -> Profile {
        let line = |name: &str| table(name, Some(tp), vec![Axis::Tokens], vec![vec![1.0, 0.001], vec![10000.0, 10.0]]);
        let mut ops: Vec<OpTable> = [
            "input_layernorm",
            "attn_pre_proj",
            "attn_rope",
            "attn_post_proj",
            "post_attention_layernorm",
            "mlp_up_proj",
            "mlp_act",
            "mlp_down_proj",
            "add",
            "lm_head",
        ]
        .iter()
        .map(|n| line(n))
        .collect();
        // Decode: 0.01 ms per sequence × (context / 1000).
        ops.push(table(
            "attn_decode",
            Some(tp),
            vec![Axis::Batch, Axis::Context],
            vec![vec![1.0, 1000.0, 0.01], vec![1.0, 2000.0, 0.02], vec![8.0, 1000.0, 0.08], vec![8.0, 2000.0, 0.16]],
        ));
        // Prefill: 1 ms per million causal pairs, at cached 0 (chunk 1000 → 500,500 pairs).
        ops.push(table(
            "attn_prefill",
            Some(tp),
            vec![Axis::Chunk, Axis::Cached],
            vec![vec![1000.0, 0.0, 0.5005], vec![1000.0, 1000.0, 1.5005], vec![2000.0, 0.0, 2.001]],
        ));
        ops.push(table("schedule", None, vec![Axis::Batch], vec![vec![1.0, 0.5], vec![101.0, 1.5]]));
        Profile {
            format_version: PROFILE_FORMAT_VERSION,
            meta: ProfileMeta { model: ModelDims::from_spec(&llama8b()), tp: vec![tp], ..Default::default() },
            ops,
        }
    }

    fn build(p: &Profile, tp: u64) -> Result<Profiled, String> {
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        Profiled::new(llama8b(), g, tp, RooflineParams::default(), p)
    }

    #[test]
    fn iteration_time_is_the_sum_of_the_tables_by_hand() {
        let m = build(&profile(1), 1).unwrap();
        let mut b = BatchShape::default();
        for _ in 0..8 {
            b.add_decode(1500);
        }
        // 8 tokens: 9 per-layer token ops at 0.001 + 7 × 9.999/9999 ms ≈ 0.008 ms each.
        let tok = 0.001 + 7.0 * (10.0 - 0.001) / 9999.0;
        let layer = 9.0 * tok + 0.12; // decode: batch 8, context 1500 → 0.12 ms.
        let lm = tok; // 8 sampled sequences.
        let cpu = 0.5 + 7.0 / 100.0; // batch 8 on the schedule line.
        let expected = (32.0 * layer + lm + cpu) * 1e-3;
        let got = m.iteration_seconds(&b);
        assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
        assert!(m.fallbacks().is_empty(), "{:?}", m.fallbacks());
        assert_eq!(m.iteration_time(&b), SimTime((expected * 1e9).ceil() as u64));
    }

    #[test]
    fn mixed_prefills_scale_by_causal_pairs() {
        let m = build(&profile(1), 1).unwrap();
        let attn = |b: &BatchShape| m.breakdown(b).into_iter().find(|o| o.name == "attn_prefill").unwrap().seconds;
        let mut one = BatchShape::default();
        one.add_prefill(2000, 0, true);
        assert!((attn(&one) - 32.0 * 2.001e-3).abs() < 1e-12);
        // Two prefills of 1000 and 3000 tokens: mean chunk 2000 (2,001,000 pairs each), the
        // batch has 500,500 + 4,501,500 pairs: 2 × 2.001 ms × 5,002,000 / 4,002,000.
        let mut two = BatchShape::default();
        two.add_prefill(1000, 0, true);
        two.add_prefill(3000, 0, true);
        let expected = 32.0 * 2.0 * 2.001e-3 * 5_002_000.0 / 4_002_000.0;
        assert!((attn(&two) - expected).abs() < 1e-12, "{} vs {expected}", attn(&two));
    }

    #[test]
    fn missing_groups_fall_back_to_the_roofline() {
        let m = build(&profile(2), 2).unwrap();
        assert!(m.fallbacks().iter().any(|f| f == "all_reduce"));
        let mut b = BatchShape::default();
        b.add_decode(100);
        let ops = m.breakdown(&b);
        let ar = ops.iter().find(|o| o.name == "all_reduce").unwrap();
        assert!(!ar.measured);
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let r = Roofline::new(llama8b(), g, 2, RooflineParams::default());
        let roof = r.breakdown(&b).into_iter().find(|o| o.name == "allreduce").unwrap().seconds;
        assert!((ar.seconds - (roof + 64.0 * 3e-6)).abs() < 1e-15);
    }

    #[test]
    fn mismatches_are_one_line_errors() {
        let e = build(&profile(1), 2).unwrap_err();
        assert!(e.contains("no ops measured at TP 2") && e.contains("[1]"), "{e}");
        let mut p = profile(1);
        p.meta.model.hidden = 8192;
        let e = build(&p, 1).unwrap_err();
        assert!(e.contains("hidden 8192") && e.contains("hidden 4096"), "{e}");
        let mut p = profile(1);
        p.ops[0].points[0] = vec![1.0];
        assert!(build(&p, 1).unwrap_err().contains("op input_layernorm (tp 1): every point needs 2 numbers"));
        let mut p = profile(1);
        p.ops[11].axes = vec![Axis::Tokens];
        p.ops[11].points = vec![vec![1.0, 1.0]];
        assert!(build(&p, 1).unwrap_err().contains("op attn_prefill must have axes"));
        let mut p = profile(1);
        p.format_version = 9;
        assert!(build(&p, 1).unwrap_err().contains("version 9"));
    }

    #[test]
    fn attention_from_another_geometry_is_used_only_if_per_gpu_heads_match() {
        let mut p = profile(1);
        // Llama-2-70B at TP 2: 32 query and 4 KV heads per GPU, not llama-3-8b's 32 and 8.
        let other = ModelDims {
            name: "70b".into(),
            hidden: 8192,
            heads: 64,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 1,
            vocab: 1,
        };
        for t in p.ops.iter_mut().filter(|t| t.name.starts_with("attn_decode")) {
            t.dims = Some(other.clone());
            t.tp = Some(2);
        }
        let m = build(&p, 1).unwrap();
        assert!(
            m.fallbacks().iter().any(|f| f.starts_with("attn_decode (measured for 32 query / 4 KV")),
            "{:?}",
            m.fallbacks()
        );
    }
}
