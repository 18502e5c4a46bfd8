// gpu.kernels: every CUDA kernel against its CPU twin (src/engine/ops.hpp,
// src/engine/attention.hpp, src/engine/kv_cache.hpp, tests/reference/reference.hpp) on
// random inputs of several shapes, with the llm.c-style check
// |gpu - cpu| <= atol + rtol |cpu|.
// Needs a GPU: main_device.cpp exits 77 (skip) without one.

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "attention.cuh"
#include "engine/attention.hpp"
#include "check.hpp"
#include "common.hpp"
#include "cuda_check.cuh"
#include "kv_cache.cuh"
#include "engine/kv_cache.hpp"
#include "engine/matmul.hpp"
#include "engine/quantize.hpp"
#include "gemv.cuh"
#include "engine/paged_kv_cache.hpp"
#include "matmul.cuh"
#include "ops.cuh"
#include "engine/ops.hpp"
#include "engine/sampler.hpp"
#include "reference.hpp"
#include "sampler.cuh"

using namespace pd;
using namespace pd::test;
using gpu::DeviceBuffer;
using gpu::KVPrecision;

namespace {

// Copies a host vector to a new device buffer.
template <typename T>
DeviceBuffer<T> dev(const std::vector<T>& h) {
    DeviceBuffer<T> d;
    d.upload(h);
    return d;
}

template <typename T>
std::vector<T> host(const DeviceBuffer<T>& d) {
    PD_CUDA(cudaDeviceSynchronize());
    return d.to_host();
}

std::vector<float> widen(const std::vector<std::uint16_t>& v) {
    std::vector<float> f(v.size());
    for (std::size_t i = 0; i < v.size(); i++) f[i] = bf16_to_f32(v[i]);
    return f;
}

// x rounded to bf16: the bits for the device, and their values in f32 for the CPU.
struct Bf16Copy {
    std::vector<std::uint16_t> bits;
    std::vector<float> values;
};
Bf16Copy bf16_copy(const std::vector<float>& x) {
    Bf16Copy c{std::vector<std::uint16_t>(x.size()), std::vector<float>(x.size())};
    for (std::size_t i = 0; i < x.size(); i++) c.values[i] = bf16_to_f32(c.bits[i] = f32_to_bf16(x[i]));
    return c;
}

// The residual folded into a product: ref += y0.
void add_residual(std::vector<float>& ref, const std::vector<float>& y0) {
    for (std::size_t i = 0; i < ref.size(); i++) ref[i] += y0[i];
}

// An int8 matrix W (N, K) on the device as cuda_engine.cpp uploads it:
// quantize_rows' values and scales for the GEMV, and the same weights
// dequantized to bf16 for cuBLAS (w16: that copy on the host too, the
// twin of what cuBLAS reads).
struct DeviceInt8 {
    DeviceBuffer<std::int8_t> q;
    DeviceBuffer<float> scales;
    Bf16Copy w16;
    DeviceBuffer<std::uint16_t> w;
    gpu::DeviceLinear L;
};
DeviceInt8 device_int8(const std::vector<float>& W, int K, int N, int G, const float* bias) {
    const QuantizedMatrix qm = quantize_rows(W.data(), N, K, G);
    Bf16Copy w16 = bf16_copy(dequantize_rows(qm));
    DeviceInt8 d{dev(qm.q), dev(qm.scales), w16, dev(w16.bits), {}};
    d.L.in = K, d.L.out = N, d.L.bf16 = true, d.L.w = d.w.data(), d.L.bias = bias;
    d.L.q = d.q.data(), d.L.scales = d.scales.data(), d.L.group = G;
    return d;
}

// bf16 outputs: within one bf16 rounding (2^-8 relative) of the f32 twin.
constexpr float kBf16Rtol = 1.0f / 128;

const int kRowShapes[][2] = {{1, 64}, {5, 768}, {33, 2048}, {3, 100}, {2, 4097}};

// Host K and V (in the device's layout) into a device cache: as they are,
// or as bf16 bits for a bf16 cache.
void upload_kv(gpu::DeviceKVCache& d, const std::vector<float>& k, const std::vector<float>& v) {
    if (d.precision == KVPrecision::bf16) {
        d.k16.upload(bf16_copy(k).bits.data(), k.size());
        d.v16.upload(bf16_copy(v).bits.data(), v.size());
    } else {
        d.k.upload(k.data(), k.size());
        d.v.upload(v.data(), v.size());
    }
}

// A device cache's K and V as floats (a bf16 cache widened).
std::pair<std::vector<float>, std::vector<float>> cached_kv(const gpu::DeviceKVCache& d) {
    if (d.precision == KVPrecision::bf16) return {widen(host(d.k16)), widen(host(d.v16))};
    return {host(d.k), host(d.v)};
}

// Random K (seed) and V (seed + 1) of n values each; rounded to bf16 for a
// bf16 cache, so the host holds exactly what the device does.
std::pair<std::vector<float>, std::vector<float>> random_kv(std::size_t n, unsigned seed, KVPrecision p) {
    auto k = randn(n, seed), v = randn(n, seed + 1);
    if (p == KVPrecision::bf16) k = bf16_copy(k).values, v = bf16_copy(v).values;
    return {k, v};
}

// A one-layer cache of random K and V (random_kv), on the host and the same
// values on the device.
struct RandomCache {
    KVCache host;
    gpu::DeviceKVCache dev;
};
RandomCache random_cache(int B, int Hkv, int S, int D, unsigned seed, KVPrecision p = KVPrecision::f32) {
    RandomCache r{make_kv_cache(1, B, Hkv, S, D), gpu::make_device_kv_cache(1, B, Hkv, S, D, p)};
    std::tie(r.host.k, r.host.v) = random_kv(r.host.k.size(), seed, p);
    upload_kv(r.dev, r.host.k, r.host.v);
    return r;
}

// A one-layer paged pool of n_blocks blocks of bs positions with random K
// and V (random_kv), on the host and the same values on the device.
// Tests set the block tables themselves (the kernels read only the tables).
struct RandomPool {
    PagedKVCache host;
    gpu::DeviceKVCache dev;
};
RandomPool random_pool(int n_blocks, int bs, int Hkv, int max_seq, int D, unsigned seed,
                       KVPrecision p = KVPrecision::f32) {
    RandomPool r{make_paged_kv_cache(1, Hkv, D, bs, n_blocks, max_seq),
                 gpu::make_device_paged_kv_cache(1, Hkv, D, bs, n_blocks, max_seq, p)};
    std::tie(r.host.k, r.host.v) = random_kv(r.host.k.size(), seed, p);
    upload_kv(r.dev, r.host.k, r.host.v);
    return r;
}

// Each table's blocks, one row of max_blocks ids per table, as set_block_tables takes them.
std::vector<int> table_rows(const std::vector<BlockTable>& tables, int max_blocks) {
    std::vector<int> rows(tables.size() * std::size_t(max_blocks), 0);
    for (std::size_t i = 0; i < tables.size(); i++)
        std::copy(tables[i].blocks.begin(), tables[i].blocks.end(), rows.begin() + i * max_blocks);
    return rows;
}

// Blocks 0 .. n-1 in a scrambled order (7 is prime to every n used here), so
// no table is consecutive by accident.
std::vector<int> scrambled_blocks(int n) {
    std::vector<int> ids(n);
    for (int i = 0; i < n; i++) ids[i] = (i * 7 + 3) % n;
    return ids;
}

}  // namespace

