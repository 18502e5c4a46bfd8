// Device-side helpers shared by the .cu files (nvcc only): reductions, bf16
// stores, launch sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kv_cache.cuh"

namespace pd::gpu {

constexpr int kWarp = 32;

struct SumOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduction of v over the 32 lanes of a warp; every lane gets the result.
template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
    for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, SumOp{}); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, MaxOp{}); }

// Reduction of v over the whole block with Op (sum or max; identity is its
// neutral value). blockDim.x a multiple of 32, at most 1024. Every thread gets
// the result. Safe to call several times in a row.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float identity, Op op) {
    __shared__ float partial[kWarp];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    v = warp_reduce(v, op);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < int(blockDim.x / kWarp) ? partial[lane] : identity;
        t = warp_reduce(t, op);
        if (lane == 0) partial[0] = t;
    }
    __syncthreads();
    float total = partial[0];
    __syncthreads();  // everyone has read partial[0] before a next call overwrites it
    return total;
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce(v, 0.0f, SumOp{}); }
__device__ __forceinline__ float block_max(float v) { return block_reduce(v, -INFINITY, MaxOp{}); }

// The numerator of a softmax over p[0, n), by the whole block: p[s] becomes
// exp(p[s] - m), m the maximum (stored in *m if given); returns the sum of the exps.
// Each thread writes the entries s = threadIdx.x mod blockDim.x; block_sum's
// barriers make every write visible to the whole block before it returns.
__device__ __forceinline__ float block_exp_sum(float* p, int n, float* m = nullptr) {
    float mx = -INFINITY;
    for (int s = threadIdx.x; s < n; s += blockDim.x) mx = fmaxf(mx, p[s]);
    mx = block_max(mx);
    float sum = 0.0f;
    for (int s = threadIdx.x; s < n; s += blockDim.x) {
        const float e = expf(p[s] - mx);
        p[s] = e;
        sum += e;
    }
    if (m) *m = mx;
    return block_sum(sum);
}

// Stores a float as float or as bf16 (round to nearest even).
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

inline __nv_bfloat16* as_bf16(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }
inline const __nv_bfloat16* as_bf16(const std::uint16_t* p) {
    return reinterpret_cast<const __nv_bfloat16*>(p);
}

// Calls f(K, V) with a layer's cached keys and values as their element type:
// float* for an f32 cache, __nv_bfloat16* for a bf16 one (KVPrecision). The
// one place where the kernels that read or write either kind pick their instance.
template <typename F>
void with_kv_elements(const KVLayer& c, F&& f) {
    if (c.bf16()) f(as_bf16(c.k16), as_bf16(c.v16));
    else f(c.k, c.v);
}

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(long n, int threads) {
    long blocks = (n + threads - 1) / threads;
    const long cap = 65536;  // a grid-stride loop covers the rest
    return unsigned(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

}  // namespace pd::gpu
