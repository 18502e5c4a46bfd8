// Shared by the development harnesses in gpu/dev (llm.c dev/cuda style):
// argument parsing, the no-GPU exit, random data (and its bf16 rounding),
// validation against a CPU reference (and the attention reference), event
// timing, and the card's peak numbers.
//
// Every harness validates each kernel version against its CPU reference
// BEFORE timing it, and exits 1 on a mismatch: a fast wrong kernel is not a
// result.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define DEV_CHECK(call)                                                                   \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            std::fprintf(stderr, "CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(e_), \
                         cudaGetErrorString(e_), #call, __FILE__, __LINE__);              \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

namespace dev {

// Exit code meson and the kit use for "skipped".
constexpr int kSkip = 77;

// Exits 77 with a message when there is no usable GPU.
inline void require_gpu(const char* program) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        std::printf("%s: skipped: no CUDA GPU here (%s)\n", program,
                    e != cudaSuccess ? cudaGetErrorString(e) : "no device visible");
        std::exit(kSkip);
    }
    DEV_CHECK(cudaSetDevice(0));
}

// Whether `kernel` can launch with `dynamic_bytes` of dynamic shared memory;
// if so, raises its dynamic limit to that. A block's shared memory is the
// kernel's static arrays (block_reduce's partial[32] in common.cuh: 256 bytes
// in block_exp_sum, one array for its max and one for its sum) plus
// the dynamic part, and only the sum has to fit the card's opt-in limit, so
// checking the dynamic part alone lets a launch fail at the edge.
template <typename Kernel>
bool fit_shared_memory(Kernel* kernel, std::size_t dynamic_bytes) {
    cudaFuncAttributes attr{};
    DEV_CHECK(cudaFuncGetAttributes(&attr, kernel));
    int optin = 0;
    DEV_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if (attr.sharedSizeBytes + dynamic_bytes > std::size_t(optin)) return false;
    DEV_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dynamic_bytes)));
    return true;
}

// --name value flags; `help` lists them.
struct Args {
    int argc;
    char** argv;
    std::string help;
    bool has(const char* name) const {
        for (int i = 1; i < argc; i++)
            if (std::strcmp(argv[i], name) == 0) return true;
        return false;
    }
    const char* value(const char* name) const {
        for (int i = 1; i + 1 < argc; i++)
            if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
        return nullptr;
    }
    long get(const char* name, long def) const {
        const char* v = value(name);
        return v ? std::strtol(v, nullptr, 10) : def;
    }
    double getf(const char* name, double def) const {
        const char* v = value(name);
        return v ? std::strtod(v, nullptr) : def;
    }
    void maybe_help() const {
        if (has("--help") || has("-h")) {
            std::printf("%s", help.c_str());
            std::exit(0);
        }
    }
};

