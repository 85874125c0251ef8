//! DP attention priced from measured tables: an instance of `tp` GPUs split into `dp` attention
//! ranks of `tp / dp` GPUs, each rank scheduling its own requests, all stepping together at
//! every MoE layer (vLLM's docs/serving/data_parallel_deployment.md; SGLang's
//! `--enable-dp-attention`; TensorRT-LLM's `enable_attention_dp`).
//!
//! ```text
//!   step = max over ranks r of  own(batch_r)            the rank's slice at TP tp / dp
//!        + experts(every rank's tokens)                 the instance's slice at TP tp
//!        + all-to-all(every rank's tokens)              the roofline's dispatch and combine
//! ```
//! `own` holds what a rank runs on its own batch over its own GPUs — the attention and its
//! projections, norms, RoPE, the KV write, residual adds, its all-reduce when a rank has more
//! than one GPU, the embedding, sampling and the engine's CPU work (each rank is its own engine
//! process); `experts` the MoE layers, the dense FFN layers and the LM head over all `tp` GPUs.
//! An idle rank's dummy step is taken to be no slower than the busiest rank's.

use super::profile::Profile;
use super::profiled::{Fallback, FallbackShare, Profiled};
use super::roofline::RoofOp;
use super::{cpu_ns, to_ns, BatchShape, CostAccount, CostModel, Layout, Roofline, RooflineParams};
use crate::spec::{GpuSpec, ModelSpec};
use crate::time::SimTime;

/// The ops that run over every rank's tokens on all of the instance's GPUs.
const SHARED_OPS: [&str; 5] = ["mlp_up_proj", "mlp_act", "mlp_down_proj", "moe_experts", "lm_head"];

fn shared(name: &str) -> bool {
    SHARED_OPS.contains(&name)
}

/// A rank runs everything else on its own batch, except the TP all-reduce over the whole
/// instance (the ranks exchange tokens by all-to-all instead).
fn own(name: &str) -> bool {
    !shared(name)
}

pub struct DpProfiled {
    /// One rank's slice, at TP `tp / dp`.
    rank: Profiled,
    /// The instance's slice, at TP `tp`.
    whole: Profiled,
    /// The layout's roofline, for the all-to-all.
    roofline: Roofline,
    dp: u64,
    tp_a: u64,
}

impl DpProfiled {
    /// `rank` and `whole` are the slices at TP `tp / layout.dp_attention` and `tp`.
    pub fn new(
        model: ModelSpec,
        gpu: GpuSpec,
        tp: u64,
        layout: Layout,
        params: RooflineParams,
        rank: &Profile,
        whole: &Profile,
    ) -> Result<DpProfiled, super::profile::ProfileError> {
        let dp = layout.dp_attention.max(1);
        let tp_a = tp / dp;
        Ok(DpProfiled {
            rank: Profiled::new(model.clone(), gpu.clone(), tp_a, params.clone(), rank)?,
            whole: Profiled::new(model.clone(), gpu.clone(), tp, params.clone(), whole)?,
            roofline: Roofline::new(model, gpu, tp, params).with_layout(layout),
            dp,
            tp_a,
        })
    }

    /// The two slices (a rank's, the instance's), for checks on their tables.
    pub fn slices(&self) -> [&Profiled; 2] {
        [&self.rank, &self.whole]
    }

    /// The index of the all-to-all in an account (after both slices' slots).
    fn a2a_slot(&self) -> usize {
        self.rank.slot_count() + self.whole.slot_count()
    }