// rmsnorm's shapes. Up to 16 rows take the wide blocks (up to 1,024 threads):
// head and model widths, rows shorter than a warp, and D = 8200, past the
// 8 x 1024 features held in registers. More rows take the narrow blocks (256
// threads): 17 rows (the first), a prefill's 300 and 2,048 rows of 2,048, and
// D = 4097, past the 8 x 256 features held in registers.
const int kRmsShapes[][2] = {{1, 64},  {2, 80},   {1, 2048},  {5, 2048},    {3, 4096},   {4, 4097},
                             {2, 5},   {1, 8200}, {16, 2048}, {17, 80},     {300, 2048}, {2048, 2048},
                             {40, 4097}};

TEST_CASE("gpu.kernels.rmsnorm") {
    for (auto [M, D] : kRmsShapes) {
        INFO("M " << M << " D " << D);
        auto x = randn(std::size_t(M) * D, 1, 2.0f), w = randn(D, 2);
        std::vector<float> ref(x.size());
        rmsnorm(ref.data(), x.data(), w.data(), M, D, 1e-5f);
        auto dx = dev(x), dw = dev(w);
        DeviceBuffer<float> out(x.size());
        DeviceBuffer<std::uint16_t> out16(x.size());
        gpu::rmsnorm(out.data(), dx.data(), dw.data(), M, D, 1e-5f, nullptr);
        gpu::rmsnorm(out16.data(), dx.data(), dw.data(), M, D, 1e-5f, nullptr);
        check_close(host(out), ref, 1e-5f, 1e-4f, "rmsnorm f32");
        check_close(widen(host(out16)), ref, 1e-6f, kBf16Rtol, "rmsnorm bf16 out");
    }
}

TEST_CASE("gpu.kernels.layernorm") {
    for (auto [M, D] : kRowShapes) {
        INFO("M " << M << " D " << D);
        auto x = randn(std::size_t(M) * D, 3, 2.0f), w = randn(D, 4), b = randn(D, 5);
        for (std::size_t i = 0; i < x.size(); i++) x[i] += 3.0f;  // a mean far from 0
        std::vector<float> ref(x.size());
        layernorm(ref.data(), x.data(), w.data(), b.data(), M, D, 1e-5f);
        auto dx = dev(x), dw = dev(w), db = dev(b);
        DeviceBuffer<float> out(x.size());
        DeviceBuffer<std::uint16_t> out16(x.size());
        gpu::layernorm(out.data(), dx.data(), dw.data(), db.data(), M, D, 1e-5f, nullptr);
        gpu::layernorm(out16.data(), dx.data(), dw.data(), db.data(), M, D, 1e-5f, nullptr);
        check_close(host(out), ref, 1e-4f, 1e-4f, "layernorm f32");
        check_close(widen(host(out16)), ref, 1e-4f, kBf16Rtol, "layernorm bf16 out");
    }
}

TEST_CASE("gpu.kernels.gelu_tanh") {
    for (long n : {1L, 1000L, 3L * 3072 + 5}) {
        auto x = randn(std::size_t(n), 6, 3.0f);
        std::vector<float> ref = x;
        gelu_tanh(ref.data(), n);
        auto dx = dev(x);
        DeviceBuffer<float> out(x.size());
        DeviceBuffer<std::uint16_t> out16(x.size());
        gpu::gelu_tanh(out.data(), dx.data(), n, nullptr);
        gpu::gelu_tanh(out16.data(), dx.data(), n, nullptr);
        gpu::gelu_tanh(dx.data(), dx.data(), n, nullptr);  // in place, as the CPU does
        check_close(host(out), ref, 1e-6f, 1e-5f, "gelu_tanh");
        check_close(host(dx), ref, 1e-6f, 1e-5f, "gelu_tanh in place");
        check_close(widen(host(out16)), ref, 1e-6f, kBf16Rtol, "gelu_tanh bf16 out");
    }
}

TEST_CASE("gpu.kernels.swiglu") {
    for (auto [M, F] : {std::pair{1, 96}, std::pair{7, 2048}, std::pair{2, 8193}}) {
        auto gu = randn(std::size_t(M) * 2 * F, 7, 3.0f);
        std::vector<float> ref(std::size_t(M) * F);
        swiglu(ref.data(), gu.data(), M, F);
        auto dgu = dev(gu);
        DeviceBuffer<float> out(ref.size());
        DeviceBuffer<std::uint16_t> out16(ref.size());
        gpu::swiglu(out.data(), dgu.data(), M, F, nullptr);
        gpu::swiglu(out16.data(), dgu.data(), M, F, nullptr);
        check_close(host(out), ref, 1e-6f, 1e-5f, "swiglu");
        check_close(widen(host(out16)), ref, 1e-6f, kBf16Rtol, "swiglu bf16 out");
    }
}

