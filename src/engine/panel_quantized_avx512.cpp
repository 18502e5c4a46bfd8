// The int8 and int4 decode kernel with AVX-512 VNNI's vpdpwssd, for CPUs that
// have it (Zen 4, Zen 5, Ice Lake and later): a target-specific specialisation
// of panel_quantized.cpp, used where use_avx512_vnni() (isa.hpp).
//
// The arithmetic is the portable kernel's, exactly: weights sign-extended to
// int16, x rounded to int16 per group, two products per int32 lane, one
// convert and one scale per group and column. What differs is how many
// instructions a k-pair of a panel costs. vpdpwssd multiplies and adds into
// the int32 sums in one instruction where vpmaddwd + vpaddd take two, and a
// software prefetch keeps enough cache lines in flight: a decode product reads
// each weight once, and with a few instructions per line the hardware
// prefetcher alone fell behind (measurements in docs/performance.md).
// Per 64 bytes of weights (one k-pair of 32 columns, int8; two k-pairs, int4):
//   int8: 2 x (sign-extending load, vpdpwssd)
//   int4: 2 x (sign-extending load, 3 shifts, 2 vpdpwssd) for the nibbles.
// x86 only: meson compiles this file for x86_64 builds alone.
#include "engine/panel_kernels.hpp"

#include "common.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

// Everything from here on is compiled for AVX-512 VNNI; the headers above are
// not (their inline functions are shared with the rest of the program).
// GCC 12's own AVX-512 headers warn (GCC bug 105593; panel_bf16_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma")
#include <immintrin.h>

#include "engine/panel_avx512.hpp"

namespace pd {
namespace {

using avx512::store_panel_row;

// Rows of x per pass over a panel: MB rows keep 2 MB int32 sums and 2 MB f32
// totals in registers (of 32), beside the weights and the broadcasts.
constexpr int kRowsPerPass = 4;
// Bytes the kernel asks for ahead of the ones it reads now: 2 KiB, as the
// AVX2 kernels (panel-inl.h); docs/performance.md has the sweep on Zen 5.
constexpr int kPrefetchAhead = 2048;

// The pair x[k], x[k+1] (int16) in all 16 int32 lanes.
inline __m512i broadcast_pair(const std::int16_t* x) {
    std::int32_t pair;
    std::memcpy(&pair, x, sizeof pair);
    return _mm512_set1_epi32(pair);
}

// The weights of k-pair `pair` as int16, columns 0-15 in w[0] and 16-31 in
// w[1], each int32 lane (w[c][k], w[c][k+1]). int8: the pair's 64 bytes are
// (32 columns, 2). int4: its 32 bytes hold columns 0-15 in the low nibbles
// and 16-31 in the high ones (see Linear); the shifts are arithmetic, so the
// nibbles come out signed.
template <int Bits>
inline void load_pair(const std::int8_t* pair, __m512i (&w)[2]) {
    if constexpr (Bits == 8) {
        w[0] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair)));
        w[1] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32)));
    } else {
        const __m512i b = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair)));
        w[0] = _mm512_srai_epi16(_mm512_slli_epi16(b, 12), 12);
        w[1] = _mm512_srai_epi16(b, 4);
    }
}

