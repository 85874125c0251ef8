//! The `cuda` backend: the real kernels (NVRTC-compiled .cu sources, cuBLAS GEMMs) timed with
//! CUDA events.
//!
//! Each point: random bf16 data (never zeros: they run faster than real data), several buffer
//! sets rotated so the working set exceeds twice the L2, three warm-up launches, then 15 samples,
//! each `inner` back-to-back launches between two events (enough for about 0.2 ms, so event
//! resolution and launch gaps matter little), and the median per launch.

use crate::Error;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use servesim_kernels::cuda::GpuError;
use servesim_kernels::cuda::{AttnGeometry, CudaUnavailable, DecodeWorkspace, Gpu};
use servesim_kernels::cudarc::driver::CudaSlice;

use super::{median, rotation, Backend, Device, Timing};
use crate::plan::Shape;

pub struct CudaBackend {
    pub gpu: Gpu,
    rng: ChaCha8Rng,
    pub(crate) samples: u32,
}

impl CudaBackend {
    /// Opens the GPU; the error says what is missing and what to do instead.
    pub fn open(head_dim: usize, seed: u64) -> Result<CudaBackend, CudaUnavailable> {
        Ok(CudaBackend { gpu: Gpu::open(head_dim)?, rng: ChaCha8Rng::seed_from_u64(seed), samples: 15 })
    }

    fn bf16(&mut self, n: usize) -> Result<CudaSlice<u16>, GpuError> {
        let v: Vec<f32> = (0..n).map(|_| self.rng.random_range(-1.0f32..1.0)).collect();
        self.gpu.upload_bf16(&v)
    }

    fn free_bytes(&self) -> u64 {
        self.gpu.ctx.mem_get_info().map(|(free, _)| free as u64).unwrap_or(0)
    }

    fn l2(&self) -> u64 {
        (self.gpu.info.l2_bytes.max(1 << 20)) as u64
    }
}

type Launch<'a> = Box<dyn FnMut(usize) -> Result<(), GpuError> + 'a>;

impl CudaBackend {
    /// Times `launch(i)` (i rotates the buffer sets).
    fn time(&self, mut launch: Launch) -> Result<Timing, Error> {
        let gpu = &self.gpu;
        for i in 0..3 {
            launch(i)?;
        }
        gpu.sync()?;
        let (e0, e1) = (gpu.event()?, gpu.event()?);
        let mut i = 3;
        let mut once = |inner: usize, i: &mut usize| -> Result<f64, Error> {
            e0.record(&gpu.stream).map_err(|e| GpuError::new("event", e))?;
            for _ in 0..inner {
                launch(*i)?;
                *i += 1;
            }
            e1.record(&gpu.stream).map_err(|e| GpuError::new("event", e))?;
            e1.synchronize().map_err(|e| GpuError::new("event sync", e))?;
            Ok(e0.elapsed_ms(&e1).map_err(|e| GpuError::new("elapsed", e))? as f64 / inner as f64)
        };
        let first = once(1, &mut i)?;
        let inner = ((0.2 / first.max(1e-4)).ceil() as usize).clamp(1, 64);
        let mut v = Vec::with_capacity(self.samples as usize);
        for _ in 0..self.samples {
            v.push(once(inner, &mut i)?);
        }
        Ok(Timing { ms: median(v), samples: self.samples })
    }
}

impl Backend for CudaBackend {
    fn device(&self) -> Device {
        let i = &self.gpu.info;
        Device {
            backend: "cuda".into(),
            name: i.name.clone(),
            driver: Some(format!(
                "CUDA driver {}.{}, NVRTC {}.{}, compute capability {}.{}, {} SMs, L2 {} MiB, {} GiB",
                i.driver_version / 1000,
                i.driver_version % 1000 / 10,
                i.nvrtc_version.0,
                i.nvrtc_version.1,
                i.compute_capability.0,
                i.compute_capability.1,
                i.multiprocessors,
                i.l2_bytes >> 20,
                i.memory_bytes >> 30
            )),
            clocks: Some(format!("SM {} MHz, memory {} MHz (device maxima)", i.sm_clock_mhz, i.mem_clock_mhz)),
            dtype: "bf16".into(),
        }
    }

