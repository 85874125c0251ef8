// Writes the new tokens' K and V into the paged cache (vLLM's reshape_and_cache). The cache is
// [blocks, block_size, kv_heads, head_dim]; slot_mapping[t] = block * block_size + offset, or -1
// for a token that is not cached. k, v: [tokens, kv_heads, head_dim] at token strides.
// Launch: grid (tokens), block (128).
#include <cuda_bf16.h>

extern "C" __global__ void kv_write(const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
                                    __nv_bfloat16* __restrict__ k_cache, __nv_bfloat16* __restrict__ v_cache,
                                    const long long* __restrict__ slot_mapping, int kv_heads, int head_dim,
                                    int k_stride, int v_stride) {
    const int t = blockIdx.x;
    const long long slot = slot_mapping[t];
    if (slot < 0) return;
    const int width = kv_heads * head_dim;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        k_cache[slot * width + i] = k[(size_t)t * k_stride + i];
        v_cache[slot * width + i] = v[(size_t)t * v_stride + i];
    }
}
