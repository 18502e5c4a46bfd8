// Lab 12 tests: quantize_row against the engine's own quantizer
// (pd::quantize_rows) and the round-trip bound, dequantize_row against the
// engine's dequantizer, dot_int8 against a double-precision dot product of the
// dequantized row and against the engine's int8 decode kernel. Lengths, group
// sizes and values derive from PDLAB_TEST_SEED (pd::lab::Inputs).
// Run: meson test -C build --suite track3-12
#include <cmath>
#include <stdexcept>

#include "check.hpp"
#include "engine/matmul.hpp"
#include "engine/quantize.hpp"
#include "exercise.hpp"
#include "lab_test.hpp"  // NotImplemented shown with its hint; pd::lab::needs(), observe()

using namespace pd;
using pd::lab::needs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
namespace ex = pd::lab12;

namespace {

// A seeded row: length, group size (32, 64, 128 or an odd one) and values,
// with an all-zero first group and one outlier, the two cases that trip a quantizer.
struct Row {
    std::vector<float> w;
    int group;
};
Row seeded_row(std::uint64_t stream) {
    pd::lab::Inputs in(stream);
    const int groups[] = {32, 64, 128, 7};
    Row r{in.normals(std::size_t(in.integer(1, 700)), 0.05f), groups[in.integer(0, 3)]};
    for (int k = 0; k < std::min<int>(r.group, int(r.w.size()) / 2); k++) r.w[k] = 0.0f;
    r.w[std::size_t(in.integer(0, int(r.w.size()) - 1))] = float(in.uniform(-2, 2));
    return r;
}

std::vector<int> as_ints(const std::vector<std::int8_t>& q) { return {q.begin(), q.end()}; }

}  // namespace

TEST_CASE("lab12.quantize.matches_the_engine") {
    needs([] { ex::quantize_row(std::vector<float>{1.0f}, 1); });
    for (std::uint64_t s = 0; s < 20; s++) {
        const Row r = seeded_row(100 + s);
        const ex::QuantizedRow got = ex::quantize_row(r.w, r.group);
        const QuantizedMatrix ref = quantize_rows(r.w.data(), 1, int(r.w.size()), r.group);
        observe("q", as_ints(got.q));
        observe("scales", got.scales, {0, 1e-6});
        INFO(fmt::format("row of {} values in groups of {}: the scales must be max|w|/127 of each group "
                         "({} groups, the last one shorter when G does not divide n)",
                         r.w.size(), r.group, ref.scales.size()));
        REQUIRE(got.scales.size() == ref.scales.size());
        REQUIRE(got.q.size() == r.w.size());
        for (std::size_t g = 0; g < ref.scales.size(); g++) CHECK(got.scales[g] == doctest::Approx(ref.scales[g]).epsilon(1e-6));
        INFO("q must be round(w / scale) kept in [-127, 127], 0 in an all-zero group");
        std::size_t off = 0;
        for (std::size_t k = 0; k < r.w.size(); k++) off += std::abs(int(got.q[k]) - int(ref.q[k])) > 0;
        CHECK(off == 0);
    }
}

TEST_CASE("lab12.quantize.round_trip_within_half_a_step") {
    needs([] { ex::quantize_row(std::vector<float>{1.0f}, 1); });
    for (std::uint64_t s = 0; s < 20; s++) {
        const Row r = seeded_row(200 + s);
        const ex::QuantizedRow q = ex::quantize_row(r.w, r.group);
        REQUIRE(q.q.size() == r.w.size());
        REQUIRE(q.scales.size() == (r.w.size() + r.group - 1) / r.group);
        std::size_t bad = 0;
        for (std::size_t k = 0; k < r.w.size(); k++) {
            const float scale = q.scales[k / r.group];
            bad += !(std::fabs(r.w[k] - float(q.q[k]) * scale) <= 0.5f * scale * (1 + 1e-5f));
        }
        observe("values_outside_half_a_step", bad);
        INFO(fmt::format("{} of {} weights come back further than half a step (scale / 2) from w: "
                         "round to the nearest integer, do not truncate", bad, r.w.size()));
        CHECK(bad == 0);
    }
}

TEST_CASE("lab12.quantize.bad_input_throws") {
    needs([] { ex::quantize_row(std::vector<float>{1.0f}, 1); });
    CHECK_THROWS_AS(ex::quantize_row(std::vector<float>{}, 32), std::invalid_argument);
    CHECK_THROWS_AS(ex::quantize_row(std::vector<float>{1.0f, 2.0f}, 0), std::invalid_argument);
    observe("rejects_empty_and_group_0", true);
}