TEST_CASE("gpu.kernels.rope") {
    const int max_seq = 4096;
    for (int D : {64, 128, 16})
        for (int M : {1, 9, 300}) {
            INFO("D " << D << " M " << M);
            const int n_heads = 6, stride = n_heads * D + 40;  // rows wider than the heads, as in [q | k | v]
            std::vector<float> cs(std::size_t(max_seq) * D / 2), sn(cs.size());
            rope_tables(cs.data(), sn.data(), max_seq, D, 500000.0f);
            auto x = randn(std::size_t(M) * stride, 8);
            std::vector<int> pos(M);
            for (int m = 0; m < M; m++) pos[m] = (m * 977 + 13) % max_seq;
            std::vector<float> ref = x;
            rope(ref.data(), M, stride, n_heads, D, pos.data(), cs.data(), sn.data());
            auto dx = dev(x), dcs = dev(cs), dsn = dev(sn);
            auto dpos = dev(pos);
            gpu::rope(dx.data(), M, stride, n_heads, D, dpos.data(), dcs.data(), dsn.data(), nullptr);
            check_close(host(dx), ref, 1e-5f, 1e-5f, "rope (the 40 extra floats per row must be untouched)");
        }
}

TEST_CASE("gpu.kernels.residual_bias_embed") {
    const int M = 5, N = 300, V = 50;
    auto y = randn(std::size_t(M) * N, 9), x = randn(std::size_t(M) * N, 10), b = randn(N, 11);
    std::vector<float> ref = y;
    add_inplace(ref.data(), x.data(), long(ref.size()));
    auto dy = dev(y), dx = dev(x), db = dev(b);
    gpu::add_inplace(dy.data(), dx.data(), long(y.size()), nullptr);
    check_close(host(dy), ref, 0.0f, 0.0f, "add_inplace");
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) ref[std::size_t(m) * N + n] += b[n];
    gpu::add_bias(dy.data(), db.data(), M, N, nullptr);
    check_close(host(dy), ref, 0.0f, 0.0f, "add_bias");

    // Embedding: the CPU's step 1 (memcpy of the token's row, + the position's row for GPT-2).
    auto tok = randn(std::size_t(V) * N, 12), pe = randn(std::size_t(64) * N, 13);
    std::vector<int> token = {3, 49, 0, 3, 17}, pos = {0, 1, 2, 63, 40};
    auto dtok = dev(tok), dpe = dev(pe);
    auto dtoken = dev(token), dpos = dev(pos);
    for (bool with_pos : {false, true}) {
        std::vector<float> e(std::size_t(M) * N);
        for (int r = 0; r < M; r++)
            for (int d = 0; d < N; d++)
                e[std::size_t(r) * N + d] = tok[std::size_t(token[r]) * N + d] +
                                            (with_pos ? pe[std::size_t(pos[r]) * N + d] : 0.0f);
        DeviceBuffer<float> out(e.size());
        gpu::embed(out.data(), dtoken.data(), dpos.data(), dtok.data(), with_pos ? dpe.data() : nullptr, M, N,
                   nullptr);
        check_close(host(out), e, 0.0f, 0.0f, with_pos ? "embed + positions" : "embed");
    }
}

TEST_CASE("gpu.kernels.to_bf16") {
    std::vector<float> x = randn(1000, 14, 100.0f);
    x.insert(x.end(), {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, -3.0e38f, 1e-30f, 65504.0f});  // ties round to even
    std::vector<std::uint16_t> ref(x.size());
    for (std::size_t i = 0; i < x.size(); i++) ref[i] = f32_to_bf16(x[i]);
    auto dx = dev(x);
    DeviceBuffer<std::uint16_t> out(x.size());
    gpu::to_bf16(out.data(), dx.data(), long(x.size()), nullptr);
    auto got = host(out);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < x.size(); i++) bad += got[i] != ref[i];
    CHECK(bad == 0);
}

// f32 weights always run on cuBLAS; bf16 ones on the warp-per-row GEMV for
// M <= 4 when a row is a multiple of 8 values (1032: some lanes read 4
// chunks in flight, then one more; 100: cuBLAS at every M), else on cuBLAS.
TEST_CASE("gpu.kernels.linear") {
    gpu::Blas blas(nullptr);
    const int shapes[][2] = {{64, 96}, {768, 2304}, {100, 37}, {2048, 512}, {1032, 37}};  // (in, out)
    for (auto [K, N] : shapes)
        for (int M : {1, 2, 3, 4, 5, 17, 64})
            for (bool bias : {false, true})
                for (bool accumulate : {false, true}) {
                    INFO("M " << M << " in " << K << " out " << N << " bias " << bias << " accumulate "
                              << accumulate);
                    auto x = randn(std::size_t(M) * K, 15), W = randn(std::size_t(N) * K, 16, 0.05f);
                    auto b = randn(N, 17), y0 = randn(std::size_t(M) * N, 18);
                    std::vector<float> ref(std::size_t(M) * N);
                    ref::linear(ref.data(), x.data(), W.data(), bias ? b.data() : nullptr, M, K, N);
                    if (accumulate) add_residual(ref, y0);
                    auto dx = dev(x), dW = dev(W), db = dev(b), dy = dev(y0);
                    gpu::DeviceLinear L;
                    L.in = K, L.out = N, L.w = dW.data(), L.bias = bias ? db.data() : nullptr;
                    CHECK(gpu::linear_kernel(L, M) == gpu::LinearKernel::cublas);
                    gpu::linear(blas, L, dx.data(), M, dy.data(), accumulate);
                    check_close(host(dy), ref, 2e-4f, 2e-4f, "linear f32");

                    // bf16: x and W rounded to bf16, products accumulated in f32. The
                    // reference multiplies the same rounded values in double.
                    const Bf16Copy x16 = bf16_copy(x), W16 = bf16_copy(W);
                    ref::linear(ref.data(), x16.values.data(), W16.values.data(), bias ? b.data() : nullptr, M, K, N);
                    if (accumulate) add_residual(ref, y0);
                    auto dx16 = dev(x16.bits), dW16 = dev(W16.bits);
                    dy.upload(y0);
                    L.bf16 = true, L.w = dW16.data();
                    const bool gemv = M <= gpu::kGemvMaxRows && K % 8 == 0;
                    CHECK(gpu::linear_kernel(L, M) == (gemv ? gpu::LinearKernel::gemv_bf16 : gpu::LinearKernel::cublas));
                    gpu::linear(blas, L, dx16.data(), M, dy.data(), accumulate);
                    check_close(host(dy), ref, 5e-4f, 1e-3f, "linear bf16");
                }
}

