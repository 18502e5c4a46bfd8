// The Linear layers: the GEMV for decode's few rows, cuBLAS GEMMs for the
// rest (matmul.cuh); the CPU twin is src/engine/matmul.cpp.
#include "matmul.cuh"

#include "gemv.cuh"
#include "ops.cuh"

namespace pd::gpu {

namespace {

void gemm(const Blas& blas, const DeviceLinear& L, const void* x, cudaDataType xtype, int M,
          float* y, bool accumulate) {
    PD_GPU_REQUIRE(L.w != nullptr && M >= 0);
    if (M == 0) return;
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    const cudaDataType wtype = L.bf16 ? CUDA_R_16BF : CUDA_R_32F;
    // Column-major: y^T (out x M) = [W as (in x out)]^T . x^T (in x M); see matmul.cuh.
    PD_CUBLAS(cublasGemmEx(blas.handle(), CUBLAS_OP_T, CUBLAS_OP_N, L.out, M, L.in, &alpha, L.w,
                           wtype, L.in, x, xtype, L.in, &beta, y, CUDA_R_32F, L.out,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (L.bias) add_bias(y, L.bias, M, L.out, blas.stream());
}

}  // namespace

Blas::Blas(cudaStream_t stream) : stream_(stream) {
    PD_CUBLAS(cublasCreate(&handle_));
    try {
        PD_CUBLAS(cublasSetStream(handle_, stream_));
        workspace_.resize(kBlasWorkspaceBytes);
        PD_CUBLAS(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
    } catch (...) {
        cublasDestroy(handle_);
        throw;
    }
}

Blas::~Blas() {
    if (handle_) cublasDestroy(handle_);
}

void linear(const Blas& blas, const DeviceLinear& L, const float* x, int M, float* y, bool accumulate) {
    PD_GPU_REQUIRE(!L.bf16);
    gemm(blas, L, x, CUDA_R_32F, M, y, accumulate);
}

LinearKernel linear_kernel(const DeviceLinear& L, int M) {
    if (!L.bf16 || M < 1 || M > kGemvMaxRows) return LinearKernel::cublas;
    if (L.q) return gemv_int8_fits(L.in, L.group) ? LinearKernel::gemv_int8 : LinearKernel::cublas;
    return gemv_bf16_fits(L.in) ? LinearKernel::gemv_bf16 : LinearKernel::cublas;
}

void linear(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, float* y,
            bool accumulate) {
    PD_GPU_REQUIRE(L.bf16);
    const GemvEpilogue e{L.bias, accumulate};
    switch (linear_kernel(L, M)) {
        case LinearKernel::gemv_int8:
            gemv_int8(y, x, L.q, L.scales, L.group, M, L.in, L.out, e, blas.stream());
            break;
        case LinearKernel::gemv_bf16:
            gemv_bf16(y, x, static_cast<const std::uint16_t*>(L.w), M, L.in, L.out, e, blas.stream());
            break;
        case LinearKernel::cublas:
            linear_cublas(blas, L, x, M, y, accumulate);
            break;
    }
}

void linear_swiglu(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, std::uint16_t* h,
                   float* gate_up) {
    PD_GPU_REQUIRE(L.bf16 && L.out % 2 == 0);
    const int F = L.out / 2;
    switch (linear_kernel(L, M)) {
        case LinearKernel::gemv_int8:
            gemv_swiglu_int8(h, x, L.q, L.scales, L.group, L.bias, M, L.in, F, blas.stream());
            break;
        case LinearKernel::gemv_bf16:
            gemv_swiglu_bf16(h, x, static_cast<const std::uint16_t*>(L.w), L.bias, M, L.in, F, blas.stream());
            break;
        case LinearKernel::cublas:
            linear_cublas(blas, L, x, M, gate_up);
            swiglu(h, gate_up, M, F, blas.stream());
            break;
    }
}

void linear_cublas(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, float* y,
                   bool accumulate) {
    PD_GPU_REQUIRE(L.bf16);
    gemm(blas, L, x, CUDA_R_16BF, M, y, accumulate);
}

}  // namespace pd::gpu
