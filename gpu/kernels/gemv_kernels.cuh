// The warp-per-row GEMV kernels behind gemv.cuh's launchers (nvcc only).
// gpu/dev/gemv_bf16.cu and gpu/dev/gemv_int8.cu include this header too and
// time these very kernels against their alternatives.
//
// One warp per output row o, 8 warps (rows) per block. Each lane reads 16
// bytes of the weight row per load, the warp 512 contiguous bytes, LOADS
// loads in flight per lane before the first use (a memory-bound kernel needs
// many bytes in flight to cover HBM's latency with few warps per SM). Each
// weight chunk is multiplied with all M rows of x before the next one is
// read, so the weights are streamed once for M rows. A warp sum ends the
// row; lane 0 writes the M outputs through the epilogue.
//
// Weights are read once: __ldcs streams them past L1 and marks them
// evict-first in L2, leaving the caches to x, which every warp reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>

#include "common.cuh"
#include "gemv.cuh"
#include "int8_unpack.cuh"

namespace pd::gpu {

constexpr int kGemvRowsPerBlock = 8;  // warps per block, one output row each
constexpr int kGemvThreads = kGemvRowsPerBlock * kWarp;
constexpr int kGemvLoads = 4;         // the engine's loads in flight per lane (the harness also times 1)

inline unsigned gemv_blocks(int out) { return unsigned((out + kGemvRowsPerBlock - 1) / kGemvRowsPerBlock); }

// Calls launch(std::integral_constant<int, M>) for the run-time M in
// 1..kGemvMaxRows: the kernels take the rows as a template argument, so that
// the M accumulators live in registers.
template <typename Launch>
void with_rows(int M, Launch&& launch) {
    static_assert(kGemvMaxRows == 4, "one case per row count");
    switch (M) {
        case 1: launch(std::integral_constant<int, 1>{}); break;
        case 2: launch(std::integral_constant<int, 2>{}); break;
        case 3: launch(std::integral_constant<int, 3>{}); break;
        case 4: launch(std::integral_constant<int, 4>{}); break;
    }
}

// y = d (+ bias[o]) (+ y): the epilogue of one output.
__device__ __forceinline__ void gemv_store(float* y, float d, int o, const GemvEpilogue& e) {
    if (e.bias) d += e.bias[o];
    if (e.accumulate) d += *y;
    *y = d;
}

// Calls use(chunk, c) for this lane's 16-byte chunks c = lane, lane + 32, ...
// (c < n) of a weight row w, LOADS loads in flight before the first use.
template <int LOADS, typename Use>
__device__ __forceinline__ void stream_chunks(const uint4* w, int n, Use&& use) {
    int i = threadIdx.x % kWarp;
    for (; i + (LOADS - 1) * kWarp < n; i += LOADS * kWarp) {
        uint4 wk[LOADS];
#pragma unroll
        for (int k = 0; k < LOADS; k++) wk[k] = __ldcs(&w[i + k * kWarp]);
#pragma unroll
        for (int k = 0; k < LOADS; k++) use(wk[k], i + k * kWarp);
    }
    for (; i < n; i += kWarp) use(__ldcs(&w[i]), i);  // the last chunks, fewer than LOADS per lane
}

// The dot product of 8 bf16 weights and 8 bf16 inputs, packed in 16 bytes each.
__device__ __forceinline__ float dot8_bf16(const uint4& w, const uint4& x) {
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&w);
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&x);
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 a = __bfloat1622float2(w2[k]), b = __bfloat1622float2(x2[k]);
        acc = fmaf(a.x, b.x, acc);
        acc = fmaf(a.y, b.y, acc);
    }
    return acc;
}

// bf16 weights: W (out, in), in % 8 == 0 (16-byte aligned rows).
struct Bf16Weights {
    const __nv_bfloat16* W;
    int in;

    // acc[m] += this lane's share of (row o of W) . (row m of x), x (M, in):
    // its 16-byte chunks of the row (stream_chunks).
    template <int M, int LOADS>
    __device__ __forceinline__ void dot(float (&acc)[M], const __nv_bfloat16* x, int o) const {
        const int n = in / 8;  // 16-byte chunks in a row of W, and in each row of x
        const uint4* xv = reinterpret_cast<const uint4*>(x);
        stream_chunks<LOADS>(reinterpret_cast<const uint4*>(W) + std::size_t(o) * n, n, [&](const uint4& wk, int c) {
#pragma unroll
            for (int m = 0; m < M; m++) acc[m] += dot8_bf16(wk, xv[std::size_t(m) * n + c]);
        });
    }
};

