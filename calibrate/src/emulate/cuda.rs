//! The CUDA executor: a model's forward pass with the kernels `calibrate --backend cuda` times
//! (cuBLAS bf16 GEMMs, the NVRTC-compiled attention, norm, RoPE, KV-write, SiLU and sampling
//! kernels), on random bf16 weights, timed by the host clock around the launches and a final
//! synchronisation.
//!
//! Not yet run on a GPU. Differences from a real engine, each small against a forward pass:
//! Q, K and V come from three GEMMs (the launchers take contiguous q and k, so the fused
//! output cannot be split without a copy kernel): two more launches per layer than the fused
//! GEMM the calibration times; no embedding gather (no kernel for it); the final norm and LM
//! head read the first rows of the batch instead of gathering the sampling rows (same shapes);
//! the sampler reads an f32 logits buffer of the right shape (the LM head writes bf16, and
//! there is no conversion kernel). A model whose weights exceed 60% of free memory uses one
//! layer's weights and KV cache for every layer ("one layer's weights serve every layer": the
//! GEMM times are the same; the KV cache then stays warmer in L2 for small batches).

use crate::Error;
use servesim_kernels::cuda::GpuError;
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use servesim_kernels::cuda::{AttnGeometry, DecodeWorkspace, Gpu};
use servesim_kernels::cudarc::driver::CudaSlice;
use servesim_sim::cost::SeqWork;
use servesim_sim::spec::ModelSpec;

use super::{needs, Dims, Executor, Inputs, BLOCK_TOKENS};

struct Layer {
    ln1: CudaSlice<u16>,
    ln2: CudaSlice<u16>,
    w_q: CudaSlice<u16>,
    w_k: CudaSlice<u16>,
    w_v: CudaSlice<u16>,
    w_o: CudaSlice<u16>,
    w_gate_up: CudaSlice<u16>,
    w_down: CudaSlice<u16>,
    k_cache: CudaSlice<u16>,
    v_cache: CudaSlice<u16>,
}

/// Device buffers sized for a number of tokens, sampling rows and KV blocks.
struct Buffers {
    tokens: usize,
    rows: usize,
    residual: CudaSlice<u16>,
    delta: CudaSlice<u16>,
    normed: CudaSlice<u16>,
    q: CudaSlice<u16>,
    k: CudaSlice<u16>,
    v: CudaSlice<u16>,
    attn: CudaSlice<u16>,
    gate_up: CudaSlice<u16>,
    act: CudaSlice<u16>,
    positions: CudaSlice<i32>,
    slots: CudaSlice<i64>,
    rows_res: CudaSlice<u16>,
    rows_normed: CudaSlice<u16>,
    logits: CudaSlice<u16>,
    logits_f32: CudaSlice<f32>,
    uniforms: CudaSlice<f32>,
    sampled: CudaSlice<i32>,
    /// Block tables, context lengths and chunk offsets (decode and prefill groups).
    dec_tables: CudaSlice<i32>,
    dec_ctx: CudaSlice<i32>,
    pre_tables: CudaSlice<i32>,
    pre_ctx: CudaSlice<i32>,
    pre_cu: CudaSlice<i32>,
    table_len: usize,
    seqs: usize,
}

pub struct CudaExecutor {
    gpu: Gpu,
    d: Dims,
    layers: Vec<Layer>,
    ln_final: CudaSlice<u16>,
    lm_head: CudaSlice<u16>,
    kv_blocks: usize,
    buf: Option<Buffers>,
    ws: Option<(DecodeWorkspace, usize, usize)>,
    inputs: Inputs,
    weight_bytes: usize,
    rng: ChaCha8Rng,
}

impl CudaExecutor {
    /// Opens GPU 0 (the error says what is missing: driver, device, NVRTC, cuBLAS) and uploads
    /// random weights for `model` at TP `tp` (one GPU's shard; the all-reduce is not executed).
    pub fn open(model: &ModelSpec, tp: u64, seed: u64) -> Result<CudaExecutor, Error> {
        let d = Dims::of(model, tp);
        let gpu = Gpu::open(d.head_dim)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let free = gpu.ctx.mem_get_info().map(|(f, _)| f).unwrap_or(0);
        let per_layer = 2 * d.layer_weights();
        let share = d.layers * per_layer > free * 6 / 10;
        let n_layers = if share { 1 } else { d.layers };
        // Random values tiled from one block: their values do not change the kernels' times.
        let block: Vec<f32> = (0..1 << 16).map(|_| rng.random_range(-0.05f32..0.05)).collect();
        let upload = |gpu: &Gpu, n: usize| -> Result<CudaSlice<u16>, GpuError> {
            let v: Vec<f32> = block.iter().copied().cycle().take(n).collect();
            gpu.upload_bf16(&v)
        };
        let ones = |gpu: &Gpu, n: usize| gpu.upload_bf16(&vec![1.0; n]);
        let mut layers = Vec::with_capacity(n_layers);
        for _ in 0..n_layers {
            layers.push(Layer {
                ln1: ones(&gpu, d.hidden)?,
                ln2: ones(&gpu, d.hidden)?,
                w_q: upload(&gpu, d.hidden * d.q_heads * d.head_dim)?,
                w_k: upload(&gpu, d.hidden * d.kv_heads * d.head_dim)?,
                w_v: upload(&gpu, d.hidden * d.kv_heads * d.head_dim)?,
                w_o: upload(&gpu, d.q_heads * d.head_dim * d.hidden)?,
                w_gate_up: upload(&gpu, d.hidden * 2 * d.intermediate)?,
                w_down: upload(&gpu, d.intermediate * d.hidden)?,
                k_cache: gpu.zeros(1)?,
                v_cache: gpu.zeros(1)?,
            });
        }
        let ln_final = ones(&gpu, d.hidden)?;
        let lm_head = upload(&gpu, d.hidden * d.vocab_shard)?;
        let weight_bytes = n_layers * per_layer + 2 * d.hidden * d.vocab_shard;
        Ok(CudaExecutor {
            gpu,
            d,
            layers,
            ln_final,
            lm_head,
            kv_blocks: 0,
            buf: None,
            ws: None,
            inputs: Inputs::default(),
            weight_bytes,
            rng,
        })
    }

