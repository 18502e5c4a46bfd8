// engine.matmul: the decode kernel (small M) and the oneDNN path (large M)
// against the plain reference, in f32 and bf16.
#include "check.hpp"
#include "matmul.hpp"
#include "reference.hpp"

using namespace pd;
using namespace pd::test;

static void check_linear(int M, int K, int N, Precision p, bool with_bias) {
    auto w = randn(std::size_t(N) * K, 11, 0.1f), x = randn(std::size_t(M) * K, 12);
    std::vector<float> b = with_bias ? randn(N, 13) : std::vector<float>{};
    // The reference sees exactly the weights the kernel sees (rounded for bf16).
    std::vector<float> w_seen = w;
    if (p == Precision::bf16)
        for (auto& v : w_seen) v = bf16_to_f32(f32_to_bf16(v));
    std::vector<float> x_seen = x;
    if (p == Precision::bf16 && M > kSmallM)  // oneDNN's bf16 path rounds x too
        for (auto& v : x_seen) v = bf16_to_f32(f32_to_bf16(v));
    Linear L = make_linear(w, b, K, N, p);
    std::vector<float> got(std::size_t(M) * N), ref(got.size());
    linear_forward(L, x.data(), M, got.data());
    ref::linear(ref.data(), x_seen.data(), w_seen.data(), with_bias ? b.data() : nullptr, M, K, N);
    check_close(got, ref, 1e-3f, 1e-3f,
                fmt::format("linear M={} K={} N={} {} bias={} ({})", M, K, N, precision_name(p), with_bias,
                            linear_impl_name(L, M)));
}

TEST_CASE("engine.matmul.small_m_f32") {
    for (int M : {1, 3, 16})
        for (auto [K, N] : {std::pair{64, 32}, {70, 33}, {768, 130}}) check_linear(M, K, N, Precision::f32, M == 3);
}

TEST_CASE("engine.matmul.small_m_bf16") {
    for (int M : {1, 5})
        for (auto [K, N] : {std::pair{64, 32}, {77, 9}}) check_linear(M, K, N, Precision::bf16, M == 5);
}

TEST_CASE("engine.matmul.onednn_f32") {
    check_linear(17, 64, 48, Precision::f32, false);
    check_linear(100, 96, 130, Precision::f32, true);
}

TEST_CASE("engine.matmul.onednn_bf16") {
    check_linear(40, 64, 48, Precision::bf16, true);
}

TEST_CASE("engine.matmul.no_reference_kernel") {
    // The blocked weights must be served by a JIT kernel, not oneDNN's slow reference.
    Linear L = make_linear(randn(256 * 256, 1), {}, 256, 256, Precision::f32);
    for (int M : {17, 128, 300}) {
        std::string impl = linear_impl_name(L, M);
        INFO("M=" << M << " uses " << impl);
        CHECK(impl.find("ref") == std::string::npos);
    }
}
