// Causal prefill attention over a paged KV cache, grouped-query heads, tiled flash-style with an
// online softmax: a chunk of new tokens attends to the sequence's cached prefix (earlier chunks,
// shared prefixes) and causally to itself. The new tokens' K and V are already in the cache
// (kv_write runs first), so every key is read through the block table.
//
//   q:            [total_new_tokens, q_heads, HEAD_DIM] bf16; sequence s owns rows
//                 cu_seqlens_q[s] .. cu_seqlens_q[s + 1]
//   k/v_cache:    [blocks, block_size, kv_heads, HEAD_DIM] bf16
//   block_tables: [seqs, max_blocks] int32;  context_lens: [seqs] int32 (cached + new)
//   out:          like q
// Query row i of sequence s sits at position cached_s + i and sees keys 0 ..= cached_s + i.
// Each thread owns one query row (its accumulator in registers); a block of BLOCK_M rows walks
// key tiles of BLOCK_N tokens staged in shared memory. CUDA-core arithmetic (no tensor cores).
// HEAD_DIM is fixed at compile time (-DHEAD_DIM=128 by default).
// Launch: grid (ceil(max_new / BLOCK_M), q_heads, seqs), block (BLOCK_M).
#include <cuda_bf16.h>

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#define BLOCK_M 64
#define BLOCK_N 32
#define NEG_INF (-__int_as_float(0x7f800000))

extern "C" __global__ void __launch_bounds__(BLOCK_M) prefill_attention(
    __nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ cu_seqlens_q,
    const int* __restrict__ block_tables, const int* __restrict__ context_lens, int max_blocks, int q_heads,
    int kv_heads, int block_size, float scale) {
    // Rows padded by one pair of bf16 so that threads reading their own rows hit different banks.
    __shared__ __nv_bfloat16 qs[BLOCK_M][HEAD_DIM + 2];
    __shared__ __nv_bfloat16 ks[BLOCK_N][HEAD_DIM + 2];
    __shared__ __nv_bfloat16 vs[BLOCK_N][HEAD_DIM + 2];
    // Each thread's scores for the current key tile (column per thread: no bank conflicts).
    __shared__ float ps[BLOCK_N][BLOCK_M];
    const int tile = blockIdx.x, qh = blockIdx.y, s = blockIdx.z;
    const int kvh = qh / (q_heads / kv_heads);
    const int q_start = cu_seqlens_q[s];
    const int new_tokens = cu_seqlens_q[s + 1] - q_start;
    const int row0 = tile * BLOCK_M;
    if (row0 >= new_tokens) return;
    const int ctx = context_lens[s];
    const int cached = ctx - new_tokens;
    const int i = row0 + threadIdx.x;
    const bool valid = i < new_tokens;
    const int pos = cached + i;
    for (int j = threadIdx.x; j < BLOCK_M * HEAD_DIM; j += BLOCK_M) {
        const int r = j / HEAD_DIM, d = j % HEAD_DIM;
        qs[r][d] = row0 + r < new_tokens ? q[((size_t)(q_start + row0 + r) * q_heads + qh) * HEAD_DIM + d]
                                         : __float2bfloat16(0.0f);
    }
    float acc[HEAD_DIM];
#pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d) acc[d] = 0.0f;
    float m = NEG_INF, l = 0.0f;
    // Keys up to the last valid row of this tile.
    const int key_end = cached + min(new_tokens, row0 + BLOCK_M);
    const int* table = block_tables + (size_t)s * max_blocks;
    for (int k0 = 0; k0 < key_end; k0 += BLOCK_N) {
        __syncthreads();
        for (int j = threadIdx.x; j < BLOCK_N * HEAD_DIM; j += BLOCK_M) {
            const int r = j / HEAD_DIM, d = j % HEAD_DIM, t = k0 + r;
            __nv_bfloat16 kv = __float2bfloat16(0.0f), vv = kv;
            if (t < key_end) {
                const size_t off = (((size_t)table[t / block_size] * block_size + t % block_size) * kv_heads + kvh) * HEAD_DIM + d;
                kv = k_cache[off];
                vv = v_cache[off];
            }
            ks[r][d] = kv;
            vs[r][d] = vv;
        }
        __syncthreads();
        if (!valid) continue;
        float tile_max = NEG_INF;
        for (int r = 0; r < BLOCK_N; ++r) {
            float dot = 0.0f;
            for (int d = 0; d < HEAD_DIM; ++d) dot += __bfloat162float(qs[threadIdx.x][d]) * __bfloat162float(ks[r][d]);
            const float sc = k0 + r <= pos ? dot * scale : NEG_INF;
            ps[r][threadIdx.x] = sc;
            tile_max = fmaxf(tile_max, sc);
        }
        if (tile_max == NEG_INF) continue;
        const float m_new = fmaxf(m, tile_max);
        const float corr = __expf(m - m_new);
        l *= corr;
#pragma unroll
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] *= corr;
        for (int r = 0; r < BLOCK_N; ++r) {
            const float p = __expf(ps[r][threadIdx.x] - m_new);
            l += p;
#pragma unroll
            for (int d = 0; d < HEAD_DIM; ++d) acc[d] += p * __bfloat162float(vs[r][d]);
        }
        m = m_new;
    }
    if (!valid) return;
    const float inv = 1.0f / l;
#pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d) out[((size_t)(q_start + i) * q_heads + qh) * HEAD_DIM + d] = __float2bfloat16(acc[d] * inv);
}
