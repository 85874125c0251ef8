// Paged decode attention (one new query token per sequence) with grouped-query heads and
// split-K over the context (flash-decoding): each block scores one KV head's query group on a
// slice of `split_tokens` context tokens and writes an unnormalised partial result with its
// running max and sum; decode_attention_reduce merges the slices.
//
//   q:            [seqs, q_heads, HEAD_DIM] bf16
//   k/v_cache:    [blocks, block_size, kv_heads, HEAD_DIM] bf16
//   block_tables: [seqs, max_blocks] int32;  context_lens: [seqs] int32 (this step's token included)
//   partial_acc:  [seqs, q_heads, max_splits, HEAD_DIM] f32;  partial_ml: [.., max_splits, 2] f32
//   out:          [seqs, q_heads, HEAD_DIM] bf16
// Launch partial: grid (max_splits, kv_heads, seqs), block (128), dynamic shared
//   split_tokens * 8 + (2 * group * HEAD_DIM + group * split_tokens) * 4 bytes, group = q_heads / kv_heads.
// Launch reduce: grid (q_heads, seqs), block (128).
// HEAD_DIM is fixed at compile time (-DHEAD_DIM=128 by default), even, at most 256; the partial
// kernel's head_dim argument is not read (the reduce kernel's is).
//
// Work split: a thread scores one context token at a time (its key row read in 16-byte loads when
// HEAD_DIM is a multiple of 8), a warp accumulates V over its tokens with the lanes across the
// head dimension (bf16 pairs), and the warps' sums meet in shared memory.
#include <cuda_bf16.h>

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#if HEAD_DIM % 2 != 0 || HEAD_DIM > 256
#error "decode_attention.cu: HEAD_DIM must be even and at most 256"
#endif
#define PAIRS_PER_LANE ((HEAD_DIM / 2 + 31) / 32)
#define GROUP_CHUNK 8

#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

// Scores of context token row `kp` against query heads g0 .. g0 + GROUP_CHUNK - 1 (those < group).
__device__ __forceinline__ void score_row(float* dot, const float* qs, const __nv_bfloat16* kp, int g0, int group) {
#if HEAD_DIM % 8 == 0
    const uint4* k4 = reinterpret_cast<const uint4*>(kp);
#pragma unroll 4
    for (int c = 0; c < HEAD_DIM / 8; ++c) {
        const uint4 raw = __ldg(k4 + c);
        const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
        float kf[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(k2[j]);
            kf[2 * j] = f.x;
            kf[2 * j + 1] = f.y;
        }
#pragma unroll
        for (int gg = 0; gg < GROUP_CHUNK; ++gg) {
            if (g0 + gg < group) {
                const float* qrow = qs + (g0 + gg) * HEAD_DIM + c * 8;
#pragma unroll
                for (int j = 0; j < 8; ++j) dot[gg] += qrow[j] * kf[j];
            }
        }
    }
#else
    const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(kp);
    for (int c = 0; c < HEAD_DIM / 2; ++c) {
        const float2 f = __bfloat1622float2(k2[c]);
#pragma unroll
        for (int gg = 0; gg < GROUP_CHUNK; ++gg) {
            if (g0 + gg < group) {
                const float* qrow = qs + (g0 + gg) * HEAD_DIM + 2 * c;
                dot[gg] += qrow[0] * f.x + qrow[1] * f.y;
            }
        }
    }
#endif
}

