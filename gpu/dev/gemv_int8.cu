// The products of one int8 decode step at batch 1 (M = 1) (llm.c dev/cuda
// style): y (out) = W (out, in) . x (in), W int8 with one f32 scale per group
// of G inputs (the CPU's format, src/engine/quantize.hpp), x bf16, y f32: the
// shapes and format of gpu/kernels/gemv.cuh's gemv_int8. Memory-bound: the time to
// beat is the int8 bytes and their scales over the copy bandwidth, about half
// of bf16's (gemv_bf16 times that one).
//
//   version 1  thread per output row, one weight at a time: no load is
//              coalesced (the simplest kernel, and a second check of the twin).
//   version 2  warp per output row, 16 weights per 16-byte load, 4 loads in
//              flight per lane, int8 turned into f32 with __byte_perm: the
//              engine's kernel (gpu/kernels/gemv_kernels.cuh).
//
// Each version is checked on every output of each distinct shape against the
// CPU twin (double, the same int8 values, scales and bf16 inputs) before it
// is timed (gemv_step.cuh).
//
//   gemv_int8 [--version 0|1|2] [--group 64] [--dim 2048] [--hidden 8192] [--qkv 3072]
//             [--vocab 128256] [--layers 16] [--repeats 10] [--bandwidth-gbs X]
// The defaults are synthetic:llama-1b's shapes at group size 64. Exits 77
// without a GPU.
#include "gemv_step.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "gemv_kernels.cuh"

namespace {

using bf16 = __nv_bfloat16;

// One product of the step: int8 weights and scales on the device, input and output.
struct Product {
    const char* name;
    int in = 0, out = 0, group = 0;
    std::int8_t* q = nullptr;  // (out, in)
    float* scales = nullptr;   // (out, groups())
    bf16* x = nullptr;
    float* y = nullptr;

    int groups() const { return (in + group - 1) / group; }
};

// --- version 1 -------------------------------------------------------------------
__global__ void gemv_int8_v1(float* y, const std::int8_t* q, const float* scales, int group, const bf16* x,
                             int in, int out) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out) return;
    const std::int8_t* row = q + std::size_t(o) * in;
    const float* s = scales + std::size_t(o) * ((in + group - 1) / group);
    float acc = 0.0f;
    for (int i = 0; i < in; i++) acc += float(row[i]) * s[i / group] * __bfloat162float(x[i]);
    y[o] = acc;
}

// --- the CPU twin ----------------------------------------------------------------
// y = sum over groups of scale * (q . x) in double, from the kernels' own values.
std::vector<float> reference_gemv(const Product& p) {
    const std::vector<std::int8_t> q = dev::to_host(p.q, std::size_t(p.out) * p.in);
    const std::vector<float> s = dev::to_host(p.scales, std::size_t(p.out) * p.groups());
    const std::vector<bf16> x = dev::to_host(p.x, p.in);
    std::vector<float> y(p.out);
    for (int o = 0; o < p.out; o++) {
        double acc = 0;
        for (int i = 0; i < p.in; i++)
            acc += double(q[std::size_t(o) * p.in + i]) * s[std::size_t(o) * p.groups() + i / p.group] *
                   __bfloat162float(x[i]);
        y[o] = float(acc);
    }
    return y;
}

std::vector<dev::Version<Product>> versions() {
    return {
        {1, "1 thread per row", [](const Product& p) {
             gemv_int8_v1<<<(p.out + 127) / 128, 128>>>(p.y, p.q, p.scales, p.group, p.x, p.in, p.out);
         }},
        {2, "2 warp per row, 4 x 16 bytes in flight (engine)", [](const Product& p) {
             using namespace pd::gpu;
             const Int8Weights w = int8_weights(p.q, p.scales, p.group, p.in);
             gemv_kernel<1, kGemvLoads><<<gemv_blocks(p.out), kGemvThreads>>>(p.y, p.x, w, p.out, GemvEpilogue{});
         }},
    };
}

}  // namespace

const char* const kHelp = R"(gemv_int8: one int8 decode step's products at M = 1, validated then timed.
  --version V    0 = all (default), 1 thread per row, 2 warp per row (the engine's)
  --group G      inputs per scale: 32, 64 (default) or 128
)";

int main(int argc, char** argv) {
    dev::Args args{argc, argv, std::string(kHelp) + dev::kStepHelp};
    args.maybe_help();
    const int group = int(args.get("--group", 64));
    if (group != 32 && group != 64 && group != 128) {
        std::fprintf(stderr, "gemv_int8: --group must be 32, 64 or 128, as the engine's int8 precisions\n");
        return 2;
    }
    dev::StepRun run = dev::start_step(args, "gemv_int8", 16);
    // Weights in [-127, 127] and scales of about 0.05 / 127, the size of the
    // bf16 harness's weights (the kernel does not mind a scale's sign).
    const std::vector<Product> step =
        dev::make_step<Product>(run.shapes, [&](const char* name, int out, int in, unsigned seed) {
            Product p{name, in, out, group};
            p.q = dev::device_hashed<std::int8_t>(std::size_t(out) * in, seed, 127.0f);
            p.scales = dev::device_hashed<float>(std::size_t(out) * p.groups(), seed + 1000, 0.05f / 127);
            p.x = run.x, p.y = run.y;
            return p;
        });
    DEV_CHECK(cudaDeviceSynchronize());
    std::vector<std::vector<float>> refs;
    for (const Product& p : dev::distinct_shapes(step)) refs.push_back(reference_gemv(p));

    double bytes = 0, flops = 0;
    for (const Product& p : step) {
        bytes += double(p.out) * p.in + 4.0 * p.out * p.groups() + 2.0 * p.in + 4.0 * p.out;
        flops += 2.0 * p.out * double(p.in);
    }
    std::printf("int8 GEMV (group %d), M = 1: %d layers + head\n", group, run.shapes.layers);
    const bool ok = dev::run_versions<Product>("gemv_int8", versions(), run, step, refs, 1e-3f, 1e-3f, bytes, flops);
    for (const Product& p : step) {
        cudaFree(p.q);
        cudaFree(p.scales);
    }
    run.release();
    return ok ? 0 : 1;
}
