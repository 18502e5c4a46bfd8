// Lab 11 reference solution. Like every Highway source, this file is compiled
// once per instruction set: foreach_target.h includes it again for each
// target, and the part between HWY_BEFORE_NAMESPACE and HWY_AFTER_NAMESPACE
// becomes one kernel per target. The rest is compiled once (HWY_ONCE).
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track3/11-decode-matvec/exercise.hpp"

#include <algorithm>
#include <cstddef>

#include "exercise_per_target.hpp"  // this file, once per target

HWY_BEFORE_NAMESPACE();
namespace pd::lab11 {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y[first..last) for rows of W, one row at a time: the rows are read in
// memory order, one sequential stream that the hardware prefetcher follows
// (four rows at once make four interleaved streams that restart every four
// rows, and measured 1.7x slower). Four accumulators keep four FMAs and eight
// loads in flight; x is reloaded for every row, from L1.
void MatvecRows(const float* W, const float* x, float* y, int first, int last, int cols) {
    const hn::ScalableTag<float> d;
    const int N = int(hn::Lanes(d)), full = cols / (4 * N) * (4 * N);
    for (int r = first; r < last; r++) {
        const float* w = W + std::size_t(r) * cols;
        auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
        for (int c = 0; c < full; c += 4 * N) {
            a0 = hn::MulAdd(hn::LoadU(d, w + c), hn::LoadU(d, x + c), a0);
            a1 = hn::MulAdd(hn::LoadU(d, w + c + N), hn::LoadU(d, x + c + N), a1);
            a2 = hn::MulAdd(hn::LoadU(d, w + c + 2 * N), hn::LoadU(d, x + c + 2 * N), a2);
            a3 = hn::MulAdd(hn::LoadU(d, w + c + 3 * N), hn::LoadU(d, x + c + 3 * N), a3);
        }
        float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
        for (int c = full; c < cols; c++) s += w[c] * x[c];  // the tail: fewer than four vectors
        y[r] = s;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace pd::lab11
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include <stdexcept>

#include "engine/isa.hpp"

namespace pd::lab11 {

HWY_EXPORT(MatvecRows);

namespace {

void check(int rows, int cols) {
    if (rows < 1 || cols < 1) throw std::invalid_argument("matvec: rows and cols must be at least 1");
}

// Rows [first, last) with 4 rows at a time and 4 accumulators per row: 16
// independent chains, x[c] loaded once for four rows.
void unrolled_rows(const float* W, const float* x, float* y, int first, int last, int cols) {
    int r = first;
    for (; r + 4 <= last; r += 4) {
        const float* w[4] = {W + std::size_t(r) * cols, W + std::size_t(r + 1) * cols,
                             W + std::size_t(r + 2) * cols, W + std::size_t(r + 3) * cols};
        float acc[4][4] = {};
        int c = 0;
        for (; c + 4 <= cols; c += 4)
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 4; k++) acc[i][k] += w[i][c + k] * x[c + k];
        for (int i = 0; i < 4; i++) {
            float s = (acc[i][0] + acc[i][1]) + (acc[i][2] + acc[i][3]);
            for (int t = c; t < cols; t++) s += w[i][t] * x[t];
            y[r + i] = s;
        }
    }
    for (; r < last; r++) {
        float s = 0;
        for (int c = 0; c < cols; c++) s += W[std::size_t(r) * cols + c] * x[c];
        y[r] = s;
    }
}

// Thread t of T gets rows [rows t / T, rows (t+1) / T), rounded to 4 so that
// the 4-row blocks stay whole.
template <class Kernel>
void split_rows(int rows, Kernel&& kernel) {
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads(), blocks = (rows + 3) / 4;
        const int first = std::min(rows, blocks * t / T * 4), last = std::min(rows, blocks * (t + 1) / T * 4);
        if (first < last) kernel(first, last);
    }
}

}  // namespace

void matvec_naive(const float* W, const float* x, float* y, int rows, int cols) {
    check(rows, cols);
    for (int r = 0; r < rows; r++) {
        float s = 0;
        for (int c = 0; c < cols; c++) s += W[std::size_t(r) * cols + c] * x[c];
        y[r] = s;
    }
}

void matvec_unrolled(const float* W, const float* x, float* y, int rows, int cols) {
    check(rows, cols);
    unrolled_rows(W, x, y, 0, rows, cols);
}

void matvec_threads(const float* W, const float* x, float* y, int rows, int cols) {
    check(rows, cols);
    split_rows(rows, [&](int first, int last) { unrolled_rows(W, x, y, first, last, cols); });
}

void matvec_simd(const float* W, const float* x, float* y, int rows, int cols) {
    check(rows, cols);
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    split_rows(rows, [&](int first, int last) { HWY_DYNAMIC_DISPATCH(MatvecRows)(W, x, y, first, last, cols); });
}

}  // namespace pd::lab11
#endif  // HWY_ONCE
