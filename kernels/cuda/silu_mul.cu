// SiLU-and-multiply of the gated FFN: gate_up is [tokens, 2d] (gate | up);
//   out[t, i] = silu(gate[t, i]) * up[t, i],  silu(x) = x / (1 + exp(-x)).
// Launch: grid (tokens), block (256).
#include <cuda_bf16.h>

extern "C" __global__ void silu_mul(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ gate_up, int d) {
    const size_t t = blockIdx.x;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        const float g = __bfloat162float(gate_up[t * 2 * d + i]);
        const float u = __bfloat162float(gate_up[t * 2 * d + d + i]);
        out[t * d + i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
    }
}
