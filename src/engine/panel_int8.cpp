// The int8 decode kernel in Highway: one source for every instruction set,
// the best one picked at run time (isa.hpp), like panel_kernels.cpp.
//
// An int8 panel (see Linear) is ceil(K/G) blocks: G rows of 32 int8 weights,
// k-major, then the 32 f32 scales of that group. For each group the kernel
// widens each row's 32 int8 to f32 (sign-extend to i32, convert), multiplies
// them by x[m][k] broadcast into per-group sums, then adds sum * scale into
// the running totals: one scale multiply per group of G products, and the
// sums stay exact float products of x and the integers q.
//
// Why widen the weights rather than quantize x to int8 and multiply integers:
// x stays exact, and the result is exactly x times the dequantized weights
// (the tests hold it to that). The price is arithmetic: sign-extend, convert
// and multiply-add for every 16 (AVX-512) or 8 (AVX2) weights. Measured on a
// loaded Zen 4 core, that is about 23 G weights/s (18 GB/s of int8), against
// 29 GB/s for bf16's kernel on the same core. Halving the instructions (x
// rounded to int16 per group, weights multiplied in pairs with vpmaddwd) was
// tried and streamed no faster from DRAM: the limit is elsewhere (see "Open
// items" in docs/performance.md). Numbers and method:
// labs/track3/12-quantization/README.md.

#include <algorithm>
#include <cstdint>

#include "engine/isa.hpp"
#include "engine/panel_kernels.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/panel_int8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"
#include "engine/panel-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {
// Rows per pass: totals and group sums (2 x rows x kVecs), the broadcasts and
// one weight vector must fit the registers: 1 row with AVX2 or NEON, 6 with AVX-512.
constexpr int kRowsPerPassInt8 = std::clamp((kRegs - 2) / (2 * kVecs + 1), 1, 8);
// Interleaved group sums for MB rows: about 8 independent chains.
constexpr int unroll_int8(int MB) { return std::max(1, 8 / (MB * kVecs)); }

// 32 int8 weights at q, lanes [v * kLanes, (v + 1) * kLanes), as f32.
HWY_INLINE V widen(const std::int8_t* q, int v) {
    const D d;
    const hn::Rebind<std::int8_t, D> d8;
    const hn::RebindToSigned<D> di;
    return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + v * kLanes)));
}

// One group: rows [0, kn) of its (G, 32) int8 block times MB rows of x (at the
// group's first k), added as sums * scales into tot.
template <int MB, int U>
HWY_INLINE void group_int8(const std::int8_t* q, const float* scales, int kn, const float* x, int ldx,
                           V (&tot)[1][MB][kVecs]) {
    const D d;
    V part[U][MB][kVecs];
    for (auto& a : part)
        for (auto& r : a)
            for (auto& v : r) v = hn::Zero(d);
    auto step = [&](int u, int k) {
        V xb[MB];
        for (int m = 0; m < MB; m++) xb[m] = hn::Set(d, x[std::size_t(m) * ldx + k]);
        for (int v = 0; v < kVecs; v++) {
            const V w = widen(q + std::size_t(k) * kPanel, v);
            for (int m = 0; m < MB; m++) part[u][m][v] = hn::MulAdd(w, xb[m], part[u][m][v]);
        }
    };
    int k = 0;
    for (; k + U <= kn; k += U)
        for (int u = 0; u < U; u++) step(u, k + u);
    for (; k < kn; k++) step(0, k);
    for (int v = 0; v < kVecs; v++) {
        const V s = hn::LoadU(d, scales + v * kLanes);
        for (int m = 0; m < MB; m++) {
            V sum = part[0][m][v];
            for (int u = 1; u < U; u++) sum = hn::Add(sum, part[u][m][v]);
            tot[0][m][v] = hn::MulAdd(sum, s, tot[0][m][v]);
        }
    }
}

// One int8 panel times MB rows of x (stride K).
template <int MB>
HWY_INLINE void panel_int8(const Linear& L, const std::byte* panel, const float* x, float* y,
                           const float* bias, int ncols) {
    const D d;
    const int K = L.in, G = int8_group(L.precision);
    V tot[1][MB][kVecs];
    for (auto& r : tot[0])
        for (auto& v : r) v = hn::Zero(d);
    for (int g = 0; g < L.n_groups(); g++) {
        const auto* q = reinterpret_cast<const std::int8_t*>(panel + std::size_t(g) * L.group_bytes());
        const auto* scales = reinterpret_cast<const float*>(q + std::size_t(G) * kPanel);
        group_int8<MB, unroll_int8(MB)>(q, scales, std::min(G, K - g * G), x + std::size_t(g) * G, K, tot);
    }
    store_sums<MB, 1>(tot, y, L.out, bias, ncols);
}

// mb (1..MB) rows of one panel: the largest template that fits mb.
template <int MB>
HWY_INLINE void panel_rows_int8(int mb, const Linear& L, const std::byte* panel, const float* x, float* y,
                                const float* bias, int ncols) {
    if constexpr (MB > 1)
        if (mb < MB) return panel_rows_int8<MB - 1>(mb, L, panel, x, y, bias, ncols);
    panel_int8<MB>(L, panel, x, y, bias, ncols);
}

void PanelProductsInt8(const PanelJob& j, int first, int last) {
    const int K = j.L->in, N = j.L->out;
    const float* bias_all = j.L->bias.empty() ? nullptr : j.L->bias.data();
    for (int p = first; p < last; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        for (int m0 = 0; m0 < j.M; m0 += kRowsPerPassInt8)
            panel_rows_int8<kRowsPerPassInt8>(std::min(kRowsPerPassInt8, j.M - m0), *j.L, j.L->panel(p),
                                              j.x + std::size_t(m0) * K, j.y + std::size_t(m0) * N + n0,
                                              bias_all ? bias_all + n0 : nullptr, ncols);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(PanelProductsInt8);

void panel_products_int8(const PanelJob& job, int first, int last) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    HWY_DYNAMIC_DISPATCH(PanelProductsInt8)(job, first, last);
}

}  // namespace pd
#endif