// int8 weights against their CPU twin, the engine's int8 product
// (pd::linear_forward on an int8 Linear), on the same bf16-valued x. The
// device holds what cuda_engine.cpp uploads: quantize_rows' values and scales
// for the GEMV, and the same weights dequantized to bf16 for cuBLAS.
//  - GEMV (M <= 4, rows a multiple of 16): the exact weights q * s, as the
//    CPU's decode kernel; it rounds x to int16 per group, 2^-16 of the
//    group's largest |x|: close agreement.
//  - cuBLAS (M > 4, or rows of 100): the bf16 copy. From M = 17 the CPU's
//    prefill multiplies the same copy (oneDNN); below, the CPU's decode kernel
//    has the exact weights, and the copy's rounding (2^-9 of each weight)
//    shows: a looser tolerance there.
// Shapes: groups that divide the row, a last group shorter than the others
// (96 at G = 64, 2064 at G = 32 and 64: 16 inputs), rows the GEMV cannot take (100).
TEST_CASE("gpu.kernels.linear_int8") {
    gpu::Blas blas(nullptr);
    const int shapes[][2] = {{64, 96}, {96, 37}, {768, 2304}, {2064, 40}, {100, 37}};  // (in, out)
    for (Precision p : {Precision::int8_g32, Precision::int8_g64, Precision::int8_g128})
        for (auto [K, N] : shapes)
            for (int M : {1, 2, 3, 4, 5, 17})
                for (bool accumulate : {false, true}) {
                    const int G = group_size(p);
                    INFO(std::string(precision_name(p)) << " M " << M << " in " << K << " out " << N << " accumulate " << accumulate);
                    auto W = randn(std::size_t(N) * K, 30, 0.05f), b = randn(N, 31), y0 = randn(std::size_t(M) * N, 32);
                    const Bf16Copy x = bf16_copy(randn(std::size_t(M) * K, 33));
                    const Linear cpu = make_linear(W, b, K, N, p);
                    std::vector<float> ref(std::size_t(M) * N);
                    linear_forward(cpu, x.values.data(), M, ref.data());
                    if (accumulate) add_residual(ref, y0);

                    auto dx = dev(x.bits);
                    auto db = dev(b), dy = dev(y0);
                    const DeviceInt8 d = device_int8(W, K, N, G, db.data());
                    const gpu::DeviceLinear& L = d.L;
                    const bool gemv = M <= gpu::kGemvMaxRows && K % 16 == 0;
                    CHECK(gpu::linear_kernel(L, M) == (gemv ? gpu::LinearKernel::gemv_int8 : gpu::LinearKernel::cublas));
                    gpu::linear(blas, L, dx.data(), M, dy.data(), accumulate);
                    const float tol = gemv || M > kSmallM ? 1e-3f : 1e-2f;
                    check_close(host(dy), ref, tol, tol, "linear int8");
                }
}

// Llama's MLP-in product with SwiGLU, h = swiglu(x W^T) in bf16, against its
// twin: the CPU product, then pd::swiglu. M <= 4: the fused GEMV, against
// ref::linear on the bf16 values (bf16) or the engine's int8 product (int8).
// M = 5 and rows of 100: cuBLAS's product, then the swiglu kernel; for int8
// that product reads the bf16 copy of the dequantized weights, so its twin is
// ref::linear on that copy. (Against the exact int8 weights, the copy's
// rounding, 2^-9 of each weight, moved g and u by ~5e-3 at in = 2064, and
// silu(g) * u by up to 0.03: the first run on an H200 saw 14 of 1500 outside
// 0.01 + 0.01 |ref|.)
TEST_CASE("gpu.kernels.linear_swiglu") {
    gpu::Blas blas(nullptr);
    const int shapes[][2] = {{64, 48}, {2064, 300}, {100, 37}};  // (in, F): W is (2F, in)
    for (Precision p : {Precision::bf16, Precision::int8_g64})
        for (auto [K, F] : shapes)
            for (int M : {1, 2, 4, 5}) {
                INFO(std::string(precision_name(p)) << " M " << M << " in " << K << " F " << F);
                const int N = 2 * F;
                auto W = randn(std::size_t(N) * K, 40, 0.05f);
                const Bf16Copy x = bf16_copy(randn(std::size_t(M) * K, 41)), W16 = bf16_copy(W);
                const bool int8 = is_int8(p);
                auto dx = dev(x.bits), dW16 = dev(W16.bits);
                DeviceInt8 d8;
                if (int8) d8 = device_int8(W, K, N, group_size(p), nullptr);
                gpu::DeviceLinear L;
                L.in = K, L.out = N, L.bf16 = true, L.w = dW16.data();
                if (int8) L = d8.L;
                const bool int8_gemv = int8 && gpu::linear_kernel(L, M) != gpu::LinearKernel::cublas;

                std::vector<float> gate_up(std::size_t(M) * N), ref(std::size_t(M) * F);
                if (int8_gemv) {
                    linear_forward(make_linear(W, {}, K, N, p), x.values.data(), M, gate_up.data());
                } else {
                    const std::vector<float>& w = int8 ? d8.w16.values : W16.values;
                    ref::linear(gate_up.data(), x.values.data(), w.data(), nullptr, M, K, N);
                }
                swiglu(ref.data(), gate_up.data(), M, F);

                DeviceBuffer<float> scratch(gate_up.size());
                DeviceBuffer<std::uint16_t> h(ref.size());
                gpu::linear_swiglu(blas, L, dx.data(), M, h.data(), scratch.data());
                // int8's GEMV: the CPU's x in int16 moves g and u by ~1e-4 at K = 2064.
                check_close(widen(host(h)), ref, int8_gemv ? 1e-3f : 1e-4f, kBf16Rtol, "linear_swiglu");
            }
}

