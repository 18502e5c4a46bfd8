// Lab 11 tests: each of your four matrix-vector products against a
// double-precision reference, |got - exact| <= 1e-5 + 1e-5 * |exact|, on
// sizes drawn from PDLAB_TEST_SEED: odd, prime, one row, one column, fewer
// columns than a vector, more rows than threads and fewer, and a model's
// widest rows (tens of thousands of columns).
//   meson test -C build --suite track3-11        (all of them)
//   build/labs/track3/11-decode-matvec/lab11_tests --test-case='lab11.simd.*'
// The SIMD kernel runs on the best instruction set of this CPU; test the
// others too: PDLAB_ISA=avx2 (or scalar) meson test -C build --suite track3-11
#include <omp.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/isa.hpp"
#include "exercise.hpp"
#include "lab_test.hpp"

using namespace pd::lab11;
using pd::lab::Inputs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)

namespace {

using Matvec = void (*)(const float*, const float*, float*, int, int);

constexpr double kAtol = 1e-5, kRtol = 1e-5;

// The shapes every version is checked on: the edges first, then seeded ones.
std::vector<std::pair<int, int>> shapes(Inputs& in) {
    std::vector<std::pair<int, int>> s = {{1, 1}, {1, 7}, {3, 1}, {5, 15}, {7, 17}, {4, 33}, {9, 64}, {13, 129}};
    for (int t = 0; t < 8; t++) s.push_back({in.integer(1, 300), in.integer(1, 1000)});
    s.push_back({in.integer(1, 9), in.integer(20000, 33000)});  // a head's row length, few rows
    return s;
}

// Checks y = W x for one shape; the message says where the first wrong row is
// and what its error looks like.
void check_shape(Matvec f, const char* name, int rows, int cols, Inputs& in) {
    // Scaled so each product term is of order 1 / sqrt(cols): |y| of order 1, as in a model.
    const std::vector<float> W = in.normals(std::size_t(rows) * cols, 1.0f / std::sqrt(float(cols)));
    const std::vector<float> x = in.normals(std::size_t(cols));
    std::vector<float> y(std::size_t(rows) + 1, NAN);
    const float guard = y[rows] = 12345.0f;  // one float past the end: must stay untouched
    f(W.data(), x.data(), y.data(), rows, cols);
    observe(fmt::format("{} y ({}x{})", name, rows, cols), y.data(), std::size_t(rows), {kAtol, kRtol});
    for (int r = 0; r < rows; r++) {
        double exact = 0;
        for (int c = 0; c < cols; c++) exact += double(W[std::size_t(r) * cols + c]) * x[c];
        const double err = std::fabs(double(y[r]) - exact);
        if (!(err <= kAtol + kRtol * std::fabs(exact))) {
            FAIL_CHECK(fmt::format("{} on a {}x{} matrix: y[{}] = {} but the exact sum is {:.7g} (error {:.2g}). {}",
                                   name, rows, cols, r, y[r], exact, err,
                                   std::isnan(y[r]) ? "NaN: this row was never written (rows left over after the last block?)"
                                   : r >= rows - rows % 4 ? "A row of the last, partial block: check the leftover rows"
                                                          : "Check the leftover columns, and that each accumulator starts at 0"));
            return;
        }
    }
    CHECK_MESSAGE(y[rows] == guard, name << " wrote past y[" << rows - 1 << "]");
}

void check_version(Matvec f, const char* name, std::uint64_t stream) {
    Inputs in(stream);
    for (auto [rows, cols] : shapes(in)) check_shape(f, name, rows, cols, in);
}

void check_rejects(Matvec f, const char* name) {
    std::vector<float> buf(4, 1.0f);
    INFO(name, " must throw std::invalid_argument for rows or cols below 1");
    CHECK_THROWS_AS(f(buf.data(), buf.data(), buf.data(), 0, 4), std::invalid_argument);
    CHECK_THROWS_AS(f(buf.data(), buf.data(), buf.data(), 2, 0), std::invalid_argument);
    CHECK_THROWS_AS(f(buf.data(), buf.data(), buf.data(), -1, 2), std::invalid_argument);
}

void try_once(Matvec f) {
    pd::lab::needs([&] {
        float one = 1, out = 0;
        f(&one, &one, &out, 1, 1);
    });
}

}  // namespace

TEST_CASE("lab11.naive.against_double") {
    try_once(matvec_naive);
    check_version(matvec_naive, "matvec_naive", 1101);
    check_rejects(matvec_naive, "matvec_naive");
}

TEST_CASE("lab11.unrolled.against_double") {
    try_once(matvec_unrolled);
    check_version(matvec_unrolled, "matvec_unrolled", 1102);
    check_rejects(matvec_unrolled, "matvec_unrolled");
}

TEST_CASE("lab11.threads.against_double_for_every_thread_count") {
    // More threads than rows, as many, fewer: every share, empty or not, must add up.
    try_once(matvec_threads);
    const int saved = omp_get_max_threads();
    for (int threads : {1, 2, 3, 7}) {
        omp_set_num_threads(threads);
        INFO(threads, " OpenMP threads");
        check_version(matvec_threads, "matvec_threads", 1103 + threads);
    }
    omp_set_num_threads(saved);
    check_rejects(matvec_threads, "matvec_threads");
}

TEST_CASE("lab11.simd.against_double") {
    try_once(matvec_simd);
    INFO("kernels: ", pd::kernel_isa(), " (PDLAB_ISA picks another)");
    const int saved = omp_get_max_threads();
    for (int threads : {1, 3}) {
        omp_set_num_threads(threads);
        INFO(threads, " OpenMP threads");
        check_version(matvec_simd, "matvec_simd", 1110 + threads);
    }
    omp_set_num_threads(saved);
    check_rejects(matvec_simd, "matvec_simd");
}

TEST_CASE("lab11.seed.another_seed_gives_other_inputs") {
    Inputs a(1101), b(1101, pd::lab::env_test_seed() + 1);
    CHECK_MESSAGE(shapes(a) != shapes(b), "two seeds gave the same shapes");
}