    fn measure(&mut self, shape: &Shape) -> Result<Timing, Error> {
        let l2 = self.l2();
        let budget = self.free_bytes() / 2;
        let too_big = |bytes: u64| -> Result<(), Error> {
            if bytes > budget {
                Err(Error::unsupported(format!(
                    "{} needs {} MiB, more than half the free memory",
                    shape.describe(),
                    bytes >> 20
                )))
            } else {
                Ok(())
            }
        };
        match shape.clone() {
            Shape::Gemm { m, k, n } => {
                let set = 2 * (m * k + k * n + m * n);
                let r = rotation(set, l2, 8);
                too_big(set * r as u64)?;
                let (m, k, n) = (m as usize, k as usize, n as usize);
                let mut sets = Vec::new();
                for _ in 0..r {
                    sets.push((self.bf16(m * k)?, self.bf16(k * n)?, self.gpu.zeros::<u16>(m * n)?));
                }
                let gpu = &self.gpu;
                self.time(Box::new(move |i| {
                    let (a, w, c) = &mut sets[i % r];
                    gpu.gemm(a, w, c, m, k, n)
                }))
            }
            Shape::RmsNorm { tokens, hidden } => {
                let (t, h) = (tokens as usize, hidden as usize);
                let r = rotation(6 * tokens * hidden, l2, 8);
                let mut sets = Vec::new();
                for _ in 0..r {
                    sets.push((self.gpu.zeros::<u16>(t * h)?, self.bf16(t * h)?, self.bf16(t * h)?));
                }
                let w = self.bf16(h)?;
                let gpu = &self.gpu;
                self.time(Box::new(move |i| {
                    let (out, x, res) = &mut sets[i % r];
                    gpu.rms_norm(out, x, &w, res, t, h)
                }))
            }
            Shape::Rope { tokens, q_heads, kv_heads, head_dim } => {
                let (t, qh, kh, hd) = (tokens as usize, q_heads as usize, kv_heads as usize, head_dim as usize);
                let r = rotation(2 * tokens * (q_heads + kv_heads) * head_dim, l2, 8);
                let mut sets = Vec::new();
                for _ in 0..r {
                    sets.push((self.bf16(t * qh * hd)?, self.bf16(t * kh * hd)?));
                }
                let pos = self.gpu.upload(&(0..t as i32).collect::<Vec<_>>())?;
                let gpu = &self.gpu;
                self.time(Box::new(move |i| {
                    let (q, k) = &mut sets[i % r];
                    gpu.rope(q, k, &pos, t, qh, kh, hd)
                }))
            }
            Shape::KvWrite { tokens, kv_heads, head_dim } => {
                let (t, kh, hd) = (tokens as usize, kv_heads as usize, head_dim as usize);
                let r = rotation(8 * tokens * kv_heads * head_dim, l2, 8);
                let mut sets = Vec::new();
                for _ in 0..r {
                    sets.push((
                        self.bf16(t * kh * hd)?,
                        self.bf16(t * kh * hd)?,
                        self.gpu.zeros::<u16>(t * kh * hd)?,
                        self.gpu.zeros::<u16>(t * kh * hd)?,
                    ));
                }
                let slots = self.gpu.upload(&(0..t as i64).collect::<Vec<_>>())?;
                let gpu = &self.gpu;
                self.time(Box::new(move |i| {
                    let (k, v, kc, vc) = &mut sets[i % r];
                    gpu.kv_write(k, v, kc, vc, &slots, t, kh, hd)
                }))
            }
            Shape::SiluMul { tokens, d } => {
                let (t, d) = (tokens as usize, d as usize);
                let r = rotation(6 * tokens * d as u64, l2, 8);
                let mut sets = Vec::new();
                for _ in 0..r {
                    sets.push((self.gpu.zeros::<u16>(t * d)?, self.bf16(t * 2 * d)?));
                }
                let gpu = &self.gpu;
                self.time(Box::new(move |i| {
                    let (out, gu) = &mut sets[i % r];
                    gpu.silu_mul(out, gu, t, d)
                }))
            }
            Shape::Decode { contexts, q_heads, kv_heads, head_dim } => {
                let (qh, kh, hd, bs) = (q_heads as usize, kv_heads as usize, head_dim as usize, 16usize);
                let seqs = contexts.len();
                let max_ctx = *contexts.iter().max().unwrap_or(&1) as usize;
                let max_blocks = max_ctx.div_ceil(bs);
                let blocks: usize = contexts.iter().map(|&c| (c as usize).div_ceil(bs)).sum();
                let kv_bytes = (2 * blocks * bs * kh * hd * 2) as u64;
                too_big(kv_bytes)?;
                // A KV cache bigger than L2 needs no rotation; the block tables interleave
                // sequences so that reads are scattered as in a real cache.
                let mut tables = vec![0i32; seqs * max_blocks];
                let mut next = 0i32;
                for b in 0..max_blocks {
                    for (s, &c) in contexts.iter().enumerate() {
                        if b < (c as usize).div_ceil(bs) {
                            tables[s * max_blocks + b] = next;
                            next += 1;
                        }
                    }
                }
                let (kc, vc) = (self.bf16(blocks * bs * kh * hd)?, self.bf16(blocks * bs * kh * hd)?);
                let q = self.bf16(seqs * qh * hd)?;
                let ctx: Vec<i32> = contexts.iter().map(|&c| c as i32).collect();
                let (dt, dc) = (self.gpu.upload(&tables)?, self.gpu.upload(&ctx)?);
                let mut out = self.gpu.zeros::<u16>(seqs * qh * hd)?;
                let mut ws = DecodeWorkspace::new(&self.gpu, seqs, qh, hd, max_ctx)?;
                let g = AttnGeometry { seqs, max_blocks, q_heads: qh, kv_heads: kh, head_dim: hd, block_size: bs };
                let gpu = &self.gpu;
                self.time(Box::new(move |_| gpu.decode_attention(&mut out, &mut ws, &q, &kc, &vc, &dt, &dc, &g)))
            }
            Shape::Prefill { chunk, cached, q_heads, kv_heads, head_dim } => {
                let (qh, kh, hd, bs) = (q_heads as usize, kv_heads as usize, head_dim as usize, 16usize);
                if hd != self.gpu.head_dim {
                    return Err(Error::unsupported(format!(
                        "prefill kernel compiled for head_dim {}, shape has {hd}",
                        self.gpu.head_dim
                    )));
                }
                let total = (chunk + cached) as usize;
                let max_blocks = total.div_ceil(bs);
                let set = (2 * max_blocks * bs * kh * hd * 2 + 4 * chunk as usize * qh * hd) as u64;
                let r = rotation(set, l2, 4);
                too_big(set * r as u64)?;
                let mut sets = Vec::new();
                for _ in 0..r {
                    sets.push((
                        self.bf16(max_blocks * bs * kh * hd)?,
                        self.bf16(max_blocks * bs * kh * hd)?,
                        self.bf16(chunk as usize * qh * hd)?,
                    ));
                }
                let tables = self.gpu.upload(&(0..max_blocks as i32).collect::<Vec<_>>())?;
                let ctx = self.gpu.upload(&[total as i32])?;
                let cu = self.gpu.upload(&[0i32, chunk as i32])?;
                let mut out = self.gpu.zeros::<u16>(chunk as usize * qh * hd)?;
                let g = AttnGeometry { seqs: 1, max_blocks, q_heads: qh, kv_heads: kh, head_dim: hd, block_size: bs };
                let gpu = &self.gpu;
                self.time(Box::new(move |i| {
                    let (kc, vc, q) = &sets[i % r];
                    gpu.prefill_attention(&mut out, q, kc, vc, &cu, &tables, &ctx, chunk as usize, &g)
                }))
            }
            Shape::Sample { batch, vocab } => {
                let (b, v) = (batch as usize, vocab as usize);
                let logits: Vec<f32> = (0..b * v).map(|_| self.rng.random_range(-8.0f32..8.0)).collect();
                let u: Vec<f32> = (0..b).map(|i| (i as f32 * 0.618) % 1.0).collect();
                let (dl, du) = (self.gpu.upload(&logits)?, self.gpu.upload(&u)?);
                let mut out = self.gpu.zeros::<i32>(b)?;
                let gpu = &self.gpu;
                self.time(Box::new(move |_| gpu.sample(&mut out, &dl, &du, b, v, 0.8, 0.9)))
            }
        }
    }
}
