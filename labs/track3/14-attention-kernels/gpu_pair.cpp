// Lab 14's --device cuda where the kit has the CUDA backend (gpu_pair.hpp).
#include "gpu_pair.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include <fmt/format.h>

#include "attention_pair.cuh"
#include "common.hpp"
#include "cuda_check.cuh"
#include "engine/engine.hpp"

namespace pd::lab14 {
namespace {

gpu::AttentionShape gpu_shape(const AttentionShape& s) { return {s.T, s.S, s.n_heads, s.n_kv_heads, s.D}; }

gpu::DeviceBuffer<std::uint16_t> upload_bf16(const std::vector<float>& v) {
    std::vector<std::uint16_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); i++) h[i] = f32_to_bf16(v[i]);
    gpu::DeviceBuffer<std::uint16_t> d;
    d.upload(h);
    return d;
}

// ms per call of `calls` calls on the default stream. A launch returns before
// the GPU has run it, so the time is read between two events the GPU stamps,
// after waiting for the second: the GPU's time, not the host's queueing.
double time_calls(const std::function<void()>& call, int calls) {
    cudaEvent_t start, stop;
    PD_CUDA(cudaEventCreate(&start));
    PD_CUDA(cudaEventCreate(&stop));
    PD_CUDA(cudaEventRecord(start, nullptr));
    for (int c = 0; c < calls; c++) call();
    PD_CUDA(cudaEventRecord(stop, nullptr));
    PD_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    PD_CUDA(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return double(ms) / calls;
}

}  // namespace

std::string require_gpu_pair(int head_dim) {
    std::string why;
    if (!cuda_available(&why)) fail("--device cuda is not available: {}. Use --device cpu.", why);
    if (!gpu::tiled_attention_supports(head_dim))
        fail("--device cuda: the GPU's tiled kernel works in tensor-core tiles of 16 and needs --head-dim a "
             "multiple of 16 in 16 .. 256, got {}", head_dim);
    cudaDeviceProp p{};
    PD_CUDA(cudaGetDeviceProperties(&p, 0));
    return fmt::format("{}, {} SMs, {:.0f} GiB", p.name, p.multiProcessorCount, double(p.totalGlobalMem) / (1 << 30));
}

Tiles gpu_tiles() { return {gpu::kFlashBr, gpu::kFlashBc}; }

GpuPair run_gpu_pair(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& K,
                     const std::vector<float>& V, int warmup, int repeats, int calls) {
    const gpu::AttentionShape g = gpu_shape(s);
    const auto dq = upload_bf16(q), dK = upload_bf16(K), dV = upload_bf16(V);
    gpu::DeviceBuffer<float> naive_out(q.size()), tiled_out(q.size()), scores(gpu::naive_attention_scratch(g));
    GpuPair r;
    auto naive = [&] {
        r.naive_bytes = gpu::naive_attention(naive_out.data(), dq.data(), dK.data(), dV.data(), g, scores.data(),
                                             nullptr);
    };
    auto tiled = [&] {
        r.tiled_bytes = gpu::tiled_attention(tiled_out.data(), dq.data(), dK.data(), dV.data(), g, nullptr);
    };
    std::vector<double> naive_ms, tiled_ms;
    for (int run = 0; run < warmup + repeats; run++) {
        const double n = time_calls(naive, calls), t = time_calls(tiled, calls);
        if (run >= warmup) naive_ms.push_back(n), tiled_ms.push_back(t);
    }
    r.naive_ms = summarize(naive_ms);
    r.tiled_ms = summarize(tiled_ms);
    r.naive_out = naive_out.to_host();
    r.tiled_out = tiled_out.to_host();
    return r;
}

}  // namespace pd::lab14
