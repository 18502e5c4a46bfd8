// The products of one bf16 decode step at batch 1 (M = 1), step by step
// (llm.c dev/cuda style): y (out) = W (out, in) . x (in), W and x bf16,
// accumulated and written in f32, the shapes of gpu/matmul.cuh's linear().
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
//              the latency of HBM.
//   version 4  cublasGemmEx with M = 1 (pd::gpu::linear: what the engine runs today).
//
// Each version is checked on every output of each distinct shape against a
// CPU twin (double, the same bf16 inputs) with |got - ref| <= atol + rtol |ref|,
// its output poisoned (NaN) before, BEFORE it is timed. The timed run is one
// decode step's products for --layers layers plus the head (the 1B model has
// 2.47 GB of them, 40 times the L2, so no run is served from the cache).
//
//   gemv_bf16 [--version 0|1|2|3|4] [--dim 2048] [--hidden 8192] [--qkv 3072]
//             [--vocab 128256] [--layers 16] [--repeats 10] [--bandwidth-gbs X]
// The defaults are synthetic:llama-1b's shapes. --bandwidth-gbs: the copy
// bandwidth gpu/dev/bandwidth measured (else the card's clock-derived peak).
// Exits 77 without a GPU.
#include "dev_common.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "common.cuh"
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

// --- versions 2 and 3 ----------------------------------------------------------------
// The dot product of 8 bf16 weights and 8 bf16 inputs packed in 16 bytes each.
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x) {
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&w);
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&x);
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 a = __bfloat1622float2(w2[k]), b = __bfloat1622float2(x2[k]);
        acc = fmaf(a.x, b.x, acc);
        acc = fmaf(a.y, b.y, acc);
    }
    return acc;
}

constexpr int kRowsPerBlock = 8;  // warps per block, one output row each

// Warp per row, LOADS 16-byte loads of W per lane in flight at a time. Rows
// are `in` bf16 long, in % 8 == 0, so every row starts 16-byte aligned.
// Weights are read once: __ldcs streams them past L1 and marks them evict-first
// in L2, leaving the cache to x, which every warp reads.
template <int LOADS>
__global__ void gemv_warp_row(float* y, const bf16* W, const bf16* x, int in, int out) {
    const int lane = threadIdx.x % pd::gpu::kWarp;
    const int o = blockIdx.x * kRowsPerBlock + threadIdx.x / pd::gpu::kWarp;
    if (o >= out) return;  // the whole warp leaves together: o is the warp's
    const uint4* w = reinterpret_cast<const uint4*>(W + std::size_t(o) * in);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const int n = in / 8, step = pd::gpu::kWarp * LOADS;
    float acc = 0.0f;
    int i = lane;
    for (; i + (LOADS - 1) * pd::gpu::kWarp < n; i += step) {
        uint4 wk[LOADS];
#pragma unroll
        for (int k = 0; k < LOADS; k++) wk[k] = __ldcs(&w[i + k * pd::gpu::kWarp]);
#pragma unroll
        for (int k = 0; k < LOADS; k++) acc += dot8(wk[k], xv[i + k * pd::gpu::kWarp]);
    }
    for (; i < n; i += pd::gpu::kWarp) acc += dot8(__ldcs(&w[i]), xv[i]);
    acc = pd::gpu::warp_sum(acc);
    if (lane == 0) y[o] = acc;
}

// Fills n bf16 values with a hash of (seed, index) scaled to [-scale, scale):
// gigabytes of weights in milliseconds, where the host would need seconds.
__global__ void fill_bf16(bf16* p, std::size_t n, unsigned seed, float scale) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        std::uint32_t h = std::uint32_t(i) * 2654435761u ^ std::uint32_t(i >> 32) * 40503u ^ seed * 2246822519u;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        p[i] = __float2bfloat16_rn(scale * (float(h) * (2.0f / 4294967296.0f) - 1.0f));
    }
}

