#include "matmul.hpp"
#include "simd.hpp"

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* in the
// cvt/unpack/permute intrinsics, GCC bug 105593, fixed in 13): not our code.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <mutex>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

namespace pd {

const char* precision_name(Precision p) { return p == Precision::f32 ? "f32" : "bf16"; }

Precision parse_precision(const std::string& s) {
    if (s == "f32" || s == "fp32" || s == "float32") return Precision::f32;
    if (s == "bf16" || s == "bfloat16") return Precision::bf16;
    fail("unknown precision \"{}\": use f32 or bf16", s);
}

std::size_t bytes_per_weight(Precision p) { return p == Precision::f32 ? 4 : 2; }

// --- oneDNN (prefill) --------------------------------------------------------

namespace {

dnnl::engine& cpu_engine() {
    static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    return eng;
}

dnnl::stream& cpu_stream() {
    static dnnl::stream s(cpu_engine());
    return s;
}

}  // namespace

// One matmul primitive per row count M, all sharing the packed weights. A
// primitive is JIT-compiled on first use of its M, then reused.
struct PackedWeights {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;

    struct ForM {
        dnnl::matmul prim;
        dnnl::memory::desc src_md, dst_md, scratch_md;
        std::vector<std::uint8_t> scratch;    // user scratchpad: nothing allocated per call
        std::vector<bf16> src16;              // x converted to bf16 (bf16 precision)
        std::string impl;
    };

    dt wdt;
    dnnl::memory weights;                  // (in, out) logically, blocked layout
    dnnl::memory bias;                     // (1, out), when has_bias
    bool has_bias = false;
    std::unordered_map<int, std::unique_ptr<ForM>> by_m;
    std::mutex mu;

    ForM& get(const Linear& L, int M) {
        std::lock_guard lock(mu);
        auto it = by_m.find(M);
        if (it != by_m.end()) return *it->second;
        auto f = std::make_unique<ForM>();
        f->src_md = dnnl::memory::desc({M, L.in}, wdt, tag::ab);
        f->dst_md = dnnl::memory::desc({M, L.out}, dt::f32, tag::ab);
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        auto pd = has_bias ? dnnl::matmul::primitive_desc(
                             dnnl::matmul::desc(f->src_md, weights.get_desc(),
                                                bias.get_desc(), f->dst_md),
                             attr, cpu_engine())
                       : dnnl::matmul::primitive_desc(
                             dnnl::matmul::desc(f->src_md, weights.get_desc(), f->dst_md), attr,
                             cpu_engine());
        f->prim = dnnl::matmul(pd);
        f->scratch_md = pd.scratchpad_desc();
        f->scratch.resize(f->scratch_md.get_size());
        if (wdt == dt::bf16) f->src16.resize(std::size_t(M) * L.in);
        f->impl = pd.impl_info_str();
        return *by_m.emplace(M, std::move(f)).first->second;
    }
};

static std::shared_ptr<PackedWeights> pack(const Linear& L, const float* w_out_in) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    auto p = std::make_shared<PackedWeights>();
    p->wdt = L.precision == Precision::bf16 ? dt::bf16 : dt::f32;
    // Ask oneDNN which weight layout it wants for a typical prefill (M = 128),
    // then reorder once. Rows of W are columns of the (in, out) matrix: "ba".
    dnnl::memory::desc src_md({128, L.in}, p->wdt, tag::ab);
    dnnl::memory::desc any_w({L.in, L.out}, p->wdt, tag::any);
    dnnl::memory::desc dst_md({128, L.out}, dt::f32, tag::ab);
    auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, any_w, dst_md), cpu_engine());
    dnnl::memory::desc user_md({L.in, L.out}, dt::f32, tag::ba);
    dnnl::memory user(user_md, cpu_engine(), const_cast<float*>(w_out_in));
    p->weights = dnnl::memory(pd.weights_desc(), cpu_engine());
    dnnl::reorder(user, p->weights).execute(cpu_stream(), user, p->weights);
    if (!L.bias.empty()) {
        p->has_bias = true;
        p->bias = dnnl::memory({{1, L.out}, dt::f32, tag::ab}, cpu_engine());
        std::memcpy(p->bias.get_data_handle(), L.bias.data(), L.bias.size() * sizeof(float));
    }
    cpu_stream().wait();
    return p;
}

