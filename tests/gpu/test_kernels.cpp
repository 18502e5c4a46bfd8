// gpu.kernels: every CUDA kernel against its CPU twin (src/engine/ops.hpp,
// src/engine/attention.hpp, src/engine/kv_cache.hpp, tests/reference/reference.hpp) on
// random inputs of several shapes, with the llm.c-style check
// |gpu - cpu| <= atol + rtol |cpu|.
// Needs a GPU: main_device.cpp exits 77 (skip) without one.

#include <algorithm>
#include <cstdint>
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
// dequantized to bf16 for cuBLAS.
struct DeviceInt8 {
    DeviceBuffer<std::int8_t> q;
    DeviceBuffer<float> scales;
    DeviceBuffer<std::uint16_t> w;
    gpu::DeviceLinear L;
};
DeviceInt8 device_int8(const std::vector<float>& W, int K, int N, int G, const float* bias) {
    const QuantizedMatrix qm = quantize_rows(W.data(), N, K, G);
    DeviceInt8 d{dev(qm.q), dev(qm.scales), dev(bf16_copy(dequantize_rows(qm)).bits), {}};
    d.L.in = K, d.L.out = N, d.L.bf16 = true, d.L.w = d.w.data(), d.L.bias = bias;
    d.L.q = d.q.data(), d.L.scales = d.scales.data(), d.L.group = G;
    return d;
}

// bf16 outputs: within one bf16 rounding (2^-8 relative) of the f32 twin.
constexpr float kBf16Rtol = 1.0f / 128;

const int kRowShapes[][2] = {{1, 64}, {5, 768}, {33, 2048}, {3, 100}, {2, 4097}};

// A one-layer cache of random K (seed) and V (seed + 1), on the host and the
// same values on the device.
struct RandomCache {
    KVCache host;
    gpu::DeviceKVCache dev;
};
RandomCache random_cache(int B, int Hkv, int S, int D, unsigned seed) {
    RandomCache r{make_kv_cache(1, B, Hkv, S, D), gpu::make_device_kv_cache(1, B, Hkv, S, D)};
    r.host.k = randn(r.host.k.size(), seed);
    r.host.v = randn(r.host.v.size(), seed + 1);
    r.dev.k.upload(r.host.k.data(), r.host.k.size());
    r.dev.v.upload(r.host.v.data(), r.host.v.size());
    return r;
}

