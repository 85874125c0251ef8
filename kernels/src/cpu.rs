//! CPU reference implementations of every op, in f32, with the same layouts and the same
//! algorithms as the CUDA kernels (split-K decode attention, tiled online-softmax prefill,
//! bisection top-p). They are the oracle of the GPU correctness checks and the ops the `cpu`
//! timing backend measures. The tests below check each against a naive formula.
//!
//! Layouts (row-major): activations `[tokens, width]`; heads `[tokens, heads, head_dim]`; the KV
//! cache `[blocks, block_size, kv_heads, head_dim]`; block tables `[seqs, max_blocks]`.

/// C[m×n] = A[m×k] · B[k×n] (row-major), multi-threaded.
pub fn gemm(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm: buffers too small");
    // SAFETY: the three buffers hold at least the m×k, k×n and m×n row-major matrices the
    // strides describe (checked above), and `c` does not alias `a` or `b` (distinct borrows).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// RMSNorm of each row of `x` (`hidden` wide), optionally after adding `residual` (which then
/// holds the sum, rounded to bf16 as the GPU stores it).
pub fn rms_norm(out: &mut [f32], x: &[f32], weight: &[f32], mut residual: Option<&mut [f32]>, hidden: usize, eps: f32) {
    for (t, row) in x.chunks_exact(hidden).enumerate() {
        let r = t * hidden..(t + 1) * hidden;
        let mut v: Vec<f32> = row.to_vec();
        if let Some(res) = residual.as_deref_mut() {
            for (vi, ri) in v.iter_mut().zip(&mut res[r.clone()]) {
                *vi = crate::bf16::to_f32(crate::bf16::from_f32(*vi + *ri));
                *ri = *vi;
            }
        }
        let ss: f32 = v.iter().map(|a| a * a).sum();
        let inv = 1.0 / (ss / hidden as f32 + eps).sqrt();
        for ((o, vi), w) in out[r].iter_mut().zip(&v).zip(weight) {
            *o = vi * inv * w;
        }
    }
}

/// NeoX-style rotary embedding in place on `q` and `k` (token strides `q_stride`, `k_stride`).
#[allow(clippy::too_many_arguments)]
pub fn rope(
    q: &mut [f32],
    k: &mut [f32],
    positions: &[i32],
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    q_stride: usize,
    k_stride: usize,
    theta: f32,
) {
    let half = head_dim / 2;
    for (t, &pos) in positions.iter().enumerate() {
        for head in 0..q_heads + kv_heads {
            let base = if head < q_heads {
                t * q_stride + head * head_dim
            } else {
                t * k_stride + (head - q_heads) * head_dim
            };
            let buf: &mut [f32] = if head < q_heads { &mut *q } else { &mut *k };
            for i in 0..half {
                let freq = theta.powf(-2.0 * i as f32 / head_dim as f32);
                let (s, c) = (pos as f32 * freq).sin_cos();
                let (x1, x2) = (buf[base + i], buf[base + i + half]);
                buf[base + i] = x1 * c - x2 * s;
                buf[base + i + half] = x2 * c + x1 * s;
            }
        }
    }
}

/// out[t, i] = silu(gate[t, i]) · up[t, i], with gate_up = [gate | up] rows of width 2d.
pub fn silu_mul(out: &mut [f32], gate_up: &[f32], d: usize) {
    for (o, gu) in out.chunks_exact_mut(d).zip(gate_up.chunks_exact(2 * d)) {
        for i in 0..d {
            let g = gu[i];
            o[i] = g / (1.0 + (-g).exp()) * gu[d + i];
        }
    }
}

/// Writes each token's K and V (`[tokens, kv_heads·head_dim]` at the given strides) into the
/// cache slot `slot_mapping[t]` (negative: skipped).
#[allow(clippy::too_many_arguments)]
pub fn kv_write(
    k: &[f32],
    v: &[f32],
    k_cache: &mut [f32],
    v_cache: &mut [f32],
    slot_mapping: &[i64],
    kv_heads: usize,
    head_dim: usize,
    k_stride: usize,
    v_stride: usize,
) {
    let w = kv_heads * head_dim;
    for (t, &slot) in slot_mapping.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        let s = slot as usize * w;
        k_cache[s..s + w].copy_from_slice(&k[t * k_stride..t * k_stride + w]);
        v_cache[s..s + w].copy_from_slice(&v[t * v_stride..t * v_stride + w]);
    }
}

