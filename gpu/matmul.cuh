// Matrix products on the GPU: y = x @ W^T + b for every Linear layer, with
// cuBLAS. Mirrors src/engine/matmul.hpp; the CPU twin is pd::ref::linear
// (tests/reference/reference.hpp) and pd::linear_forward.
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
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_check.cuh"

namespace pd::gpu {

struct DeviceLinear {
    int in = 0, out = 0;
    bool bf16 = false;            // weights in bf16 (else f32)
    const void* w = nullptr;      // (out, in) row-major on the device
    const float* bias = nullptr;  // (out), or null

    std::size_t weight_bytes() const { return std::size_t(in) * out * (bf16 ? 2 : 4); }
};

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
// The f32 overload needs f32 weights, the bf16 one bf16 weights.
void linear(const Blas& blas, const DeviceLinear& L, const float* x, int M, float* y,
            bool accumulate = false);
void linear(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, float* y,
            bool accumulate = false);

}  // namespace pd::gpu