// argmax against pd::argmax: random rows, a tie (the first wins), all -inf,
// NaN at index 0 (pd::argmax keeps 0) and elsewhere (never picked), rows
// of 1 and of a 128,256-token vocabulary.
TEST_CASE("gpu.kernels.argmax") {
    for (int n : {1, 97, 1500, 128256}) {
        const int rows = 6;
        auto logits = randn(std::size_t(rows) * n, 50, 3.0f);
        auto row = [&](int r) { return logits.data() + std::size_t(r) * n; };
        const int last = n - 1;
        row(1)[last] = row(1)[n / 2] = 100.0f;  // a tie: the lower index wins
        std::fill(row(2), row(2) + n, -INFINITY);
        row(3)[0] = NAN;
        row(4)[last] = NAN;
        row(5)[n / 3] = INFINITY;
        std::vector<int> ref(rows);
        for (int r = 0; r < rows; r++) ref[r] = argmax(row(r), n);
        auto dl = dev(logits);
        DeviceBuffer<int> out(rows);
        gpu::argmax(out.data(), dl.data(), rows, n, nullptr);
        INFO("n " << n);
        CHECK(host(out) == ref);
    }
}

// kv_write against pd::kv_write; a bf16 cache holds the same values rounded
// to nearest even, as pd::f32_to_bf16 rounds them (a copy: exact either way).
TEST_CASE("gpu.kernels.kv_write") {
    const int L = 2, B = 3, Hkv = 2, S = 40, D = 64, Q = 4 * D, KV = Hkv * D, stride = Q + 2 * KV;
    KVCache ref = make_kv_cache(L, B, Hkv, S, D);
    const std::vector<int> slots = {2, 0, 2}, pos = {5, 0, 39};
    auto rows = randn(slots.size() * stride, 19);
    for (std::size_t r = 0; r < slots.size(); r++)
        kv_write(ref, 1, slots[r], pos[r], rows.data() + r * stride + Q, rows.data() + r * stride + Q + KV);
    auto drows = dev(rows);
    auto dslots = dev(slots), dpos = dev(pos);
    for (KVPrecision p : {KVPrecision::f32, KVPrecision::bf16}) {
        const bool bf16 = p == KVPrecision::bf16;
        INFO("bf16 cache " << bf16);
        gpu::DeviceKVCache dc = gpu::make_device_kv_cache(L, B, Hkv, S, D, p);
        gpu::kv_write(dc.layer(1), drows.data() + Q, drows.data() + Q + KV, stride, dslots.data(), dpos.data(),
                      int(slots.size()), nullptr);
        const auto [k, v] = cached_kv(dc);
        check_close(k, bf16 ? bf16_copy(ref.k).values : ref.k, 0.0f, 0.0f, "K cache");
        check_close(v, bf16 ? bf16_copy(ref.v).values : ref.v, 0.0f, 0.0f, "V cache");
    }
}

