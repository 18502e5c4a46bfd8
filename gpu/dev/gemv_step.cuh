// What the decode-product harnesses (gemv_bf16, gemv_int8) share: the
// products of one decode step at the model's shapes, weights made on the
// device, each version validated on every output of each distinct shape
// against a CPU twin before the whole step is timed against the floor.
//
// A harness defines its Product (a weight matrix on the device, in its own
// format, with `name`, `in`, `out` and the output `y`), how to make one, its
// versions and its CPU twin; run_versions() does the rest.
#pragma once

#include "dev_common.cuh"

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace dev {

// Fills n values of T (float, __nv_bfloat16 or std::int8_t) with a hash of
// (seed, index) scaled to [-scale, scale) (int8: rounded, scale <= 127):
// gigabytes of weights in milliseconds, where the host would need seconds.
template <typename T>
__global__ void fill_hashed(T* p, std::size_t n, unsigned seed, float scale) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        std::uint32_t h = std::uint32_t(i) * 2654435761u ^ std::uint32_t(i >> 32) * 40503u ^ seed * 2246822519u;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        const float v = scale * (float(h) * (2.0f / 4294967296.0f) - 1.0f);
        if constexpr (std::is_same_v<T, __nv_bfloat16>) p[i] = __float2bfloat16_rn(v);
        else if constexpr (std::is_same_v<T, std::int8_t>) p[i] = std::int8_t(rintf(v));
        else p[i] = v;
    }
}

template <typename T>
T* device_hashed(std::size_t n, unsigned seed, float scale) {
    T* p = nullptr;
    DEV_CHECK(cudaMalloc(&p, n * sizeof(T)));
    fill_hashed<<<pd::gpu::grid_for(long(n), 256), 256>>>(p, n, seed, scale);
    DEV_CHECK(cudaGetLastError());
    return p;
}

// The shapes of one decode step (defaults: synthetic:llama-1b's).
struct StepShapes {
    int dim = 2048, hidden = 8192, qkv = 3072, vocab = 128256, layers = 16;
};

inline const char* kStepHelp =
    "  --dim D --hidden F --qkv Q --vocab V --layers L   shapes (llama-1b: 2048 8192 3072 128256 16)\n"
    "  --repeats R    timed runs, median reported (10)\n"
    "  --bandwidth-gbs X   copy bandwidth for the floor (gpu/dev/bandwidth; default: the card's peak)\n";

// The shapes from the flags; exits 2 unless every row is a multiple of
// `multiple` inputs (the kernels' 16-byte loads).
inline StepShapes step_shapes(const Args& args, const char* program, int multiple) {
    StepShapes s;
    s.dim = int(args.get("--dim", s.dim)), s.hidden = int(args.get("--hidden", s.hidden));
    s.qkv = int(args.get("--qkv", s.qkv)), s.vocab = int(args.get("--vocab", s.vocab));
    s.layers = int(args.get("--layers", s.layers));
    if (s.dim < multiple || s.hidden < multiple || s.qkv < 1 || s.vocab < 1 || s.layers < 1 ||
        s.dim % multiple || s.hidden % multiple) {
        std::fprintf(stderr, "%s: need positive shapes with --dim and --hidden multiples of %d "
                             "(rows are read 16 bytes at a time)\n", program, multiple);
        std::exit(2);
    }
    return s;
}

// What both harnesses set up from their flags: the shapes, the card, the
// bandwidth of the floor, and the step's input x (bf16, the widest row) and
// output y (f32, the widest output), shared by the products, which run one
// after another.
struct StepRun {
    StepShapes shapes;
    Card card;
    double gbs = 0;
    int version = 0, repeats = 10;
    __nv_bfloat16* x = nullptr;
    float* y = nullptr;

    void release() {
        cudaFree(x);
        cudaFree(y);
    }
};

