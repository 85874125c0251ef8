// Residual add, out = a + b (bf16, fp32 arithmetic), for engines that do not fuse it into the
// norm. Launch: grid (ceil(n / 256)), block (256).
#include <cuda_bf16.h>

extern "C" __global__ void residual_add(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ a,
                                        const __nv_bfloat16* __restrict__ b, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}