namespace {

// Columns [from, to) of every row of x (rows of `stride` floats).
std::vector<float> columns(const std::vector<float>& x, int stride, int from, int to) {
    std::vector<float> c;
    for (std::size_t r = 0; r < x.size() / stride; r++)
        c.insert(c.end(), x.begin() + r * stride + from, x.begin() + r * stride + to);
    return c;
}

// One case of gpu.kernels.rope_kv_write: H = 8 query heads over Hkv, rows of
// two sequences in a contiguous cache or a paged pool in scrambled blocks of 16.
void check_rope_kv_write(int D, int Hkv, KVPrecision p, bool paged) {
    const int H = 8, max_seq = 64, bs = 16, n_blocks = 12, B = 2;
    const int Q = H * D, KV = Hkv * D, stride = Q + 2 * KV;
    const bool bf16 = p == KVPrecision::bf16;
    const std::vector<int> slots = {0, 1, 1, 0, 1}, pos = {0, 15, 16, 47, 63};
    const int M = int(slots.size());
    const auto ids = scrambled_blocks(n_blocks);
    const std::vector<BlockTable> tables = {{{ids[0], ids[1], ids[2]}, 0}, {{ids[3], ids[4], ids[5], ids[6]}, 0}};
    std::vector<float> cs(std::size_t(max_seq) * D / 2), sn(cs.size());
    rope_tables(cs.data(), sn.data(), max_seq, D, 10000.0f);
    const auto rows = randn(std::size_t(M) * stride, 70, 2.0f);

    // The CPU twins: rope on the q and k heads, then each row's K and V written.
    std::vector<float> ref_rows = rows;
    rope(ref_rows.data(), M, stride, H + Hkv, D, pos.data(), cs.data(), sn.data());
    KVCache cache = make_kv_cache(1, B, Hkv, max_seq, D);
    PagedKVCache pool = make_paged_kv_cache(1, Hkv, D, bs, n_blocks, max_seq);
    for (int r = 0; r < M; r++) {
        const float* k = ref_rows.data() + std::size_t(r) * stride + Q;
        if (paged) paged_write(pool, 0, tables[slots[r]], pos[r], k, k + KV);
        else kv_write(cache, 0, slots[r], pos[r], k, k + KV);
    }
    const std::vector<float>& ref_k = paged ? pool.k : cache.k;
    const std::vector<float>& ref_v = paged ? pool.v : cache.v;

    // The device: the fused kernel, and the two kernels, each on its own rows and cache.
    auto make_cache = [&] {
        gpu::DeviceKVCache d = paged ? gpu::make_device_paged_kv_cache(1, Hkv, D, bs, n_blocks, max_seq, p)
                                     : gpu::make_device_kv_cache(1, B, Hkv, max_seq, D, p);
        if (paged) gpu::set_block_tables(d, table_rows(tables, d.max_blocks()), B, nullptr);
        return d;
    };
    gpu::DeviceKVCache fused = make_cache(), twice = make_cache();
    auto dfused = dev(rows), dtwice = dev(rows), dcs = dev(cs), dsn = dev(sn);
    auto dslots = dev(slots), dpos = dev(pos);
    gpu::rope_kv_write(fused.layer(0), dfused.data(), stride, H, dslots.data(), dpos.data(), dcs.data(), dsn.data(),
                       M, nullptr);
    gpu::rope(dtwice.data(), M, stride, H + Hkv, D, dpos.data(), dcs.data(), dsn.data(), nullptr);
    gpu::kv_write(twice.layer(0), dtwice.data() + Q, dtwice.data() + Q + KV, stride, dslots.data(), dpos.data(), M,
                  nullptr);

    // The rows: q rotated in place, the k and v parts as they came.
    const auto got_rows = host(dfused);
    check_close(columns(got_rows, stride, 0, Q), columns(host(dtwice), stride, 0, Q), 1e-7f, 1e-6f,
                "q: fused vs rope");
    check_close(columns(got_rows, stride, 0, Q), columns(ref_rows, stride, 0, Q), 1e-5f, 1e-5f, "q: fused vs pd::rope");
    check_close(columns(got_rows, stride, Q, stride), columns(rows, stride, Q, stride), 0.0f, 0.0f,
                "the rows' k and v parts untouched");

    // The cache: the rotated k and the v at each row's place.
    const auto [k, v] = cached_kv(fused);
    const auto [k2, v2] = cached_kv(twice);
    check_close(k, k2, 1e-7f, bf16 ? kBf16Rtol : 1e-6f, "K: fused vs rope + kv_write");
    check_close(v, v2, 0.0f, 0.0f, "V: fused vs kv_write");
    check_close(k, bf16 ? bf16_copy(ref_k).values : ref_k, 1e-5f, bf16 ? kBf16Rtol : 1e-5f,
                "K: fused vs the CPU twins");
    check_close(v, bf16 ? bf16_copy(ref_v).values : ref_v, 0.0f, 0.0f, "V: fused vs the CPU twins");
}

}  // namespace

// Llama's steps 4 and 5 in one kernel (rope_kv_write) against the two
// kernels it replaces (rope on the q and k heads, then kv_write) and against
// their CPU twins (pd::rope, then pd::kv_write or pd::paged_write): rows of
// two sequences at positions inside and at the edges of blocks of 16; GQA 1,
// 4 and 8; head_dim 64, 128 and 80; the contiguous cache and a paged pool;
// f32 and bf16 caches. The fused kernel rotates with the same function as
// rope (rotate_pair), so it agrees with the two kernels to the last bit or
// so; the CPU twin rounds its own way (Highway), and a bf16 cache's rounding
// may then land one bf16 step apart (2^-8 relative).
TEST_CASE("gpu.kernels.rope_kv_write") {
    for (int D : {64, 128, 80})
        for (int Hkv : {8, 2, 1})
            for (KVPrecision p : {KVPrecision::f32, KVPrecision::bf16})
                for (bool paged : {false, true}) {
                    INFO("head_dim " << D << " kv heads " << Hkv << " bf16 cache " << (p == KVPrecision::bf16)
                                     << " paged " << paged);
                    check_rope_kv_write(D, Hkv, p, paged);
                }
}

