// engine.ops: each fast operation against its plain reference.
#include <cstring>

#include "engine/bf16_convert.hpp"
#include "check.hpp"
#include "engine/ops.hpp"
#include "reference.hpp"

using namespace pd;
using namespace pd::test;

TEST_CASE("engine.ops.rmsnorm") {
    for (int D : {7, 64, 768}) {
        int M = 5;
        auto x = randn(std::size_t(M) * D, 1), w = randn(D, 2);
        std::vector<float> got(x.size()), ref(x.size());
        rmsnorm(got.data(), x.data(), w.data(), M, D, 1e-5f);
        ref::rmsnorm(ref.data(), x.data(), w.data(), M, D, 1e-5f);
        check_close(got, ref, 1e-5f, 1e-4f, fmt::format("rmsnorm D={}", D));
    }
}

TEST_CASE("engine.ops.layernorm") {
    int M = 4, D = 96;
    auto x = randn(std::size_t(M) * D, 3, 3.0f), w = randn(D, 4), b = randn(D, 5);
    for (auto& v : x) v += 10.0f;  // a large mean must not hurt the variance
    std::vector<float> got(x.size()), ref(x.size());
    layernorm(got.data(), x.data(), w.data(), b.data(), M, D, 1e-5f);
    ref::layernorm(ref.data(), x.data(), w.data(), b.data(), M, D, 1e-5f);
    check_close(got, ref, 1e-4f, 1e-4f, "layernorm");
}

TEST_CASE("engine.ops.gelu_tanh") {
    // Several threads' chunks, a tail shorter than a vector, and the extremes
    // where the exp in x / (1 + exp(-2u)) saturates.
    auto x = randn(10007, 6, 3.0f);
    for (float v : {-1e4f, -90.0f, -20.0f, 0.0f, 20.0f, 90.0f, 1e4f}) x.push_back(v);
    auto ref = x;
    gelu_tanh(x.data(), long(x.size()));
    ref::gelu_tanh(ref.data(), long(ref.size()));
    check_close(x, ref, 1e-6f, 1e-5f, "gelu_tanh");
}

TEST_CASE("engine.ops.swiglu") {
    int M = 3, F = 50;
    auto gu = randn(std::size_t(M) * 2 * F, 7, 2.0f);
    gu[0] = -200.0f, gu[1] = 200.0f;  // exp(-g) saturates both ways
    std::vector<float> got(std::size_t(M) * F), ref(got.size());
    swiglu(got.data(), gu.data(), M, F);
    ref::swiglu(ref.data(), gu.data(), M, F);
    check_close(got, ref, 1e-6f, 1e-5f, "swiglu");
}

TEST_CASE("engine.ops.rope") {
    int M = 6, H = 3, D = 16, S = 64;
    float theta = 10000.0f;
    auto x = randn(std::size_t(M) * H * D, 8), ref = x;
    std::vector<int> pos = {0, 1, 2, 17, 40, 63};
    std::vector<float> cos_t(std::size_t(S) * D / 2), sin_t(cos_t.size());
    rope_tables(cos_t.data(), sin_t.data(), S, D, theta);
    rope(x.data(), M, H * D, H, D, pos.data(), cos_t.data(), sin_t.data());
    ref::rope(ref.data(), M, H, D, pos.data(), theta);
    check_close(x, ref, 1e-5f, 1e-4f, "rope (rotate-half layout)");
    // Position 0 is the identity rotation.
    auto y = randn(std::size_t(H) * D, 9), y0 = y;
    int p0 = 0;
    rope(y.data(), 1, H * D, H, D, &p0, cos_t.data(), sin_t.data());
    check_close(y, y0, 0.0f, 0.0f, "rope at position 0");
}

TEST_CASE("engine.ops.softmax") {
    auto x = randn(1000, 10, 20.0f), ref = x;
    softmax(x.data(), int(x.size()));
    ref::softmax(ref.data(), int(ref.size()));
    check_close(x, ref, 1e-7f, 1e-4f, "softmax");
    double sum = 0;
    for (float v : x) sum += v;
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("engine.ops.bf16_rounding") {
    // The vector rounding equals f32_to_bf16 bit for bit: random values, ties
    // (both even and odd), values that round up into the next binade or to
    // infinity, infinities, NaN (stays a NaN) and a tail shorter than a vector.
    std::vector<float> x = randn(1000, 41, 10.0f);
    for (std::uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3fffffffu, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                               0x7fc00001u, 0x7f800001u, 0x00008000u, 0x80000000u}) {
        float f;
        std::memcpy(&f, &bits, 4);
        x.push_back(f);
    }
    std::vector<bf16> h(x.size());
    std::vector<float> r(x.size());
    to_bf16(x.data(), h.data(), x.size());
    round_to_bf16(x.data(), r.data(), x.size());
    for (std::size_t i = 0; i < x.size(); i++) {
        INFO("i=" << i << " x=" << x[i]);
        CHECK(h[i] == f32_to_bf16(x[i]));
        const float want = bf16_to_f32(f32_to_bf16(x[i]));
        CHECK(std::memcmp(&r[i], &want, 4) == 0);
    }
}