// --- the CPU twin ----------------------------------------------------------------
// y = W x in double, from the same bf16 values the kernels read.
std::vector<float> reference_gemv(const std::vector<bf16>& W, const std::vector<bf16>& x, int in, int out) {
    std::vector<float> y(out);
    for (int o = 0; o < out; o++) {
        double acc = 0;
        for (int i = 0; i < in; i++) acc += double(__bfloat162float(W[std::size_t(o) * in + i])) * __bfloat162float(x[i]);
        y[o] = float(acc);
    }
    return y;
}

// One product of the step: a weight matrix on the device, its input and output.
struct Product {
    const char* name;
    int in = 0, out = 0;
    bf16* W = nullptr;
    bf16* x = nullptr;
    float* y = nullptr;
};

using Launcher = std::function<void(const Product&)>;

struct Version {
    int number;
    const char* name;
    Launcher launch;
};

bf16* device_bf16(std::size_t n, unsigned seed, float scale) {
    bf16* p = nullptr;
    DEV_CHECK(cudaMalloc(&p, n * sizeof(bf16)));
    fill_bf16<<<pd::gpu::grid_for(long(n), 256), 256>>>(p, n, seed, scale);
    DEV_CHECK(cudaGetLastError());
    return p;
}

// One decode step's products: per layer qkv, attention output, MLP in (gate
// and up) and MLP out, then the head. Inputs and output are shared buffers
// of the widest shape: the products run one after another.
std::vector<Product> make_step(int dim, int hidden, int qkv, int vocab, int layers, bf16* x, float* y) {
    std::vector<Product> step;
    unsigned seed = 100;
    auto add = [&](const char* name, int out, int in) {
        Product p{name, in, out, device_bf16(std::size_t(out) * in, seed++, 0.05f), x, y};
        step.push_back(p);
    };
    for (int l = 0; l < layers; l++) {
        add("qkv", qkv, dim);
        add("attn_out", dim, dim);
        add("mlp_in", 2 * hidden, dim);
        add("mlp_out", dim, hidden);
    }
    add("head", vocab, dim);
    return step;
}

// Checks a version on every output of each distinct shape (the first layer's
// four products and the head) against the CPU twin, output poisoned first.
bool validate_version(const Version& v, const std::vector<Product>& shapes,
                      const std::vector<std::vector<float>>& refs) {
    bool ok = true;
    for (std::size_t s = 0; s < shapes.size(); s++) {
        const Product& p = shapes[s];
        DEV_CHECK(cudaMemset(p.y, 0xFF, std::size_t(p.out) * sizeof(float)));  // NaN: unwritten fails
        v.launch(p);
        DEV_CHECK(cudaGetLastError());
        DEV_CHECK(cudaDeviceSynchronize());
        const std::string what = std::string(v.name) + ", " + p.name;
        ok = dev::validate(what.c_str(), dev::to_host(p.y, p.out), refs[s], dev::all_indices(p.out), 1e-3f, 1e-3f) && ok;
    }
    return ok;
}