/// The geometry of paged attention.
#[derive(Clone, Copy, Debug)]
pub struct Paged<'a> {
    pub block_tables: &'a [i32],
    pub max_blocks: usize,
    pub context_lens: &'a [i32],
    pub q_heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
}

impl Paged<'_> {
    /// Offset in the cache of token `t` of sequence `s`, KV head `h`.
    fn at(&self, s: usize, t: usize, h: usize) -> usize {
        let blk = self.block_tables[s * self.max_blocks + t / self.block_size] as usize;
        ((blk * self.block_size + t % self.block_size) * self.kv_heads + h) * self.head_dim
    }
}

/// Paged decode attention with split-K: each slice of `split_tokens` context tokens gives an
/// unnormalised partial sum with its max and denominator; the slices are then merged, as
/// `decode_attention.cu` does. `q` and `out` are `[seqs, q_heads, head_dim]`.
pub fn decode_attention(
    out: &mut [f32],
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    g: &Paged,
    split_tokens: usize,
    scale: f32,
) {
    let hd = g.head_dim;
    let group = g.q_heads / g.kv_heads;
    for (s, &ctx) in g.context_lens.iter().enumerate() {
        let ctx = ctx as usize;
        for qh in 0..g.q_heads {
            let h = qh / group;
            let qv = &q[(s * g.q_heads + qh) * hd..][..hd];
            let mut parts: Vec<(f32, f32, Vec<f32>)> = Vec::new();
            for t0 in (0..ctx).step_by(split_tokens) {
                let t1 = ctx.min(t0 + split_tokens);
                let scores: Vec<f32> = (t0..t1)
                    .map(|t| {
                        let kp = &k_cache[g.at(s, t, h)..][..hd];
                        qv.iter().zip(kp).map(|(a, b)| a * scale * b).sum()
                    })
                    .collect();
                let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let p: Vec<f32> = scores.iter().map(|x| (x - m).exp()).collect();
                let l = p.iter().sum();
                let mut acc = vec![0.0f32; hd];
                for (t, pt) in (t0..t1).zip(&p) {
                    for (a, vv) in acc.iter_mut().zip(&v_cache[g.at(s, t, h)..][..hd]) {
                        *a += pt * vv;
                    }
                }
                parts.push((m, l, acc));
            }
            let m = parts.iter().map(|p| p.0).fold(f32::NEG_INFINITY, f32::max);
            let l: f32 = parts.iter().map(|p| p.1 * (p.0 - m).exp()).sum();
            let o = &mut out[(s * g.q_heads + qh) * hd..][..hd];
            for (d, od) in o.iter_mut().enumerate() {
                *od = parts.iter().map(|p| (p.0 - m).exp() * p.2[d]).sum::<f32>() / l;
            }
        }
    }
}

/// Causal prefill attention over the paged cache (new tokens' K/V already written), tiled with
/// an online softmax over key tiles of 32, as `prefill_attention.cu` does. Sequence `s` owns
/// query rows `cu_seqlens_q[s]..cu_seqlens_q[s+1]`; row i sits at position cached + i.
pub fn prefill_attention(
    out: &mut [f32],
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    cu_seqlens_q: &[i32],
    g: &Paged,
    scale: f32,
) {
    const BLOCK_N: usize = 32;
    let hd = g.head_dim;
    let group = g.q_heads / g.kv_heads;
    for s in 0..cu_seqlens_q.len() - 1 {
        let start = cu_seqlens_q[s] as usize;
        let new = cu_seqlens_q[s + 1] as usize - start;
        let cached = g.context_lens[s] as usize - new;
        for i in 0..new {
            let pos = cached + i;
            for qh in 0..g.q_heads {
                let h = qh / group;
                let qv = &q[((start + i) * g.q_heads + qh) * hd..][..hd];
                let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
                let mut acc = vec![0.0f32; hd];
                for k0 in (0..=pos).step_by(BLOCK_N) {
                    let keys = k0..(k0 + BLOCK_N).min(pos + 1);
                    let sc: Vec<f32> = keys
                        .clone()
                        .map(|t| {
                            qv.iter().zip(&k_cache[g.at(s, t, h)..][..hd]).map(|(a, b)| a * b).sum::<f32>() * scale
                        })
                        .collect();
                    let m_new = sc.iter().copied().fold(m, f32::max);
                    let corr = (m - m_new).exp();
                    l *= corr;
                    acc.iter_mut().for_each(|a| *a *= corr);
                    for (t, x) in keys.zip(&sc) {
                        let p = (x - m_new).exp();
                        l += p;
                        for (a, vv) in acc.iter_mut().zip(&v_cache[g.at(s, t, h)..][..hd]) {
                            *a += p * vv;
                        }
                    }
                    m = m_new;
                }
                let o = &mut out[((start + i) * g.q_heads + qh) * hd..][..hd];
                for (od, a) in o.iter_mut().zip(&acc) {
                    *od = a / l;
                }
            }
        }
    }
}