// A one-layer paged pool of n_blocks blocks of bs positions with random K
// (seed) and V (seed + 1), on the host and the same values on the device.
// Tests set the block tables themselves (the kernels read only the tables).
struct RandomPool {
    PagedKVCache host;
    gpu::DeviceKVCache dev;
};
RandomPool random_pool(int n_blocks, int bs, int Hkv, int max_seq, int D, unsigned seed) {
    RandomPool r{make_paged_kv_cache(1, Hkv, D, bs, n_blocks, max_seq),
                 gpu::make_device_paged_kv_cache(1, Hkv, D, bs, n_blocks, max_seq)};
    r.host.k = randn(r.host.k.size(), seed);
    r.host.v = randn(r.host.v.size(), seed + 1);
    r.dev.k.upload(r.host.k.data(), r.host.k.size());
    r.dev.v.upload(r.host.v.data(), r.host.v.size());
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

TEST_CASE("gpu.kernels.rmsnorm") {
    for (auto [M, D] : kRowShapes) {
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
                    const int G = int8_group(p);
                    INFO(precision_name(p) << " M " << M << " in " << K << " out " << N << " accumulate " << accumulate);
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
// twin: the CPU product (ref::linear on the bf16 values, or the engine's
// int8 product), then pd::swiglu. M <= 4: the fused GEMV; M = 5 and rows of
// 100: the product, then the swiglu kernel (int8 there: cuBLAS's bf16 copy
// against the CPU's exact int8 weights, a looser tolerance, as above).
TEST_CASE("gpu.kernels.linear_swiglu") {
    gpu::Blas blas(nullptr);
    const int shapes[][2] = {{64, 48}, {2064, 300}, {100, 37}};  // (in, F): W is (2F, in)
    for (Precision p : {Precision::bf16, Precision::int8_g64})
        for (auto [K, F] : shapes)
            for (int M : {1, 2, 4, 5}) {
                INFO(precision_name(p) << " M " << M << " in " << K << " F " << F);
                const int N = 2 * F;
                auto W = randn(std::size_t(N) * K, 40, 0.05f);
                const Bf16Copy x = bf16_copy(randn(std::size_t(M) * K, 41)), W16 = bf16_copy(W);
                std::vector<float> gate_up(std::size_t(M) * N), ref(std::size_t(M) * F);
                if (p == Precision::bf16) ref::linear(gate_up.data(), x.values.data(), W16.values.data(), nullptr, M, K, N);
                else linear_forward(make_linear(W, {}, K, N, p), x.values.data(), M, gate_up.data());
                swiglu(ref.data(), gate_up.data(), M, F);

                const bool int8 = is_int8(p);
                auto dx = dev(x.bits), dW16 = dev(W16.bits);
                DeviceInt8 d8;
                if (int8) d8 = device_int8(W, K, N, int8_group(p), nullptr);
                gpu::DeviceLinear L;
                L.in = K, L.out = N, L.bf16 = true, L.w = dW16.data();
                if (int8) L = d8.L;
                DeviceBuffer<float> scratch(gate_up.size());
                DeviceBuffer<std::uint16_t> h(ref.size());
                gpu::linear_swiglu(blas, L, dx.data(), M, h.data(), scratch.data());
                // int8's GEMV: the CPU's x in int16 moves g and u by ~1e-4 at K = 2064.
                const bool loose = int8 && gpu::linear_kernel(L, M) == gpu::LinearKernel::cublas;
                check_close(widen(host(h)), ref, loose ? 1e-2f : int8 ? 1e-3f : 1e-4f, loose ? 1e-2f : kBf16Rtol,
                            "linear_swiglu");
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

TEST_CASE("gpu.kernels.kv_write") {
    const int L = 2, B = 3, Hkv = 2, S = 40, D = 64, Q = 4 * D, KV = Hkv * D, stride = Q + 2 * KV;
    KVCache ref = make_kv_cache(L, B, Hkv, S, D);
    gpu::DeviceKVCache dc = gpu::make_device_kv_cache(L, B, Hkv, S, D);
    const std::vector<int> slots = {2, 0, 2}, pos = {5, 0, 39};
    auto rows = randn(slots.size() * stride, 19);
    for (std::size_t r = 0; r < slots.size(); r++)
        kv_write(ref, 1, slots[r], pos[r], rows.data() + r * stride + Q, rows.data() + r * stride + Q + KV);
    auto drows = dev(rows);
    auto dslots = dev(slots), dpos = dev(pos);
    gpu::kv_write(dc.layer(1), drows.data() + Q, drows.data() + Q + KV, stride, dslots.data(), dpos.data(),
                  int(slots.size()), nullptr);
    check_close(host(dc.k), ref.k, 0.0f, 0.0f, "K cache");
    check_close(host(dc.v), ref.v, 0.0f, 0.0f, "V cache");
}

// Decode attention: one query per row, GQA ratios 1, 4 and 8 (8 query heads
// over 8, 2 and 1 KV heads), cache lengths 1, 17, 300 and 2048, rows of one
// batch at different lengths, q read with a row stride.
TEST_CASE("gpu.kernels.attention_decode") {
    const int H = 8, S = 2100, B = 4;
    for (int D : {64, 128, 80})
        for (int Hkv : {8, 2, 1}) {
            INFO("head_dim " << D << " kv heads " << Hkv);
            auto [c, dc] = random_cache(B, Hkv, S, D, 20);
            // Each length alone, then all four in one batch.
            std::vector<std::vector<int>> cases = {{1}, {17}, {300}, {2048}, {1, 17, 300, 2048}};
            for (const auto& lens : cases) {
                const int rows = int(lens.size()), q_stride = H * D + 2 * Hkv * D;
                INFO("cache lengths " << fmt::format("{}", fmt::join(lens, ",")));
                std::vector<int> slots(rows), pos(rows);
                for (int r = 0; r < rows; r++) slots[r] = (r + 1) % B, pos[r] = lens[r] - 1;
                auto qrows = randn(std::size_t(rows) * q_stride, 22, 2.0f);
                std::vector<float> q(std::size_t(rows) * H * D), ref(q.size());
                for (int r = 0; r < rows; r++)
                    std::copy_n(qrows.data() + std::size_t(r) * q_stride, H * D, q.data() + std::size_t(r) * H * D);
                attention_decode(ref.data(), q.data(), c, 0, slots.data(), pos.data(), rows, H);

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
// output to the bit (the kernel visits keys in the same order either way).
TEST_CASE("gpu.kernels.attention_contiguous_equals_paged") {
    const int H = 8, Hkv = 2, D = 64, S = 320, bs = 16, n_blocks = S / bs;
    auto [c, dc] = random_cache(1, Hkv, S, D, 50);
    auto pool = random_pool(n_blocks, bs, Hkv, S, D, 0);
    BlockTable table{scrambled_blocks(n_blocks), S};
    for (int h = 0; h < Hkv; h++)
        for (int p = 0; p < S; p++) {
            const std::size_t from = (std::size_t(h) * S + p) * D;
            const std::size_t to = (std::size_t(table.blocks[p / bs]) * Hkv + h) * bs * D + std::size_t(p % bs) * D;
            std::copy_n(c.k.data() + from, D, pool.host.k.data() + to);
            std::copy_n(c.v.data() + from, D, pool.host.v.data() + to);
        }
    pool.dev.k.upload(pool.host.k.data(), pool.host.k.size());
    pool.dev.v.upload(pool.host.v.data(), pool.host.v.size());
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
