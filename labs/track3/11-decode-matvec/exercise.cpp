// Lab 11 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-4).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track3-11
//
// This file is a Highway source (README "SIMD with Highway"): foreach_target.h
// compiles it once per instruction set. Everything between HWY_BEFORE_NAMESPACE
// and HWY_AFTER_NAMESPACE becomes one kernel per target (AVX-512, AVX2, NEON,
// the portable fallback); the rest, inside #if HWY_ONCE, is compiled once.
#include "exercise.hpp"

#include <algorithm>
#include <cstddef>

#include "exercise_per_target.hpp"  // this file, once per target
#include "todo_exercise.hpp"

HWY_BEFORE_NAMESPACE();
namespace pd::lab11 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Task 4: y[first..last) = rows first..last-1 of W times x, with vectors of
// this target's width: const hn::ScalableTag<float> d; hn::Lanes(d) floats each.
void MatvecRows(const float* W, const float* x, float* y, int first, int last, int cols) {
    (void)W, (void)x, (void)y, (void)first, (void)last, (void)cols;
    TODO_EXERCISE(
        "README \"SIMD with Highway\": hn::LoadU, hn::MulAdd and hn::SumOfLanes; task 2's ideas "
        "(rows sharing x, several accumulators) carry over; a scalar loop for the tail columns");
}

}  // namespace HWY_NAMESPACE
}  // namespace pd::lab11
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include <stdexcept>

#include "engine/isa.hpp"

namespace pd::lab11 {

HWY_EXPORT(MatvecRows);  // the table of MatvecRows, one entry per target

void matvec_naive(const float* W, const float* x, float* y, int rows, int cols) {
    (void)W, (void)x, (void)y, (void)rows, (void)cols;
    TODO_EXERCISE("README \"The naive loop\": two loops and one float accumulator; exercise.hpp says what to reject");
}

void matvec_unrolled(const float* W, const float* x, float* y, int rows, int cols) {
    (void)W, (void)x, (void)y, (void)rows, (void)cols;
    TODO_EXERCISE(
        "README \"Blocked and unrolled\": 4 rows per pass, 4 accumulators per row, then the leftover "
        "columns and rows; no intrinsics, the compiler vectorises what it can prove independent");
}

void matvec_threads(const float* W, const float* x, float* y, int rows, int cols) {
    (void)W, (void)x, (void)y, (void)rows, (void)cols;
    TODO_EXERCISE(
        "README \"Every core\": #pragma omp parallel, omp_get_thread_num()/omp_get_num_threads(), one "
        "contiguous share of rows per thread, each running task 2's loop on it");
}

void matvec_simd(const float* W, const float* x, float* y, int rows, int cols) {
    (void)W, (void)x, (void)y, (void)rows, (void)cols;
    // Keep this line in your version: it applies PDLAB_ISA before the first dispatch.
    kernel_isa();
    TODO_EXERCISE(
        "README \"SIMD with Highway\": task 3's split, each thread calling "
        "HWY_DYNAMIC_DISPATCH(MatvecRows)(W, x, y, first, last, cols)");
}

}  // namespace pd::lab11
#endif  // HWY_ONCE
