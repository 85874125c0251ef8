// Paged decode attention (one new query token per sequence) with grouped-query heads and
// split-K over the context (flash-decoding): each block scores one KV head's query group on a
// slice of `split_tokens` context tokens and writes an unnormalised partial result with its
// running max and sum; decode_attention_reduce merges the slices.
//
//   q:            [seqs, q_heads, head_dim] bf16
//   k/v_cache:    [blocks, block_size, kv_heads, head_dim] bf16
//   block_tables: [seqs, max_blocks] int32;  context_lens: [seqs] int32 (this step's token included)
//   partial_acc:  [seqs, q_heads, max_splits, head_dim] f32;  partial_ml: [.., max_splits, 2] f32
//   out:          [seqs, q_heads, head_dim] bf16
// Launch partial: grid (max_splits, kv_heads, seqs), block (128),
//   dynamic shared (group * head_dim + group * split_tokens) * 4 bytes, group = q_heads / kv_heads.
// Launch reduce: grid (q_heads, seqs), block (128).
#include <cuda_bf16.h>

#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

extern "C" __global__ void decode_attention_partial(
    float* __restrict__ partial_acc, float* __restrict__ partial_ml, const __nv_bfloat16* __restrict__ q,
    const __nv_bfloat16* __restrict__ k_cache, const __nv_bfloat16* __restrict__ v_cache,
    const int* __restrict__ block_tables, const int* __restrict__ context_lens, int max_blocks, int q_heads,
    int kv_heads, int head_dim, int block_size, int split_tokens, int max_splits, float scale) {
    extern __shared__ float smem[];
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
    float* qs = smem;                        // [group][head_dim], pre-scaled
    float* scores = smem + group * head_dim; // [group][split_tokens]
    for (int i = threadIdx.x; i < group * head_dim; i += blockDim.x) {
        const int g = i / head_dim, d = i % head_dim;
        qs[i] = __bfloat162float(q[((size_t)s * q_heads + h * group + g) * head_dim + d]) * scale;
    }
    __syncthreads();
    const int* table = block_tables + (size_t)s * max_blocks;
    for (int t = t0 + warp; t < t1; t += warps) {
        const size_t blk = (size_t)table[t / block_size];
        const __nv_bfloat16* kp = k_cache + ((blk * block_size + t % block_size) * kv_heads + h) * head_dim;
        for (int g = 0; g < group; ++g) {
            float dot = 0.0f;
            for (int d = lane; d < head_dim; d += 32) dot += qs[g * head_dim + d] * __bfloat162float(kp[d]);
            dot = warp_sum(dot);
            if (lane == 0) scores[g * split_tokens + (t - t0)] = dot;
        }
    }
    __syncthreads();
    const int n = t1 - t0;
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
    for (int i = threadIdx.x; i < group * head_dim; i += blockDim.x) {
        const int g = i / head_dim, d = i % head_dim;
        const float* p = scores + g * split_tokens;
        float acc = 0.0f;
        for (int t = t0; t < t1; ++t) {
            const size_t blk = (size_t)table[t / block_size];
            acc += p[t - t0] * __bfloat162float(v_cache[((blk * block_size + t % block_size) * kv_heads + h) * head_dim + d]);
        }
        partial_acc[(slot0 + (size_t)g * max_splits) * head_dim + d] = acc;
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
