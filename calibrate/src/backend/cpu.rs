//! The `cpu` backend: the CPU reference ops (f32), timed with the wall clock. It exists so the
//! whole pipeline (sweep → fit → profile → simulate) runs anywhere, CI included; its times
//! describe this CPU, not a GPU.

use crate::Error;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use servesim_kernels::cpu;

use super::{median, rotation, Backend, Device, Timing};
use crate::clock::Clock;
use crate::plan::Shape;

/// Working set that rotation must exceed (a generous last-level cache).
const CACHE_BYTES: u64 = 32 << 20;

pub struct CpuBackend {
    rng: ChaCha8Rng,
    /// Timed runs per point (after one warm-up), fewer when a run is slow.
    pub reps: u32,
    /// The clock read around each run (wall by default; `servesim validate` reads the thread's
    /// CPU time, with the GEMM pinned to one thread).
    pub clock: Clock,
    /// Bytes streamed through before each timed run (untimed), evicting the core's private
    /// caches as the previous op of a forward pass does; 0 (the default) for none.
    pub evict_bytes: usize,
}

impl CpuBackend {
    pub fn new(seed: u64) -> CpuBackend {
        crate::clock::keep_heap_mapped();
        CpuBackend { rng: ChaCha8Rng::seed_from_u64(seed), reps: 5, clock: Clock::Wall, evict_bytes: 0 }
    }

    fn data(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.rng.random_range(-1.0f32..1.0)).collect()
    }
}

/// Random inputs and outputs of one op, and how to run it.
type Run = Box<dyn FnMut()>;

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

