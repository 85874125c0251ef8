// Sampling one token per sequence from fp32 logits [seqs, vocab].
// temperature <= 0: greedy (argmax; the lowest index among equal maxima).
// Otherwise top-p: p = softmax(logits / temperature); keep the tokens with p_i >= tau, where
// tau is the largest threshold whose kept mass is still >= top_p (found by 40 bisection steps);
// then, with u = uniforms[s] in [0, 1), return the first kept token (in index order) at which
// the cumulative kept probability reaches u * kept mass.
// Launch: grid (seqs), block (256).
#include <cuda_bf16.h>

#define THREADS 256

__device__ float block_reduce(float v, bool is_max, float* shared) {
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = shared[lane < THREADS / 32 ? lane : 0];
    if (lane >= THREADS / 32) v = is_max ? -3.0e38f : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) sample(int* __restrict__ out, const float* __restrict__ logits,
                                                             const float* __restrict__ uniforms, int vocab,
                                                             float temperature, float top_p) {
    __shared__ float red[THREADS / 32];
    __shared__ float sums[THREADS];
    __shared__ int best_idx[THREADS];
    __shared__ float best_val[THREADS];
    __shared__ int owner;
    __shared__ float owner_target;
    const float* row = logits + (size_t)blockIdx.x * vocab;
    const int tid = threadIdx.x;
    // Greedy pass (also the max for the softmax): per-thread best, then a block argmax.
    float bv = -3.0e38f;
    int bi = 0x7fffffff;
    for (int i = tid; i < vocab; i += THREADS) {
        if (row[i] > bv) { bv = row[i]; bi = i; }
    }
    best_val[tid] = bv;
    best_idx[tid] = bi;
    __syncthreads();
    if (tid == 0) {
        for (int t = 1; t < THREADS; ++t) {
            if (best_val[t] > best_val[0] || (best_val[t] == best_val[0] && best_idx[t] < best_idx[0])) {
                best_val[0] = best_val[t];
                best_idx[0] = best_idx[t];
            }
        }
    }
    __syncthreads();
    if (temperature <= 0.0f) {
        if (tid == 0) out[blockIdx.x] = best_idx[0];
        return;
    }
    const float mx = best_val[0] / temperature;
    float z = 0.0f;
    for (int i = tid; i < vocab; i += THREADS) z += __expf(row[i] / temperature - mx);
    z = block_reduce(z, false, red);
    // Bisection for tau in [0, p_max = 1 / z].
    float lo = 0.0f, hi = 1.0f / z;
    if (top_p < 1.0f) {
        for (int it = 0; it < 40; ++it) {
            const float mid = 0.5f * (lo + hi);
            float mass = 0.0f;
            for (int i = tid; i < vocab; i += THREADS) {
                const float p = __expf(row[i] / temperature - mx) / z;
                if (p >= mid) mass += p;
            }
            mass = block_reduce(mass, false, red);
            if (mass >= top_p) lo = mid; else hi = mid;
        }
    }
    const float tau = lo;
    // Each thread owns a contiguous range; find the range holding the target, then scan it.
    const int chunk = (vocab + THREADS - 1) / THREADS;
    const int begin = min(vocab, tid * chunk), end = min(vocab, begin + chunk);
    float own = 0.0f;
    for (int i = begin; i < end; ++i) {
        const float p = __expf(row[i] / temperature - mx) / z;
        if (p >= tau) own += p;
    }
    sums[tid] = own;
    __syncthreads();
    if (tid == 0) {
        float total = 0.0f;
        for (int t = 0; t < THREADS; ++t) total += sums[t];
        const float target = uniforms[blockIdx.x] * total;
        float before = 0.0f;
        owner = -1;
        for (int t = 0; t < THREADS; ++t) {
            if (sums[t] > 0.0f) {
                owner = t;
                owner_target = target - before;
                if (before + sums[t] >= target) break;
            }
            before += sums[t];
        }
    }
    __syncthreads();
    if (tid == owner) {
        float cum = 0.0f;
        int pick = -1;
        for (int i = begin; i < end; ++i) {
            const float p = __expf(row[i] / temperature - mx) / z;
            if (p >= tau) {
                pick = i;
                cum += p;
                if (cum >= owner_target) break;
            }
        }
        out[blockIdx.x] = pick;
    }
}
