//! Pipeline parallelism: an instance's layers split over `pp` stages of `tp` GPUs each, its
//! running batch split into micro-batches that flow through the stages one after another.
//!
//! ```text
//!   stages      vLLM's partition (vllm/distributed/utils.py, get_pp_indices, vllm-project/vllm
//!               5a6541db): ⌊L / pp⌋ layers each; the remainder one more each to the stages
//!               before the last, from the back (the last holds the final norm and the LM head)
//!   micro-batch the iteration's sequences in `min(pp, sequences)` micro-batches, whole sequences,
//!               balanced by tokens (longest first onto the lightest): a prefill chunk is never
//!               split, so a long chunk makes its micro-batch the slow one
//!   stage time  s[j][m] = layers_j / L × (GPU time of micro-batch m − its head)
//!                         + head (embedding, LM head, sampling) on the last stage
//!                         + send of its activations to the next stage on the others:
//!                           tokens × hidden × 2 bytes / link + 10 µs (AIConfigurator's P2P op,
//!                           aic-core/.../operators/communication.rs, and its systems' p2p_latency);
//!                           the link is the GPUs' NVLink (or PCIe) within a node and the network
//!                           per GPU (`[gpu] network_gb_per_s`) where the next stage is on
//!                           another node, stages placed in order on nodes of `gpus_per_node`
//!   iteration   max( max_j Σ_m s[j][m]   (the busiest stage's work),
//!                    max_m Σ_j s[j][m] ) (a micro-batch's trip through every stage)
//!               + the CPU time of the whole batch, once
//! ```
//! Every sequence of the batch advances one step per iteration, as it would with one stage:
//! this is the pipeline's steady state, with every stage working on one micro-batch at a
//! time and each micro-batch's next step waiting for its last stage (a token depends on the
//! previous one). Equal micro-batches give `pp × s`: the throughput of `pp` GPUs' groups with
//! one micro-batch's latency per step. Fewer micro-batches than stages (a batch of one), or
//! one heavy micro-batch (a long prefill chunk), leave stages idle — the bubbles — which the
//! second term prices. Within the iteration every micro-batch's tokens are counted at its end.

use std::sync::Arc;

use super::{BatchShape, CostAccount, CostModel, Fallback, FallbackShare, PipelineShare, SeqWork};
pub use crate::spec::stage_layers;
use crate::spec::GpuSpec;
use crate::time::SimTime;

/// Latency of one point-to-point send between stages: AIConfigurator's `p2p_latency` (10 µs in
/// every system yaml of aiconfigurator-core 0.12.0 but the B60's).
pub const P2P_LATENCY_S: f64 = 10e-6;

/// The bandwidth of each stage's send to the next, bytes/s: stages of `tp` GPUs placed in
/// order on nodes of the GPU's `gpus_per_node`; a send whose next stage starts on another node
/// goes over the network, the others over the GPUs' interconnect.
pub fn stage_links(gpu: &GpuSpec, tp: u64, pp: u64) -> Vec<f64> {
    let per_node = gpu.gpus_per_node().max(1);
    (0..pp.saturating_sub(1))
        .map(|j| {
            let (last, next) = ((j + 1) * tp - 1, (j + 1) * tp);
            if last / per_node == next / per_node {
                gpu.interconnect_bytes_per_s
            } else {
                gpu.network_bytes_per_s()
            }
        })
        .collect()
}

/// A cost model of one stage's `tp` GPUs, run as a pipeline of stages.
pub struct Pipeline {
    inner: Arc<dyn CostModel>,
    stages: Vec<u64>,
    layers: u64,
    /// Activation bytes per token sent between stages (hidden × 2: bf16).
    bytes_per_token: f64,
    /// Bandwidth of each stage's send to the next (one fewer than the stages).
    links: Vec<f64>,
}

impl Pipeline {
    /// `inner` prices the whole model at the stage's TP; `links` the bandwidth of each
    /// stage-to-stage send (each of the `tp` GPUs sends the whole hidden state to its peer, in
    /// parallel), one per stage but the last.
    pub fn new(inner: Arc<dyn CostModel>, layers: u64, pp: u64, hidden: u64, links: Vec<f64>) -> Pipeline {
        let stages = stage_layers(layers, pp);
        assert_eq!(links.len() + 1, stages.len(), "one link per stage but the last");
        Pipeline { inner, stages, layers: layers.max(1), bytes_per_token: hidden as f64 * 2.0, links }
    }