static void reserve_bf16_split(int in);

// Storage for the row-major weights the decode kernel streams, advised onto
// transparent huge pages before anything touches it (this machine's THP mode
// is "madvise": only advised memory gets them). Measured on the reference
// machine in its fast-DRAM phase: the same AVX-512 read loop streams 60-61 GB/s
// from a huge-page buffer but 36-37 GB/s from 4 KiB pages, and decode was
// stuck at that 37 GB/s. PDLAB_HUGEPAGES=0 turns it off, to see the difference.
template <typename T>
static std::vector<T> huge_page_vector(std::size_t n) {
    static const bool enabled = [] {
        const char* e = std::getenv("PDLAB_HUGEPAGES");
        return !(e && std::string(e) == "0");
    }();
    std::vector<T> v;
    v.reserve(n);
    constexpr std::uintptr_t huge = std::uintptr_t(2) << 20;
    auto a = (reinterpret_cast<std::uintptr_t>(v.data()) + huge - 1) & ~(huge - 1);
    auto b = (reinterpret_cast<std::uintptr_t>(v.data() + n)) & ~(huge - 1);
    if (enabled && b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_HUGEPAGE);
    v.resize(n);  // first touch, after the advice
    return v;
}

Linear make_linear(std::vector<float> w, std::vector<float> bias, int in, int out,
                   Precision precision) {
    Linear L;
    L.in = in;
    L.out = out;
    L.precision = precision;
    L.bias = std::move(bias);
    L.packed = pack(L, w.data());
    if (precision == Precision::bf16) {
        reserve_bf16_split(in);  // decode's scratch, sized now rather than in the decode loop
        L.w16 = huge_page_vector<bf16>(w.size());
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < w.size(); i++) L.w16[i] = f32_to_bf16(w[i]);
    } else {
        L.w = huge_page_vector<float>(w.size());  // a copy: the loader's vector has 4 KiB pages
        std::memcpy(L.w.data(), w.data(), w.size() * sizeof(float));
    }
    return L;
}

std::string linear_impl_name(const Linear& L, int M) {
    if (M <= kSmallM) return "pdlab small-M kernel";
    return L.packed->get(L, M).impl;
}

// --- small-M kernel (decode) --------------------------------------------------
//
// Decode multiplies a few rows of x (M <= 16) by every weight matrix: each
// weight is used M times, so at small M the kernel's speed is the rate at
// which it streams weights from DRAM. The threads split the output rows into
// one contiguous range each (one OpenMP region per call, the split computed
// from the thread number), and each thread walks its range one weight row
// after the other: its share of the matrix is read as ONE sequential stream,
// which the hardware prefetchers follow from start to end. (Reading 4 or 8
// rows side by side -- 4 or 8 streams of 3 KiB each for K = 768 -- was 20%
// slower: every short stream has to be detected by the prefetcher anew.)
// Within a row, M = 1 keeps 4 independent accumulators (K unrolled 4 times).
//
// From M = kTileMinM rows of x on, the product is compute-bound rather than
// memory-bound (the ridge is near M = 8 to 13 on a 2-core Zen 4; see pdlab
// roofline), and a register tile of 4 weight rows x 4 rows of x -- 8 loads for
// 16 FMAs, the 16 sums reduced together -- does fewer loads per FMA.

namespace {

#if defined(__AVX512F__)
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const bf16* p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const bf16* p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}