    /// One lock-step iteration of `ranks` (an idle rank's batch empty) in seconds, and its
    /// CPU part; with `acc`, the slowest rank's and the shared ops' stand-ins are accounted.
    pub fn dp_seconds(&self, ranks: &[BatchShape], acc: Option<&mut CostAccount>) -> (f64, f64) {
        let union = BatchShape::union(ranks);
        if union.is_empty() {
            return (0.0, 0.0);
        }
        let mut slowest: Option<(usize, f64, f64)> = None;
        for (r, b) in ranks.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
            let (t, cpu) = self.rank.part_seconds(b, &own, None);
            if slowest.is_none_or(|(_, s, _)| t > s) {
                slowest = Some((r, t, cpu));
            }
        }
        let (r, own_s, cpu) = slowest.expect("a rank has work");
        self.finish(&ranks[r], own_s, cpu, &union, acc)
    }

    /// The step's seconds from the slowest rank's `own_s` (its batch `b`): the shared ops and
    /// the all-to-all over `union` added, and with `acc` the account kept.
    fn finish(
        &self,
        b: &BatchShape,
        own_s: f64,
        cpu: f64,
        union: &BatchShape,
        acc: Option<&mut CostAccount>,
    ) -> (f64, f64) {
        let a2a = self.roofline.op_time(RoofOp::AllToAll, union);
        let Some(acc) = acc else {
            return (own_s + self.whole.part_seconds(union, &shared, None).0 + a2a, cpu);
        };
        self.rank.part_seconds(b, &own, Some((acc, 0)));
        let offset = self.rank.slot_count();
        let (shared_s, _) = self.whole.part_seconds(union, &shared, Some((acc, offset)));
        if a2a > 0.0 {
            acc.add(self.a2a_slot(), a2a);
        }
        let total = own_s + shared_s + a2a;
        acc.total_s += total;
        acc.iterations += 1;
        (total, cpu)
    }

    /// A batch priced as if its ranks held an even share of it each (what callers that see
    /// one batch, such as routers weighing instances, ask).
    fn even(&self, b: &BatchShape, acc: Option<&mut CostAccount>) -> (f64, f64) {
        if b.is_empty() {
            return (0.0, 0.0);
        }
        let share = even_share(b, self.dp);
        let (own_s, cpu) = self.rank.part_seconds(&share, &own, None);
        self.finish(&share, own_s, cpu, b, acc)
    }
}

/// One of `n` even shares of `b` (counts rounded up, so that a batch with work leaves each
/// share some; the context and attention pairs in proportion to the sequences and tokens).
fn even_share(b: &BatchShape, n: u64) -> BatchShape {
    let div = |x: u64| x.div_ceil(n);
    let mut s = BatchShape {
        prefill_seqs: div(b.prefill_seqs),
        prefill_tokens: div(b.prefill_tokens),
        prefill_cached_tokens: b.prefill_cached_tokens / n,
        prefill_attn_pairs: b.prefill_attn_pairs / n as f64,
        decode_seqs: div(b.decode_seqs),
        decode_context_tokens: b.decode_context_tokens / n,
        sampled_seqs: div(b.sampled_seqs),
    };
    // A decode's context covers at least its own token.
    s.decode_context_tokens = s.decode_context_tokens.max(s.decode_seqs);
    s
}

impl CostModel for DpProfiled {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        to_ns(self.even(b, None).0)
    }

    fn iteration_times(&self, b: &BatchShape, acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        let (t, cpu) = self.even(b, acc);
        (to_ns(t), cpu_ns(cpu))
    }

    fn dp_iteration_times(&self, ranks: &[BatchShape], acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        let (t, cpu) = self.dp_seconds(ranks, acc);
        (to_ns(t), cpu_ns(cpu))
    }

    fn cpu_time(&self, b: &BatchShape) -> SimTime {
        cpu_ns(self.even(b, None).1)
    }

    fn collective_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return SimTime::ZERO;
        }
        let share = even_share(b, self.dp);
        let all_reduce = self.rank.part_seconds(&share, &|n| n == "all_reduce", None).0;
        cpu_ns(all_reduce + self.roofline.op_time(RoofOp::AllToAll, b))
    }

    fn accounts(&self) -> bool {
        true
    }

    fn iteration_time_accounted(&self, b: &BatchShape, acc: &mut CostAccount) -> SimTime {
        to_ns(self.even(b, Some(acc)).0)
    }

    fn fallbacks(&self) -> Vec<Fallback> {
        let mut out: Vec<Fallback> = self.rank.fallbacks().iter().filter(|f| own(&f.op)).cloned().collect();
        out.extend(self.whole.fallbacks().iter().filter(|f| shared(&f.op)).cloned());
        out.push(Fallback { op: "all_to_all".into(), reason: A2A.into() });
        out
    }

    fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        let r = self.rank.slot_count();
        let part = |from: usize, to: usize| CostAccount {
            by_slot: acc.by_slot.iter().skip(from).take(to - from).copied().collect(),
            ..acc.clone()
        };
        let mut out: Vec<FallbackShare> = self.rank.shares(&part(0, r)).into_iter().collect();
        for s in &mut out {
            s.reason = format!("on each DP rank's {} GPU(s): {}", self.tp_a, s.reason);
        }
        out.extend(self.whole.shares(&part(r, self.a2a_slot())));
        if let Some(&(secs, iterations)) = acc.by_slot.get(self.a2a_slot()).filter(|x| x.1 > 0) {
            out.push(FallbackShare {
                group: String::new(),
                op: "all_to_all".into(),
                reason: format!("priced by the roofline: {A2A}"),
                iterations,
                share: if acc.total_s > 0.0 { secs / acc.total_s } else { 0.0 },
                extrapolated: false,
            });
        }
        out
    }
}

