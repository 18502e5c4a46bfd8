// What the Highway panel kernels share (panel_kernels.cpp, panel_quantized.cpp):
// prefetching the weight stream and storing a panel's sums. Compiled once per target, like simd-inl.h: include
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

// The bf16 and int8 kernels ask, at each step, for the weights 2 KiB ahead of
// the bytes they read now (f32's kernel does not: with it, f32 got slower at 1
// thread, 1.15x -> 1.33-1.41x its floor; see docs/performance.md).
// Why: a decode product streams its panels once, front to back, and the work
// per cache line (a few loads, converts and multiply-adds) leaves too few lines
// in flight for the hardware prefetcher alone. On Zen 3 (AVX2, 2026-12-03,
// bench-llama-125m B=1, 1 thread) int8 streamed 12.3 GB/s without it and
// 16-17.5 GB/s with it (the DRAM probe: 19 GB/s); 1 KiB ahead gained half as
// much and 4 KiB no more. Prefetches past the matrix's end are harmless.
// AVX2 only, where it was measured: on Zen 4 (AVX-512) an earlier try made the
// bf16 kernel slower (docs/performance.md), and NEON is unmeasured. The
// AVX-512 VNNI int8/int4 kernel (panel_quantized_avx512.cpp) does not
// prefetch either: on Zen 5 its decode was faster without (docs/performance.md).
constexpr bool kPrefetchWeights = HWY_TARGET == HWY_AVX2;
constexpr std::size_t kPrefetchAhead = 2048;

// Prefetches the `bytes` (a multiple of 64) that follow `now` by kPrefetchAhead.
template <std::size_t bytes>
HWY_INLINE void prefetch_ahead(const void* now) {
    if constexpr (kPrefetchWeights) {
        const char* ahead = static_cast<const char*>(now) + kPrefetchAhead;
        for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(ahead + b);
    }
}

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
