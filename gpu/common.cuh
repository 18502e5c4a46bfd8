// Device-side helpers shared by the .cu files (nvcc only): reductions, bf16
// stores, launch sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace pd::gpu {

constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum of v over the whole block (blockDim.x a multiple of 32, at most 1024).
// Every thread gets the total. Safe to call several times in a row.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[kWarp];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < int(blockDim.x / kWarp) ? partial[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) partial[0] = t;
    }
    __syncthreads();
    float total = partial[0];
    __syncthreads();  // everyone has read partial[0] before a next call overwrites it
    return total;
}

// Maximum of v over the whole block; same rules as block_sum.
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[kWarp];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    v = warp_max(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < int(blockDim.x / kWarp) ? partial[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) partial[0] = t;
    }
    __syncthreads();
    float total = partial[0];
    __syncthreads();
    return total;
}

// Stores a float as float or as bf16 (round to nearest even).
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

inline __nv_bfloat16* as_bf16(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }
inline const __nv_bfloat16* as_bf16(const std::uint16_t* p) {
    return reinterpret_cast<const __nv_bfloat16*>(p);
}

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(long n, int threads) {
    long blocks = (n + threads - 1) / threads;
    const long cap = 65536;  // a grid-stride loop covers the rest
    return unsigned(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

}  // namespace pd::gpu
