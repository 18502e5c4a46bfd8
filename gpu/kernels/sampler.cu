// argmax on the device; the CPU twin is pd::argmax (src/engine/sampler.cpp).
#include "sampler.cuh"

#include <climits>

#include "common.cuh"
#include "cuda_check.cuh"

namespace pd::gpu {

namespace {

constexpr int kArgmaxThreads = 1024;

// A candidate: a logit and its index. NaN logits never become candidates,
// so that `better` is a total order: the larger value, then the lower index.
struct Best {
    float v;
    int i;
};

__device__ __forceinline__ Best better(Best a, Best b) { return b.v > a.v || (b.v == a.v && b.i < a.i) ? b : a; }

// The best candidate over the warp; every lane gets it.
__device__ __forceinline__ Best warp_best(Best b) {
    for (int o = kWarp / 2; o > 0; o /= 2)
        b = better(b, Best{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)});
    return b;
}

__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(int* out, const float* logits, int n) {
    __shared__ Best partial[kWarp];
    const float* row = logits + std::size_t(blockIdx.x) * n;
    const Best none{-INFINITY, INT_MAX};  // loses to every logit, -inf included
    Best b = none;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (!isnan(row[i])) b = better(b, Best{row[i], i});
    b = warp_best(b);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    if (lane == 0) partial[warp] = b;
    __syncthreads();
    if (warp != 0) return;
    b = warp_best(lane < int(blockDim.x / kWarp) ? partial[lane] : none);
    // pd::argmax starts at index 0 and moves only to a larger logit: a NaN
    // there, or no number in the row at all, leaves it at 0.
    if (lane == 0) out[blockIdx.x] = isnan(row[0]) || b.i == INT_MAX ? 0 : b.i;
}

}  // namespace

void argmax(int* out, const float* logits, int rows, int n, cudaStream_t s) {
    PD_GPU_REQUIRE(rows >= 0 && n >= 1);
    if (rows == 0) return;
    argmax_kernel<<<rows, kArgmaxThreads, 0, s>>>(out, logits, n);
    PD_CUDA_LAUNCHED();
}

}  // namespace pd::gpu
