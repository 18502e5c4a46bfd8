// Lab 11: what you write. The product at the heart of a decode step: one row
// of activations times a weight matrix, y = W x, four times, each a step
// faster. At batch 1 every weight is used for ONE multiply-add, so the speed
// limit is how fast the weights stream from DRAM (lab 10); each version
// removes what keeps the previous one from that limit.
//
// All four have the same contract:
//   W : (rows, cols) f32, row-major: row r starts at W + r * cols
//   x : (cols) f32
//   y : (rows) f32, y[r] = sum over c of W[r, c] * x[c]  (overwritten)
// rows and cols are any sizes >= 1: odd, prime, not a multiple of anything.
// W, x, y do not overlap. Each throws std::invalid_argument when rows or cols
// is below 1 (nullptr operands are not checked: that is the caller's promise).
// Results must be within 1e-5 + 1e-5 * |y| of the exact (double) sum, for
// values like those of a model (|W x| terms of order 1, cols up to tens of
// thousands): any order of summation in f32 meets that.
#pragma once

namespace pd::lab11 {

// Task 1 (README "The naive loop"): one row at a time, one accumulator, one
// thread. The reference the others are timed against.
void matvec_naive(const float* W, const float* x, float* y, int rows, int cols);

// Task 2 (README "Blocked and unrolled"): still one thread, no intrinsics.
// Several rows at once (each x[c] loaded once for all of them) and several
// independent accumulators per row (no add waits for the previous one), so
// the compiler can keep many loads in flight.
void matvec_unrolled(const float* W, const float* x, float* y, int rows, int cols);

// Task 3 (README "Every core"): your matvec_unrolled, with the rows split
// among the OpenMP threads (omp_get_max_threads(); one contiguous share each).
void matvec_threads(const float* W, const float* x, float* y, int rows, int cols);

// Task 4 (README "SIMD with Highway"): the threads of task 3, each running a
// Highway kernel: full vectors of the CPU's widest instruction set (16 floats
// with AVX-512, 8 with AVX2, 4 with NEON), chosen when the program runs
// (dynamic dispatch: HWY_DYNAMIC_DISPATCH), and a scalar tail for the columns
// past the last full vector. exercise.cpp has the Highway scaffolding.
void matvec_simd(const float* W, const float* x, float* y, int rows, int cols);

}  // namespace pd::lab11
