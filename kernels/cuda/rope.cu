// Rotary position embedding, NeoX style (the two halves of each head rotate together), in place
// on Q and K. q: [tokens, q_heads, head_dim] at token stride q_stride; k likewise. For pair i of
// a head at position p: angle = p * theta^(-2i / head_dim),
//   x[i] = x[i] cos - x[i + d/2] sin;  x[i + d/2] = x[i + d/2] cos + x[i] sin.
// Launch: grid (tokens), block (128).
#include <cuda_bf16.h>

extern "C" __global__ void rope(__nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ k,
                                const int* __restrict__ positions, int q_heads, int kv_heads,
                                int head_dim, int q_stride, int k_stride, float theta) {
    const int t = blockIdx.x;
    const int half = head_dim / 2;
    const float pos = (float)positions[t];
    const int pairs = (q_heads + kv_heads) * half;
    for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
        const int head = j / half, i = j % half;
        __nv_bfloat16* base = head < q_heads ? q + (size_t)t * q_stride + head * head_dim
                                             : k + (size_t)t * k_stride + (head - q_heads) * head_dim;
        const float freq = powf(theta, -2.0f * (float)i / (float)head_dim);
        float s, c;
        sincosf(pos * freq, &s, &c);
        const float x1 = __bfloat162float(base[i]), x2 = __bfloat162float(base[i + half]);
        base[i] = __float2bfloat16(x1 * c - x2 * s);
        base[i + half] = __float2bfloat16(x2 * c + x1 * s);
    }
}
