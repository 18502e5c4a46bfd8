// Matrix products on the GPU: y = x @ W^T + b for every Linear layer. Mirrors
// src/engine/matmul.hpp; the CPU twin is pd::ref::linear
// (tests/reference/reference.hpp) and pd::linear_forward. Two kernels, picked
// by linear_kernel() from the rows M, as the CPU picks by kSmallM:
//  - M <= kGemvMaxRows (decode): a warp-per-row GEMV (gemv.cuh) that streams
//    each weight once for all M rows: bf16, or int8 with per-group scales.
//  - larger M (prefill), f32 weights, or rows the GEMV cannot read 16 bytes at
//    a time: cuBLAS, as below.
//
// W is row-major (out, in) on the device, as on the host. cuBLAS is
// column-major, and a row-major (out, in) matrix is the same bytes as a
// column-major (in, out) one, so y^T (out, M) = W (out, in) . x^T (in, M) is
//   cublasGemmEx(op(A) = T on W with lda = in, op(B) = N on x with ldb = in,
//                C = y with ldc = out).
//
// f32 weights: f32 inputs, f32 compute (no TF32), like the CPU.
// bf16 weights: x must be bf16 too (cuBLAS takes one type for A and B); the
// products are accumulated in f32 and y is f32. The kernels that feed a
// product write their output in bf16 directly (see ops.cuh).
// int8 weights: x bf16 as for bf16; the GEMV reads the int8 values and their
// scales, cuBLAS the same weights dequantized to bf16 (uploaded once, see
// gpu/host/cuda_engine.cpp's upload: why both).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_check.cuh"

namespace pd::gpu {

struct DeviceLinear {
    int in = 0, out = 0;
    bool bf16 = false;            // weights in bf16 (else f32); an int8 matrix's copy for cuBLAS is bf16
    const void* w = nullptr;      // (out, in) row-major on the device
    const float* bias = nullptr;  // (out), or null
    // int8 weights, or null: the CPU's QuantizedMatrix (src/engine/quantize.hpp)
    // as it is, weight (o, k) = q[o, k] * scales[o, k / group]; w then holds
    // the same weights dequantized to bf16.
    const std::int8_t* q = nullptr;  // (out, in)
    const float* scales = nullptr;   // (out, ceil(in / group))
    int group = 0;
};

enum class LinearKernel { cublas, gemv_bf16, gemv_int8 };

// The kernel linear() runs for M rows of x: the GEMV of the weights' type for
// 1 <= M <= kGemvMaxRows when its 16-byte loads fit the rows, else cuBLAS.
LinearKernel linear_kernel(const DeviceLinear& L, int M);

// Each Blas's cuBLAS workspace: cuBLAS's recommended size on Hopper, more
// than enough elsewhere (the engine counts it before allocating).
constexpr std::size_t kBlasWorkspaceBytes = std::size_t(32) << 20;

// A cuBLAS handle bound to one stream, with its own workspace: cuBLAS then
// allocates nothing while it runs, which lets its calls be captured in a CUDA
// graph (model.cu does so for decode).
class Blas {
public:
    explicit Blas(cudaStream_t stream);
    ~Blas();
    Blas(const Blas&) = delete;
    Blas& operator=(const Blas&) = delete;

    cublasHandle_t handle() const { return handle_; }
    cudaStream_t stream() const { return stream_; }

private:
    cublasHandle_t handle_ = nullptr;
    cudaStream_t stream_ = nullptr;
    DeviceBuffer<unsigned char> workspace_;
};

// y (M, out) = x (M, in) @ W^T (+ bias). With accumulate, y += x @ W^T (+ bias):
// the residual connection folded into the product (beta = 1).
// The f32 overload needs f32 weights, the bf16 one bf16 or int8 weights.
// linear_kernel() picks the kernel.
void linear(const Blas& blas, const DeviceLinear& L, const float* x, int M, float* y,
            bool accumulate = false);
void linear(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, float* y,
            bool accumulate = false);

// Llama's MLP-in product and SwiGLU: h (M, F) bf16 = swiglu(x W^T (+ bias)),
// W (2F, in) with rows [gate | up], bf16 or int8 weights. Where linear_kernel()
// picks a GEMV, one launch with SwiGLU in its epilogue (gemv.cuh); else
// linear() into gate_up (M, 2F) f32, then ops.cuh's swiglu. h must not overlap x.
void linear_swiglu(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, std::uint16_t* h,
                   float* gate_up);

// linear()'s cuBLAS path whatever M (bf16 weights, or an int8 matrix's bf16
// copy): for the harnesses that time it against the GEMV.
void linear_cublas(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, float* y,
                   bool accumulate = false);

}  // namespace pd::gpu