// One weight row (length K) times MB rows of x, with U accumulators per x row
// (K unrolled U times) so that even MB = 1 keeps 4 FMA chains in flight.
// y[j * ldy] = w . x_j + b for j < MB.
template <typename W, int MB, int U>
inline void row_times_x(const W* w, int K, const float* x, float* y, int ldy, float b) {
    __m512 acc[MB * U];
    for (int i = 0; i < MB * U; i++) acc[i] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 * U <= K; k += 16 * U) {
        __m512 wv[U];
        for (int u = 0; u < U; u++) wv[u] = load16(w + k + 16 * u);
        for (int j = 0; j < MB; j++)
            for (int u = 0; u < U; u++)
                acc[j * U + u] = _mm512_fmadd_ps(wv[u], load16(x + std::size_t(j) * K + k + 16 * u), acc[j * U + u]);
    }
    for (; k + 16 <= K; k += 16) {
        __m512 wv = load16(w + k);
        for (int j = 0; j < MB; j++)
            acc[j * U] = _mm512_fmadd_ps(wv, load16(x + std::size_t(j) * K + k), acc[j * U]);
    }
    if (k < K) {  // the last K % 16 columns
        __mmask16 mask = __mmask16((1u << (K - k)) - 1);
        __m512 wv = load16(w + k, mask);
        for (int j = 0; j < MB; j++)
            acc[j * U] = _mm512_fmadd_ps(wv, load16(x + std::size_t(j) * K + k, mask), acc[j * U]);
    }
    for (int j = 0; j < MB; j++) {
        __m512 s = acc[j * U];
        for (int u = 1; u < U; u++) s = _mm512_add_ps(s, acc[j * U + u]);
        y[std::size_t(j) * ldy] = _mm512_reduce_add_ps(s) + b;
    }
}

// 4 weight rows times 4 rows of x: 16 accumulators, reduced together.
// y[j * ldy + r] = w_r . x_j + bias[r].
template <typename W>
inline void tile4x4(const W* w, int K, const float* x, float* y, int ldy, const float* bias) {
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wr[4];
        for (int r = 0; r < 4; r++) wr[r] = load16(w + std::size_t(r) * K + k);
        for (int j = 0; j < 4; j++) {
            __m512 xv = load16(x + std::size_t(j) * K + k);
            for (int r = 0; r < 4; r++) acc[r * 4 + j] = _mm512_fmadd_ps(wr[r], xv, acc[r * 4 + j]);
        }
    }
    if (k < K) {
        __mmask16 mask = __mmask16((1u << (K - k)) - 1);
        __m512 wr[4];
        for (int r = 0; r < 4; r++) wr[r] = load16(w + std::size_t(r) * K + k, mask);
        for (int j = 0; j < 4; j++) {
            __m512 xv = load16(x + std::size_t(j) * K + k, mask);
            for (int r = 0; r < 4; r++) acc[r * 4 + j] = _mm512_fmadd_ps(wr[r], xv, acc[r * 4 + j]);
        }
    }
    alignas(64) float sums[16];  // lane r*4 + j: (weight row r, x row j)
    _mm512_store_ps(sums, simd::reduce16(acc));
    for (int j = 0; j < 4; j++)
        for (int r = 0; r < 4; r++) y[std::size_t(j) * ldy + r] = sums[r * 4 + j] + (bias ? bias[r] : 0.0f);
}
#else
template <typename W, int MB, int U>
inline void row_times_x(const W* w, int K, const float* x, float* y, int ldy, float b) {
    auto val = [](W v) {
        if constexpr (std::is_same_v<W, bf16>) return bf16_to_f32(v);
        else return v;
    };
    for (int j = 0; j < MB; j++) {
        float s = 0;
        for (int k = 0; k < K; k++) s += val(w[k]) * x[std::size_t(j) * K + k];
        y[std::size_t(j) * ldy] = s + b;
    }
}
template <typename W>
inline void tile4x4(const W* w, int K, const float* x, float* y, int ldy, const float* bias) {
    for (int r = 0; r < 4; r++)
        row_times_x<W, 4, 1>(w + std::size_t(r) * K, K, x, y + r, ldy, bias ? bias[r] : 0.0f);
}
#endif

