// The decode kernel for quantized weights (int8 and int4) in Highway: one
// source for every instruction set, the best one picked at run time
// (isa.hpp), like panel_kernels.cpp.
//
// A quantized panel (see Linear) is ceil(K/G) blocks: the group's weights, k
// in pairs as for bf16 (int8: (G/2, 32, 2) bytes; int4: (G/2, 32) bytes of
// two values each), then the 32 f32 scales of that group. x arrives rounded
// to int16 in the same groups, with a scale per row and group
// (quantize_activations; matmul.cpp). For each group the kernel multiplies
// integers: 2 weights of a column (sign-extended to int16) times the pair
// x[k], x[k+1] broadcast, both products added into one int32 lane (x86's
// vpmaddwd, NEON's smlal; Highway's ReorderWidenMulAccumulate). After G
// products it converts the column's int32 sum to f32 once and adds it times
// the weight scale and x's scale into the running totals.
//
// Why integers: widening every weight to f32 (sign-extend, convert, then a
// multiply-add) costs 3 instructions per 16 weights on AVX-512; the int16
// products take 3 per 32 (extend, multiply-pairs, add). On one loaded Zen 4
// core the f32 widening streamed 18 GB/s of int8 against 29 GB/s for bf16's
// kernel: arithmetic, not memory, was the limit. The price is x's rounding,
// 2^-16 of its group's largest |x| (256 times finer than the weights' own);
// the tests hold the kernel to x rounded exactly so times q * s.
//
// int4 adds two shifts per vector: a byte sign-extended to int16 shifted
// right by 4 is its high nibble, shifted left then right by 12 its low one
// (both arithmetic, so the nibbles come out signed).
//
// int4's x is rounded to 127 levels a side instead of 32767 (x_quantized_max,
// matmul.hpp): the same int16 lanes here, but the AVX-512 VNNI kernel can
// then multiply four bytes per lane. Its error, 1/254 of the group's largest
// |x|, is 1/18 of the int4 weights' own (1/14 of theirs), so it adds almost
// nothing to int4's.
//
// Overflow: |q| <= 127 and |x_q| <= 32767, so one pair adds at most 2^23 and a
// group of G <= 128 inputs (64 pairs) at most 2^29 to an int32 lane.
// Numbers and method: labs/track3/12-quantization/README.md.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/isa.hpp"
#include "engine/panel_kernels.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/panel_quantized.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"
#include "engine/panel-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {

// ReorderWidenMulAccumulate keeps a second sum where the pairs' two products
// land in different registers (NEON, the portable fallbacks): 2 int sums per
// vector there, 1 on x86.
constexpr int kIntSums = HWY_ARCH_X86 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR ? 1 : 2;
// Rows per pass: totals, int sums, the broadcasts and the weight vectors (one
// for int8, two for int4's nibbles) must fit the registers: 1 row with AVX2
// or NEON, 5-6 with AVX-512.
template <int Bits>
constexpr int kRowsPerPass = std::clamp((kRegs - 2 - (Bits == 4)) / ((1 + kIntSums) * kVecs + 1), 1, 8);
// Interleaved int sums for MB rows: about 8 independent chains.
constexpr int unroll_int(int MB) { return std::max(1, 8 / (MB * kVecs * kIntSums)); }
// Bytes of one k-pair's (32, 2) weights: 64 for int8, 32 for int4 (Linear::pair_bytes(), as a constant).
template <int Bits>
constexpr std::size_t kPairBytes = std::size_t(kPanel) * 2 * Bits / 8;

#if HWY_TARGET == HWY_SCALAR
// Value i (0-63) of a k-pair's weights, as the packing stored it (see Linear).
template <int Bits>
HWY_INLINE std::int32_t stored_weight(const std::int8_t* pair, int i) {
    if constexpr (Bits == 8) return pair[i];
    else return i < 32 ? std::int8_t(std::uint8_t(pair[i]) << 4) >> 4 : pair[i - 32] >> 4;
}

// The portable fallback has one lane per vector, too narrow for a pair of
// int16 in an int32 lane: the same sums in plain integers, column by column.
template <int Bits, int MB, int U>
HWY_INLINE void group_sums(const std::int8_t* q, const float* w_scales, int pairs, const std::int16_t* x,
                           int ldx, const float* x_scales, int x_scale_stride, V (&tot)[1][MB][kVecs]) {
    const D d;
    for (int m = 0; m < MB; m++)
        for (int c = 0; c < kPanel; c++) {
            std::int32_t sum = 0;
            for (int k = 0; k < 2 * pairs; k++)
                sum += stored_weight<Bits>(q + (k / 2) * kPairBytes<Bits>, 2 * c + (k & 1)) * x[std::size_t(m) * ldx + k];
            const V scale = hn::Set(d, w_scales[c] * x_scales[std::size_t(m) * x_scale_stride]);
            tot[0][m][c] = hn::MulAdd(hn::Set(d, float(sum)), scale, tot[0][m][c]);
        }
}
#else
using DI = hn::RebindToSigned<D>;               // int32 sums, one lane per output column
using VI = hn::Vec<DI>;
using D16 = hn::Repartition<std::int16_t, DI>;  // a k-pair of int16 per int32 lane
using D8 = hn::Rebind<std::int8_t, D16>;        // the bytes one D16 vector is widened from
static_assert(kVecs % 2 == 0, "int4 splits a panel's vectors into a low-nibble and a high-nibble half");