inline std::vector<float> randn(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

template <typename T>
T* to_device(const std::vector<T>& h) {
    T* p = nullptr;
    DEV_CHECK(cudaMalloc(&p, h.size() * sizeof(T)));
    DEV_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

template <typename T>
std::vector<T> to_host(const T* d, std::size_t n) {
    std::vector<T> h(n);
    DEV_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// The values rounded to bf16 (round to nearest even), and the same kept in f32.
inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
    std::vector<__nv_bfloat16> h(v.size());
    for (std::size_t i = 0; i < v.size(); i++) h[i] = __float2bfloat16_rn(v[i]);
    return h;
}
inline std::vector<float> rounded(const std::vector<float>& v) {
    std::vector<float> r(v.size());
    for (std::size_t i = 0; i < v.size(); i++) r[i] = __bfloat162float(__float2bfloat16_rn(v[i]));
    return r;
}

// The CPU reference of attention for one query row q (D) against n rows of
// keys and values, K and V (n, D) contiguous, in double: softmax(q K^T / sqrt(D)) V.
// p: scratch of at least n doubles.
inline void reference_attention_row(float* out, const float* q, const float* K, const float* V, int n, int D,
                                    std::vector<double>& p) {
    double mx = -1e300, sum = 0;
    for (int s = 0; s < n; s++) {
        double dot = 0;
        for (int d = 0; d < D; d++) dot += double(q[d]) * K[std::size_t(s) * D + d];
        p[s] = dot / std::sqrt(double(D));
        mx = std::max(mx, p[s]);
    }
    for (int s = 0; s < n; s++) sum += (p[s] = std::exp(p[s] - mx));
    for (int d = 0; d < D; d++) {
        double acc = 0;
        for (int s = 0; s < n; s++) acc += p[s] / sum * V[std::size_t(s) * D + d];
        out[d] = float(acc);
    }
}
// |got - ref| <= atol + rtol |ref| at every checked index; prints the worst.
inline bool validate(const char* what, const std::vector<float>& got, const std::vector<float>& ref,
                     const std::vector<std::size_t>& indices, float atol = 1e-4f, float rtol = 1e-3f) {
    std::size_t bad = 0, worst = indices.empty() ? 0 : indices[0];
    double worst_excess = -1e300;
    for (std::size_t i : indices) {
        double err = std::fabs(double(got[i]) - ref[i]), tol = atol + rtol * std::fabs(ref[i]);
        if (!(err <= tol)) bad++;
        if (!(err - tol <= worst_excess)) worst_excess = err - tol, worst = i;
    }
    if (bad) {
        std::printf("  %s: INCORRECT: %zu of %zu checked values outside atol %g + rtol %g; worst at %zu: "
                    "got %g, expected %g\n",
                    what, bad, indices.size(), atol, rtol, worst, got[worst], ref[worst]);
        return false;
    }
    return true;
}

inline std::vector<std::size_t> all_indices(std::size_t n) {
    std::vector<std::size_t> v(n);
    for (std::size_t i = 0; i < n; i++) v[i] = i;
    return v;
}

// Median of `repeats` timed runs after `warmup` untimed ones, in ms. Each run
// is bracketed by events on the default stream; the synchronise before
// reading the second event is what makes the number the GPU's time rather
// than the launch's.
inline double time_ms(const std::function<void()>& run, int warmup = 3, int repeats = 20) {
    cudaEvent_t a, b;
    DEV_CHECK(cudaEventCreate(&a));
    DEV_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++) run();
    DEV_CHECK(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int i = 0; i < repeats; i++) {
        DEV_CHECK(cudaEventRecord(a));
        run();
        DEV_CHECK(cudaEventRecord(b));
        DEV_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        DEV_CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    DEV_CHECK(cudaGetLastError());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// The card and its peak numbers. Memory: clock x bus width x 2 (DDR).
// FP32: SMs x 128 lanes x 2 (FMA) x clock -- 128 FP32 lanes per SM holds for
// Hopper, Ada and GA10x; A100 has 64. Override either with --peak-gbs /
// --peak-tflops when the card's datasheet says otherwise.
struct Card {
    std::string name;
    int sms = 0, cc_major = 0, cc_minor = 0;
    double peak_gbs = 0, peak_fp32_tflops = 0;
};

inline Card card(const Args& args) {
    Card c;
    cudaDeviceProp p{};
    DEV_CHECK(cudaGetDeviceProperties(&p, 0));
    int mem_khz = 0, bus_bits = 0, sm_khz = 0;
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, 0);
    cudaGetLastError();
    c.name = p.name;
    c.sms = p.multiProcessorCount;
    c.cc_major = p.major, c.cc_minor = p.minor;
    c.peak_gbs = args.getf("--peak-gbs", 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9);
    c.peak_fp32_tflops = args.getf("--peak-tflops", double(c.sms) * 128 * 2 * sm_khz * 1e3 / 1e12);
    std::printf("card: %s, %d SMs, compute capability %d.%d; peak %.0f GB/s, %.1f FP32 TFLOP/s "
                "(from the device's clocks; --peak-gbs / --peak-tflops to override)\n",
                c.name.c_str(), c.sms, c.cc_major, c.cc_minor, c.peak_gbs, c.peak_fp32_tflops);
    return c;
}

// A harness's first steps: --help answered, a GPU required (exit 77 without
// one), the card read and printed.
inline Card start(const Args& args, const char* program) {
    args.maybe_help();
    require_gpu(program);
    return card(args);
}

// The file --json names, open for writing; nullptr without --json. Exits 2,
// naming it, when it cannot be written.
inline FILE* json_file(const Args& args, const char* program) {
    const char* path = args.value("--json");
    if (!path) return nullptr;
    FILE* f = std::fopen(path, "w");
    if (!f) {
        std::fprintf(stderr, "%s: cannot write %s\n", program, path);
        std::exit(2);
    }
    return f;
}

// One result line: time, bandwidth and FLOP rate against the card's peaks.
inline void report(const char* version, double ms, double bytes, double flops, const Card& c) {
    const double gbs = bytes / (ms * 1e-3) / 1e9, tf = flops / (ms * 1e-3) / 1e12;
    std::printf("  %-44s %9.4f ms  %8.1f GB/s (%5.1f%% of peak)  %7.2f TFLOP/s (%5.1f%% of FP32 peak)\n",
                version, ms, gbs, c.peak_gbs > 0 ? 100 * gbs / c.peak_gbs : 0.0, tf,
                c.peak_fp32_tflops > 0 ? 100 * tf / c.peak_fp32_tflops : 0.0);
}

}  // namespace dev
