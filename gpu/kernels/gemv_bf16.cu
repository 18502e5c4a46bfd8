// The bf16 decode product (gemv.cuh): gemv_kernels.cuh's gemv_kernel on Bf16Weights.
#include "gemv.cuh"

#include "cuda_check.cuh"
#include "gemv_kernels.cuh"

namespace pd::gpu {

bool gemv_bf16_fits(int in) { return in > 0 && in % 8 == 0; }

void gemv_bf16(float* y, const std::uint16_t* x, const std::uint16_t* W, int M, int in, int out,
               GemvEpilogue e, cudaStream_t s) {
    PD_GPU_REQUIRE(M >= 1 && M <= kGemvMaxRows && gemv_bf16_fits(in) && out >= 0);
    if (out == 0) return;
    with_rows(M, [&](auto rows) {
        gemv_kernel<decltype(rows)::value, kGemvLoads>
            <<<gemv_blocks(out), kGemvThreads, 0, s>>>(y, as_bf16(x), Bf16Weights{as_bf16(W), in}, out, e);
    });
    PD_CUDA_LAUNCHED();
}

void gemv_swiglu_bf16(std::uint16_t* h, const std::uint16_t* x, const std::uint16_t* W, const float* bias,
                      int M, int in, int F, cudaStream_t s) {
    PD_GPU_REQUIRE(M >= 1 && M <= kGemvMaxRows && gemv_bf16_fits(in) && F >= 0);
    if (F == 0) return;
    with_rows(M, [&](auto rows) {
        gemv_swiglu_kernel<decltype(rows)::value, kGemvLoads>
            <<<gemv_blocks(F), kGemvThreads, 0, s>>>(as_bf16(h), as_bf16(x), Bf16Weights{as_bf16(W), in}, bias, F);
    });
    PD_CUDA_LAUNCHED();
}

}  // namespace pd::gpu