// The pair x[k], x[k+1] (int16) in every int32 lane, as int16 lanes.
HWY_INLINE hn::Vec<D16> broadcast_pair(const std::int16_t* x) {
    std::int32_t pair;
    std::memcpy(&pair, x, sizeof pair);
    return hn::BitCast(D16(), hn::Set(DI(), pair));
}

// One group: k-pairs [0, pairs) of its weights times MB rows of int16 x (at
// the group's first k, row stride ldx), added into tot as int sum * weight
// scale * x scale.
template <int Bits, int MB, int U>
HWY_INLINE void group_sums(const std::int8_t* q, const float* w_scales, int pairs, const std::int16_t* x,
                           int ldx, const float* x_scales, int x_scale_stride, V (&tot)[1][MB][kVecs]) {
    const D d;
    const DI di;
    const D16 d16;
    VI sum0[U][MB][kVecs], sum1[U][MB][kVecs];
    for (int u = 0; u < U; u++)
        for (int m = 0; m < MB; m++)
            for (int v = 0; v < kVecs; v++) sum0[u][m][v] = sum1[u][m][v] = hn::Zero(di);
    auto step = [&](int u, int j) {
        const std::int8_t* pair = q + std::size_t(j) * kPairBytes<Bits>;
        if (Bits == 8 || j % 2 == 0) prefetch_ahead<64>(pair);  // one line per 64 bytes
        hn::Vec<D16> xb[MB];
        for (int m = 0; m < MB; m++) xb[m] = broadcast_pair(x + std::size_t(m) * ldx + 2 * j);
        auto accumulate = [&](int v, hn::Vec<D16> w) {
            for (int m = 0; m < MB; m++)
                sum0[u][m][v] = hn::ReorderWidenMulAccumulate(di, w, xb[m], sum0[u][m][v], sum1[u][m][v]);
        };
        if constexpr (Bits == 8) {
            for (int v = 0; v < kVecs; v++) accumulate(v, hn::PromoteTo(d16, hn::LoadU(D8(), pair + v * 2 * kLanes)));
        } else {
            for (int v = 0; v < kVecs / 2; v++) {
                const auto b = hn::PromoteTo(d16, hn::LoadU(D8(), pair + v * 2 * kLanes));
                accumulate(v, hn::ShiftRight<12>(hn::ShiftLeft<12>(b)));  // low nibbles: columns 0-15
                accumulate(v + kVecs / 2, hn::ShiftRight<4>(b));          // high nibbles: columns 16-31
            }
        }
    };
    int j = 0;
    for (; j + U <= pairs; j += U)
        for (int u = 0; u < U; u++) step(u, j + u);
    for (; j < pairs; j++) step(0, j);
    for (int v = 0; v < kVecs; v++) {
        const V s = hn::LoadU(d, w_scales + v * kLanes);
        for (int m = 0; m < MB; m++) {
            VI sum = hn::RearrangeToOddPlusEven(sum0[0][m][v], sum1[0][m][v]);
            for (int u = 1; u < U; u++) sum = hn::Add(sum, hn::RearrangeToOddPlusEven(sum0[u][m][v], sum1[u][m][v]));
            const V scale = hn::Mul(s, hn::Set(d, x_scales[std::size_t(m) * x_scale_stride]));
            tot[0][m][v] = hn::MulAdd(hn::ConvertTo(d, sum), scale, tot[0][m][v]);
        }
    }
}
#endif

// One quantized panel times MB rows of x (int16, stride j.ldx; scales stride n_groups).
template <int Bits, int MB>
HWY_INLINE void panel_quantized(const PanelJob& j, const std::byte* panel, const std::int16_t* x,
                                const float* x_scales, float* y, const float* bias, int ncols) {
    const D d;
    const Linear& L = *j.L;
    const int K = L.in, G = group_size(L.precision), groups = L.n_groups();
    V tot[1][MB][kVecs];
    for (auto& r : tot[0])
        for (auto& v : r) v = hn::Zero(d);
    for (int g = 0; g < groups; g++) {
        const auto* q = reinterpret_cast<const std::int8_t*>(panel + std::size_t(g) * L.group_bytes());
        const auto* w_scales = reinterpret_cast<const float*>(q + std::size_t(G / 2) * kPairBytes<Bits>);
        const int pairs = (std::min(G, K - g * G) + 1) / 2;
        group_sums<Bits, MB, unroll_int(MB)>(q, w_scales, pairs, x + std::size_t(g) * G, j.ldx, x_scales + g,
                                             groups, tot);
    }
    store_sums<MB, 1>(tot, y, L.out, bias, ncols);
}