#if defined(__AVX512BF16__)
// bf16 weights with AVX512_BF16: vdpbf16ps multiplies 32 bf16 pairs and adds
// them into 16 f32 lanes, so the weights need no widening at all. x (f32) is
// split once per call into x_hi = bf16(x) and x_lo = bf16(x - x_hi); w . x is
// then w . x_hi + w . x_lo, within about 2^-16 of the f32 product (the
// widen-and-FMA path was compute-bound at ~55% of the bandwidth floor).
// xh, xl: MB rows of Kp bf16 (K rounded up to 32, zero-padded).
template <int MB, int U>
inline void row_times_x_bf16(const bf16* w, int K, const bf16* xh, const bf16* xl, int Kp, float* y,
                             int ldy, float b) {
    __m512 ah[MB * U], al[MB * U];
    for (int i = 0; i < MB * U; i++) ah[i] = al[i] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 32 * U <= K; k += 32 * U) {
        __m512bh wv[U];
        for (int u = 0; u < U; u++) wv[u] = (__m512bh)_mm512_loadu_si512(w + k + 32 * u);
        for (int j = 0; j < MB; j++)
            for (int u = 0; u < U; u++) {
                const std::size_t o = std::size_t(j) * Kp + k + 32 * u;
                ah[j * U + u] = _mm512_dpbf16_ps(ah[j * U + u], wv[u], (__m512bh)_mm512_load_si512(xh + o));
                al[j * U + u] = _mm512_dpbf16_ps(al[j * U + u], wv[u], (__m512bh)_mm512_load_si512(xl + o));
            }
    }
    for (; k < K; k += 32) {  // the rest, the last 32-column chunk masked
        const int left = K - k;
        const __mmask32 m = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
        __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + k);
        for (int j = 0; j < MB; j++) {
            const std::size_t o = std::size_t(j) * Kp + k;
            ah[j * U] = _mm512_dpbf16_ps(ah[j * U], wv, (__m512bh)_mm512_load_si512(xh + o));
            al[j * U] = _mm512_dpbf16_ps(al[j * U], wv, (__m512bh)_mm512_load_si512(xl + o));
        }
    }
    for (int j = 0; j < MB; j++) {
        __m512 s = _mm512_add_ps(ah[j * U], al[j * U]);
        for (int u = 1; u < U; u++) s = _mm512_add_ps(s, _mm512_add_ps(ah[j * U + u], al[j * U + u]));
        y[std::size_t(j) * ldy] = _mm512_reduce_add_ps(s) + b;
    }
}

// Rows [a, b) of W (bf16) times M rows of x already split into xh/xl.
inline void small_m_rows_bf16(const bf16* w, int K, int N, const bf16* xh, const bf16* xl, int Kp, int M,
                              float* y, const float* bias, int a, int b) {
    for (int n = a; n < b; n++) {
        const bf16* wr = w + std::size_t(n) * K;
        const float bn = bias ? bias[n] : 0.0f;
        int m = 0;
        for (; m + 8 <= M; m += 8)
            row_times_x_bf16<8, 1>(wr, K, xh + std::size_t(m) * Kp, xl + std::size_t(m) * Kp, Kp,
                                   y + std::size_t(m) * N + n, N, bn);
        const bf16 *h = xh + std::size_t(m) * Kp, *l = xl + std::size_t(m) * Kp;
        float* ym = y + std::size_t(m) * N + n;
        switch (M - m) {
            case 7: row_times_x_bf16<7, 1>(wr, K, h, l, Kp, ym, N, bn); break;
            case 6: row_times_x_bf16<6, 1>(wr, K, h, l, Kp, ym, N, bn); break;
            case 5: row_times_x_bf16<5, 1>(wr, K, h, l, Kp, ym, N, bn); break;
            case 4: row_times_x_bf16<4, 1>(wr, K, h, l, Kp, ym, N, bn); break;
            case 3: row_times_x_bf16<3, 1>(wr, K, h, l, Kp, ym, N, bn); break;
            case 2: row_times_x_bf16<2, 2>(wr, K, h, l, Kp, ym, N, bn); break;
            case 1: row_times_x_bf16<1, 4>(wr, K, h, l, Kp, ym, N, bn); break;
            default: break;
        }
    }
}