// Exits 77 without a GPU, 2 on bad shapes.
inline StepRun start_step(const Args& args, const char* program, int multiple) {
    require_gpu(program);
    StepRun r;
    r.version = int(args.get("--version", 0)), r.repeats = int(args.get("--repeats", 10));
    r.shapes = step_shapes(args, program, multiple);
    r.card = card(args);
    r.gbs = args.getf("--bandwidth-gbs", r.card.peak_gbs);
    const StepShapes& s = r.shapes;
    r.x = device_hashed<__nv_bfloat16>(std::size_t(std::max(s.dim, s.hidden)), 7, 1.0f);
    DEV_CHECK(cudaMalloc(&r.y, std::size_t(std::max({s.qkv, s.dim, 2 * s.hidden, s.vocab})) * sizeof(float)));
    return r;
}

// One decode step's products: per layer qkv, attention output, MLP in (gate
// and up) and MLP out, then the head. make(name, out, in, seed) -> Product.
template <typename Product, typename Make>
std::vector<Product> make_step(const StepShapes& s, Make make) {
    std::vector<Product> step;
    unsigned seed = 100;
    for (int l = 0; l < s.layers; l++) {
        step.push_back(make("qkv", s.qkv, s.dim, seed++));
        step.push_back(make("attn_out", s.dim, s.dim, seed++));
        step.push_back(make("mlp_in", 2 * s.hidden, s.dim, seed++));
        step.push_back(make("mlp_out", s.dim, s.hidden, seed++));
    }
    step.push_back(make("head", s.vocab, s.dim, seed++));
    return step;
}

// The distinct shapes of a step: the first layer's four products and the head.
template <typename Product>
std::vector<Product> distinct_shapes(const std::vector<Product>& step) {
    return {step[0], step[1], step[2], step[3], step.back()};
}

template <typename Product>
struct Version {
    int number;
    const char* name;
    std::function<void(const Product&)> launch;
};

// Checks a version on every output of each shape against its reference,
// output poisoned (NaN) first so that an unwritten output fails.
template <typename Product>
bool validate_version(const Version<Product>& v, const std::vector<Product>& shapes,
                      const std::vector<std::vector<float>>& refs, float atol, float rtol) {
    bool ok = true;
    for (std::size_t s = 0; s < shapes.size(); s++) {
        const Product& p = shapes[s];
        DEV_CHECK(cudaMemset(p.y, 0xFF, std::size_t(p.out) * sizeof(float)));
        v.launch(p);
        DEV_CHECK(cudaGetLastError());
        DEV_CHECK(cudaDeviceSynchronize());
        const std::string what = std::string(v.name) + ", " + p.name;
        ok = validate(what.c_str(), to_host(p.y, p.out), refs[s], all_indices(p.out), atol, rtol) && ok;
    }
    return ok;
}

// Validates each selected version (run.version: its number, 0 for all), then
// times a whole step of it; prints the time against the floor of `bytes`
// at run.gbs GB/s and RESULT lines <prefix>_v<N>_ms and _floor_ratio.
// Returns whether every version matched its reference.
template <typename Product>
bool run_versions(const char* prefix, const std::vector<Version<Product>>& versions, const StepRun& run,
                  const std::vector<Product>& step, const std::vector<std::vector<float>>& refs,
                  float atol, float rtol, double bytes, double flops) {
    const double floor_ms = bytes / (run.gbs * 1e9) * 1e3;
    std::printf("%.2f GB per step; floor %.3f ms at %.0f GB/s\n", bytes / 1e9, floor_ms, run.gbs);
    const std::vector<Product> shapes = distinct_shapes(step);
    bool ok = true;
    for (const Version<Product>& v : versions) {
        if (run.version != 0 && run.version != v.number) continue;
        if (!validate_version(v, shapes, refs, atol, rtol)) {
            ok = false;
            continue;  // a wrong kernel's time is not a result
        }
        const double ms = time_ms([&] { for (const Product& p : step) v.launch(p); }, 2, run.repeats);
        report(v.name, ms, bytes, flops, run.card);
        std::printf("RESULT %s_v%d_ms=%.4f\nRESULT %s_v%d_floor_ratio=%.3f\n", prefix, v.number, ms, prefix,
                    v.number, ms / floor_ms);
    }
    std::printf("%s\n", ok ? "all versions match the CPU twin" : "MISMATCH: see above");
    return ok;
}

}  // namespace dev