    /// The iteration's time from its micro-batches' shapes (empty ones skipped).
    fn period(
        &self,
        parts: &[BatchShape],
        whole: &BatchShape,
        mut acc: Option<&mut CostAccount>,
    ) -> (SimTime, SimTime) {
        let mut stage_busy = vec![0.0f64; self.stages.len()];
        let mut longest_trip = 0.0f64;
        for mb in parts.iter().filter(|b| !b.is_empty()) {
            let (total, cpu) = self.inner.iteration_times(mb, acc.as_deref_mut());
            let head = self.inner.head_time(mb).min(total.saturating_sub(cpu));
            // In nanoseconds.
            let body = (total.saturating_sub(cpu).saturating_sub(head)).0 as f64;
            let bytes = mb.tokens() as f64 * self.bytes_per_token;
            let mut trip = 0.0;
            for (j, &n) in self.stages.iter().enumerate() {
                let extra = match self.links.get(j) {
                    Some(&link) => (bytes / link + P2P_LATENCY_S) * 1e9,
                    None => head.0 as f64,
                };
                let s = body * n as f64 / self.layers as f64 + extra;
                stage_busy[j] += s;
                trip += s;
            }
            longest_trip = longest_trip.max(trip);
        }
        let busiest = stage_busy.iter().copied().fold(0.0, f64::max);
        let cpu = self.inner.cpu_time(whole);
        let gpu = SimTime(busiest.max(longest_trip).round() as u64);
        if let Some(a) = acc {
            a.stage_busy_s += stage_busy.iter().sum::<f64>() * 1e-9;
            a.stage_span_s += self.stages.len() as f64 * gpu.0 as f64 * 1e-9;
        }
        ((gpu + cpu).max(SimTime(1)), cpu)
    }

    /// The batch as `min(pp, sequences)` equal parts, for callers that have only its
    /// aggregates.
    fn even_parts(&self, b: &BatchShape) -> Vec<BatchShape> {
        let k = (self.stages.len() as u64).min(b.seqs()).max(1);
        let share = |x: u64, i: u64| x / k + u64::from(i < x % k);
        (0..k)
            .map(|i| BatchShape {
                prefill_seqs: share(b.prefill_seqs, i),
                prefill_tokens: share(b.prefill_tokens, i),
                prefill_cached_tokens: share(b.prefill_cached_tokens, i),
                prefill_attn_pairs: b.prefill_attn_pairs / k as f64,
                decode_seqs: share(b.decode_seqs, i),
                decode_context_tokens: share(b.decode_context_tokens, i),
                sampled_seqs: share(b.sampled_seqs, i),
            })
            .collect()
    }

    /// The sequences in `min(pp, sequences)` micro-batches of whole sequences, balanced by
    /// tokens: the longest first, each onto the micro-batch with the fewest tokens so far
    /// (the lowest index on a tie).
    fn micro_batches(&self, seqs: &[SeqWork]) -> Vec<BatchShape> {
        let k = self.stages.len().min(seqs.len()).max(1);
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(seqs[i].new_tokens), std::cmp::Reverse(seqs[i].context_tokens), i));
        let mut parts = vec![BatchShape::default(); k];
        for i in order {
            let m = (0..k).min_by_key(|&m| (parts[m].tokens(), m)).expect("k ≥ 1");
            let s = &seqs[i];
            if s.prefill {
                parts[m].add_prefill(s.new_tokens, s.context_tokens - s.new_tokens, s.samples);
            } else if s.new_tokens > 1 {
                parts[m].add_verify(s.new_tokens, s.context_tokens);
            } else {
                parts[m].add_decode(s.context_tokens);
            }
        }
        parts
    }
}

impl CostModel for Pipeline {
    fn iteration_time(&self, b: &BatchShape) -> SimTime {
        if b.is_empty() {
            return self.inner.iteration_time(b);
        }
        self.period(&self.even_parts(b), b, None).0
    }

    fn wants_seqs(&self) -> bool {
        true
    }

    fn iteration_time_of(&self, b: &BatchShape, seqs: &[SeqWork]) -> SimTime {
        self.iteration_times_of(b, seqs, None).0
    }

    fn iteration_times_of(
        &self,
        b: &BatchShape,
        seqs: &[SeqWork],
        acc: Option<&mut CostAccount>,
    ) -> (SimTime, SimTime) {
        if seqs.is_empty() {
            return self.iteration_times(b, acc);
        }
        self.period(&self.micro_batches(seqs), b, acc)
    }

    fn accounts(&self) -> bool {
        // The stages' work is accounted whatever the inner model keeps.
        true
    }

    fn pipeline(&self, acc: &CostAccount) -> Option<PipelineShare> {
        let busy_share = if acc.stage_span_s > 0.0 { acc.stage_busy_s / acc.stage_span_s } else { 0.0 };
        Some(PipelineShare { group: String::new(), stages: self.stages.len() as u64, busy_share })
    }

    fn iteration_times(&self, b: &BatchShape, acc: Option<&mut CostAccount>) -> (SimTime, SimTime) {
        if b.is_empty() {
            return self.inner.iteration_times(b, acc);
        }
        self.period(&self.even_parts(b), b, acc)
    }

    fn fallbacks(&self) -> Vec<Fallback> {
        self.inner.fallbacks()
    }

    fn shares(&self, acc: &CostAccount) -> Vec<FallbackShare> {
        self.inner.shares(acc)
    }

    fn cpu_time(&self, b: &BatchShape) -> SimTime {
        self.inner.cpu_time(b)
    }