// The split x of the calling thread: grows to the largest M x K seen (in the
// first decode steps, or earlier through reserve_bf16_split from make_linear),
// then is reused: the decode loop allocates nothing.
struct Bf16Split {
    std::vector<bf16, std::allocator<bf16>> buf;
    bf16* hi = nullptr;
    bf16* lo = nullptr;
    void reserve(std::size_t elems) {  // elems: M * Kp
        if (buf.size() >= 2 * elems + 32) return;
        buf.resize(2 * elems + 32);
    }
    void place(std::size_t elems) {
        auto p = (reinterpret_cast<std::uintptr_t>(buf.data()) + 63) & ~std::uintptr_t(63);
        hi = reinterpret_cast<bf16*>(p);
        lo = hi + elems;
    }
};
Bf16Split& bf16_split() {
    thread_local Bf16Split s;
    return s;
}

void split_x_bf16(const float* x, int M, int K, int Kp, bf16* hi, bf16* lo) {
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
            // Back to f32 (exact): the even/odd halves of hb, widened by a 16-bit shift.
            __m512i hi_i = (__m512i)hb;
            __m512 ha = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi_i)), 16));
            __m512 hb2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi_i, 1)), 16));
            __m512bh lb = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb2), _mm512_sub_ps(a, ha));
            _mm512_store_si512(h + k, hi_i);
            _mm512_store_si512(l + k, (__m512i)lb);
        }
    }
}
#endif  // __AVX512BF16__

#ifndef PDLAB_TILE_MIN_M
#define PDLAB_TILE_MIN_M 8
#endif
constexpr int kTileMinM = PDLAB_TILE_MIN_M;

// Weight row n times M rows of x, at most 8 at a time.
template <typename W>
inline void row_times_all_x(const W* w, int K, int N, const float* x, int M, float* y, int n, float bn) {
    int m = 0;
    for (; m + 8 <= M; m += 8) row_times_x<W, 8, 1>(w, K, x + std::size_t(m) * K, y + std::size_t(m) * N + n, N, bn);
    const float* xm = x + std::size_t(m) * K;
    float* ym = y + std::size_t(m) * N + n;
    switch (M - m) {
        case 7: row_times_x<W, 7, 1>(w, K, xm, ym, N, bn); break;
        case 6: row_times_x<W, 6, 1>(w, K, xm, ym, N, bn); break;
        case 5: row_times_x<W, 5, 1>(w, K, xm, ym, N, bn); break;
        case 4: row_times_x<W, 4, 1>(w, K, xm, ym, N, bn); break;
        case 3: row_times_x<W, 3, 2>(w, K, xm, ym, N, bn); break;
        case 2: row_times_x<W, 2, 2>(w, K, xm, ym, N, bn); break;
        case 1: row_times_x<W, 1, 4>(w, K, xm, ym, N, bn); break;
        default: break;
    }
}

// Output columns [a, b) of y (rows [a, b) of W).
template <typename W>
void small_m_rows(const W* w, int K, int N, const float* x, int M, float* y, const float* bias, int a, int b) {
    int n = a;
    if (M >= kTileMinM) {  // compute-bound: 4x4 register tiles, x rows in groups of 4
        const int M4 = M / 4 * 4;
        for (; n + 4 <= b; n += 4) {
            const W* wn = w + std::size_t(n) * K;
            for (int m = 0; m < M4; m += 4)
                tile4x4(wn, K, x + std::size_t(m) * K, y + std::size_t(m) * N + n, N, bias ? bias + n : nullptr);
            for (int r = 0; r < 4 && M4 < M; r++)
                row_times_all_x(wn + std::size_t(r) * K, K, N, x + std::size_t(M4) * K, M - M4,
                                y + std::size_t(M4) * N, n + r, bias ? bias[n + r] : 0.0f);
        }
    }
    for (; n < b; n++)  // memory-bound: one weight row after the other
        row_times_all_x(w + std::size_t(n) * K, K, N, x, M, y, n, bias ? bias[n] : 0.0f);
}