/// One token per row of `logits` (`vocab` wide): greedy when `temperature <= 0` (lowest index
/// among equal maxima), else top-p as `sample.cu` defines it: keep p_i ≥ τ for the largest τ
/// whose kept mass is ≥ top_p, and return the first kept token (in index order) at which the
/// cumulative kept probability reaches u · kept mass.
pub fn sample(out: &mut [i32], logits: &[f32], uniforms: &[f32], vocab: usize, temperature: f32, top_p: f32) {
    for (s, row) in logits.chunks_exact(vocab).enumerate() {
        let (mut best, mut bi) = (f32::NEG_INFINITY, 0usize);
        for (i, &x) in row.iter().enumerate() {
            if x > best {
                best = x;
                bi = i;
            }
        }
        if temperature <= 0.0 {
            out[s] = bi as i32;
            continue;
        }
        let mx = best / temperature;
        let e: Vec<f32> = row.iter().map(|x| (x / temperature - mx).exp()).collect();
        let z: f32 = e.iter().sum();
        let p: Vec<f32> = e.iter().map(|x| x / z).collect();
        let (mut lo, mut hi) = (0.0f32, 1.0 / z);
        if top_p < 1.0 {
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                let mass: f32 = p.iter().filter(|&&x| x >= mid).sum();
                if mass >= top_p {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
        }
        let kept: f32 = p.iter().filter(|&&x| x >= lo).sum();
        let target = uniforms[s] * kept;
        let (mut cum, mut pick) = (0.0f32, -1i32);
        for (i, &x) in p.iter().enumerate() {
            if x >= lo {
                pick = i as i32;
                cum += x;
                if cum >= target {
                    break;
                }
            }
        }
        out[s] = pick;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
        }
    }

    #[test]
    fn gemm_matches_the_triple_loop() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (m, k, n) = (7, 33, 19);
        let (a, b) = (random(&mut rng, m * k), random(&mut rng, k * n));
        let mut c = vec![0.0; m * n];
        gemm(&a, &b, &mut c, m, k, n);
        let naive: Vec<f32> =
            (0..m * n).map(|ij| (0..k).map(|l| a[ij / n * k + l] * b[l * n + ij % n]).sum()).collect();
        close(&c, &naive, 1e-5);
    }

    #[test]
    fn rms_norm_by_hand_and_fused_add() {
        // Row (3, 4): mean square 12.5; eps 0 → divide by sqrt(12.5).
        let mut out = vec![0.0; 2];
        rms_norm(&mut out, &[3.0, 4.0], &[1.0, 2.0], None, 2, 0.0);
        let r = 12.5f32.sqrt();
        close(&out, &[3.0 / r, 8.0 / r], 1e-6);
        let mut res = vec![-2.0, -2.0];
        rms_norm(&mut out, &[3.0, 4.0], &[1.0, 1.0], Some(&mut res), 2, 0.0);
        assert_eq!(res, vec![1.0, 2.0]);
        let r = 2.5f32.sqrt();
        close(&out, &[1.0 / r, 2.0 / r], 1e-6);
    }

    #[test]
    fn rope_rotates_pairs_and_keeps_norms() {
        // Position 0 is the identity; position p rotates pair 0 by p radians (freq 1).
        let mut q = vec![1.0, 0.0, 0.5, 0.25];
        let mut k = vec![0.0, 1.0, 0.0, 0.0];
        rope(&mut q, &mut k, &[0], 1, 1, 4, 4, 4, 10000.0);
        assert_eq!(q, vec![1.0, 0.0, 0.5, 0.25]);
        let mut q = vec![1.0, 0.0, 0.0, 0.0];
        let mut k = vec![1.0, 0.0, 0.0, 0.0];
        rope(&mut q, &mut k, &[2], 1, 1, 4, 4, 4, 10000.0);
        // Pair (x[0], x[2]) = (1, 0) rotated by 2 rad: (cos 2, sin 2).
        close(&[q[0], q[2]], &[2f32.cos(), 2f32.sin()], 1e-6);
        // Relative positions: q at p and k at p' give the same dot product as at p + 5, p' + 5.
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let (q0, k0) = (random(&mut rng, 8), random(&mut rng, 8));
        let dot = |pq: i32, pk: i32| {
            let (mut a, mut b, mut c, mut d) = (q0.clone(), k0.clone(), q0.clone(), k0.clone());
            rope(&mut a, &mut b, &[pq], 1, 1, 8, 8, 8, 100.0);
            rope(&mut c, &mut d, &[pk], 1, 1, 8, 8, 8, 100.0);
            a.iter().zip(&d).map(|(x, y)| x * y).sum::<f32>()
        };
        assert!((dot(3, 1) - dot(8, 6)).abs() < 1e-5);
    }

    #[test]
    fn silu_mul_by_hand() {
        let mut out = vec![0.0; 2];
        silu_mul(&mut out, &[0.0, 2.0, 5.0, 3.0], 2);
        close(&out, &[0.0, 2.0 / (1.0 + (-2.0f32).exp()) * 3.0], 1e-6);
    }

    /// A random paged layout: each sequence's blocks scattered over the cache.
    struct Layout {
        tables: Vec<i32>,
        max_blocks: usize,
        blocks: usize,
    }

    fn layout(rng: &mut ChaCha8Rng, ctx: &[i32], block_size: usize) -> Layout {
        let max_blocks = ctx.iter().map(|&c| (c as usize).div_ceil(block_size)).max().unwrap();
        let blocks = max_blocks * ctx.len() + 3;
        let mut ids: Vec<i32> = (0..blocks as i32).collect();
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.random_range(0..=i));
        }
        Layout { tables: ids[..max_blocks * ctx.len()].to_vec(), max_blocks, blocks }
    }

    /// Plain softmax(q·K^T·scale)·V over a sequence's keys 0..=last (gathered contiguously).
    fn naive_attention(q: &[f32], keys: &[Vec<f32>], values: &[Vec<f32>], scale: f32) -> Vec<f32> {
        let s: Vec<f64> =
            keys.iter().map(|k| q.iter().zip(k).map(|(a, b)| (a * b) as f64).sum::<f64>() * scale as f64).collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..q.len()).map(|d| (e.iter().zip(values).map(|(p, v)| p * v[d] as f64).sum::<f64>() / z) as f32).collect()
    }

    #[test]
    fn decode_attention_matches_naive_softmax_with_mixed_lengths_and_gqa() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (q_heads, kv_heads, hd, bs) = (8, 2, 16, 4);
        let ctx = [1i32, 5, 37, 64, 130];
        let l = layout(&mut rng, &ctx, bs);
        let w = kv_heads * hd;
        let (kc, vc) = (random(&mut rng, l.blocks * bs * w), random(&mut rng, l.blocks * bs * w));
        let q = random(&mut rng, ctx.len() * q_heads * hd);
        let g = Paged {
            block_tables: &l.tables,
            max_blocks: l.max_blocks,
            context_lens: &ctx,
            q_heads,
            kv_heads,
            head_dim: hd,
            block_size: bs,
        };
        let scale = 1.0 / (hd as f32).sqrt();
        for split in [16usize, 1000] {
            let mut out = vec![0.0; q.len()];
            decode_attention(&mut out, &q, &kc, &vc, &g, split, scale);
            for (s, &c) in ctx.iter().enumerate() {
                for qh in 0..q_heads {
                    let h = qh / (q_heads / kv_heads);
                    let keys: Vec<Vec<f32>> = (0..c as usize).map(|t| kc[g.at(s, t, h)..][..hd].to_vec()).collect();
                    let vals: Vec<Vec<f32>> = (0..c as usize).map(|t| vc[g.at(s, t, h)..][..hd].to_vec()).collect();
                    let want = naive_attention(&q[(s * q_heads + qh) * hd..][..hd], &keys, &vals, scale);
                    close(&out[(s * q_heads + qh) * hd..][..hd], &want, 1e-5);
                }
            }
        }
    }

    #[test]
    fn prefill_attention_is_causal_over_the_cached_prefix() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let (q_heads, kv_heads, hd, bs) = (4, 2, 8, 16);
        // Sequence 0: 40 new tokens, nothing cached; sequence 1: 9 new over 70 cached.
        let new = [40usize, 9];
        let ctx = [40i32, 79];
        let cu = [0i32, 40, 49];
        let l = layout(&mut rng, &ctx, bs);
        let w = kv_heads * hd;
        let (kc, vc) = (random(&mut rng, l.blocks * bs * w), random(&mut rng, l.blocks * bs * w));
        let q = random(&mut rng, 49 * q_heads * hd);
        let g = Paged {
            block_tables: &l.tables,
            max_blocks: l.max_blocks,
            context_lens: &ctx,
            q_heads,
            kv_heads,
            head_dim: hd,
            block_size: bs,
        };
        let scale = 0.3;
        let mut out = vec![0.0; q.len()];
        prefill_attention(&mut out, &q, &kc, &vc, &cu, &g, scale);
        for s in 0..2 {
            let cached = ctx[s] as usize - new[s];
            for i in 0..new[s] {
                for qh in 0..q_heads {
                    let h = qh / 2;
                    let last = cached + i;
                    let keys: Vec<Vec<f32>> = (0..=last).map(|t| kc[g.at(s, t, h)..][..hd].to_vec()).collect();
                    let vals: Vec<Vec<f32>> = (0..=last).map(|t| vc[g.at(s, t, h)..][..hd].to_vec()).collect();
                    let row = cu[s] as usize + i;
                    let want = naive_attention(&q[(row * q_heads + qh) * hd..][..hd], &keys, &vals, scale);
                    close(&out[(row * q_heads + qh) * hd..][..hd], &want, 1e-5);
                }
            }
        }
    }

    #[test]
    fn kv_write_places_tokens_in_their_slots() {
        let k: Vec<f32> = (0..6).map(|x| x as f32).collect();
        let v: Vec<f32> = (0..6).map(|x| -(x as f32)).collect();
        let (mut kc, mut vc) = (vec![9.0; 12], vec![9.0; 12]);
        // Three tokens of width 2: to slots 5, -1 (skipped), 0.
        kv_write(&k, &v, &mut kc, &mut vc, &[5, -1, 0], 1, 2, 2, 2);
        assert_eq!(kc, vec![4.0, 5.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 0.0, 1.0]);
        assert_eq!(vc[10..], [-0.0, -1.0]);
    }

    #[test]
    fn sampling_greedy_and_top_p_follow_the_renormalised_kept_set() {
        let logits = vec![0.0f32, 3.0, 3.0, 1.0, 2.0];
        let mut out = vec![0i32];
        sample(&mut out, &logits, &[0.5], 5, 0.0, 1.0);
        assert_eq!(out[0], 1, "greedy takes the lowest index among equal maxima");
        // Temperature 1: p ∝ e^x. Top-p 0.8 keeps the smallest set of largest probabilities
        // reaching 0.8: {1, 2, 4} (0.359 + 0.359 + 0.132 = 0.850).
        let e: Vec<f64> = logits.iter().map(|&x| (x as f64).exp()).collect();
        let z: f64 = e.iter().sum();
        let p: Vec<f64> = e.iter().map(|x| x / z).collect();
        let kept = [1usize, 2, 4];
        let mass: f64 = kept.iter().map(|&i| p[i]).sum();
        assert!(mass >= 0.8 && mass - p[4] < 0.8);
        // The empirical distribution over a fine grid of u matches p restricted to the kept set.
        let mut counts = [0usize; 5];
        let n = 20000;
        for j in 0..n {
            sample(&mut out, &logits, &[(j as f32 + 0.5) / n as f32], 5, 1.0, 0.8);
            counts[out[0] as usize] += 1;
        }
        for i in 0..5 {
            let want = if kept.contains(&i) { p[i] / mass } else { 0.0 };
            assert!((counts[i] as f64 / n as f64 - want).abs() < 1e-3, "token {i}: {counts:?}");
        }
    }
}