extern "C" __global__ void decode_attention_partial(
    float* __restrict__ partial_acc, float* __restrict__ partial_ml, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k_cache, const __nv_bfloat16* __restrict__ v_cache,
    const int* __restrict__ block_tables, const int* __restrict__ context_lens, int max_blocks, int q_heads,
    int kv_heads, int head_dim, int block_size, int split_tokens, int max_splits, float scale) {
    extern __shared__ double smem[]; // 8-byte aligned
    const int split = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
    const int group = q_heads / kv_heads;
    const int ctx = context_lens[s];
    const int t0 = split * split_tokens;
    const int t1 = min(ctx, t0 + split_tokens);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const size_t slot0 = ((size_t)s * q_heads + (size_t)h * group) * max_splits + split;
    if (t0 >= t1) {
        for (int g = threadIdx.x; g < group; g += blockDim.x) {
            partial_ml[(slot0 + (size_t)g * max_splits) * 2] = NEG_INF;
            partial_ml[(slot0 + (size_t)g * max_splits) * 2 + 1] = 0.0f;
        }
        return;
    }
    const int n = t1 - t0;
    size_t* rows = reinterpret_cast<size_t*>(smem);         // [split_tokens]: each token's row in the caches
    float* qs = reinterpret_cast<float*>(rows + split_tokens); // [group][HEAD_DIM], pre-scaled
    float* accs = qs + group * HEAD_DIM;                      // [group][HEAD_DIM], the warps' V sums
    float* scores = accs + group * HEAD_DIM;                  // [group][split_tokens]
    for (int i = threadIdx.x; i < group * HEAD_DIM; i += blockDim.x) {
        const int g = i / HEAD_DIM, d = i % HEAD_DIM;
        qs[i] = __bfloat162float(q[((size_t)s * q_heads + h * group + g) * HEAD_DIM + d]) * scale;
        accs[i] = 0.0f;
    }
    // Each token's row offset in the caches (its block looked up once).
    const int* table = block_tables + (size_t)s * max_blocks;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int t = t0 + i;
        rows[i] = (((size_t)table[t / block_size] * block_size + t % block_size) * kv_heads + h) * HEAD_DIM;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        for (int g0 = 0; g0 < group; g0 += GROUP_CHUNK) {
            float dot[GROUP_CHUNK];
#pragma unroll
            for (int gg = 0; gg < GROUP_CHUNK; ++gg) dot[gg] = 0.0f;
            score_row(dot, qs, k_cache + rows[i], g0, group);
#pragma unroll
            for (int gg = 0; gg < GROUP_CHUNK; ++gg)
                if (g0 + gg < group) scores[(g0 + gg) * split_tokens + i] = dot[gg];
        }
    }
    __syncthreads();
    for (int g = warp; g < group; g += warps) {
        float* row = scores + g * split_tokens;
        float m = NEG_INF;
        for (int i = lane; i < n; i += 32) m = fmaxf(m, row[i]);
        m = warp_max(m);
        float l = 0.0f;
        for (int i = lane; i < n; i += 32) {
            const float p = __expf(row[i] - m);
            row[i] = p;
            l += p;
        }
        l = warp_sum(l);
        if (lane == 0) {
            partial_ml[(slot0 + (size_t)g * max_splits) * 2] = m;
            partial_ml[(slot0 + (size_t)g * max_splits) * 2 + 1] = l;
        }
    }
    __syncthreads();
    for (int g0 = 0; g0 < group; g0 += GROUP_CHUNK) {
        float acc[GROUP_CHUNK][2 * PAIRS_PER_LANE];
#pragma unroll
        for (int gg = 0; gg < GROUP_CHUNK; ++gg)
#pragma unroll
            for (int k = 0; k < 2 * PAIRS_PER_LANE; ++k) acc[gg][k] = 0.0f;
#pragma unroll 2
        for (int i = warp; i < n; i += warps) {
            const __nv_bfloat162* vp = reinterpret_cast<const __nv_bfloat162*>(v_cache + rows[i]);
            float vf[2 * PAIRS_PER_LANE];
#pragma unroll
            for (int k = 0; k < PAIRS_PER_LANE; ++k) {
                const int pr = lane + 32 * k;
                const float2 f = pr < HEAD_DIM / 2 ? __bfloat1622float2(vp[pr]) : make_float2(0.0f, 0.0f);
                vf[2 * k] = f.x;
                vf[2 * k + 1] = f.y;
            }
#pragma unroll
            for (int gg = 0; gg < GROUP_CHUNK; ++gg) {
                if (g0 + gg < group) {
                    const float p = scores[(g0 + gg) * split_tokens + i];
#pragma unroll
                    for (int k = 0; k < 2 * PAIRS_PER_LANE; ++k) acc[gg][k] += p * vf[k];
                }
            }
        }
#pragma unroll
        for (int gg = 0; gg < GROUP_CHUNK; ++gg) {
            if (g0 + gg < group) {
#pragma unroll
                for (int k = 0; k < PAIRS_PER_LANE; ++k) {
                    const int pr = lane + 32 * k;
                    if (pr < HEAD_DIM / 2) {
                        atomicAdd(&accs[(g0 + gg) * HEAD_DIM + 2 * pr], acc[gg][2 * k]);
                        atomicAdd(&accs[(g0 + gg) * HEAD_DIM + 2 * pr + 1], acc[gg][2 * k + 1]);
                    }
                }
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < group * HEAD_DIM; i += blockDim.x) {
        const int g = i / HEAD_DIM, d = i % HEAD_DIM;
        partial_acc[(slot0 + (size_t)g * max_splits) * HEAD_DIM + d] = accs[i];
    }
}

extern "C" __global__ void decode_attention_reduce(__nv_bfloat16* __restrict__ out, const float* __restrict__ partial_acc,
                                                   const float* __restrict__ partial_ml, const int* __restrict__ context_lens,
                                                   int q_heads, int head_dim, int split_tokens, int max_splits) {
    const int qh = blockIdx.x, s = blockIdx.y;
    const int splits = (context_lens[s] + split_tokens - 1) / split_tokens;
    const size_t base = ((size_t)s * q_heads + qh) * max_splits;
    float m = NEG_INF;
    for (int i = 0; i < splits; ++i) m = fmaxf(m, partial_ml[(base + i) * 2]);
    float l = 0.0f;
    for (int i = 0; i < splits; ++i) l += partial_ml[(base + i) * 2 + 1] * __expf(partial_ml[(base + i) * 2] - m);
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float o = 0.0f;
        for (int i = 0; i < splits; ++i) o += __expf(partial_ml[(base + i) * 2] - m) * partial_acc[(base + i) * head_dim + d];
        out[((size_t)s * q_heads + qh) * head_dim + d] = __float2bfloat16(o / l);
    }
}
