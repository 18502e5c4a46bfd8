// gpu.pair: lab 14's pair on the GPU (gpu/kernels/attention_pair.cuh) and the engine's
// flash prefill (gpu/kernels/attention.cuh's attention_prefill_flash), each against the
// lab's CPU naive kernel (labs/track3/14-attention-kernels/kernels.hpp) with
// the llm.c-style check |gpu - cpu| <= atol + rtol |cpu|, at lengths that are
// mostly not multiples of the 64-key tile or the 64-query block.
// Needs a GPU: main_device.cpp exits 77 (skip) without one.

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "attention.cuh"
#include "attention_pair.cuh"
#include "check.hpp"
#include "common.hpp"
#include "cuda_check.cuh"
#include "kernels.hpp"
#include "kv_cache.cuh"

using namespace pd;
using namespace pd::test;
using gpu::DeviceBuffer;

namespace {

struct Case {
    int T, S, H, Hkv, D;
};

// Prefill (T = S), decode (T = 1) and queries after a cache (T < S); GQA
// ratios 1, 2, 4, 8; head_dim 16, 64, 80, 128 and 256 (the largest the flash
// kernel takes, whose shared memory, 190 KiB, is closest to sm_90's limit).
const Case kCases[] = {{1, 1, 4, 2, 64},   {100, 100, 4, 2, 64}, {257, 257, 8, 2, 64}, {1000, 1000, 4, 1, 64},
                       {1, 777, 8, 8, 64}, {1, 4097, 4, 2, 128}, {37, 501, 4, 4, 80},  {130, 1300, 8, 1, 128},
                       {65, 65, 2, 2, 16},   {70, 200, 2, 1, 256}};

// The naive kernel computes in f32 like its twin: only the order of the sums differs.
constexpr float kNaiveAtol = 5e-5f, kNaiveRtol = 5e-4f;
// The tiled kernel rounds the probabilities to bf16 (2^-9 relative) before
// P V, so an output moves by at most 2^-9 of the largest |v| it averages
// (below 0.01 for these normal values); its inputs are compared after the
// same rounding to bf16 that the kernel applies.
constexpr float kTiledAtol = 1e-2f, kTiledRtol = 1e-2f;

struct Inputs {
    std::vector<float> q, K, V;  // q (T, H, D); K, V (Hkv, S, D)
};

Inputs random_inputs(const Case& c, float q_scale, unsigned seed) {
    return {randn(std::size_t(c.T) * c.H * c.D, seed, q_scale), randn(std::size_t(c.Hkv) * c.S * c.D, seed + 1),
            randn(std::size_t(c.Hkv) * c.S * c.D, seed + 2)};
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
    std::vector<std::uint16_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); i++) h[i] = f32_to_bf16(v[i]);
    return h;
}

// The values the tensor cores see: each rounded to bf16, kept in f32.
Inputs rounded_to_bf16(const Inputs& in) {
    auto round = [](const std::vector<float>& v) {
        std::vector<float> r(v.size());
        for (std::size_t i = 0; i < v.size(); i++) r[i] = bf16_to_f32(f32_to_bf16(v[i]));
        return r;
    };
    return {round(in.q), round(in.K), round(in.V)};
}

lab14::AttentionShape lab_shape(const Case& c) { return {c.T, c.S, c.H, c.Hkv, c.D}; }
gpu::AttentionShape gpu_shape(const Case& c) { return {c.T, c.S, c.H, c.Hkv, c.D}; }

std::vector<float> cpu_naive(const Inputs& in, const Case& c) {
    std::vector<float> out(in.q.size());
    lab14::naive_attention(out.data(), in.q.data(), in.K.data(), in.V.data(), lab_shape(c));
    return out;
}

template <typename T>
DeviceBuffer<T> dev(const std::vector<T>& h) {
    DeviceBuffer<T> d;
    d.upload(h);
    return d;
}

// The GPU pair's output (poisoned with NaN first: an element never written fails
// the check) and the scratch bytes the call reported.
struct GpuRun {
    std::vector<float> out;
    std::size_t bytes;
};

template <typename In>
GpuRun gpu_naive(const std::vector<In>& q, const std::vector<In>& K, const std::vector<In>& V, const Case& c) {
    auto dq = dev(q), dK = dev(K), dV = dev(V);
    DeviceBuffer<float> out(q.size()), scratch(gpu::naive_attention_scratch(gpu_shape(c)));
    PD_CUDA(cudaMemset(out.data(), 0xff, out.bytes()));
    const std::size_t bytes =
        gpu::naive_attention(out.data(), dq.data(), dK.data(), dV.data(), gpu_shape(c), scratch.data(), nullptr);
    PD_CUDA(cudaDeviceSynchronize());
    return {out.to_host(), bytes};
}