impl CpuBackend {
    fn build(&mut self, shape: &Shape) -> Run {
        match shape.clone() {
            Shape::Gemm { m, k, n } => {
                // In a forward pass the activations were just written (warm) and the weights
                // come from memory (a model's weights exceed the caches): only the weights
                // rotate, through enough copies (equal values suffice) to exceed the cache.
                let (m, k, n) = (m as usize, k as usize, n as usize);
                let r = rotation(4 * (k * n) as u64, CACHE_BYTES, 64);
                let w = self.data(k * n);
                let weights: Vec<Vec<f32>> = (0..r).map(|_| w.clone()).collect();
                let a = self.data(m * k);
                let mut c = vec![0.0f32; m * n];
                let mut i = 0;
                Box::new(move || {
                    cpu::gemm(&a, &weights[i % weights.len()], &mut c, m, k, n);
                    i += 1;
                })
            }
            Shape::RmsNorm { tokens, hidden } => {
                let (t, h) = (tokens as usize, hidden as usize);
                let (x, w, mut res) = (self.data(t * h), self.data(h), self.data(t * h));
                let mut out = vec![0.0; t * h];
                Box::new(move || cpu::rms_norm(&mut out, &x, &w, Some(&mut res), h, 1e-5))
            }
            Shape::Rope { tokens, q_heads, kv_heads, head_dim } => {
                let (t, qh, kh, hd) = (tokens as usize, q_heads as usize, kv_heads as usize, head_dim as usize);
                let (mut q, mut k) = (self.data(t * qh * hd), self.data(t * kh * hd));
                let pos: Vec<i32> = (0..t as i32).collect();
                Box::new(move || cpu::rope(&mut q, &mut k, &pos, qh, kh, hd, qh * hd, kh * hd, 500000.0))
            }
            Shape::KvWrite { tokens, kv_heads, head_dim } => {
                let (t, w) = (tokens as usize, (kv_heads * head_dim) as usize);
                let (k, v) = (self.data(t * w), self.data(t * w));
                let (mut kc, mut vc) = (vec![0.0; 2 * t * w], vec![0.0; 2 * t * w]);
                let slots: Vec<i64> = (0..t as i64).map(|i| 2 * i + 1).collect();
                Box::new(move || cpu::kv_write(&k, &v, &mut kc, &mut vc, &slots, w, 1, w, w))
            }
            Shape::SiluMul { tokens, d } => {
                let (t, d) = (tokens as usize, d as usize);
                let gu = self.data(t * 2 * d);
                let mut out = vec![0.0; t * d];
                Box::new(move || cpu::silu_mul(&mut out, &gu, d))
            }
            Shape::Decode { contexts, q_heads, kv_heads, head_dim } => {
                let (qh, kh, hd, bs) = (q_heads as usize, kv_heads as usize, head_dim as usize, 16usize);
                let ctx: Vec<i32> = contexts.iter().map(|&c| c as i32).collect();
                let max_blocks = contexts.iter().map(|&c| (c as usize).div_ceil(bs)).max().unwrap_or(1);
                let blocks = max_blocks * ctx.len();
                // Block b of every sequence, then b + 1, ...: a sequence's blocks are scattered
                // through the cache as in a running server (and as the cuda backend lays them).
                let mut tables = vec![0i32; blocks];
                let mut next = 0i32;
                for b in 0..max_blocks {
                    for (s, &c) in contexts.iter().enumerate() {
                        if b < (c as usize).div_ceil(bs) {
                            tables[s * max_blocks + b] = next;
                            next += 1;
                        }
                    }
                }
                // Each layer's KV cache is read once per forward pass: cold, as the weights.
                let kv = self.data(blocks * bs * kh * hd);
                let r = rotation(8 * kv.len() as u64, CACHE_BYTES, 16);
                let caches: Vec<(Vec<f32>, Vec<f32>)> = (0..r).map(|_| (kv.clone(), kv.clone())).collect();
                let q = self.data(ctx.len() * qh * hd);
                let mut out = vec![0.0; q.len()];
                let mut i = 0;
                Box::new(move || {
                    let (kc, vc) = &caches[i % caches.len()];
                    i += 1;
                    let g = cpu::Paged {
                        block_tables: &tables,
                        max_blocks,
                        context_lens: &ctx,
                        q_heads: qh,
                        kv_heads: kh,
                        head_dim: hd,
                        block_size: bs,
                    };
                    cpu::decode_attention(&mut out, &q, kc, vc, &g, 256, 1.0 / (hd as f32).sqrt());
                })
            }
            Shape::Prefill { chunk, cached, q_heads, kv_heads, head_dim } => {
                let (qh, kh, hd, bs) = (q_heads as usize, kv_heads as usize, head_dim as usize, 16usize);
                let total = (chunk + cached) as usize;
                let ctx = vec![total as i32];
                let max_blocks = total.div_ceil(bs);
                let tables: Vec<i32> = (0..max_blocks as i32).collect();
                let (kc, vc) = (self.data(max_blocks * bs * kh * hd), self.data(max_blocks * bs * kh * hd));
                let q = self.data(chunk as usize * qh * hd);
                let cu = vec![0, chunk as i32];
                let mut out = vec![0.0; q.len()];
                Box::new(move || {
                    let g = cpu::Paged {
                        block_tables: &tables,
                        max_blocks,
                        context_lens: &ctx,
                        q_heads: qh,
                        kv_heads: kh,
                        head_dim: hd,
                        block_size: bs,
                    };
                    cpu::prefill_attention(&mut out, &q, &kc, &vc, &cu, &g, 1.0 / (hd as f32).sqrt());
                })
            }
            Shape::Sample { batch, vocab } => {
                let (b, v) = (batch as usize, vocab as usize);
                let logits: Vec<f32> = self.data(b * v).iter().map(|x| x * 8.0).collect();
                let u: Vec<f32> = (0..b).map(|i| (i as f32 * 0.618) % 1.0).collect();
                let mut out = vec![0i32; b];
                Box::new(move || cpu::sample(&mut out, &logits, &u, v, 0.8, 0.9))
            }
        }
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device {
            backend: "cpu".into(),
            name: format!(
                "CPU: {} ({} threads)",
                cpu_name(),
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
            driver: None,
            clocks: None,
            dtype: "f32".into(),
        }
    }

    fn measure(&mut self, shape: &Shape) -> Result<Timing, Error> {
        let mut run = self.build(shape);
        run();
        let mut times = Vec::new();
        let clock = self.clock;
        let mut evict = vec![1u64; self.evict_bytes / 8];
        let start = clock.now_ns();
        while times.len() < self.reps as usize {
            if !evict.is_empty() {
                // Read and write every line, so that nothing of the op stays in L1/L2.
                for x in evict.iter_mut().step_by(8) {
                    *x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            let t = clock.now_ns();
            run();
            times.push((clock.now_ns() - t) as f64 * 1e-6);
            // Slow shapes: three samples are enough once 0.2 s went by.
            if times.len() >= 3 && clock.now_ns() - start > 200_000_000 {
                break;
            }
        }
        Ok(Timing { ms: median(times.clone()), samples: times.len() as u32 })
    }
}