    fn buffers(&mut self, tokens: usize, rows: usize, table_len: usize, seqs: usize) -> Result<Buffers, Error> {
        let (g, d) = (&self.gpu, self.d);
        let z16 = |n: usize| g.zeros::<u16>(n.max(1));
        let z32 = |n: usize| g.zeros::<i32>(n.max(1));
        let u: Vec<f32> = (0..rows.max(1)).map(|_| self.rng.random_range(0.0f32..1.0)).collect();
        let logits: Vec<f32> = (0..rows.max(1) * d.vocab_shard).map(|_| self.rng.random_range(-8.0f32..8.0)).collect();
        Ok(Buffers {
            tokens,
            rows,
            residual: z16(tokens * d.hidden)?,
            delta: z16(tokens * d.hidden)?,
            normed: z16(tokens * d.hidden)?,
            q: z16(tokens * d.q_heads * d.head_dim)?,
            k: z16(tokens * d.kv_heads * d.head_dim)?,
            v: z16(tokens * d.kv_heads * d.head_dim)?,
            attn: z16(tokens * d.q_heads * d.head_dim)?,
            gate_up: z16(tokens * 2 * d.intermediate)?,
            act: z16(tokens * d.intermediate)?,
            positions: z32(tokens)?,
            slots: g.zeros::<i64>(tokens.max(1))?,
            rows_res: z16(rows * d.hidden)?,
            rows_normed: z16(rows * d.hidden)?,
            logits: z16(rows * d.vocab_shard)?,
            logits_f32: g.upload(&logits)?,
            uniforms: g.upload(&u)?,
            sampled: z32(rows)?,
            dec_tables: z32(table_len)?,
            dec_ctx: z32(seqs)?,
            pre_tables: z32(table_len)?,
            pre_ctx: z32(seqs)?,
            pre_cu: z32(seqs + 1)?,
            table_len,
            seqs,
        })
    }
}

impl Executor for CudaExecutor {
    fn describe(&self) -> String {
        format!(
            "cuda: {} ({} layers, {} distinct), {:.0} MiB of bf16 weights, host clock around launches and a sync",
            self.gpu.info.name,
            self.d.layers,
            self.layers.len(),
            self.weight_bytes as f64 / (1 << 20) as f64
        )
    }

    fn prepare(&mut self, seqs: &[SeqWork]) -> Result<(), Error> {
        let d = self.d;
        let (blocks, tokens) = needs(seqs);
        if blocks > self.kv_blocks {
            let n = (blocks + blocks / 4) * BLOCK_TOKENS * d.kv_heads * d.head_dim;
            for l in &mut self.layers {
                l.k_cache = self.gpu.zeros(n)?;
                l.v_cache = self.gpu.zeros(n)?;
            }
            self.kv_blocks = blocks + blocks / 4;
        }
        let max_blocks = seqs.iter().map(|s| (s.context_tokens as usize).div_ceil(BLOCK_TOKENS)).max().unwrap_or(1);
        let table_len = seqs.len() * max_blocks;
        let small = self
            .buf
            .as_ref()
            .is_none_or(|b| b.tokens < tokens || b.rows < seqs.len() || b.table_len < table_len || b.seqs < seqs.len());
        if small {
            let grow = |x: usize| x + x / 4 + 1;
            let b = self.buffers(grow(tokens), grow(seqs.len()), grow(table_len), grow(seqs.len()))?;
            self.buf = Some(b);
        }
        let decodes = seqs.iter().filter(|s| !s.prefill).count();
        let max_ctx = seqs.iter().filter(|s| !s.prefill).map(|s| s.context_tokens as usize).max().unwrap_or(1);
        let ws_small = self.ws.as_ref().is_none_or(|(_, n, c)| *n < decodes || *c < max_ctx);
        if decodes > 0 && ws_small {
            let n = decodes + decodes / 4 + 1;
            let c = max_ctx + max_ctx / 4 + 1;
            self.ws = Some((DecodeWorkspace::new(&self.gpu, n, d.q_heads, d.head_dim, c)?, n, c));
        }
        Ok(())
    }