template <typename W>
void small_m(const W* w, int K, int N, const float* x, int M, float* y, const float* bias) {
    // Below a few hundred KiB of weights, waking the second thread costs more
    // than it saves. A plain branch, not an "if" clause: libgomp allocates a
    // team for every parallel region it serialises, and decode must not allocate.
    if (std::size_t(N) * K * sizeof(W) < (std::size_t(256) << 10) || omp_get_max_threads() == 1) {
        small_m_rows(w, K, N, x, M, y, bias, 0, N);
        return;
    }
    // Chunks of whole 4-row blocks, 8 per thread, handed out in order as the
    // threads get free: each chunk is one long sequential stream, and a core
    // that gets less DRAM bandwidth than the other does less of the matrix
    // (a static half each left one thread waiting at the end of most calls).
    const int chunk = std::max(4, (N / (8 * omp_get_max_threads()) + 3) / 4 * 4);
    const int nchunks = (N + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < nchunks; c++) small_m_rows(w, K, N, x, M, y, bias, c * chunk, std::min(N, (c + 1) * chunk));
}

}  // namespace

static void reserve_bf16_split([[maybe_unused]] int in) {
#if defined(__AVX512BF16__)
    bf16_split().reserve(std::size_t(kSmallM) * ((in + 31) / 32 * 32));
#endif
}

void linear_small_m(const Linear& L, const float* x, int M, float* y) {
    const float* bias = L.bias.empty() ? nullptr : L.bias.data();
    if (L.precision == Precision::bf16) {
#if defined(__AVX512BF16__)
        if (M >= kTileMinM) {  // compute-bound: the widening 4x4 tiles do fewer loads per FMA
            small_m(L.w16.data(), L.in, L.out, x, M, y, bias);
            return;
        }
        const int K = L.in, N = L.out, Kp = (K + 31) / 32 * 32;
        const std::size_t elems = std::size_t(M) * Kp;
        Bf16Split& sp = bf16_split();
        sp.reserve(std::size_t(kSmallM) * Kp);  // once per thread and largest K
        sp.place(elems);
        split_x_bf16(x, M, K, Kp, sp.hi, sp.lo);
        const bf16* w = L.w16.data();
        if (std::size_t(N) * K * sizeof(bf16) < (std::size_t(256) << 10) || omp_get_max_threads() == 1) {
            small_m_rows_bf16(w, K, N, sp.hi, sp.lo, Kp, M, y, bias, 0, N);
            return;
        }
        const bf16 *hi = sp.hi, *lo = sp.lo;
        const int chunk = std::max(4, N / (8 * omp_get_max_threads()));  // as in small_m()
        const int nchunks = (N + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1)
        for (int c = 0; c < nchunks; c++)
            small_m_rows_bf16(w, K, N, hi, lo, Kp, M, y, bias, c * chunk, std::min(N, (c + 1) * chunk));
        return;
#else
        small_m(L.w16.data(), L.in, L.out, x, M, y, bias);
        return;
#endif
    }
    small_m(L.w.data(), L.in, L.out, x, M, y, bias);
}

void linear_forward(const Linear& L, const float* x, int M, float* y) {
    if (M <= kSmallM) {
        linear_small_m(L, x, M, y);
        return;
    }
    auto& f = L.packed->get(L, M);
    const void* src = x;
    if (L.precision == Precision::bf16) {
        std::size_t n = std::size_t(M) * L.in;
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; i++) f.src16[i] = f32_to_bf16(x[i]);
        src = f.src16.data();
    }
    auto& eng = cpu_engine();
    dnnl::memory src_m(f.src_md, eng, const_cast<void*>(src));
    dnnl::memory dst_m(f.dst_md, eng, y);
    dnnl::memory scratch_m(f.scratch_md, eng, f.scratch.data());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src_m},
                                               {DNNL_ARG_WEIGHTS, L.packed->weights},
                                               {DNNL_ARG_DST, dst_m},
                                               {DNNL_ARG_SCRATCHPAD, scratch_m}};
    if (L.packed->has_bias) args[DNNL_ARG_BIAS] = L.packed->bias;
    f.prim.execute(cpu_stream(), args);
    cpu_stream().wait();
}

}  // namespace pd
