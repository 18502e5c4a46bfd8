// engine.matmul: the decode kernel (small M) and the oneDNN path (large M)
// against the plain reference, in f32 and bf16.
#include <omp.h>

#include <cstdlib>
#include <map>
#include <string>

#include "check.hpp"
#include "engine/isa.hpp"
#include "engine/matmul.hpp"
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

TEST_CASE("engine.matmul.precision_table") {
    // Every format row (precision.cpp) parses from its name, names itself back,
    // and its bytes follow from its bits (and, quantized, one f32 scale per group).
    for (const std::string& name : format_names())
        for (int group : {32, 64, 128}) {
            const Precision p = parse_precision(name, group);
            INFO(name << " group " << group);
            CHECK(std::string(p.traits().name) == name);
            CHECK(std::string(precision_name(p)) ==
                  (is_quantized(p) ? name + "-g" + std::to_string(group) : name));
            CHECK(group_size(p) == (is_quantized(p) ? group : 0));
            CHECK(matrix_bytes(group, 3, p) ==
                  std::size_t(3) * (std::size_t(group) * weight_bits(p) / 8 + (is_quantized(p) ? sizeof(float) : 0)));
        }
    CHECK(parse_precision("int8", 32) == Precision::int8_g32);
    CHECK(parse_precision("bfloat16") == Precision::bf16);
    CHECK_FALSE(Precision::int4_g64.traits().cuda);  // --device cuda refuses it (engine.cpp)
    CHECK_THROWS_AS(parse_precision("int8", 48), UserError);
    CHECK_THROWS_AS(parse_precision("int3"), UserError);
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

TEST_CASE("engine.matmul.arranged_for_decode") {
    // Panels moved into per-thread arenas give the same products, whatever the
    // thread count the kernel then runs with (equal to the parts, or not), and
    // the same row-major weights back.
    const int saved = omp_get_max_threads();
    for (Precision p : {Precision::f32, Precision::bf16}) {
        auto w1 = randn(std::size_t(300) * 256, 31, 0.1f), w2 = randn(std::size_t(256) * 700, 32, 0.1f);
        auto b2 = randn(256, 33);
        Linear a = make_linear(w1, {}, 256, 300, p), b = make_linear(w2, b2, 700, 256, p);
        const auto rows_a = p == Precision::f32 ? linear_rows_f32(a) : std::vector<float>{};
        const auto x1 = randn(std::size_t(kSmallM) * 256, 34), x2 = randn(std::size_t(kSmallM) * 700, 35);
        for (int M : {1, 3, 16}) {
            std::vector<float> ya(std::size_t(M) * 300), yb(std::size_t(M) * 256);
            linear_small_m(a, x1.data(), M, ya.data());
            linear_small_m(b, x2.data(), M, yb.data());
            Linear a3 = a, b3 = b;
            arrange_for_decode({&a3, &b3}, 3);
            REQUIRE(a3.parts.size() == 3);
            CHECK(a3.store == b3.store);  // one set of arenas for both
            for (int threads : {1, 2, 3}) {
                omp_set_num_threads(threads);
                std::vector<float> ga(ya.size()), gb(yb.size());
                linear_small_m(a3, x1.data(), M, ga.data());
                linear_small_m(b3, x2.data(), M, gb.data());
                INFO(std::string(precision_name(p)) << " M=" << M << " threads=" << threads);
                CHECK(ga == ya);
                CHECK(gb == yb);
            }
            omp_set_num_threads(saved);
            if (p == Precision::f32) CHECK(linear_rows_f32(a3) == rows_a);
        }
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

TEST_CASE("engine.matmul.kernel_follows_pdlab_isa") {
    // The decode kernel runs on the instruction set PDLAB_ISA names (the
    // per-ISA test runs rely on it), else on the best this CPU has.
    const std::map<std::string, std::string> shown{
        {"avx512", "AVX-512"}, {"avx2", "AVX2"}, {"neon", "NEON"}, {"scalar", "portable"}};
    const char* env = std::getenv("PDLAB_ISA");
    const std::string name = env && std::string(env) != "best" ? env : available_isas().front();
    Linear L = make_linear(randn(64 * 64, 1), {}, 64, 64, Precision::f32);
    INFO("PDLAB_ISA=" << name << ", kernel: " << linear_impl_name(L, 1));
    CHECK(linear_impl_name(L, 1).find(shown.at(name)) != std::string::npos);
}
