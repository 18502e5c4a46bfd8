// cuBLAS GEMMs for the Linear layers; the CPU twin is src/engine/matmul.cpp.
#include "matmul.cuh"

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

void linear(const Blas& blas, const DeviceLinear& L, const std::uint16_t* x, int M, float* y,
            bool accumulate) {
    PD_GPU_REQUIRE(L.bf16);
    gemm(blas, L, x, CUDA_R_16BF, M, y, accumulate);
}

}  // namespace pd::gpu
