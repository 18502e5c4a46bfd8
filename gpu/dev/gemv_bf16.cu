// The products of one bf16 decode step at batch 1 (M = 1), step by step
// (llm.c dev/cuda style): y (out) = W (out, in) . x (in), W and x bf16,
// accumulated and written in f32, the shapes of gpu/kernels/matmul.cuh's linear().
// Memory-bound: every weight is read once for two FLOPs, so the time to beat
// is weight bytes / copy bandwidth.
//
//   version 1  thread per output row, one bf16 at a time: each thread walks a
//              row of its own, so neighbouring threads read addresses `in`
//              apart and no load is coalesced.
//   version 2  warp per output row (calm's matmul): each lane reads 16 bytes
//              (8 weights) per step, the warp 512 contiguous bytes of the row,
//              and x likewise; a warp sum ends the row.
//   version 3  version 2 with 4 independent 16-byte loads in flight per lane
//              before the first use: more bytes in flight per warp, which a
//              memory-bound kernel needs when a few warps per SM must cover
//              the latency of HBM. The engine's decode product.
//   version 4  cublasGemmEx with M = 1 (what the engine ran before the GEMV,
//              and still runs for more than gpu/kernels/gemv.cuh's kGemvMaxRows rows).
// Versions 2 and 3 are the engine's kernel (gpu/kernels/gemv_kernels.cuh) with 1 and 4
// loads in flight.
//
// Each version is checked on every output of each distinct shape against a
// CPU twin (double, the same bf16 inputs) with |got - ref| <= atol + rtol |ref|,
// its output poisoned (NaN) before, BEFORE it is timed (gemv_step.cuh). The
// timed run is one decode step's products for --layers layers plus the head
// (the 1B model has 2.47 GB of them, 40 times the L2, so no run is served
// from the cache).
//
//   gemv_bf16 [--version 0|1|2|3|4] [--dim 2048] [--hidden 8192] [--qkv 3072]
//             [--vocab 128256] [--layers 16] [--repeats 10] [--bandwidth-gbs X]
// The defaults are synthetic:llama-1b's shapes. --bandwidth-gbs: the copy
// bandwidth gpu/dev/bandwidth measured (else the card's clock-derived peak).
// Exits 77 without a GPU.
#include "gemv_step.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "gemv_kernels.cuh"
#include "matmul.cuh"

namespace {

using bf16 = __nv_bfloat16;

// --- version 1 -------------------------------------------------------------------
__global__ void gemv_v1(float* y, const bf16* W, const bf16* x, int in, int out) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out) return;
    const bf16* row = W + std::size_t(o) * in;
    float acc = 0.0f;
    for (int i = 0; i < in; i++) acc += __bfloat162float(row[i]) * __bfloat162float(x[i]);
    y[o] = acc;
}

// One product of the step: a weight matrix on the device, its input and output.
struct Product {
    const char* name;
    int in = 0, out = 0;
    bf16* W = nullptr;
    bf16* x = nullptr;
    float* y = nullptr;
};

// --- the CPU twin ----------------------------------------------------------------
// y = W x in double, from the same bf16 values the kernels read.
std::vector<float> reference_gemv(const Product& p) {
    const std::vector<bf16> W = dev::to_host(p.W, std::size_t(p.out) * p.in), x = dev::to_host(p.x, p.in);
    std::vector<float> y(p.out);
    for (int o = 0; o < p.out; o++) {
        double acc = 0;
        for (int i = 0; i < p.in; i++) acc += double(__bfloat162float(W[std::size_t(o) * p.in + i])) * __bfloat162float(x[i]);
        y[o] = float(acc);
    }
    return y;
}

std::vector<dev::Version<Product>> versions(const pd::gpu::Blas& blas) {
    using pd::gpu::Bf16Weights, pd::gpu::GemvEpilogue, pd::gpu::gemv_blocks, pd::gpu::gemv_kernel,
        pd::gpu::kGemvLoads, pd::gpu::kGemvThreads;
    return {
        {1, "1 thread per row", [](const Product& p) {
             gemv_v1<<<(p.out + 127) / 128, 128>>>(p.y, p.W, p.x, p.in, p.out);
         }},
        {2, "2 warp per row, 16-byte loads (calm)", [](const Product& p) {
             gemv_kernel<1, 1><<<gemv_blocks(p.out), kGemvThreads>>>(p.y, p.x, Bf16Weights{p.W, p.in}, p.out,
                                                                      GemvEpilogue{});
         }},
        {3, "3 warp per row, 4 x 16 bytes in flight (engine)", [](const Product& p) {
             gemv_kernel<1, kGemvLoads><<<gemv_blocks(p.out), kGemvThreads>>>(p.y, p.x, Bf16Weights{p.W, p.in},
                                                                               p.out, GemvEpilogue{});
         }},
        {4, "4 cublasGemmEx, M = 1", [&blas](const Product& p) {
             pd::gpu::DeviceLinear L;
             L.in = p.in, L.out = p.out, L.bf16 = true, L.w = p.W;
             pd::gpu::linear_cublas(blas, L, reinterpret_cast<const std::uint16_t*>(p.x), 1, p.y);
         }},
    };
}

}  // namespace

const char* const kHelp = R"(gemv_bf16: one bf16 decode step's products at M = 1, validated then timed.
  --version V    0 = all (default), 1 thread per row, 2 warp per row, 3 warp per row
                 with 4 loads in flight (the engine's), 4 cuBLAS
)";

int main(int argc, char** argv) {
    dev::Args args{argc, argv, std::string(kHelp) + dev::kStepHelp};
    args.maybe_help();
    dev::StepRun run = dev::start_step(args, "gemv_bf16", 8);
    const std::vector<Product> step =
        dev::make_step<Product>(run.shapes, [&](const char* name, int out, int in, unsigned seed) {
            return Product{name, in, out, dev::device_hashed<bf16>(std::size_t(out) * in, seed, 0.05f), run.x, run.y};
        });
    DEV_CHECK(cudaDeviceSynchronize());
    std::vector<std::vector<float>> refs;
    for (const Product& p : dev::distinct_shapes(step)) refs.push_back(reference_gemv(p));

    double bytes = 0, flops = 0;
    for (const Product& p : step) {
        bytes += 2.0 * p.out * double(p.in) + 2.0 * p.in + 4.0 * p.out;
        flops += 2.0 * p.out * double(p.in);
    }
    std::printf("bf16 GEMV, M = 1: %d layers + head\n", run.shapes.layers);
    pd::gpu::Blas blas(nullptr);  // the default stream, which the timing events use
    const bool ok = dev::run_versions<Product>("gemv", versions(blas), run, step, refs, 1e-3f, 1e-3f, bytes, flops);
    for (const Product& p : step) cudaFree(p.W);
    run.release();
    return ok ? 0 : 1;
}