// Decode attention: one query per row, GQA ratios 1, 4 and 8 (8 query heads
// over 8, 2 and 1 KV heads), cache lengths 1, 17, 300 and 2048, rows of one
// batch at different lengths, q read with a row stride. Then a bf16 cache
// (PDLAB_CUDA_KV=bf16) of the same values: against the CPU twin on the same
// bf16 values as tightly as f32 (the kernel widens each bf16 exactly, then
// does the same f32 arithmetic); against the f32 values with the bf16 cache's
// own error: each element of K and V moves by up to 2^-9 of itself, which
// moves a score (|q| ~ 2 per element here) by a few 1e-3, the softmax weights
// by as much relatively, and the output by that plus V's own 2^-9 (up to
// ~1e-2 at the tails of these values): within 3e-2 + 3e-2 |ref|.
TEST_CASE("gpu.kernels.attention_decode") {
    const int H = 8, S = 2100, B = 4;
    for (int D : {64, 128, 80})
        for (int Hkv : {8, 2, 1}) {
            INFO("head_dim " << D << " kv heads " << Hkv);
            auto [c, dc] = random_cache(B, Hkv, S, D, 20);
            auto [c16, dc16] = random_cache(B, Hkv, S, D, 20, KVPrecision::bf16);
            // Each length alone, then four in one batch; 2100 keys are 33 splits,
            // more than the merge's warp has lanes.
            std::vector<std::vector<int>> cases = {{1}, {17}, {300}, {2048}, {2100}, {1, 17, 300, 2048}};
            for (const auto& lens : cases) {
                const int rows = int(lens.size()), q_stride = H * D + 2 * Hkv * D;
                INFO("cache lengths " << fmt::format("{}", fmt::join(lens, ",")));
                std::vector<int> slots(rows), pos(rows);
                for (int r = 0; r < rows; r++) slots[r] = (r + 1) % B, pos[r] = lens[r] - 1;
                auto qrows = randn(std::size_t(rows) * q_stride, 22, 2.0f);
                std::vector<float> q(std::size_t(rows) * H * D), ref(q.size()), ref16(q.size());
                for (int r = 0; r < rows; r++)
                    std::copy_n(qrows.data() + std::size_t(r) * q_stride, H * D, q.data() + std::size_t(r) * H * D);
                attention_decode(ref.data(), q.data(), c, 0, slots.data(), pos.data(), rows, H);
                attention_decode(ref16.data(), q.data(), c16, 0, slots.data(), pos.data(), rows, H);

                auto dq = dev(qrows);
                auto dslots = dev(slots), dpos = dev(pos);
                DeviceBuffer<float> dscratch(gpu::attention_decode_scratch(rows, H, S, D));
                DeviceBuffer<float> out(ref.size());
                DeviceBuffer<std::uint16_t> out16(ref.size());
                gpu::attention_decode(out.data(), dq.data(), q_stride, dc.layer(0), dslots.data(), dpos.data(),
                                      rows, H, dscratch.data(), nullptr);
                gpu::attention_decode(out16.data(), dq.data(), q_stride, dc.layer(0), dslots.data(),
                                      dpos.data(), rows, H, dscratch.data(), nullptr);
                check_close(host(out), ref, 2e-5f, 2e-4f, "attention_decode f32");
                check_close(widen(host(out16)), ref, 1e-5f, kBf16Rtol, "attention_decode bf16 out");

                gpu::attention_decode(out.data(), dq.data(), q_stride, dc16.layer(0), dslots.data(), dpos.data(),
                                      rows, H, dscratch.data(), nullptr);
                const auto got16 = host(out);
                check_close(got16, ref16, 2e-5f, 2e-4f, "bf16 cache vs the CPU on the same bf16 values");
                check_close(got16, ref, 3e-2f, 3e-2f, "bf16 cache vs the CPU on the f32 values");
            }
        }
}

// kv_write through a paged table: rows of two sequences, positions inside
// and at the edges of blocks of 16, against pd::paged_write.
TEST_CASE("gpu.kernels.kv_write_paged") {
    const int bs = 16, n_blocks = 12, Hkv = 2, D = 80, S = 64, Q = 4 * D, KV = Hkv * D, stride = Q + 2 * KV;
    auto pool = random_pool(n_blocks, bs, Hkv, S, D, 30);
    const auto ids = scrambled_blocks(n_blocks);
    std::vector<BlockTable> tables = {{{ids[0], ids[1], ids[2]}, 0}, {{ids[3], ids[4], ids[5], ids[6]}, 0}};
    const std::vector<int> slots = {0, 1, 1, 0, 1}, pos = {0, 15, 16, 47, 63};
    auto rows = randn(slots.size() * stride, 31);
    for (std::size_t r = 0; r < slots.size(); r++)
        paged_write(pool.host, 0, tables[slots[r]], pos[r], rows.data() + r * stride + Q,
                    rows.data() + r * stride + Q + KV);
    gpu::set_block_tables(pool.dev, table_rows(tables, pool.dev.max_blocks()), int(tables.size()), nullptr);
    auto drows = dev(rows);
    auto dslots = dev(slots), dpos = dev(pos);
    gpu::kv_write(pool.dev.layer(0), drows.data() + Q, drows.data() + Q + KV, stride, dslots.data(), dpos.data(),
                  int(slots.size()), nullptr);
    check_close(host(pool.dev.k), pool.host.k, 0.0f, 0.0f, "K pool");
    check_close(host(pool.dev.v), pool.host.v, 0.0f, 0.0f, "V pool");
}

// The decode kernel through paged tables against pd::attention_paged: one
// batch of spans (a prefill chunk from position 0, a chunk after a cached
// prefix whose first block is shared with the first sequence, decode rows at
// 1, 130, 301 and 512 keys), none a multiple of the block; GQA 1, 4 and 8;
// head_dim 64, 80 and 128; f32 and bf16 outputs.
TEST_CASE("gpu.kernels.attention_paged") {
    const int H = 8, bs = 16, S = 600, n_blocks = 80;
    struct Span {
        int start, n;
    };
    const std::vector<Span> spans = {{0, 23}, {21, 5}, {0, 1}, {129, 1}, {300, 1}, {511, 1}};
    for (int D : {64, 128, 80})
        for (int Hkv : {8, 2, 1}) {
            INFO("head_dim " << D << " kv heads " << Hkv);
            auto pool = random_pool(n_blocks, bs, Hkv, S, D, 40);
            // Each span's sequence gets the next unused scrambled blocks; the
            // second shares the first's block 0 (its cached prefix starts there).
            const auto ids = scrambled_blocks(n_blocks);
            std::vector<BlockTable> tables(spans.size());
            int next = 0;
            for (std::size_t i = 0; i < spans.size(); i++) {
                const int need = blocks_for(pool.host, spans[i].start + spans[i].n);
                for (int j = 0; j < need; j++)
                    tables[i].blocks.push_back(i == 1 && j == 0 ? tables[0].blocks[0] : ids[next++]);
                tables[i].len = spans[i].start;
            }
            std::vector<PagedSpan> host_spans;
            std::vector<int> slots, pos;
            for (std::size_t i = 0; i < spans.size(); i++) {
                host_spans.push_back({&tables[i], int(slots.size()), spans[i].start, spans[i].n});
                for (int j = 0; j < spans[i].n; j++) slots.push_back(int(i)), pos.push_back(spans[i].start + j);
            }
            const int rows = int(slots.size()), q_stride = H * D + 2 * Hkv * D;
            auto qrows = randn(std::size_t(rows) * q_stride, 42, 2.0f);
            std::vector<float> q(std::size_t(rows) * H * D), ref(q.size());
            for (int r = 0; r < rows; r++)
                std::copy_n(qrows.data() + std::size_t(r) * q_stride, H * D, q.data() + std::size_t(r) * H * D);
            attention_paged(ref.data(), q.data(), pool.host, 0, host_spans, H);

            gpu::set_block_tables(pool.dev, table_rows(tables, pool.dev.max_blocks()), int(tables.size()), nullptr);
            auto dq = dev(qrows);
            auto dslots = dev(slots), dpos = dev(pos);
            DeviceBuffer<float> dscratch(gpu::attention_decode_scratch(rows, H, S, D));
            DeviceBuffer<float> out(ref.size());
            DeviceBuffer<std::uint16_t> out16(ref.size());
            gpu::attention_decode(out.data(), dq.data(), q_stride, pool.dev.layer(0), dslots.data(), dpos.data(), rows,
                                  H, dscratch.data(), nullptr);
            gpu::attention_decode(out16.data(), dq.data(), q_stride, pool.dev.layer(0), dslots.data(), dpos.data(),
                                  rows, H, dscratch.data(), nullptr);
            check_close(host(out), ref, 2e-5f, 2e-4f, "attention through paged tables, f32");
            check_close(widen(host(out16)), ref, 1e-5f, kBf16Rtol, "attention through paged tables, bf16 out");
        }
}