// f (16 weights) . 16 bf16 inputs: x0 holds k 0-7, x1 k 8-15.
__device__ __forceinline__ float dot16_int8(const float (&f)[16], const uint4& x0, const uint4& x1) {
    const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&x0);
    const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x1);
    float acc = 0.0f;
#pragma unroll
    for (int p = 0; p < 8; p++) {  // input pair p: k = 2p, 2p + 1
        const float2 v = __bfloat1622float2(p < 4 ? a[p] : b[p - 4]);
        acc = fmaf(f[2 * p], v.x, acc);
        acc = fmaf(f[2 * p + 1], v.y, acc);
    }
    return acc;
}

// int8 weights: q (out, in), scales (out, groups), in % 16 == 0, and a group
// of 16 << group_shift inputs: a 16-byte chunk c of a row lies in group
// int8_chunk_group(c, group_shift). Each chunk's 16 products are summed, then scaled.
struct Int8Weights {
    const std::int8_t* q;
    const float* scales;
    int group_shift, groups, in;

    // As Bf16Weights::dot: this lane's chunks of (row o) . (row m of x).
    template <int M, int LOADS>
    __device__ __forceinline__ void dot(float (&acc)[M], const __nv_bfloat16* x, int o) const {
        const int n = in / 16;  // 16-byte chunks in a row of q; a row of x has 2n
        const float* s = scales + std::size_t(o) * groups;
        const uint4* xv = reinterpret_cast<const uint4*>(x);
        stream_chunks<LOADS>(reinterpret_cast<const uint4*>(q) + std::size_t(o) * n, n, [&](const uint4& wk, int c) {
            float f[16];
            int8x16_to_float(wk, f);
            const float scale = s[int8_chunk_group(c, group_shift)];
#pragma unroll
            for (int m = 0; m < M; m++) {
                const uint4* xr = xv + std::size_t(m) * 2 * n + 2 * c;
                acc[m] = fmaf(scale, dot16_int8(f, xr[0], xr[1]), acc[m]);
            }
        });
    }
};

// The Int8Weights of q (out, in) and scales in groups of `group` (gemv_int8_fits).
inline Int8Weights int8_weights(const std::int8_t* q, const float* scales, int group, int in) {
    return {q, scales, int8_group_shift(group), (in + group - 1) / group, in};
}

// Warp per output row: y (M, out) = x W^T (x (M, in) bf16), then the epilogue.
// Weights: Bf16Weights or Int8Weights.
template <int M, int LOADS, typename Weights>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(float* y, const __nv_bfloat16* x, Weights w, int out, GemvEpilogue e) {
    const int lane = threadIdx.x % kWarp;
    const int o = blockIdx.x * kGemvRowsPerBlock + threadIdx.x / kWarp;
    if (o >= out) return;  // the whole warp leaves together: o is the warp's
    float acc[M] = {};
    w.template dot<M, LOADS>(acc, x, o);
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = warp_sum(acc[m]);
    if (lane == 0)
#pragma unroll
        for (int m = 0; m < M; m++) gemv_store(y + std::size_t(m) * out + o, acc[m], o, e);
}

// Llama's MLP-in product with SwiGLU as its epilogue: W's rows are [gate | up]
// (2F, in); warp o < F computes gate row o and up row F + o, and writes
// h (M, F) = silu(gate) * up in bf16 (ops.cu's swiglu, the same math), the
// MLP-out product's input. One launch and no f32 (M, 2F) round trip, instead
// of the product and a swiglu launch. bias (2F) or null.
template <int M, int LOADS, typename Weights>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_swiglu_kernel(__nv_bfloat16* h, const __nv_bfloat16* x, Weights w, const float* bias, int F) {
    const int lane = threadIdx.x % kWarp;
    const int o = blockIdx.x * kGemvRowsPerBlock + threadIdx.x / kWarp;
    if (o >= F) return;  // the whole warp leaves together: o is the warp's
    float gate[M] = {}, up[M] = {};
    w.template dot<M, LOADS>(gate, x, o);
    w.template dot<M, LOADS>(up, x, F + o);
#pragma unroll
    for (int m = 0; m < M; m++) gate[m] = warp_sum(gate[m]), up[m] = warp_sum(up[m]);
    if (lane != 0) return;
#pragma unroll
    for (int m = 0; m < M; m++) {
        const float g = gate[m] + (bias ? bias[o] : 0.0f), u = up[m] + (bias ? bias[F + o] : 0.0f);
        h[std::size_t(m) * F + o] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
    }
}

}  // namespace pd::gpu
