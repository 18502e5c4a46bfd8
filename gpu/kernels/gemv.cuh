// The decode products: y = x W^T for a few rows of x (M <= kGemvMaxRows), a
// warp per output row (calm's matmul). Memory-bound: each warp streams one
// weight row once, 16 bytes per lane per load, and multiplies it with all M
// rows of x, accumulating in f32. matmul.cu's linear_kernel() picks these for
// small M and cuBLAS otherwise; the kernels themselves are in gemv_kernels.cuh.
//
// Shapes: x (M, in) bf16 row-major, y (M, out) f32 row-major.
//   bf16 weights: W (out, in) bf16 row-major.
//   int8 weights: q (out, in) int8 row-major and scales (out, ceil(in / group))
//                 f32, the CPU's QuantizedMatrix as quantize_rows makes it
//                 (src/engine/quantize.hpp): weight (o, k) = q[o, k] * scales[o, k / group].
//
// CPU twins: pd::ref::linear on the same bf16 values (bf16), the engine's int8
// product pd::linear_forward on an int8 Linear (int8); tests/gpu/test_kernels.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace pd::gpu {

// Rows of x one GEMV launch serves: every weight row is read once for all of them.
constexpr int kGemvMaxRows = 4;

// What happens to each output after its dot product d:
//   y = d (+ bias[o]) (+ y, when accumulate: the residual connection folded
//   into the product, cuBLAS's beta = 1 in matmul.cu).
struct GemvEpilogue {
    const float* bias = nullptr;  // (out), or null
    bool accumulate = false;
};

// Whether a row of `in` weights can be read 16 bytes at a time: 8 bf16, or 16
// int8 that never straddle two groups of `group` (a multiple of 16).
bool gemv_bf16_fits(int in);
bool gemv_int8_fits(int in, int group);

// y (M, out) = x (M, in) W^T, then the epilogue. 1 <= M <= kGemvMaxRows,
// gemv_bf16_fits(in). x and W are bf16 bits (pd::bf16).
void gemv_bf16(float* y, const std::uint16_t* x, const std::uint16_t* W, int M, int in, int out,
               GemvEpilogue e, cudaStream_t s);

// The same with int8 weights and their per-group scales; gemv_int8_fits(in, group).
void gemv_int8(float* y, const std::uint16_t* x, const std::int8_t* q, const float* scales, int group,
               int M, int in, int out, GemvEpilogue e, cudaStream_t s);

// Llama's MLP-in product with SwiGLU as its epilogue: W (2F, in) has rows
// [gate | up], [g | u] = x W^T (+ bias (2F)), and h (M, F) = silu(g) * u in
// bf16 (ops.cuh's swiglu), in one launch. h must not overlap x.
void gemv_swiglu_bf16(std::uint16_t* h, const std::uint16_t* x, const std::uint16_t* W, const float* bias,
                      int M, int in, int F, cudaStream_t s);
void gemv_swiglu_int8(std::uint16_t* h, const std::uint16_t* x, const std::int8_t* q, const float* scales,
                      int group, const float* bias, int M, int in, int F, cudaStream_t s);

}  // namespace pd::gpu