// mb (1..MB) rows of one panel: the largest template that fits mb.
template <int Bits, int MB>
HWY_INLINE void panel_rows_quantized(int mb, const PanelJob& j, const std::byte* panel, const std::int16_t* x,
                                     const float* x_scales, float* y, const float* bias, int ncols) {
    if constexpr (MB > 1)
        if (mb < MB) return panel_rows_quantized<Bits, MB - 1>(mb, j, panel, x, x_scales, y, bias, ncols);
    panel_quantized<Bits, MB>(j, panel, x, x_scales, y, bias, ncols);
}

// Panels [first, last) of an int8 (Bits 8) or int4 (Bits 4) Linear.
template <int Bits>
void panels_quantized(const PanelJob& j, int first, int last) {
    constexpr int R = kRowsPerPass<Bits>;
    const int N = j.L->out, groups = j.L->n_groups();
    const float* bias_all = j.L->bias.empty() ? nullptr : j.L->bias.data();
    for (int p = first; p < last; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        for (int m0 = 0; m0 < j.M; m0 += R)
            panel_rows_quantized<Bits, R>(std::min(R, j.M - m0), j, j.L->panel(p), j.x_int16 + std::size_t(m0) * j.ldx,
                                          j.x_scales + std::size_t(m0) * groups, j.y + std::size_t(m0) * N + n0,
                                          bias_all ? bias_all + n0 : nullptr, ncols);
    }
}

// x (M, K) -> xq (M, ldx) int16, zero past K, and scales (M, ceil(K / G)):
// quantize_activations (quantize.hpp) with SIMD, the same products x * (1 / s)
// rounded to nearest even, so the same integers. A scalar loop spent more time
// here than the kernel on the weights (nearbyintf is a libm call per value).
// A group holding NaN or inf gets a NaN scale, which reaches the output.
void QuantizeXInt16(const float* x, int M, int K, int G, int max_q, std::int16_t* xq, int ldx, float* scales) {
    const D d;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<std::int16_t, decltype(di)> d16;
    const int N = int(hn::Lanes(d)), groups = (K + G - 1) / G;
    for (int m = 0; m < M; m++) {
        const float* xm = x + std::size_t(m) * K;
        std::int16_t* qm = xq + std::size_t(m) * ldx;
        for (int g = 0; g < groups; g++) {
            const int first = g * G, n = std::min(G, K - first);
            V vmax = hn::Zero(d), finite = hn::Zero(d);  // finite: x * 0, NaN unless every x is finite
            int i = 0;
            for (; i + N <= n; i += N) {
                const V v = hn::LoadU(d, xm + first + i);
                vmax = hn::Max(vmax, hn::Abs(v));
                finite = hn::Add(finite, hn::Mul(v, hn::Zero(d)));
            }
            float amax = LaneMax(d, vmax), check = LaneSum(d, finite);
            for (int t = i; t < n; t++) amax = std::max(amax, std::fabs(xm[first + t])), check += xm[first + t] * 0.0f;
            const float scale = check == 0.0f ? amax / float(max_q) : std::numeric_limits<float>::quiet_NaN();
            const float inv = scale > 0 ? 1.0f / scale : 0.0f;
            for (i = 0; i + N <= n; i += N) {
                const auto r = hn::NearestInt(hn::Mul(hn::LoadU(d, xm + first + i), hn::Set(d, inv)));
                hn::StoreU(hn::DemoteTo(d16, r), d16, qm + first + i);
            }
            for (int t = i; t < n; t++)
                qm[first + t] = std::int16_t(std::fmin(std::fmax(std::nearbyint(xm[first + t] * inv), -float(max_q)), float(max_q)));
            scales[std::size_t(m) * groups + g] = scale;
        }
        std::fill(qm + K, qm + ldx, std::int16_t(0));
    }
}

void PanelProductsQuantized(const PanelJob& j, int first, int last) {
    if (is_int4(j.L->precision)) panels_quantized<4>(j, first, last);
    else panels_quantized<8>(j, first, last);
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(PanelProductsQuantized);
HWY_EXPORT(QuantizeXInt16);

void quantize_x_int16(const float* x, int M, int K, int G, int max_q, std::int16_t* xq, int ldx, float* scales) {
    kernel_isa();
    HWY_DYNAMIC_DISPATCH(QuantizeXInt16)(x, M, K, G, max_q, xq, ldx, scales);
}

void panel_products_quantized(const PanelJob& job, int first, int last) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    HWY_DYNAMIC_DISPATCH(PanelProductsQuantized)(job, first, last);
}

}  // namespace pd
#endif