    fn collective_time(&self, b: &BatchShape) -> SimTime {
        // The stage model's collectives, in the share of the GPU time it gives them.
        let coll = self.inner.collective_time(b);
        let (t, c) = self.inner.iteration_times(b, None);
        let gpu = t.saturating_sub(c);
        if coll == SimTime::ZERO || gpu == SimTime::ZERO {
            return SimTime::ZERO;
        }
        let (pt, pc) = self.iteration_times(b, None);
        SimTime((coll.0 as f64 * pt.saturating_sub(pc).0 as f64 / gpu.0 as f64).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::LinearCost;

    #[test]
    fn stages_follow_vllm_get_pp_indices() {
        // vLLM logs "Hidden layers were unevenly partitioned: [...]" with these.
        assert_eq!(stage_layers(32, 4), vec![8, 8, 8, 8]);
        assert_eq!(stage_layers(80, 3), vec![27, 27, 26]);
        assert_eq!(stage_layers(126, 4), vec![31, 32, 32, 31]);
        assert_eq!(stage_layers(61, 8), vec![7, 7, 8, 8, 8, 8, 8, 7]);
        assert_eq!(stage_layers(7, 1), vec![7]);
    }

    /// 10 µs per token, no fixed part, no head: the stage times are hand-computable.
    fn line() -> Arc<dyn CostModel> {
        Arc::new(LinearCost { base_us: 0.0, per_token_us: 10.0, per_seq_us: 0.0 })
    }

    #[test]
    fn equal_micro_batches_fill_the_pipeline() {
        // 8 decodes over 2 stages of 16 layers each, a link too fast to matter but its 10 µs:
        // two micro-batches of 4 tokens, 40 µs of layers each, 20 µs per stage, + 10 µs of
        // send on stage 0. Stage 0 busy 2 × 30 = 60 µs, stage 1 2 × 20 = 40 µs; one trip
        // 30 + 20 = 50 µs. Iteration 60 µs: not the 80 µs of one stage doing it all.
        let p = Pipeline::new(line(), 32, 2, 4096, vec![1e18]);
        let seqs: Vec<SeqWork> = (0..8).map(|i| SeqWork::decode(100 + i)).collect();
        let b = SeqWork::shape_of(&seqs);
        assert_eq!(p.iteration_time_of(&b, &seqs), SimTime(60_000));
        // The aggregates alone split evenly: the same here.
        assert_eq!(p.iteration_time(&b), SimTime(60_000));
    }

    #[test]
    fn one_sequence_leaves_a_bubble() {
        // One decode over 4 stages: its trip is the whole model (10 µs) plus 3 sends of
        // 10 µs; each stage idles the rest of the time.
        let p = Pipeline::new(line(), 32, 4, 4096, vec![1e18; 3]);
        let seqs = [SeqWork::decode(10)];
        let b = SeqWork::shape_of(&seqs);
        assert_eq!(p.iteration_time_of(&b, &seqs), SimTime(40_000));
    }

    #[test]
    fn a_long_chunk_makes_its_micro_batch_the_slow_one() {
        // A 1000-token chunk and three decodes over 2 stages: micro-batches {chunk} and {3
        // decodes}, never the chunk split. {chunk}: 10 ms of layers, 5 ms per stage; trip
        // 5 ms + 10 µs + 5 ms = 10.01 ms, which beats stage 0's busy 5.01 + 0.025 ms.
        let p = Pipeline::new(line(), 32, 2, 4096, vec![1e18]);
        let seqs = [SeqWork::decode(50), SeqWork::decode(60), SeqWork::decode(70), SeqWork::prefill(1000, 0, true)];
        let b = SeqWork::shape_of(&seqs);
        assert_eq!(p.iteration_time_of(&b, &seqs), SimTime(10_010_000));
    }

    #[test]
    fn sends_cross_the_network_only_between_nodes() {
        let h100 = crate::spec::GpuPreset::find("h100-sxm").unwrap().spec();
        // TP 4 × PP 4 on nodes of 8: stages 0–1 on one node, 2–3 on the next; only the send
        // from stage 1 to 2 leaves the node (400 Gb/s = 50 GB/s per GPU; NVLink 450 GB/s).
        assert_eq!(stage_links(&h100, 4, 4), vec![450e9, 50e9, 450e9]);
        assert_eq!(stage_links(&h100, 8, 2), vec![50e9]);
        assert_eq!(stage_links(&h100, 1, 2), vec![450e9]);
    }

    #[test]
    fn sends_cost_bytes_over_the_link() {
        // 2 decodes over 2 stages, hidden 4096: a link of 8.192e9 B/s sends one token's
        // 8192 bytes in 1 µs. Stage 0 = 5 + 1 + 10 µs per micro-batch, busy 32 µs; a trip
        // 16 + 5 = 21 µs.
        let p = Pipeline::new(line(), 32, 2, 4096, vec![8.192e9]);
        let seqs = [SeqWork::decode(5), SeqWork::decode(6)];
        let b = SeqWork::shape_of(&seqs);
        assert_eq!(p.iteration_time_of(&b, &seqs), SimTime(32_000));
    }
}