/// Why the all-to-all is the roofline's.
const A2A: &str = "the experts' dispatch and combine between DP attention ranks (not read from the database)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::profile::{Axis, ModelDims, OpTable, ProfileMeta, PROFILE_FORMAT_VERSION};
    use crate::spec::{Dtype, GpuPreset, ModelPreset};

    fn qwen() -> ModelSpec {
        ModelSpec::from_preset(ModelPreset::find("qwen3-30b-a3b").unwrap(), Dtype::Bf16, Dtype::Bf16)
    }

    fn table(name: &str, tp: u32, axes: Vec<Axis>, points: Vec<Vec<f64>>) -> OpTable {
        OpTable::linear(name, Some(tp), axes, points)
    }

    /// At TP `tp`: every token op `tokens / 1000` ms, the experts `tokens / 100` ms, decode
    /// attention 0.01 ms per sequence per 1,000 tokens of context.
    fn profile(tp: u32) -> Profile {
        let line =
            |name: &str, per: f64| table(name, tp, vec![Axis::Tokens], vec![vec![1.0, per], vec![1e4, 1e4 * per]]);
        let mut ops: Vec<OpTable> = [
            "input_layernorm",
            "attn_pre_proj",
            "attn_rope",
            "attn_post_proj",
            "post_attention_layernorm",
            "add",
            "lm_head",
        ]
        .iter()
        .map(|n| line(n, 0.001))
        .collect();
        ops.push(line("moe_experts", 0.01));
        ops.push(table(
            "attn_decode",
            tp,
            vec![Axis::Batch, Axis::Context],
            vec![vec![1.0, 1000.0, 0.01], vec![1.0, 2000.0, 0.02], vec![64.0, 1000.0, 0.64], vec![64.0, 2000.0, 1.28]],
        ));
        Profile {
            format_version: PROFILE_FORMAT_VERSION,
            meta: ProfileMeta { model: ModelDims::from_spec(&qwen()), tp: vec![tp], ..Default::default() },
            ops,
        }
    }

    fn decodes(n: u64) -> BatchShape {
        let mut b = BatchShape::default();
        for _ in 0..n {
            b.add_decode(1000);
        }
        b
    }

    #[test]
    fn each_rank_reads_its_own_slice_and_the_experts_run_over_every_ranks_tokens() {
        let g = GpuPreset::find("h100-sxm").unwrap().spec();
        let params = RooflineParams { cpu_overhead_base_us: 0.0, cpu_overhead_per_seq_us: 0.0, ..Default::default() };
        let layout = Layout { dp_attention: 2, ep: true, pp: 1 };
        let m = DpProfiled::new(qwen(), g, 2, layout, params, &profile(1), &profile(2)).unwrap();
        let a2a = |b: &BatchShape| m.roofline.op_time(RoofOp::AllToAll, b);
        // 16 decodes on rank 0, rank 1 idle: per layer (48) rank 0's six token ops at 16 tokens
        // (6 × 0.016 ms) and its attention (0.16 ms), the experts at 16 tokens (0.16 ms), the
        // LM head once (0.016 ms), and the roofline's all-to-all.
        let ms = 1e-3;
        let lopsided = 48.0 * (6.0 * 0.016 + 0.16 + 0.16) * ms + 0.016 * ms + a2a(&decodes(16));
        let (t, cpu) = m.dp_seconds(&[decodes(16), BatchShape::default()], None);
        assert!((t - lopsided).abs() < 1e-12, "{t} vs {lopsided}");
        assert_eq!(cpu, 0.0);
        // Eight on each: each rank's own ops at 8, the experts still at 16.
        let even = 48.0 * (6.0 * 0.008 + 0.08 + 0.16) * ms + 0.016 * ms + a2a(&decodes(16));
        let (t, _) = m.dp_seconds(&[decodes(8), decodes(8)], None);
        assert!((t - even).abs() < 1e-12, "{t} vs {even}");
        // One batch of 16 is priced as its even split.
        assert!((m.even(&decodes(16), None).0 - even).abs() < 1e-12);
        // The account holds the all-to-all (the roofline's) as a share of the step.
        let mut acc = CostAccount::default();
        m.dp_seconds(&[decodes(8), decodes(8)], Some(&mut acc));
        let shares = m.shares(&acc);
        let s = shares.iter().find(|s| s.op == "all_to_all").expect("accounted");
        assert!((s.share - a2a(&decodes(16)) / even).abs() < 1e-12, "{s:?}");
        assert!(m.fallbacks().iter().any(|f| f.op == "all_to_all"));
        assert!(!m.fallbacks().iter().any(|f| f.op == "moe_experts" || f.op == "all_reduce"), "{:?}", m.fallbacks());
    }
}