    fn run(&mut self, seqs: &[SeqWork]) -> Result<u64, Error> {
        let start = Instant::now();
        self.forward(seqs)?;
        self.gpu.sync()?;
        Ok(start.elapsed().as_nanos() as u64)
    }
}

impl CudaExecutor {
    fn forward(&mut self, seqs: &[SeqWork]) -> Result<(), Error> {
        let d = self.d;
        let (h, hd, qh, kh) = (d.hidden, d.head_dim, d.q_heads, d.kv_heads);
        self.inputs.build(seqs);
        let inp = &self.inputs;
        let (t, dec) = (inp.tokens, inp.decodes);
        let gpu = &self.gpu;
        let b = self.buf.as_mut().ok_or_else(|| Error::unsupported("run before prepare"))?;
        let st = &gpu.stream;
        let e = |x: servesim_kernels::cudarc::driver::DriverError| GpuError::new("upload", x);
        st.memcpy_htod(&inp.positions, &mut b.positions).map_err(e)?;
        st.memcpy_htod(&inp.slots, &mut b.slots).map_err(e)?;
        st.memcpy_htod(&inp.decode_tables, &mut b.dec_tables).map_err(e)?;
        st.memcpy_htod(&inp.decode_ctx, &mut b.dec_ctx).map_err(e)?;
        st.memcpy_htod(&inp.prefill_tables, &mut b.pre_tables).map_err(e)?;
        st.memcpy_htod(&inp.prefill_ctx, &mut b.pre_ctx).map_err(e)?;
        // The prefill kernel reads query rows from cu[s]: offsetting by the decodes lets it
        // use the whole batch's q and output buffers.
        let cu: Vec<i32> = inp.prefill_cu.iter().map(|c| c + dec as i32).collect();
        st.memcpy_htod(&cu, &mut b.pre_cu).map_err(e)?;
        let n_distinct = self.layers.len();
        for li in 0..d.layers {
            let l = &mut self.layers[li % n_distinct];
            gpu.rms_norm(&mut b.normed, &mut b.delta, &l.ln1, &mut b.residual, t, h)?;
            gpu.gemm(&b.normed, &l.w_q, &mut b.q, t, h, qh * hd)?;
            gpu.gemm(&b.normed, &l.w_k, &mut b.k, t, h, kh * hd)?;
            gpu.gemm(&b.normed, &l.w_v, &mut b.v, t, h, kh * hd)?;
            gpu.rope(&mut b.q, &mut b.k, &b.positions, t, qh, kh, hd)?;
            gpu.kv_write(&b.k, &b.v, &mut l.k_cache, &mut l.v_cache, &b.slots, t, kh, hd)?;
            if dec > 0 {
                let (ws, _, _) = self.ws.as_mut().ok_or_else(|| Error::unsupported("no decode workspace"))?;
                let g = AttnGeometry {
                    seqs: dec,
                    max_blocks: inp.decode_max_blocks,
                    q_heads: qh,
                    kv_heads: kh,
                    head_dim: hd,
                    block_size: BLOCK_TOKENS,
                };
                gpu.decode_attention(&mut b.attn, ws, &b.q, &l.k_cache, &l.v_cache, &b.dec_tables, &b.dec_ctx, &g)?;
            }
            if t > dec {
                let g = AttnGeometry {
                    seqs: seqs.len() - dec,
                    max_blocks: inp.prefill_max_blocks,
                    q_heads: qh,
                    kv_heads: kh,
                    head_dim: hd,
                    block_size: BLOCK_TOKENS,
                };
                gpu.prefill_attention(
                    &mut b.attn,
                    &b.q,
                    &l.k_cache,
                    &l.v_cache,
                    &b.pre_cu,
                    &b.pre_tables,
                    &b.pre_ctx,
                    inp.prefill_max_new,
                    &g,
                )?;
            }
            gpu.gemm(&b.attn, &l.w_o, &mut b.delta, t, qh * hd, h)?;
            gpu.rms_norm(&mut b.normed, &mut b.delta, &l.ln2, &mut b.residual, t, h)?;
            gpu.gemm(&b.normed, &l.w_gate_up, &mut b.gate_up, t, h, 2 * d.intermediate)?;
            gpu.silu_mul(&mut b.act, &b.gate_up, t, d.intermediate)?;
            gpu.gemm(&b.act, &l.w_down, &mut b.delta, t, d.intermediate, h)?;
        }
        let s = inp.sample_rows.len();
        if s > 0 {
            gpu.rms_norm(&mut b.rows_normed, &mut b.delta, &self.ln_final, &mut b.rows_res, s, h)?;
            gpu.gemm(&b.rows_normed, &self.lm_head, &mut b.logits, s, h, d.vocab_shard)?;
            gpu.sample(&mut b.sampled, &b.logits_f32, &b.uniforms, s, d.vocab_shard, 0.8, 0.9)?;
        }
        Ok(())
    }
}
