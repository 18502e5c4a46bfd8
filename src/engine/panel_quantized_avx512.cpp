// The int8 and int4 decode kernel with AVX-512 VNNI, for CPUs that have it
// (Zen 4, Zen 5, Ice Lake and later): a target-specific specialisation of
// panel_quantized.cpp, used where use_avx512_vnni() (isa.hpp).
//
// The integer sums are the portable kernel's, exactly, and so are the convert
// and the scaling per group and column after them; what differs is how many
// instructions a panel's bytes cost. It asks for no lines ahead, unlike the
// AVX2 kernels: on Zen 5 the hardware prefetcher alone kept this kernel's
// stream fed, and software requests 2 KiB ahead made decode slower (int8 at 1
// thread 1.38-1.54x its floor with them, 1.03-1.08x without; measurements in
// docs/performance.md).
//
// int8 (x in int16): vpdpwssd multiplies two int16 pairs and adds them into an
// int32 lane in one instruction where vpmaddwd + vpaddd take two. Per 64
// bytes (one k-pair of 32 columns): 2 x (sign-extending load, vpdpwssd).
//
// int4 (x in int8 levels: x_quantized_max, matmul.hpp): vpdpbusd multiplies
// four unsigned bytes by four signed ones per int32 lane, 64 products per
// instruction, twice vpdpwssd's 32, which bounded int4 (one vpdpwssd per
// cycle on Zen 5, whatever the nibbles cost). Per 64 bytes (two k-pairs): one
// load, one vpermw to bring each column's four k together, two vpternlogd and
// a shift for the nibbles, 2 vpdpbusd. (Each thread rounds its own copy of x
// to bytes per call: K values against its share of the panels.) The weights enter as the unsigned
// operand, q + 8 in [1, 15]; 8 x the group's sum of x is taken back out of
// every sum, so they stay exact.
// x86 only: meson compiles this file for x86_64 builds alone.
#include "engine/panel_kernels.hpp"

#include "common.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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

// The pair x[k], x[k+1] (int16) in all 16 int32 lanes; for int4, the four
// bytes x[k..k+3] (int8).
inline __m512i broadcast_lane(const void* x) {
    std::int32_t lane;
    std::memcpy(&lane, x, sizeof lane);
    return _mm512_set1_epi32(lane);
}

// int8: the weights of k-pair `pair` as int16, columns 0-15 in w[0] and
// 16-31 in w[1], each int32 lane (w[c][k], w[c][k+1]): the pair's 64 bytes
// are (32 columns, 2).
inline void load_pair(const std::int8_t* pair, __m512i (&w)[2]) {
    w[0] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair)));
    w[1] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32)));
}

// int4: the weights of the k-quad at `quad` (two k-pairs, 64 bytes) as
// unsigned bytes q + 8, columns 0-15 in w[0] and 16-31 in w[1], each int32
// lane (w[c][k..k+3]). Each k-pair's 32 bytes hold columns 0-15 in their low
// nibbles and 16-31 in their high ones (see Linear), byte 2c + i holding
// column c's k + i, so int16 word c of each pair is column c's two k; vpermw
// puts word c of the first pair beside word c of the second. A nibble is
// two's complement: flipping its sign bit adds 8, so (b & 0xF) ^ 0x8 (one
// vpternlogd; 0x6A is the truth table of (A & B) ^ C) is q + 8.
constexpr int kNibbleOffset = 8;

inline void load_quad(const std::int8_t* quad, __m512i (&w)[2]) {
    alignas(64) static constexpr std::int16_t interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                                21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                                11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i v = _mm512_permutexvar_epi16(_mm512_load_si512(interleave), _mm512_loadu_si512(quad));
    const __m512i nibble = _mm512_set1_epi8(0xF), offset = _mm512_set1_epi8(kNibbleOffset);
    w[0] = _mm512_ternarylogic_epi32(v, nibble, offset, 0x6A);
    w[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), nibble, offset, 0x6A);
}

// int4's x, from the int16 x of quantize_x_int16 (values within int8 there):
// x8 (M, ldx) bytes, and excess (M, groups) = 8 x each group's sum of x, what
// the weights' offset adds to every int32 sum of that group.
void int4_x(const std::int16_t* x, int M, int ldx, int groups, int G, std::int8_t* x8, std::int32_t* excess) {
    for (int m = 0; m < M; m++)
        for (int g = 0; g < groups; g++) {
            const std::size_t at = std::size_t(m) * ldx + std::size_t(g) * G;
            __m512i sum = _mm512_setzero_si512();
            for (int k = 0; k < G; k += 32) {  // G is 32, 64 or 128
                const __m512i v = _mm512_loadu_si512(x + at + k);
                sum = _mm512_add_epi32(sum, _mm512_madd_epi16(v, _mm512_set1_epi16(1)));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(x8 + at + k), _mm512_cvtepi16_epi8(v));
            }
            excess[std::size_t(m) * groups + g] = kNibbleOffset * _mm512_reduce_add_epi32(sum);
        }
}

// The rows of x one pass over a panel multiplies (row strides ldx and
// groups): int8 weights take x16; int4 weights take x8 and excess (int4_x).
struct RowsOfX {
    const std::int16_t* x16 = nullptr;
    const std::int8_t* x8 = nullptr;
    const std::int32_t* excess = nullptr;
    const float* scales = nullptr;
    int ldx = 0, groups = 0;
};