template <typename In>
GpuRun gpu_tiled(const std::vector<In>& q, const std::vector<In>& K, const std::vector<In>& V, const Case& c) {
    auto dq = dev(q), dK = dev(K), dV = dev(V);
    DeviceBuffer<float> out(q.size());
    PD_CUDA(cudaMemset(out.data(), 0xff, out.bytes()));
    const std::size_t bytes = gpu::tiled_attention(out.data(), dq.data(), dK.data(), dV.data(), gpu_shape(c), nullptr);
    PD_CUDA(cudaDeviceSynchronize());
    return {out.to_host(), bytes};
}

}  // namespace

TEST_CASE("gpu.pair.naive") {
    for (const Case& c : kCases) {
        INFO("T " << c.T << " S " << c.S << " heads " << c.H << "/" << c.Hkv << " D " << c.D);
        const Inputs in = random_inputs(c, 2.0f, 41);
        const std::vector<float> ref = cpu_naive(in, c);
        const GpuRun f32 = gpu_naive(in.q, in.K, in.V, c);
        check_close(f32.out, ref, kNaiveAtol, kNaiveRtol, "naive, f32 inputs");
        // bf16 inputs: the twin runs on the same values, widened.
        const Inputs r = rounded_to_bf16(in);
        const GpuRun b16 = gpu_naive(to_bf16(in.q), to_bf16(in.K), to_bf16(in.V), c);
        check_close(b16.out, cpu_naive(r, c), kNaiveAtol, kNaiveRtol, "naive, bf16 inputs");
        // The twins report the same scratch: one head's T x S floats.
        std::vector<float> out(in.q.size());
        CHECK(f32.bytes == lab14::naive_attention(out.data(), in.q.data(), in.K.data(), in.V.data(), lab_shape(c)));
    }
}

TEST_CASE("gpu.pair.tiled") {
    for (const Case& c : kCases) {
        INFO("T " << c.T << " S " << c.S << " heads " << c.H << "/" << c.Hkv << " D " << c.D);
        REQUIRE(gpu::tiled_attention_supports(c.D));
        const Inputs in = random_inputs(c, 2.0f, 43);
        const std::vector<float> ref = cpu_naive(rounded_to_bf16(in), c);
        check_close(gpu_tiled(in.q, in.K, in.V, c).out, ref, kTiledAtol, kTiledRtol, "tiled, f32 inputs");
        check_close(gpu_tiled(to_bf16(in.q), to_bf16(in.K), to_bf16(in.V), c).out, ref, kTiledAtol, kTiledRtol,
                    "tiled, bf16 inputs");
    }
}

// Scores spread over about +-1000 (q scaled by 300): exp is out of float's
// range unless every exponent is a score minus a running max that includes it.
// A score of 1000 is summed in f32 to about 1e-3 (two orders of summation
// differ by that much), which moves the weights of a row whose top scores
// nearly tie: the naive kernel gets 1e-3 + 1e-3 |ref| here.
TEST_CASE("gpu.pair.hostile") {
    for (const Case& c : {Case{300, 300, 4, 2, 64}, Case{1, 1000, 4, 2, 64}, Case{37, 501, 2, 1, 128}}) {
        INFO("T " << c.T << " S " << c.S << " D " << c.D);
        const Inputs in = rounded_to_bf16(random_inputs(c, 300.0f, 47));
        const std::vector<float> ref = cpu_naive(in, c);
        check_close(gpu_naive(in.q, in.K, in.V, c).out, ref, 1e-3f, 1e-3f, "naive, hostile scores");
        check_close(gpu_tiled(in.q, in.K, in.V, c).out, ref, kTiledAtol, kTiledRtol, "tiled, hostile scores");
    }
}

