//! The CPU executor: a model's forward pass with the CPU reference ops (f32), the ops the `cpu`
//! calibration backend times, on random weights.
//!
//! Every layer has its own weights and KV cache unless `share_layers` is set (one layer's
//! weights and cache serve every layer, for models too big for memory; the caches then stay
//! warmer than in a real model). Time is read on [`Clock`]: the thread's CPU time by default,
//! which needs the GEMM on this thread (`MATMUL_NUM_THREADS=1`).

use crate::Error;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use servesim_kernels::cpu;
use servesim_sim::cost::SeqWork;
use servesim_sim::spec::ModelSpec;

use super::{needs, Dims, Executor, Inputs, BLOCK_TOKENS};
use crate::clock::Clock;

struct Layer {
    ln1: Vec<f32>,
    ln2: Vec<f32>,
    w_qkv: Vec<f32>,
    w_o: Vec<f32>,
    w_gate_up: Vec<f32>,
    w_down: Vec<f32>,
    k_cache: Vec<f32>,
    v_cache: Vec<f32>,
}

/// The ops a forward pass times separately when asked ([`Executor::record_ops`]), named as
/// the profile names them; everything else in the pass (embedding, copies between ops, input
/// preparation, the final residual and norm) is `other`.
pub const OPS: [&str; 13] = [
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_kv_cache_save",
    "attn_decode",
    "attn_prefill",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "lm_head",
    "sample",
];

/// The index of each of [`OPS`].
#[derive(Clone, Copy)]
enum Op {
    InputLayernorm,
    AttnPreProj,
    AttnRope,
    AttnKvCacheSave,
    AttnDecode,
    AttnPrefill,
    AttnPostProj,
    PostAttentionLayernorm,
    MlpUpProj,
    MlpAct,
    MlpDownProj,
    LmHead,
    Sample,
}

/// Times the ops of one forward pass when recording.
struct OpTimer {
    on: bool,
    clock: Clock,
    ns: [u64; OPS.len()],
}

impl OpTimer {
    fn time(&mut self, op: Op, f: impl FnOnce()) {
        if self.on {
            let t = self.clock.now_ns();
            f();
            self.ns[op as usize] += self.clock.now_ns() - t;
        } else {
            f();
        }
    }
}

pub struct CpuExecutor {
    /// Whether forward passes time each op, and the last pass's times (ns, [`OPS`] order).
    record: bool,
    op_ns: [u64; OPS.len()],
    /// The last pass's whole time, ns.
    pass_ns: u64,
    d: Dims,
    layers: Vec<Layer>,
    /// Forward passes use layer `i % layers.len()` for layer i.
    embedding: Vec<f32>,
    ln_final: Vec<f32>,
    lm_head: Vec<f32>,
    clock: Clock,
    inputs: Inputs,
    // Activations, grown to the largest batch seen.
    token_ids: Vec<usize>,
    residual: Vec<f32>,
    delta: Vec<f32>,
    normed: Vec<f32>,
    qkv: Vec<f32>,
    q: Vec<f32>,
    attn: Vec<f32>,
    gate_up: Vec<f32>,
    act: Vec<f32>,
    rows: Vec<f32>,
    rows_normed: Vec<f32>,
    logits: Vec<f32>,
    uniforms: Vec<f32>,
    sampled: Vec<i32>,
    rng: ChaCha8Rng,
}