TEST_CASE("lab12.dequantize.matches_the_engine") {
    needs([] { ex::dequantize_row(ex::QuantizedRow{1, {1}, {1.0f}}); });
    for (std::uint64_t s = 0; s < 20; s++) {
        const Row r = seeded_row(300 + s);
        const QuantizedMatrix ref = quantize_rows(r.w.data(), 1, int(r.w.size()), r.group);
        const ex::QuantizedRow row{r.group, ref.q, ref.scales};
        const std::vector<float> got = ex::dequantize_row(row);
        observe("dequantized", got, {0, 1e-6});
        pd::test::check_close(got, dequantize_rows(ref), 0.0f, 1e-6f,
                              fmt::format("dequantize_row (n={}, G={}): value k is q[k] times the scale of "
                                          "group k / G", r.w.size(), r.group));
    }
}

TEST_CASE("lab12.dot.matches_double_reference") {
    needs([] { ex::dot_int8(ex::QuantizedRow{1, {1}, {1.0f}}, std::vector<float>{1.0f}); });
    for (std::uint64_t s = 0; s < 20; s++) {
        const Row r = seeded_row(400 + s);
        const auto x = pd::lab::Inputs(500 + s).normals(r.w.size());
        const QuantizedMatrix ref = quantize_rows(r.w.data(), 1, int(r.w.size()), r.group);
        const double got = ex::dot_int8(ex::QuantizedRow{r.group, ref.q, ref.scales}, x);
        double want = 0, mag = 0;
        const auto dq = dequantize_rows(ref);
        for (std::size_t k = 0; k < x.size(); k++) want += double(dq[k]) * x[k], mag += std::fabs(double(dq[k]) * x[k]);
        observe("dot", got, {1e-6, 1e-6});
        INFO(fmt::format("dot_int8 (n={}, G={}) = {} but the dequantized row gives {}: each group's sum of "
                         "q * x times its scale, all groups added", x.size(), r.group, got, want));
        CHECK(std::fabs(got - want) <= 1e-6 * (1 + mag));
    }
}

TEST_CASE("lab12.dot.matches_the_engine_kernel") {
    // The engine's int8 decode kernel (panel_quantized.cpp) on the same weights: a
    // (1, n) x (n, 1) product of an int8 Linear with the group sizes it supports.
    // The kernel rounds x to int16 per group (2^-16 of the group's largest |x|),
    // so it is held to a tolerance on the size of the terms, not of the sum.
    needs([] { ex::dot_int8(ex::QuantizedRow{1, {1}, {1.0f}}, std::vector<float>{1.0f}); });
    for (int G : {32, 64, 128}) {
        pd::lab::Inputs in(600 + G);
        const int n = in.integer(1, 900);
        const auto w = in.normals(std::size_t(n), 0.05f), x = in.normals(std::size_t(n));
        const ex::QuantizedRow q = ex::quantize_row(w, G);
        Linear L = make_linear(w, {}, n, 1, int8_precision(G));
        float y = 0;
        linear_forward(L, x.data(), 1, &y);
        const double got = ex::dot_int8(q, x);
        double mag = 0;  // sum of |w x|: the kernel's rounding of x scales with it
        for (int k = 0; k < n; k++) mag += std::fabs(double(w[std::size_t(k)]) * x[std::size_t(k)]);
        observe("dot_vs_kernel", got, {1e-4, 1e-4});
        INFO(fmt::format("n={}, G={}: your quantize_row + dot_int8 give {}, the engine's int8 kernel {}", n, G,
                         got, y));
        CHECK(std::fabs(got - y) <= 1e-4 * (1 + mag));
    }
}

TEST_CASE("lab12.dot.bad_input_throws") {
    needs([] { ex::dot_int8(ex::QuantizedRow{1, {1}, {1.0f}}, std::vector<float>{1.0f}); });
    CHECK_THROWS_AS(ex::dot_int8(ex::QuantizedRow{1, {1, 2}, {1.0f, 1.0f}}, std::vector<float>{1.0f}),
                    std::invalid_argument);
    observe("rejects_length_mismatch", true);
}

TEST_CASE("lab12.seed.other_seed_other_rows") {
    // The graded rows derive from PDLAB_TEST_SEED: a hard-coded answer fails another seed.
    const auto a = pd::lab::Inputs(100, 1).normals(50), b = pd::lab::Inputs(100, 2).normals(50);
    CHECK(a != b);
}