// One quantized panel times MB rows of int16 x (row stride ldx, scales row
// stride groups): for each group, G/2 k-pairs of integer products in U
// interleaved sums per column half, then sum * weight scale * x scale into
// the totals. Every group is read whole: the packing pads a short last group
// and x is zero there, so the padding adds nothing.
template <int Bits, int G, int MB, int U>
void panel_quantized(const std::byte* panel, int groups, const std::int16_t* x, int ldx, const float* x_scales,
                     float* y, int ldy, const float* bias, int ncols) {
    constexpr std::size_t pair_bytes = std::size_t(kPanel) * 2 * Bits / 8;  // Linear::pair_bytes()
    constexpr std::size_t group_bytes = G / 2 * pair_bytes + kPanel * sizeof(float);
    __m512 tot[MB][2];
    for (auto& t : tot) t[0] = t[1] = _mm512_setzero_ps();
    for (int g = 0; g < groups; g++) {
        const auto* q = reinterpret_cast<const std::int8_t*>(panel + std::size_t(g) * group_bytes);
        const std::int16_t* xg = x + std::size_t(g) * G;
        __m512i sum[U][MB][2];
        for (auto& su : sum)
            for (auto& s : su) s[0] = s[1] = _mm512_setzero_si512();
        for (int j = 0; j < G / 2; j += U)
            for (int u = 0; u < U; u++) {
                const std::int8_t* pair = q + std::size_t(j + u) * pair_bytes;
                if (Bits == 8 || (j + u) % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(pair) + kPrefetchAhead, _MM_HINT_T0);
                __m512i w[2];
                load_pair<Bits>(pair, w);
                for (int m = 0; m < MB; m++) {
                    const __m512i xb = broadcast_pair(xg + std::size_t(m) * ldx + 2 * (j + u));
                    sum[u][m][0] = _mm512_dpwssd_epi32(sum[u][m][0], w[0], xb);
                    sum[u][m][1] = _mm512_dpwssd_epi32(sum[u][m][1], w[1], xb);
                }
            }
        const auto* w_scales = reinterpret_cast<const float*>(q + std::size_t(G / 2) * pair_bytes);
        const __m512 s0 = _mm512_loadu_ps(w_scales), s1 = _mm512_loadu_ps(w_scales + 16);
        for (int m = 0; m < MB; m++) {
            __m512i a = sum[0][m][0], b = sum[0][m][1];
            for (int u = 1; u < U; u++) a = _mm512_add_epi32(a, sum[u][m][0]), b = _mm512_add_epi32(b, sum[u][m][1]);
            const __m512 xs = _mm512_set1_ps(x_scales[std::size_t(m) * groups + g]);
            tot[m][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(s0, xs), tot[m][0]);
            tot[m][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b), _mm512_mul_ps(s1, xs), tot[m][1]);
        }
    }
    for (int m = 0; m < MB; m++) store_panel_row(y + std::size_t(m) * ldy, tot[m][0], tot[m][1], bias, ncols);
}

// mb (1..MB) rows: the largest template that fits mb; more interleaved sums
// for fewer rows, to keep about 8 independent vpdpwssd chains.
template <int Bits, int G, int MB>
void panel_rows(int mb, const std::byte* panel, int groups, const std::int16_t* x, int ldx, const float* x_scales,
                float* y, int ldy, const float* bias, int ncols) {
    if constexpr (MB > 1)
        if (mb < MB) return panel_rows<Bits, G, MB - 1>(mb, panel, groups, x, ldx, x_scales, y, ldy, bias, ncols);
    constexpr int U = MB == 1 ? 4 : MB == 2 ? 2 : 1;
    panel_quantized<Bits, G, MB, U>(panel, groups, x, ldx, x_scales, y, ldy, bias, ncols);
}

// Panels [first, last), with the format and group size as constants.
template <int Bits, int G>
void panels(const PanelJob& j, int first, int last) {
    const int N = j.L->out, groups = j.L->n_groups();
    const float* bias_all = j.L->bias.empty() ? nullptr : j.L->bias.data();
    for (int p = first; p < last; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        for (int m0 = 0; m0 < j.M; m0 += kRowsPerPass)
            panel_rows<Bits, G, kRowsPerPass>(std::min(kRowsPerPass, j.M - m0), j.L->panel(p), groups,
                                              j.x_int16 + std::size_t(m0) * j.ldx, j.ldx,
                                              j.x_scales + std::size_t(m0) * groups, j.y + std::size_t(m0) * N + n0,
                                              N, bias_all ? bias_all + n0 : nullptr, ncols);
    }
}

template <int Bits>
void panels_of_group(const PanelJob& j, int first, int last) {
    switch (group_size(j.L->precision)) {
        case 32: return panels<Bits, 32>(j, first, last);
        case 64: return panels<Bits, 64>(j, first, last);
        case 128: return panels<Bits, 128>(j, first, last);
    }
    fail("the AVX-512 VNNI kernel has no case for group size {}", group_size(j.L->precision));
}

}  // namespace

void panel_products_avx512_vnni(const PanelJob& j, int first, int last) {
    if (is_int4(j.L->precision)) panels_of_group<4>(j, first, last);
    else panels_of_group<8>(j, first, last);
}

}  // namespace pd

#pragma GCC pop_options