// The tiled kernel's scratch is one block's shared memory: the same at every
// length, a few tiles' worth; the naive kernel's grows as T x S.
TEST_CASE("gpu.pair.scratch") {
    for (int D : {64, 128}) {
        const std::size_t tiles = std::size_t(gpu::kFlashBr + 2 * gpu::kFlashBc) * (D + 8) * 2 +  // Q, K, V bf16
                                  std::size_t(gpu::kFlashBr) * (gpu::kFlashBc + 4) * 4 +        // scores f32
                                  std::size_t(gpu::kFlashBr) * (gpu::kFlashBc + 8) * 2 +        // probabilities
                                  std::size_t(gpu::kFlashBr) * (D + 4) * 4;                     // output f32
        for (int S : {100, 4096}) {
            INFO("D " << D << " S " << S);
            const Case c{S, S, 4, 2, D};
            const Inputs in = random_inputs(c, 1.0f, 53);
            const GpuRun tiled = gpu_tiled(in.q, in.K, in.V, c);
            CHECK(tiled.bytes == gpu::tiled_attention_smem_bytes(D));
            CHECK(tiled.bytes >= tiles);
            CHECK(tiled.bytes <= tiles + 6 * 128);  // each array rounded up to 128 bytes
            CHECK(gpu_naive(in.q, in.K, in.V, c).bytes == std::size_t(S) * S * sizeof(float));
        }
    }
}

// The engine's entry: q read in place from [q | k | v] rows, K and V from a
// cache of two sequences (the second one's, after `start` cached positions),
// the output in bf16 for the next product.
TEST_CASE("gpu.pair.engine_flash") {
    const int B = 2, b = 1, max_seq = 1100, H = 8;
    for (auto [Hkv, D, start, T] : {std::tuple{2, 64, 0, 300}, std::tuple{8, 64, 283, 17},
                                    std::tuple{1, 128, 5, 1000}, std::tuple{4, 80, 0, 1}}) {
        INFO("kv heads " << Hkv << " D " << D << " start " << start << " T " << T);
        const int S = start + T, stride = (H + 2 * Hkv) * D;
        const Case c{T, S, H, Hkv, D};
        auto rows = randn(std::size_t(T) * stride, 59, 2.0f);
        auto k_cache = randn(std::size_t(B) * Hkv * max_seq * D, 60);
        auto v_cache = randn(k_cache.size(), 61);
        // The same tensors in the lab's contiguous layouts.
        Inputs in{std::vector<float>(std::size_t(T) * H * D), std::vector<float>(std::size_t(Hkv) * S * D),
                  std::vector<float>(std::size_t(Hkv) * S * D)};
        for (int t = 0; t < T; t++)
            std::copy_n(rows.data() + std::size_t(t) * stride, H * D, in.q.data() + std::size_t(t) * H * D);
        for (int g = 0; g < Hkv; g++) {
            const std::size_t from = ((std::size_t(b) * Hkv + g) * max_seq) * D, to = std::size_t(g) * S * D;
            std::copy_n(k_cache.data() + from, std::size_t(S) * D, in.K.data() + to);
            std::copy_n(v_cache.data() + from, std::size_t(S) * D, in.V.data() + to);
        }
        const std::vector<float> ref = cpu_naive(rounded_to_bf16(in), c);

        gpu::DeviceKVCache cache = gpu::make_device_kv_cache(1, B, Hkv, max_seq, D);
        cache.k.upload(k_cache.data(), k_cache.size());
        cache.v.upload(v_cache.data(), v_cache.size());
        auto drows = dev(rows);
        DeviceBuffer<std::uint16_t> out(ref.size());
        PD_CUDA(cudaMemset(out.data(), 0xff, out.bytes()));  // bf16 NaN
        REQUIRE(gpu::attention_prefill_flash_supports(D));
        gpu::attention_prefill_flash(out.data(), drows.data(), stride, cache.layer(0), b, start, T, H, nullptr);
        PD_CUDA(cudaDeviceSynchronize());
        std::vector<float> got(ref.size());
        const std::vector<std::uint16_t> h = out.to_host();
        for (std::size_t i = 0; i < h.size(); i++) got[i] = bf16_to_f32(h[i]);
        // One more bf16 rounding, of the output (2^-9 relative).
        check_close(got, ref, kTiledAtol, kTiledRtol + 1.0f / 512, "attention_prefill_flash, bf16 out");

        // A bf16 cache (PDLAB_CUDA_KV=bf16) of the same K and V: the kernel
        // rounds an f32 cache to bf16 as it stages the tiles, so the same
        // bits, to the last one.
        gpu::DeviceKVCache cache16 = gpu::make_device_kv_cache(1, B, Hkv, max_seq, D, gpu::KVPrecision::bf16);
        cache16.k16.upload(to_bf16(k_cache).data(), k_cache.size());
        cache16.v16.upload(to_bf16(v_cache).data(), v_cache.size());
        DeviceBuffer<std::uint16_t> out16(ref.size());
        gpu::attention_prefill_flash(out16.data(), drows.data(), stride, cache16.layer(0), b, start, T, H, nullptr);
        PD_CUDA(cudaDeviceSynchronize());
        CHECK(out16.to_host() == h);
    }
}