std::vector<Version> versions(const pd::gpu::Blas& blas) {
    return {
        {1, "1 thread per row", [](const Product& p) {
             gemv_v1<<<(p.out + 127) / 128, 128>>>(p.y, p.W, p.x, p.in, p.out);
         }},
        {2, "2 warp per row, 16-byte loads (calm)", [](const Product& p) {
             gemv_warp_row<1><<<(p.out + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * 32>>>(
                 p.y, p.W, p.x, p.in, p.out);
         }},
        {3, "3 warp per row, 4 x 16 bytes in flight", [](const Product& p) {
             gemv_warp_row<4><<<(p.out + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * 32>>>(
                 p.y, p.W, p.x, p.in, p.out);
         }},
        {4, "4 cublasGemmEx, M = 1 (engine today)", [&blas](const Product& p) {
             pd::gpu::DeviceLinear L;
             L.in = p.in, L.out = p.out, L.bf16 = true, L.w = p.W;
             pd::gpu::linear(blas, L, reinterpret_cast<const std::uint16_t*>(p.x), 1, p.y);
         }},
    };
}

// The CPU twin's outputs for each shape, from the device's own bf16 values.
std::vector<std::vector<float>> references(const std::vector<Product>& shapes) {
    std::vector<std::vector<float>> refs;
    for (const Product& p : shapes)
        refs.push_back(reference_gemv(dev::to_host(p.W, std::size_t(p.out) * p.in), dev::to_host(p.x, p.in),
                                      p.in, p.out));
    return refs;
}

}  // namespace

int main(int argc, char** argv) {
    dev::Args args{argc, argv,
                   "gemv_bf16: one bf16 decode step's products at M = 1, validated then timed.\n"
                   "  --version V    0 = all (default), 1 thread per row, 2 warp per row, 3 warp per row\n"
                   "                 with 4 loads in flight, 4 cuBLAS (the engine's path)\n"
                   "  --dim D --hidden F --qkv Q --vocab V --layers L   shapes (llama-1b: 2048 8192 3072 128256 16)\n"
                   "  --repeats R    timed runs, median reported (10)\n"
                   "  --bandwidth-gbs X   copy bandwidth for the floor (gpu/dev/bandwidth; default: the card's peak)\n"};
    args.maybe_help();
    dev::require_gpu("gemv_bf16");
    const int version = int(args.get("--version", 0)), repeats = int(args.get("--repeats", 10));
    const int dim = int(args.get("--dim", 2048)), hidden = int(args.get("--hidden", 8192));
    const int qkv = int(args.get("--qkv", 3072)), vocab = int(args.get("--vocab", 128256));
    const int layers = int(args.get("--layers", 16));
    if (dim < 8 || hidden < 8 || qkv < 1 || vocab < 1 || layers < 1 || dim % 8 || hidden % 8) {
        std::fprintf(stderr, "gemv_bf16: need positive shapes with --dim and --hidden multiples of 8 "
                             "(rows are read 16 bytes at a time)\n");
        return 2;
    }
    const dev::Card card = dev::card(args);
    const double gbs = args.getf("--bandwidth-gbs", card.peak_gbs);

    bf16* x = device_bf16(std::size_t(std::max(dim, hidden)), 7, 1.0f);
    float* y = nullptr;
    DEV_CHECK(cudaMalloc(&y, std::size_t(std::max({qkv, dim, 2 * hidden, vocab})) * sizeof(float)));
    const std::vector<Product> step = make_step(dim, hidden, qkv, vocab, layers, x, y);
    DEV_CHECK(cudaDeviceSynchronize());
    const std::vector<Product> shapes{step[0], step[1], step[2], step[3], step.back()};
    const std::vector<std::vector<float>> refs = references(shapes);

    double bytes = 0, flops = 0;
    for (const Product& p : step) {
        bytes += 2.0 * p.out * double(p.in) + 2.0 * p.in + 4.0 * p.out;
        flops += 2.0 * p.out * double(p.in);
    }
    const double floor_ms = bytes / (gbs * 1e9) * 1e3;
    std::printf("bf16 GEMV, M = 1: %d layers + head, %.2f GB of weights; floor %.3f ms at %.0f GB/s\n",
                layers, bytes / 1e9, floor_ms, gbs);

    pd::gpu::Blas blas(nullptr);  // the default stream, which the timing events use
    bool ok = true;
    for (const Version& v : versions(blas)) {
        if (version != 0 && version != v.number) continue;
        if (!validate_version(v, shapes, refs)) {
            ok = false;
            continue;  // a wrong kernel's time is not a result
        }
        const double ms = dev::time_ms([&] { for (const Product& p : step) v.launch(p); }, 2, repeats);
        dev::report(v.name, ms, bytes, flops, card);
        std::printf("RESULT gemv_v%d_ms=%.4f\nRESULT gemv_v%d_floor_ratio=%.3f\n", v.number, ms, v.number, ms / floor_ms);
    }
    for (const Product& p : step) cudaFree(p.W);
    cudaFree(x);
    cudaFree(y);
    std::printf("%s\n", ok ? "all versions match the CPU twin" : "MISMATCH: see above");
    return ok ? 0 : 1;
}
