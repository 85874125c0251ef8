// RMSNorm over the hidden dimension, one block per token, optionally fused with the residual
// add that precedes it (vLLM's fused_add_rms_norm):
//   if residual: x = x + residual; residual = x
//   out = x / sqrt(mean(x^2) + eps) * weight
// bf16 in and out, fp32 arithmetic. Launch: grid (tokens), block (256).
#include <cuda_bf16.h>

__device__ __forceinline__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) / 32;
    v = lane < warps ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

extern "C" __global__ void rms_norm(__nv_bfloat16* __restrict__ out, __nv_bfloat16* __restrict__ x,
                                    const __nv_bfloat16* __restrict__ weight,
                                    __nv_bfloat16* __restrict__ residual, int hidden, float eps) {
    __shared__ float shared[32];
    const size_t row = (size_t)blockIdx.x * hidden;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = __bfloat162float(x[row + i]);
        if (residual != nullptr) {
            v += __bfloat162float(residual[row + i]);
            // The sum is stored rounded to bf16, as the next layer reads it; normalise that.
            __nv_bfloat16 r = __float2bfloat16(v);
            residual[row + i] = r;
            v = __bfloat162float(r);
        }
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum(ss, shared) / hidden + eps);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = residual != nullptr ? __bfloat162float(residual[row + i]) : __bfloat162float(x[row + i]);
        out[row + i] = __float2bfloat16(v * inv * __bfloat162float(weight[i]));
    }
}