// The contiguous cache is the paged one with a single block per sequence:
// the same keys and values, placed in scrambled blocks of 16, give the same
// output to the bit (the kernel visits keys in the same order either way),
// with an f32 cache and with a bf16 one.
TEST_CASE("gpu.kernels.attention_contiguous_equals_paged") {
    const int H = 8, Hkv = 2, D = 64, S = 320, bs = 16, n_blocks = S / bs;
    for (KVPrecision kp : {KVPrecision::f32, KVPrecision::bf16}) {
        INFO("bf16 cache " << (kp == KVPrecision::bf16));
        auto [c, dc] = random_cache(1, Hkv, S, D, 50, kp);
        auto pool = random_pool(n_blocks, bs, Hkv, S, D, 0, kp);
        BlockTable table{scrambled_blocks(n_blocks), S};
        for (int h = 0; h < Hkv; h++)
            for (int p = 0; p < S; p++) {
                const std::size_t from = (std::size_t(h) * S + p) * D;
                const std::size_t to = (std::size_t(table.blocks[p / bs]) * Hkv + h) * bs * D + std::size_t(p % bs) * D;
                std::copy_n(c.k.data() + from, D, pool.host.k.data() + to);
                std::copy_n(c.v.data() + from, D, pool.host.v.data() + to);
            }
        upload_kv(pool.dev, pool.host.k, pool.host.v);
        gpu::set_block_tables(pool.dev, table.blocks, 1, nullptr);

        const std::vector<int> slots = {0, 0, 0, 0}, pos = {0, 16, 200, 319};
        const int rows = int(slots.size());
        auto dq = dev(randn(std::size_t(rows) * H * D, 51));
        auto dslots = dev(slots), dpos = dev(pos);
        DeviceBuffer<float> dscratch(gpu::attention_decode_scratch(rows, H, S, D));
        DeviceBuffer<float> a(std::size_t(rows) * H * D), b(std::size_t(rows) * H * D);
        gpu::attention_decode(a.data(), dq.data(), H * D, dc.layer(0), dslots.data(), dpos.data(), rows, H,
                              dscratch.data(), nullptr);
        gpu::attention_decode(b.data(), dq.data(), H * D, pool.dev.layer(0), dslots.data(), dpos.data(), rows, H,
                              dscratch.data(), nullptr);
        CHECK(host(a) == host(b));
    }
}

// Prefill attention: T queries of one sequence after `start` cached positions,
// causal, GQA ratios 1, 4, 8; small scratch budgets force several query
// chunks; TF32 (bf16 models) within a looser tolerance.
TEST_CASE("gpu.kernels.attention_prefill") {
    gpu::Blas blas(nullptr);
    const int H = 8, S = 2100, B = 2, b = 1;
    struct Case {
        int D, Hkv, start, T;
    };
    const Case cases[] = {{64, 8, 0, 1},   {64, 2, 0, 17},  {64, 1, 0, 300},  {128, 2, 283, 17},
                          {80, 4, 5, 300}, {64, 2, 0, 2048}, {64, 8, 1000, 300}};
    for (const Case& k : cases) {
        const int D = k.D, Hkv = k.Hkv, start = k.start, T = k.T, stride = H * D + 2 * Hkv * D;
        INFO("head_dim " << D << " kv heads " << Hkv << " start " << start << " T " << T);
        auto [c, dc] = random_cache(B, Hkv, S, D, 23);
        auto qrows = randn(std::size_t(T) * stride, 25, 2.0f);
        std::vector<float> q(std::size_t(T) * H * D), ref(q.size());
        for (int t = 0; t < T; t++)
            std::copy_n(qrows.data() + std::size_t(t) * stride, H * D, q.data() + std::size_t(t) * H * D);
        attention_prefill(ref.data(), q.data(), c, 0, b, start, T, H);
        auto dq = dev(qrows);
        // The default budget (one chunk here), and budgets of 5 and 64 query rows.
        const std::size_t per_row = std::size_t(H) * (start + T);
        for (std::size_t budget : {gpu::kPrefillScoreBudget, 5 * per_row, 64 * per_row})
            for (bool tf32 : {false, true}) {
                INFO("budget " << budget << " (" << gpu::attention_prefill_chunk(T, start, H, budget)
                               << " queries per chunk) tf32 " << tf32);
                DeviceBuffer<float> dscratch(gpu::attention_prefill_scratch(T, start, H, budget));
                DeviceBuffer<float> out(ref.size());
                gpu::attention_prefill(blas, out.data(), dq.data(), stride, dc.layer(0), b, start, T, H,
                                       dscratch.data(), tf32, budget);
                const float tol = tf32 ? 1e-2f : 1e-4f;
                check_close(host(out), ref, tol, tol, tf32 ? "attention_prefill tf32" : "attention_prefill");
            }
    }
}
