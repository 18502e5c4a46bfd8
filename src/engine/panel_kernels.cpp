// The decode kernels in Highway: one source, compiled for every instruction
// set in hwy_config.hpp, the best one picked at run time (isa.hpp).
//
// Decode multiplies a few rows of x (M <= 16) by every weight matrix. At M = 1
// each weight is used once, so the kernel's speed is the rate at which it
// streams weights from DRAM; at M = 16 each weight feeds 16 multiply-adds and
// the product is compute-bound (the ridge is near M = 8 to 13 on a 2-core
// Zen 4; see pdlab roofline).
//
// One layout serves both: column panels of 32 outputs, k-major (Linear). For
// each k the kernel loads the panel's 32 weights (32 / lanes vectors: 2 with
// AVX-512, 4 with AVX2, 8 with NEON) and, for each of a few rows of x,
// broadcasts x[m][k] and multiply-adds it into that row's 32 running sums. So:
//  - a panel is one contiguous run of K * 128 bytes (f32), read front to back:
//    the hardware prefetchers follow it (threads take runs of whole panels);
//  - the sums need no horizontal reduction (one lane per output);
//  - as many rows are served per pass as the registers hold (8 with AVX-512,
//    3 with AVX2 or NEON); more rows read the panel again, from L2.
// With few rows the k loop is split into U interleaved partial sums, so that
// 8 or more multiply-add chains are in flight.
//
// bf16 panels hold k in pairs (K/2, 32, 2); a pair of bf16 is one 32-bit
// lane, widened to two f32 lanes by a shift and a mask (bf16 is the top half
// of an f32), so bf16 streams half the bytes for the same arithmetic.

#include "engine/panel_kernels.hpp"

#include <algorithm>
#include <cstring>

#include "engine/isa.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/panel_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"
#include "engine/panel-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {
// Rows per pass: accumulators (rows x kVecs) + broadcasts + one weight vector
// must fit the register file (16 vectors with AVX2, 32 with AVX-512 and NEON).
constexpr int kRowsPerPass = std::clamp((kRegs - 1) / (kVecs + 1), 1, 8);
// Interleaved partial sums for MB rows: about 8 independent chains.
constexpr int unroll(int MB) { return std::max(1, 8 / (MB * kVecs)); }

// One f32 panel (K, 32) times MB rows of x (stride ldx).
template <int MB, int U>
HWY_INLINE void panel_f32(const float* wp, int K, const float* x, int ldx, float* y, int ldy,
                          const float* bias, int ncols) {
    const D d;
    V acc[U][MB][kVecs];
    for (auto& a : acc)
        for (auto& r : a)
            for (auto& v : r) v = hn::Zero(d);
    auto step = [&](int u, int k) {
        V xb[MB];
        for (int m = 0; m < MB; m++) xb[m] = hn::Set(d, x[std::size_t(m) * ldx + k]);
        for (int v = 0; v < kVecs; v++) {
            const V w = hn::Load(d, wp + std::size_t(k) * kPanel + v * kLanes);
            for (int m = 0; m < MB; m++) acc[u][m][v] = hn::MulAdd(w, xb[m], acc[u][m][v]);
        }
    };
    int k = 0;
    for (; k + U <= K; k += U)
        for (int u = 0; u < U; u++) step(u, k + u);
    for (; k < K; k++) step(0, k);
    store_sums<MB, U>(acc, y, ldy, bias, ncols);
}

// One bf16 panel (ceil(K/2), 32, 2) times MB rows of x.
template <int MB, int U>
HWY_INLINE void panel_bf16(const bf16* wp, int K, const float* x, int ldx, float* y, int ldy,
                           const float* bias, int ncols) {
    const D d;
    const hn::RebindToUnsigned<D> du;
    const auto top = hn::Set(du, 0xFFFF0000u);
    const auto* pairs = reinterpret_cast<const std::uint32_t*>(wp);
    V acc[U][MB][kVecs];
    for (auto& a : acc)
        for (auto& r : a)
            for (auto& v : r) v = hn::Zero(d);
    // k-pair kp: weights of k = 2kp in the low halves, 2kp + 1 in the high.
    auto step = [&](int u, int kp, bool odd_valid) {
        prefetch_ahead<kPanel * sizeof(std::uint32_t)>(pairs + std::size_t(kp) * kPanel);
        V xe[MB], xo[MB];
        for (int m = 0; m < MB; m++) {
            xe[m] = hn::Set(d, x[std::size_t(m) * ldx + 2 * kp]);
            xo[m] = hn::Set(d, odd_valid ? x[std::size_t(m) * ldx + 2 * kp + 1] : 0.0f);
        }
        for (int v = 0; v < kVecs; v++) {
            const auto w = hn::Load(du, pairs + std::size_t(kp) * kPanel + v * kLanes);
            const V we = hn::BitCast(d, hn::ShiftLeft<16>(w)), wo = hn::BitCast(d, hn::And(w, top));
            for (int m = 0; m < MB; m++)
                acc[u][m][v] = hn::MulAdd(wo, xo[m], hn::MulAdd(we, xe[m], acc[u][m][v]));
        }
    };
    const int full = K / 2;  // pairs with both k inside K
    int kp = 0;
    for (; kp + U <= full; kp += U)
        for (int u = 0; u < U; u++) step(u, kp + u, true);
    for (; kp < full; kp++) step(0, kp, true);
    if (K % 2) step(0, full, false);
    store_sums<MB, U>(acc, y, ldy, bias, ncols);
}

// mb (1..MB) rows of one panel: the largest template that fits mb.
template <int MB>
HWY_INLINE void panel_rows(int mb, const PanelJob& j, const std::byte* panel, const float* x, float* y,
                           const float* bias, int ncols) {
    if constexpr (MB > 1)
        if (mb < MB) return panel_rows<MB - 1>(mb, j, panel, x, y, bias, ncols);
    const int K = j.L->in, N = j.L->out;
    if (j.L->precision == Precision::f32)
        panel_f32<MB, unroll(MB)>(reinterpret_cast<const float*>(panel), K, x, K, y, N, bias, ncols);
    else
        panel_bf16<MB, unroll(MB)>(reinterpret_cast<const bf16*>(panel), K, x, K, y, N, bias, ncols);
}

void PanelProducts(const PanelJob& j, int first, int last) {
    const int K = j.L->in, N = j.L->out;
    const float* bias_all = j.L->bias.empty() ? nullptr : j.L->bias.data();
    for (int p = first; p < last; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        const std::byte* panel = j.L->panel(p);
        for (int m0 = 0; m0 < j.M; m0 += kRowsPerPass)
            panel_rows<kRowsPerPass>(std::min(kRowsPerPass, j.M - m0), j, panel, j.x + std::size_t(m0) * K,
                                     j.y + std::size_t(m0) * N + n0, bias_all ? bias_all + n0 : nullptr, ncols);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(PanelProducts);

void panel_products(const PanelJob& job, int first, int last) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    HWY_DYNAMIC_DISPATCH(PanelProducts)(job, first, last);
}

}  // namespace pd
#endif