fn random(rng: &mut ChaCha8Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

impl CpuExecutor {
    /// Random weights for `model` at TP `tp` (one GPU's shard; the all-reduce is not executed).
    pub fn new(model: &ModelSpec, tp: u64, share_layers: bool, clock: Clock, seed: u64) -> CpuExecutor {
        let d = Dims::of(model, tp);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Weights scaled by 1/sqrt(fan-in) keep activations of order 1 through the layers (no
        // overflow, no denormals to slow the arithmetic down).
        let w = |rng: &mut ChaCha8Rng, k: usize, n: usize| random(rng, k * n, (3.0 / k as f32).sqrt());
        let n_layers = if share_layers { 1 } else { d.layers };
        let layers = (0..n_layers)
            .map(|_| Layer {
                ln1: vec![1.0; d.hidden],
                ln2: vec![1.0; d.hidden],
                w_qkv: w(&mut rng, d.hidden, d.qkv()),
                w_o: w(&mut rng, d.q_heads * d.head_dim, d.hidden),
                w_gate_up: w(&mut rng, d.hidden, 2 * d.intermediate),
                w_down: w(&mut rng, d.intermediate, d.hidden),
                k_cache: Vec::new(),
                v_cache: Vec::new(),
            })
            .collect();
        CpuExecutor {
            embedding: random(&mut rng, d.vocab * d.hidden, 1.0),
            ln_final: vec![1.0; d.hidden],
            lm_head: w(&mut rng, d.hidden, d.vocab_shard),
            d,
            layers,
            clock,
            record: false,
            op_ns: [0; OPS.len()],
            pass_ns: 0,
            inputs: Inputs::default(),
            token_ids: Vec::new(),
            residual: Vec::new(),
            delta: Vec::new(),
            normed: Vec::new(),
            qkv: Vec::new(),
            q: Vec::new(),
            attn: Vec::new(),
            gate_up: Vec::new(),
            act: Vec::new(),
            rows: Vec::new(),
            rows_normed: Vec::new(),
            logits: Vec::new(),
            uniforms: Vec::new(),
            sampled: Vec::new(),
            rng,
        }
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        4 * (self.layers.len() * self.d.layer_weights() + self.embedding.len() + self.lm_head.len())
    }
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        // Room for growth, so a slightly larger batch does not reallocate inside a timed run.
        v.resize(n + n / 4, 0.0);
    }
}

impl Executor for CpuExecutor {
    fn describe(&self) -> String {
        format!(
            "cpu: reference ops in f32, {} layers ({} distinct), {:.0} MiB of weights, clock {}",
            self.d.layers,
            self.layers.len(),
            self.weight_bytes() as f64 / (1 << 20) as f64,
            self.clock.name()
        )
    }

    fn prepare(&mut self, seqs: &[SeqWork]) -> Result<(), Error> {
        let d = self.d;
        let (blocks, t) = needs(seqs);
        let s = seqs.len();
        let kv = blocks * BLOCK_TOKENS * d.kv_heads * d.head_dim;
        for l in &mut self.layers {
            grow(&mut l.k_cache, kv);
            grow(&mut l.v_cache, kv);
        }
        for (v, n) in [
            (&mut self.residual, t * d.hidden),
            (&mut self.delta, t * d.hidden),
            (&mut self.normed, t * d.hidden),
            (&mut self.qkv, t * d.qkv()),
            (&mut self.q, t * d.q_heads * d.head_dim),
            (&mut self.attn, t * d.q_heads * d.head_dim),
            (&mut self.gate_up, t * 2 * d.intermediate),
            (&mut self.act, t * d.intermediate),
            (&mut self.rows, s * d.hidden),
            (&mut self.rows_normed, s * d.hidden),
            (&mut self.logits, s * d.vocab_shard),
        ] {
            grow(v, n);
        }
        if self.uniforms.len() < s {
            let u: Vec<f32> = (self.uniforms.len()..s).map(|_| self.rng.random_range(0.0f32..1.0)).collect();
            self.uniforms.extend(u);
            self.sampled.resize(s, 0);
        }
        if self.token_ids.len() < t {
            let vocab = d.vocab;
            let ids: Vec<usize> = (self.token_ids.len()..t).map(|_| self.rng.random_range(0..vocab)).collect();
            self.token_ids.extend(ids);
        }
        Ok(())
    }

    fn run(&mut self, seqs: &[SeqWork]) -> Result<u64, Error> {
        let start = self.clock.now_ns();
        self.op_ns = self.forward(seqs);
        let ns = self.clock.now_ns() - start;
        self.pass_ns = ns;
        Ok(ns)
    }

    fn record_ops(&mut self, on: bool) {
        self.record = on;
    }

    fn op_times(&self) -> Vec<(&'static str, u64)> {
        if !self.record {
            return Vec::new();
        }
        let mut v: Vec<(&'static str, u64)> = OPS.iter().copied().zip(self.op_ns).collect();
        v.push(("pass", self.pass_ns));
        v
    }
}

impl CpuExecutor {
    /// One forward pass; returns its op times when recording (zeros otherwise).
    fn forward(&mut self, seqs: &[SeqWork]) -> [u64; OPS.len()] {
        let d = self.d;
        let (h, hd, qh, kh) = (d.hidden, d.head_dim, d.q_heads, d.kv_heads);
        let w = d.qkv();
        let qw = qh * hd;
        self.inputs.build(seqs);
        let inp = &self.inputs;
        let t = inp.tokens;
        let dec = inp.decodes;
        // Embedding lookup; the residual stream starts at zero.
        for (i, &id) in self.token_ids[..t].iter().enumerate() {
            self.delta[i * h..(i + 1) * h].copy_from_slice(&self.embedding[id * h..(id + 1) * h]);
        }
        self.residual[..t * h].fill(0.0);
        let scale = 1.0 / (hd as f32).sqrt();
        let n_distinct = self.layers.len();
        let mut ops = OpTimer { on: self.record, clock: self.clock, ns: [0; OPS.len()] };
        for li in 0..d.layers {
            let l = &mut self.layers[li % n_distinct];
            ops.time(Op::InputLayernorm, || {
                cpu::rms_norm(
                    &mut self.normed[..t * h],
                    &self.delta[..t * h],
                    &l.ln1,
                    Some(&mut self.residual[..t * h]),
                    h,
                    1e-5,
                )
            });
            ops.time(Op::AttnPreProj, || {
                cpu::gemm(&self.normed, &l.w_qkv, &mut self.qkv, t, h, w);
            });
            // RoPE on the query heads, then the key heads, in place in the fused output.
            ops.time(Op::AttnRope, || {
                cpu::rope(&mut self.qkv[..t * w], &mut [], &inp.positions, qh, 0, hd, w, 0, 500000.0);
                cpu::rope(&mut self.qkv[qw..t * w], &mut [], &inp.positions, kh, 0, hd, w, 0, 500000.0);
            });
            let kv_w = kh * hd;
            ops.time(Op::AttnKvCacheSave, || {
                cpu::kv_write(
                    &self.qkv[qw..t * w],
                    &self.qkv[qw + kv_w..t * w],
                    &mut l.k_cache,
                    &mut l.v_cache,
                    &inp.slots,
                    kh,
                    hd,
                    w,
                    w,
                )
            });
            // Queries to a contiguous [tokens, heads, head_dim] block for the attention ops.
            for i in 0..t {
                self.q[i * qw..(i + 1) * qw].copy_from_slice(&self.qkv[i * w..i * w + qw]);
            }
            if dec > 0 {
                let g = cpu::Paged {
                    block_tables: &inp.decode_tables,
                    max_blocks: inp.decode_max_blocks,
                    context_lens: &inp.decode_ctx,
                    q_heads: qh,
                    kv_heads: kh,
                    head_dim: hd,
                    block_size: BLOCK_TOKENS,
                };
                ops.time(Op::AttnDecode, || {
                    cpu::decode_attention(
                        &mut self.attn[..dec * qw],
                        &self.q[..dec * qw],
                        &l.k_cache,
                        &l.v_cache,
                        &g,
                        256,
                        scale,
                    )
                });
            }
            if t > dec {
                let g = cpu::Paged {
                    block_tables: &inp.prefill_tables,
                    max_blocks: inp.prefill_max_blocks,
                    context_lens: &inp.prefill_ctx,
                    q_heads: qh,
                    kv_heads: kh,
                    head_dim: hd,
                    block_size: BLOCK_TOKENS,
                };
                ops.time(Op::AttnPrefill, || {
                    cpu::prefill_attention(
                        &mut self.attn[dec * qw..t * qw],
                        &self.q[dec * qw..t * qw],
                        &l.k_cache,
                        &l.v_cache,
                        &inp.prefill_cu,
                        &g,
                        scale,
                    )
                });
            }
            ops.time(Op::AttnPostProj, || {
                cpu::gemm(&self.attn, &l.w_o, &mut self.delta, t, qw, h);
            });
            ops.time(Op::PostAttentionLayernorm, || {
                cpu::rms_norm(
                    &mut self.normed[..t * h],
                    &self.delta[..t * h],
                    &l.ln2,
                    Some(&mut self.residual[..t * h]),
                    h,
                    1e-5,
                )
            });
            ops.time(Op::MlpUpProj, || {
                cpu::gemm(&self.normed, &l.w_gate_up, &mut self.gate_up, t, h, 2 * d.intermediate);
            });
            ops.time(Op::MlpAct, || {
                cpu::silu_mul(
                    &mut self.act[..t * d.intermediate],
                    &self.gate_up[..t * 2 * d.intermediate],
                    d.intermediate,
                )
            });
            ops.time(Op::MlpDownProj, || {
                cpu::gemm(&self.act, &l.w_down, &mut self.delta, t, d.intermediate, h);
            });
        }
        // The sampling rows: final residual add and norm, LM head, sampling.
        let s = inp.sample_rows.len();
        if s == 0 {
            return ops.ns;
        }
        for (j, &r) in inp.sample_rows.iter().enumerate() {
            for k in 0..h {
                self.rows[j * h + k] = self.residual[r * h + k] + self.delta[r * h + k];
            }
        }
        cpu::rms_norm(&mut self.rows_normed[..s * h], &self.rows[..s * h], &self.ln_final, None, h, 1e-5);
        ops.time(Op::LmHead, || {
            cpu::gemm(&self.rows_normed, &self.lm_head, &mut self.logits, s, h, d.vocab_shard);
        });
        ops.time(Op::Sample, || {
            cpu::sample(
                &mut self.sampled[..s],
                &self.logits[..s * d.vocab_shard],
                &self.uniforms[..s],
                d.vocab_shard,
                0.8,
                0.9,
            )
        });
        ops.ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servesim_sim::spec::Dtype;

    fn tiny() -> ModelSpec {
        ModelSpec {
            name: "t".into(),
            layers: 2,
            hidden: 64,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            intermediate: 128,
            vocab: 256,
            max_context: 512,
            experts: 1,
            top_k: 1,
            tied_embeddings: false,
            weight_dtype: Dtype::Bf16,
            kv_dtype: Dtype::Bf16,
            attention_dtype: None,
            arch: servesim_sim::spec::Arch::PLAIN,
        }
    }

    #[test]
    fn forward_runs_mixed_batches_and_keeps_activations_finite() {
        let mut e = CpuExecutor::new(&tiny(), 1, false, Clock::Thread, 1);
        let seqs =
            [SeqWork::decode(40), SeqWork::decode(7), SeqWork::prefill(30, 0, true), SeqWork::prefill(9, 20, false)];
        e.prepare(&seqs).unwrap();
        let ns = e.run(&seqs).unwrap();
        assert!(ns > 0);
        let t = 1 + 1 + 30 + 9;
        assert!(e.residual[..t * 64].iter().all(|x| x.is_finite()));
        assert!(e.logits[..3 * 256].iter().all(|x| x.is_finite() && x.abs() < 1e3));
        assert!(e.sampled[..3].iter().all(|&x| (0..256).contains(&x)));
        // The keys of the chunk's last token (position 28 of sequence 3) are in the cache.
        let inp = &e.inputs;
        let slot = *inp.slots.last().unwrap() as usize;
        let kw = 2 * 16;
        assert!(e.layers[1].k_cache[slot * kw..(slot + 1) * kw].iter().any(|&x| x != 0.0));
    }

    #[test]
    fn bigger_batches_take_longer() {
        let mut e = CpuExecutor::new(&tiny(), 1, true, Clock::Thread, 1);
        let small = [SeqWork::prefill(8, 0, true)];
        let big = [SeqWork::prefill(256, 0, true)];
        let time = |e: &mut CpuExecutor, s: &[SeqWork]| {
            e.prepare(s).unwrap();
            let mut v: Vec<u64> = (0..5).map(|_| e.run(s).unwrap()).collect();
            v.sort_unstable();
            v[2]
        };
        let (a, b) = (time(&mut e, &small), time(&mut e, &big));
        assert!(b > 4 * a, "256 tokens {b} ns vs 8 tokens {a} ns");
    }
}
