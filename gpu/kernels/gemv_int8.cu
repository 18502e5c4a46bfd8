// The int8 decode product (gemv.cuh): gemv_kernels.cuh's gemv_kernel on Int8Weights.
#include "gemv.cuh"

#include "cuda_check.cuh"
#include "gemv_kernels.cuh"

namespace pd::gpu {

// Groups of a power of two times 16 (the CPU's are 32, 64 or 128), so that a
// 16-byte chunk never straddles two of them.
bool gemv_int8_fits(int in, int group) {
    return in > 0 && in % 16 == 0 && group >= 16 && (group & (group - 1)) == 0;
}

void gemv_int8(float* y, const std::uint16_t* x, const std::int8_t* q, const float* scales, int group,
               int M, int in, int out, GemvEpilogue e, cudaStream_t s) {
    PD_GPU_REQUIRE(M >= 1 && M <= kGemvMaxRows && gemv_int8_fits(in, group) && out >= 0);
    if (out == 0) return;
    const Int8Weights w = int8_weights(q, scales, group, in);
    with_rows(M, [&](auto rows) {
        gemv_kernel<decltype(rows)::value, kGemvLoads><<<gemv_blocks(out), kGemvThreads, 0, s>>>(y, as_bf16(x), w, out, e);
    });
    PD_CUDA_LAUNCHED();
}

void gemv_swiglu_int8(std::uint16_t* h, const std::uint16_t* x, const std::int8_t* q, const float* scales,
                      int group, const float* bias, int M, int in, int F, cudaStream_t s) {
    PD_GPU_REQUIRE(M >= 1 && M <= kGemvMaxRows && gemv_int8_fits(in, group) && F >= 0);
    if (F == 0) return;
    const Int8Weights w = int8_weights(q, scales, group, in);
    with_rows(M, [&](auto rows) {
        gemv_swiglu_kernel<decltype(rows)::value, kGemvLoads>
            <<<gemv_blocks(F), kGemvThreads, 0, s>>>(as_bf16(h), as_bf16(x), w, bias, F);
    });
    PD_CUDA_LAUNCHED();
}

}  // namespace pd::gpu
