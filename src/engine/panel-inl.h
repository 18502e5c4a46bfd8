// What the Highway panel kernels share (panel_kernels.cpp, panel_int8.cpp):
// storing a panel's sums. Compiled once per target, like simd-inl.h: include
// it inside the foreach_target loop, after engine/simd-inl.h.
#if defined(PDLAB_PANEL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PDLAB_PANEL_INL_H_
#undef PDLAB_PANEL_INL_H_
#else
#define PDLAB_PANEL_INL_H_
#endif

#include <cstddef>

#include "engine/matmul.hpp"  // kPanel
#include "engine/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {

constexpr int kVecs = kPanel / kLanes;  // vectors per panel row

// Adds the U partial sums of MB rows, adds the bias and stores ncols outputs.
template <int MB, int U>
HWY_INLINE void store_sums(V (&acc)[U][MB][kVecs], float* y, int ldy, const float* bias, int ncols) {
    const D d;
    for (int m = 0; m < MB; m++) {
        HWY_ALIGN float row[kPanel];
        for (int v = 0; v < kVecs; v++) {
            V s = acc[0][m][v];
            for (int u = 1; u < U; u++) s = hn::Add(s, acc[u][m][v]);
            hn::Store(s, d, row + v * kLanes);
        }
        float* out = y + std::size_t(m) * ldy;
        for (int c = 0; c < ncols; c++) out[c] = row[c] + (bias ? bias[c] : 0.0f);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#endif  // PDLAB_PANEL_INL_H_