// One quantized panel times MB rows of x: for each group, its steps (k-pairs
// for int8, k-quads for int4; 64 bytes each either way) of integer products in
// U interleaved sums per column half, then sum * weight scale * x scale into
// the totals. Every group is read whole: the packing pads a short last group
// and x is zero there, so the padding adds nothing.
template <int Bits, int G, int MB, int U>
void panel_quantized(const std::byte* panel, const RowsOfX& x, float* y, int ldy, const float* bias, int ncols) {
    constexpr int steps = Bits == 8 ? G / 2 : G / 4, k_per_step = G / steps;
    constexpr std::size_t step_bytes = 64;  // Linear::pair_bytes() x k_per_step / 2
    constexpr std::size_t group_bytes = steps * step_bytes + kPanel * sizeof(float);
    __m512 tot[MB][2];
    for (auto& t : tot) t[0] = t[1] = _mm512_setzero_ps();
    for (int g = 0; g < x.groups; g++) {
        const auto* q = reinterpret_cast<const std::int8_t*>(panel + std::size_t(g) * group_bytes);
        __m512i sum[U][MB][2];
        for (auto& su : sum)
            for (auto& s : su) s[0] = s[1] = _mm512_setzero_si512();
        for (int j = 0; j < steps; j += U)
            for (int u = 0; u < U; u++) {
                const std::int8_t* step = q + std::size_t(j + u) * step_bytes;
                __m512i w[2];
                const std::size_t k = std::size_t(g) * G + std::size_t(j + u) * k_per_step;
                if constexpr (Bits == 8) load_pair(step, w);
                else load_quad(step, w);
                for (int m = 0; m < MB; m++)
                    if constexpr (Bits == 8) {
                        const __m512i xb = broadcast_lane(x.x16 + std::size_t(m) * x.ldx + k);
                        sum[u][m][0] = _mm512_dpwssd_epi32(sum[u][m][0], w[0], xb);
                        sum[u][m][1] = _mm512_dpwssd_epi32(sum[u][m][1], w[1], xb);
                    } else {
                        const __m512i xb = broadcast_lane(x.x8 + std::size_t(m) * x.ldx + k);
                        sum[u][m][0] = _mm512_dpbusd_epi32(sum[u][m][0], w[0], xb);
                        sum[u][m][1] = _mm512_dpbusd_epi32(sum[u][m][1], w[1], xb);
                    }
            }
        const auto* w_scales = reinterpret_cast<const float*>(q + steps * step_bytes);
        const __m512 s0 = _mm512_loadu_ps(w_scales), s1 = _mm512_loadu_ps(w_scales + 16);
        for (int m = 0; m < MB; m++) {
            __m512i a = sum[0][m][0], b = sum[0][m][1];
            for (int u = 1; u < U; u++) a = _mm512_add_epi32(a, sum[u][m][0]), b = _mm512_add_epi32(b, sum[u][m][1]);
            if constexpr (Bits == 4) {
                const __m512i excess = _mm512_set1_epi32(x.excess[std::size_t(m) * x.groups + g]);
                a = _mm512_sub_epi32(a, excess), b = _mm512_sub_epi32(b, excess);
            }
            const __m512 xs = _mm512_set1_ps(x.scales[std::size_t(m) * x.groups + g]);
            tot[m][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(s0, xs), tot[m][0]);
            tot[m][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b), _mm512_mul_ps(s1, xs), tot[m][1]);
        }
    }
    for (int m = 0; m < MB; m++) store_panel_row(y + std::size_t(m) * ldy, tot[m][0], tot[m][1], bias, ncols);
}

// mb (1..MB) rows: the largest template that fits mb; more interleaved sums
// for fewer rows, to keep about 8 independent chains of multiply-adds.
template <int Bits, int G, int MB>
void panel_rows(int mb, const std::byte* panel, const RowsOfX& x, float* y, int ldy, const float* bias, int ncols) {
    if constexpr (MB > 1)
        if (mb < MB) return panel_rows<Bits, G, MB - 1>(mb, panel, x, y, ldy, bias, ncols);
    constexpr int U = MB == 1 ? 4 : MB == 2 ? 2 : 1;
    panel_quantized<Bits, G, MB, U>(panel, x, y, ldy, bias, ncols);
}

// Panels [first, last), with the format and group size as constants.
template <int Bits, int G>
void panels(const PanelJob& j, int first, int last) {
    const int N = j.L->out, groups = j.L->n_groups();
    const float* bias_all = j.L->bias.empty() ? nullptr : j.L->bias.data();
    // int4's x in bytes, once per call for all its panels; each thread keeps its own.
    thread_local std::vector<std::int8_t> x8;
    thread_local std::vector<std::int32_t> excess;
    if constexpr (Bits == 4) {
        x8.resize(std::size_t(j.M) * j.ldx);
        excess.resize(std::size_t(j.M) * groups);
        int4_x(j.x_int16, j.M, j.ldx, groups, G, x8.data(), excess.data());
    }
    for (int p = first; p < last; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        for (int m0 = 0; m0 < j.M; m0 += kRowsPerPass) {
            RowsOfX x{j.x_int16 + std::size_t(m0) * j.ldx, nullptr, nullptr,
                      j.x_scales + std::size_t(m0) * groups, j.ldx, groups};
            if constexpr (Bits == 4) x.x8 = x8.data() + std::size_t(m0) * j.ldx, x.excess = excess.data() + std::size_t(m0) * groups;
            panel_rows<Bits, G, kRowsPerPass>(std::min(kRowsPerPass, j.M - m0), j.L->panel(p), x,
                                              j.y + std::size_t(m0) * N + n0, N, bias_all ? bias_all + n0 : nullptr,
                                              ncols);
        }
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
