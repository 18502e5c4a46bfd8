// The bf16 decode kernel with AVX-512 BF16's vdpbf16ps, for CPUs that have it
// (Zen 4, Sapphire Rapids): a target-specific specialisation of
// panel_kernels.cpp, used where use_avx512_bf16() (isa.hpp).
//
// vdpbf16ps multiplies 16 outputs x 2 consecutive k of the panel with a
// broadcast pair (x[k], x[k+1]) and adds both products into 16 f32 sums, so
// the weights are never widened: twice the multiply-adds per instruction of
// the portable kernel, which matters once the product is compute-bound
// (batched decode). x is split once per call into x_hi = bf16(x) and
// x_lo = bf16(x - x_hi). Below kBf16RoundXMinM rows the panel meets both:
// w . x = w . x_hi + w . x_lo, within about 2^-16 of the f32 product, at no
// cost while the kernel waits on memory. From there on, where it would halve
// the compute-bound rate, x is rounded to bf16 (x_hi alone), as oneDNN's bf16
// prefill and the portable kernel do.
// x86 only: meson compiles this file for x86_64 builds alone.
#include "engine/panel_kernels.hpp"

#include <algorithm>
#include <cstdint>

// Everything from here on is compiled for AVX-512 BF16; the headers above are
// not (their inline functions are shared with the rest of the program).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* in the
// cvt/unpack intrinsics, GCC bug 105593, fixed in 13): not our code.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")
#include <immintrin.h>

#include "engine/panel_avx512.hpp"

namespace pd {
namespace {

using avx512::store_panel_row;

// One bf16 panel (K/2, 32, 2) times MB rows of the split x (ldx k-pairs a row).
// U: interleaved partial sums over k-pairs. Lo: add the x_lo products too.
template <int MB, int U, bool Lo>
void panel_bf16(const bf16* wp, int Kh, const std::uint32_t* xh, const std::uint32_t* xl, int ldx, float* y,
                int ldy, const float* bias, int ncols) {
    __m512 acc[U][MB][2];
    for (int u = 0; u < U; u++)
        for (int m = 0; m < MB; m++) acc[u][m][0] = acc[u][m][1] = _mm512_setzero_ps();
    auto step = [&](int u, int kp) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512(wp + std::size_t(kp) * 2 * kPanel);
        const __m512bh w1 = (__m512bh)_mm512_load_si512(wp + std::size_t(kp) * 2 * kPanel + 32);
        for (int m = 0; m < MB; m++) {
            const __m512bh h = (__m512bh)_mm512_set1_epi32(int(xh[std::size_t(m) * ldx + kp]));
            acc[u][m][0] = _mm512_dpbf16_ps(acc[u][m][0], w0, h);
            acc[u][m][1] = _mm512_dpbf16_ps(acc[u][m][1], w1, h);
            if constexpr (Lo) {
                const __m512bh l = (__m512bh)_mm512_set1_epi32(int(xl[std::size_t(m) * ldx + kp]));
                acc[u][m][0] = _mm512_dpbf16_ps(acc[u][m][0], w0, l);
                acc[u][m][1] = _mm512_dpbf16_ps(acc[u][m][1], w1, l);
            }
        }
    };
    int kp = 0;
    for (; kp + U <= Kh; kp += U)
        for (int u = 0; u < U; u++) step(u, kp + u);
    for (; kp < Kh; kp++) step(0, kp);
    for (int m = 0; m < MB; m++) {
        __m512 a = acc[0][m][0], b = acc[0][m][1];
        for (int u = 1; u < U; u++) a = _mm512_add_ps(a, acc[u][m][0]), b = _mm512_add_ps(b, acc[u][m][1]);
        store_panel_row(y + std::size_t(m) * ldy, a, b, bias, ncols);
    }
}

// mb (1..MB) rows: the largest template that fits; 2 or 4 partial sums below 4 rows.
template <int MB, bool Lo>
void panel_rows(int mb, const bf16* wp, int Kh, const std::uint32_t* h, const std::uint32_t* l, int ldx,
                float* y, int ldy, const float* bias, int ncols) {
    if constexpr (MB > 1)
        if (mb < MB) return panel_rows<MB - 1, Lo>(mb, wp, Kh, h, l, ldx, y, ldy, bias, ncols);
    constexpr int U = MB == 1 ? 4 : MB < 4 ? 2 : 1;
    panel_bf16<MB, U, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols);
}

}  // namespace

void panel_products_avx512_bf16(const PanelJob& j, int first, int last) {
    const int Kh = (j.L->in + 1) / 2, N = j.L->out;
    const float* bias_all = j.L->bias.empty() ? nullptr : j.L->bias.data();
    for (int p = first; p < last; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        const bf16* wp = reinterpret_cast<const bf16*>(j.L->panel(p));
        for (int m0 = 0; m0 < j.M; m0 += 8) {
            const int mb = std::min(8, j.M - m0);
            const std::uint32_t* h = j.x_hi + std::size_t(m0) * j.ldx;
            const std::uint32_t* l = j.x_lo + std::size_t(m0) * j.ldx;
            float* y = j.y + std::size_t(m0) * N + n0;
            const float* bias = bias_all ? bias_all + n0 : nullptr;
            if (j.M < kBf16RoundXMinM) panel_rows<8, true>(mb, wp, Kh, h, l, j.ldx, y, N, bias, ncols);
            else panel_rows<8, false>(mb, wp, Kh, h, l, j.ldx, y, N, bias, ncols);
        }
    }
}

void split_x_avx512_bf16(const float* x, int M, int K, int Kp, bf16* hi, bf16* lo) {
    for (int j = 0; j < M; j++) {
        const float* xr = x + std::size_t(j) * K;
        bf16* h = hi + std::size_t(j) * Kp;
        bf16* l = lo + std::size_t(j) * Kp;
        for (int k = 0; k < Kp; k += 32) {
            const int left = K - k;
            const __mmask16 m0 = left >= 16 ? 0xFFFF : left > 0 ? __mmask16((1u << left) - 1) : 0;
            const __mmask16 m1 = left >= 32 ? 0xFFFF : left > 16 ? __mmask16((1u << (left - 16)) - 1) : 0;
            __m512 a = _mm512_maskz_loadu_ps(m0, xr + k), b = _mm512_maskz_loadu_ps(m1, xr + k + 16);
            __m512bh hb = _mm512_cvtne2ps_pbh(b, a);  // 32 bf16, in order
            // Back to f32 (exact): the two halves of hb, widened by a 16-bit shift.
            __m512i hi_i = (__m512i)hb;
            __m512 ha = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi_i)), 16));
            __m512 hb2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi_i, 1)), 16));
            __m512bh lb = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb2), _mm512_sub_ps(a, ha));
            _mm512_store_si512(h + k, hi_i);
            _mm512_store_si512(l + k, (__m512i)lb);
        }
    }
}

}  // namespace pd

#pragma GCC pop_options
