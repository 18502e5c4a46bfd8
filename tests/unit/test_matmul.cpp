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
    if (p == Precision::bf16 && M >= kBf16RoundXMinM)  // the bf16 products from this M on round x too
        for (auto& v : x_seen) v = bf16_to_f32(f32_to_bf16(v));
    Linear L = make_linear(w, b, K, N, p);
    std::vector<float> got(std::size_t(M) * N), ref(got.size());
    linear_forward(L, x.data(), M, got.data());
    ref::linear(ref.data(), x_seen.data(), w_seen.data(), with_bias ? b.data() : nullptr, M, K, N);
    check_close(got, ref, 1e-3f, 1e-3f,
                fmt::format("linear M={} K={} N={} {} bias={} ({})", M, K, N, precision_name(p), with_bias,
                            linear_impl_name(L, M)));
}

// Every row count of the decode kernel (8 rows per pass, partial sums over k
// for M < 4), panel widths with and without a partial last panel, odd K (a
// bf16 k-pair half padded), and matrices above 256 KiB, which the threads share.
TEST_CASE("engine.matmul.small_m_f32") {
    for (int M = 1; M <= kSmallM; M++)
        for (auto [K, N] : {std::pair{64, 32}, {70, 33}, {768, 130}, {9, 7}}) check_linear(M, K, N, Precision::f32, M % 3 == 0);
}

TEST_CASE("engine.matmul.small_m_bf16") {
    for (int M = 1; M <= kSmallM; M++)
        for (auto [K, N] : {std::pair{64, 32}, {77, 9}, {301, 500}}) check_linear(M, K, N, Precision::bf16, M % 2 == 1);
}

TEST_CASE("engine.matmul.rows_round_trip") {
    // linear_rows_*() rebuilds the row-major matrix from the panels (the GPU
    // upload depends on it): exactly the input, or its bf16 rounding.
    for (auto [K, N] : {std::pair{5, 33}, {64, 64}, {77, 9}}) {
        auto w = randn(std::size_t(N) * K, 21, 1.0f);
        CHECK(linear_rows_f32(make_linear(w, {}, K, N, Precision::f32)) == w);
        std::vector<bf16> w16(w.size());
        for (std::size_t i = 0; i < w.size(); i++) w16[i] = f32_to_bf16(w[i]);
        CHECK(linear_rows_bf16(make_linear(w, {}, K, N, Precision::bf16)) == w16);
    }
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
