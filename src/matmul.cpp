#include "matmul.hpp"

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

// Weights the decode kernel streams live on transparent huge pages: this
// machine's THP mode is "madvise", so only advised memory gets them. Measured
// on the reference machine in its fast-DRAM phase: the same AVX-512 read loop
// streams 60-61 GB/s from a huge-page buffer but 36-37 GB/s from 4 KiB pages.
// The buffer is mmap'd directly (not malloc'd: below glibc's sliding mmap
// threshold a vector comes from the heap, already touched in 4 KiB pages) and
// advised before first touch. PDLAB_HUGEPAGES=0 turns the advice off.
template <typename T>
T* HugePageAllocator<T>::allocate(std::size_t n) {
    static const bool enabled = [] {
        const char* e = std::getenv("PDLAB_HUGEPAGES");
        return !(e && std::string(e) == "0");
    }();
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 1);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (enabled) ::madvise(p, bytes, MADV_HUGEPAGE);
    return static_cast<T*>(p);
}
template <typename T>
void HugePageAllocator<T>::deallocate(T* p, std::size_t n) {
    ::munmap(p, std::max<std::size_t>(n * sizeof(T), 1));
}
template struct HugePageAllocator<std::byte>;

// Row-major (out, in) -> panels (see Linear), in a new store of one arena.
static void fill_panels(Linear& L, const float* w) {
    const int K = L.in, N = L.out, P = L.n_panels();
    auto store = std::make_shared<PanelStore>();
    store->arenas.emplace_back(std::size_t(P) * L.panel_bytes());  // zero: the last panel's padding
    std::byte* base = store->arenas[0].data();
#pragma omp parallel for schedule(static)
    for (int p = 0; p < P; p++)
        for (int c = 0; c < kPanel && p * kPanel + c < N; c++) {
            const float* row = w + std::size_t(p * kPanel + c) * K;
            std::byte* panel = base + std::size_t(p) * L.panel_bytes();
            if (L.precision == Precision::f32) {
                float* dst = reinterpret_cast<float*>(panel) + c;
                for (int k = 0; k < K; k++) dst[std::size_t(k) * kPanel] = row[k];
            } else {
                bf16* dst = reinterpret_cast<bf16*>(panel) + 2 * c;
                for (int k = 0; k < K; k++) dst[std::size_t(k / 2) * kPanel * 2 + (k & 1)] = f32_to_bf16(row[k]);
            }
        }
    L.parts = {PanelPart{0, base}};
    L.store = std::move(store);
}

Linear make_linear(std::vector<float> w, std::vector<float> bias, int in, int out,
                   Precision precision) {
    Linear L;
    L.in = in;
    L.out = out;
    L.precision = precision;
    L.bias = std::move(bias);
    L.packed = pack(L, w.data());
    if (precision == Precision::bf16) reserve_bf16_split(in);  // decode's scratch, sized now
    fill_panels(L, w.data());
    return L;
}

// First panel of thread t's share of P panels.
static int part_start(int P, int t, int threads) { return int(std::int64_t(P) * t / threads); }

void arrange_for_decode(const std::vector<Linear*>& linears, int threads) {
    threads = std::max(1, threads);
    std::vector<std::size_t> size(threads, 0);
    for (const Linear* L : linears)
        for (int t = 0; t < threads; t++)
            size[t] += std::size_t(part_start(L->n_panels(), t + 1, threads) - part_start(L->n_panels(), t, threads)) *
                       L->panel_bytes();
    auto store = std::make_shared<PanelStore>();
    for (int t = 0; t < threads; t++) store->arenas.emplace_back(size[t]);
    std::vector<std::size_t> used(threads, 0);
    for (Linear* L : linears) {
        const int P = L->n_panels();
        std::vector<PanelPart> parts;
        for (int t = 0; t < threads; t++) {
            const int a = part_start(P, t, threads), b = part_start(P, t + 1, threads);
            std::byte* dst = store->arenas[t].data() + used[t];
            for (int p = a; p < b; p++)
                std::memcpy(dst + std::size_t(p - a) * L->panel_bytes(), L->panel(p), L->panel_bytes());
            parts.push_back(PanelPart{a, dst});
            used[t] += std::size_t(b - a) * L->panel_bytes();
        }
        L->parts = std::move(parts);
        L->store = store;  // the Linear's old store is freed here, unless shared
    }
}

std::vector<float> linear_rows_f32(const Linear& L) {
    if (L.precision != Precision::f32) fail("linear_rows_f32 on a {} Linear", precision_name(L.precision));
    std::vector<float> w(std::size_t(L.out) * L.in);
    for (int n = 0; n < L.out; n++) {
        const float* panel = reinterpret_cast<const float*>(L.panel(n / kPanel));
        for (int k = 0; k < L.in; k++) w[std::size_t(n) * L.in + k] = panel[std::size_t(k) * kPanel + n % kPanel];
    }
    return w;
}

std::vector<bf16> linear_rows_bf16(const Linear& L) {
    if (L.precision != Precision::bf16) fail("linear_rows_bf16 on a {} Linear", precision_name(L.precision));
    std::vector<bf16> w(std::size_t(L.out) * L.in);
    for (int n = 0; n < L.out; n++) {
        const bf16* panel = reinterpret_cast<const bf16*>(L.panel(n / kPanel));
        for (int k = 0; k < L.in; k++)
            w[std::size_t(n) * L.in + k] = panel[(std::size_t(k / 2) * kPanel + n % kPanel) * 2 + (k & 1)];
    }
    return w;
}

std::string linear_impl_name(const Linear& L, int M) {
    if (M <= kSmallM) return "pdlab small-M panel kernel";
    return L.packed->get(L, M).impl;
}

// --- small-M kernel (decode) --------------------------------------------------
//
// Decode multiplies a few rows of x (M <= 16) by every weight matrix. At M = 1
// each weight is used once, so the kernel's speed is the rate at which it
// streams weights from DRAM; at M = 16 each weight feeds 16 multiply-adds and
// the product is compute-bound (the ridge is near M = 8 to 13 on a 2-core
// Zen 4; see pdlab roofline).
//
// One layout serves both: column panels of 32 outputs, k-major (Linear::panels).
// For each k the kernel loads the panel's 32 weights (two vectors) and, for
// each of up to 8 rows of x, broadcasts x[m][k] and does two FMAs into that
// row's 32 running sums. So:
//  - a panel is one contiguous run of K * 128 bytes, read front to back: the
//    hardware prefetchers follow it (the threads take runs of whole panels);
//  - the sums need no horizontal reduction at the end (one lane per output);
//  - at M = 8 there are 16 accumulators and 2 loads + 8 broadcasts per 16 FMAs,
//    near the FMA unit's rate; M = 16 reads each panel twice, from L2.
// At M = 1, 2 and 3 the k loop is split into U interleaved partial sums, so
// that 8 or more FMA chains are in flight despite the few rows.
//
// Measured on the reference machine (2 threads, shapes of bench-llama-125m,
// same run): at M = 1 f32 this layout streamed 48-53 GB/s where the previous
// row-by-row kernel (each weight row dotted with x, then reduced) streamed
// 41; at M = 16 it ran 186-190 GFLOP/s against 74.

namespace {

#if defined(__AVX512F__)
// Stores the 32 sums of one row of y, masked to the panel's `ncols` outputs.
inline void store_panel_row(float* y, __m512 a, __m512 b, const float* bias, int ncols) {
    const __mmask16 m0 = ncols >= 16 ? 0xFFFF : __mmask16((1u << ncols) - 1);
    const __mmask16 m1 = ncols >= 32 ? 0xFFFF : ncols > 16 ? __mmask16((1u << (ncols - 16)) - 1) : 0;
    if (bias) {
        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m0, bias));
        b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(m1, bias + 16));
    }
    _mm512_mask_storeu_ps(y, m0, a);
    _mm512_mask_storeu_ps(y + 16, m1, b);
}

// Adds the U partial sums of each of the MB rows and stores them.
template <int MB, int U>
inline void store_panel_sums(__m512 (&acc)[U][MB][2], float* y, int ldy, const float* bias, int ncols) {
    for (int m = 0; m < MB; m++) {
        __m512 a = acc[0][m][0], b = acc[0][m][1];
        for (int u = 1; u < U; u++) a = _mm512_add_ps(a, acc[u][m][0]), b = _mm512_add_ps(b, acc[u][m][1]);
        store_panel_row(y + std::size_t(m) * ldy, a, b, bias, ncols);
    }
}

// One f32 panel (K, 32) times MB rows of x: y[m][0..ncols) = x_m . W_panel + bias.
// U: interleaved partial sums over k (U * MB * 2 accumulators).
template <int MB, int U>
inline void panel_f32(const float* wp, int K, const float* x, int ldx, float* y, int ldy,
                      const float* bias, int ncols) {
    __m512 acc[U][MB][2];
    for (int u = 0; u < U; u++)
        for (int m = 0; m < MB; m++) acc[u][m][0] = acc[u][m][1] = _mm512_setzero_ps();
    auto step = [&](int u, int k) {
        const __m512 w0 = _mm512_load_ps(wp + std::size_t(k) * kPanel);
        const __m512 w1 = _mm512_load_ps(wp + std::size_t(k) * kPanel + 16);
        for (int m = 0; m < MB; m++) {
            const __m512 xb = _mm512_set1_ps(x[std::size_t(m) * ldx + k]);
            acc[u][m][0] = _mm512_fmadd_ps(w0, xb, acc[u][m][0]);
            acc[u][m][1] = _mm512_fmadd_ps(w1, xb, acc[u][m][1]);
        }
    };
    int k = 0;
    for (; k + U <= K; k += U)
        for (int u = 0; u < U; u++) step(u, k + u);
    for (; k < K; k++) step(0, k);
    store_panel_sums<MB, U>(acc, y, ldy, bias, ncols);
}
#endif

#if defined(__AVX512BF16__)
// One bf16 panel (K/2, 32, 2) times MB rows of x. vdpbf16ps multiplies 16
// outputs x 2 consecutive k of the panel with a broadcast pair (x[k], x[k+1])
// and adds both products into the 16 f32 sums, so the weights are never
// widened. x (f32) is split once per call into x_hi = bf16(x) and
// x_lo = bf16(x - x_hi). With Lo, the panel meets both: w . x = w . x_hi +
// w . x_lo, within about 2^-16 of the f32 product; that costs nothing while
// the kernel waits on memory (M < 4). From M = 4 on, where it would halve the
// compute-bound rate, x is rounded to bf16 (Lo = false), as oneDNN's bf16
// prefill does with every row. xh, xl: MB rows of ldx k-pairs.
template <int MB, int U, bool Lo>
inline void panel_bf16(const bf16* wp, int Kh, const std::uint32_t* xh, const std::uint32_t* xl, int ldx,
                       float* y, int ldy, const float* bias, int ncols) {
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
    store_panel_sums<MB, U>(acc, y, ldy, bias, ncols);
}

// panel_bf16 for mb = 1..8 rows; Lo is chosen by the call's whole M, so that
// every row of a batch gets the same arithmetic.
template <bool Lo>
inline void panel_bf16_rows(int mb, const bf16* wp, int Kh, const std::uint32_t* h, const std::uint32_t* l,
                            int ldx, float* y, int ldy, const float* bias, int ncols) {
    switch (mb) {
        case 8: panel_bf16<8, 1, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        case 7: panel_bf16<7, 1, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        case 6: panel_bf16<6, 1, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        case 5: panel_bf16<5, 1, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        case 4: panel_bf16<4, 1, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        case 3: panel_bf16<3, 2, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        case 2: panel_bf16<2, 2, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
        default: panel_bf16<1, 4, Lo>(wp, Kh, h, l, ldx, y, ldy, bias, ncols); break;
    }
}

// The split x of the calling thread: grows to the largest M x K seen (in the
// first decode steps, or earlier through reserve_bf16_split from make_linear),
// then is reused: the decode loop allocates nothing.
struct Bf16Split {
    std::vector<bf16> buf;
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

// x (M, K) f32 -> hi, lo (M, Kp) bf16, Kp = K rounded up to 32, zero-padded.
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
#endif  // __AVX512BF16__

// The operands of one call, as the panel loops need them.
struct SmallM {
    const Linear& L;
    const float* x;                 // (M, K) f32
    const std::uint32_t* xh;        // bf16: x_hi, (M, ldx) k-pairs
    const std::uint32_t* xl;        // bf16: x_lo
    int ldx;                        // bf16: k-pairs per row of xh / xl
    int M;
    float* y;                       // (M, N)
};

// Panels [a, b) for all M rows of x, 8 rows at a time.
void small_m_panels(const SmallM& s, int a, int b) {
    const Linear& L = s.L;
    const int K = L.in, N = L.out;
    const float* bias_all = L.bias.empty() ? nullptr : L.bias.data();
    for (int p = a; p < b; p++) {
        const int n0 = p * kPanel, ncols = std::min(kPanel, N - n0);
        const float* bias = bias_all ? bias_all + n0 : nullptr;
        const std::byte* panel = L.panel(p);
        for (int m0 = 0; m0 < s.M; m0 += 8) {
            const int mb = std::min(8, s.M - m0);
            float* y = s.y + std::size_t(m0) * N + n0;
#if defined(__AVX512F__)
            if (L.precision == Precision::f32) {
                const float* wp = reinterpret_cast<const float*>(panel);
                const float* x = s.x + std::size_t(m0) * K;
                switch (mb) {
                    case 8: panel_f32<8, 1>(wp, K, x, K, y, N, bias, ncols); break;
                    case 7: panel_f32<7, 1>(wp, K, x, K, y, N, bias, ncols); break;
                    case 6: panel_f32<6, 1>(wp, K, x, K, y, N, bias, ncols); break;
                    case 5: panel_f32<5, 1>(wp, K, x, K, y, N, bias, ncols); break;
                    case 4: panel_f32<4, 1>(wp, K, x, K, y, N, bias, ncols); break;
                    case 3: panel_f32<3, 2>(wp, K, x, K, y, N, bias, ncols); break;
                    case 2: panel_f32<2, 2>(wp, K, x, K, y, N, bias, ncols); break;
                    default: panel_f32<1, 4>(wp, K, x, K, y, N, bias, ncols); break;
                }
                continue;
            }
#endif
#if defined(__AVX512BF16__)
            const bf16* wp = reinterpret_cast<const bf16*>(panel);
            const int Kh = (K + 1) / 2;
            const std::uint32_t* h = s.xh + std::size_t(m0) * s.ldx;
            const std::uint32_t* l = s.xl + std::size_t(m0) * s.ldx;
            if (s.M < kBf16RoundXMinM) panel_bf16_rows<true>(mb, wp, Kh, h, l, s.ldx, y, N, bias, ncols);
            else panel_bf16_rows<false>(mb, wp, Kh, h, l, s.ldx, y, N, bias, ncols);
#else
            // Portable loops (no AVX-512 in this build): the same panel walk.
            for (int m = 0; m < mb; m++) {
                const float* x = s.x + std::size_t(m0 + m) * K;
                for (int c = 0; c < ncols; c++) {
                    float sum = 0.0f;
                    for (int k = 0; k < K; k++) {
                        const float wv = L.precision == Precision::f32
                            ? reinterpret_cast<const float*>(panel)[std::size_t(k) * kPanel + c]
                            : bf16_to_f32(reinterpret_cast<const bf16*>(panel)[(std::size_t(k / 2) * kPanel + c) * 2 + (k & 1)]);
                        sum += wv * x[k];
                    }
                    y[std::size_t(m) * N + c] = sum + (bias ? bias[c] : 0.0f);
                }
            }
#endif
        }
    }
}

void small_m(const SmallM& s) {
    const int P = s.L.n_panels();
    // Below a few hundred KiB of weights, waking the second thread costs more
    // than it saves. A plain branch, not an "if" clause: libgomp allocates a
    // team for every parallel region it serialises, and decode must not allocate.
    if (s.L.weight_bytes() < (std::size_t(256) << 10) || omp_get_max_threads() == 1) {
        small_m_panels(s, 0, P);
        return;
    }
    const int parts = int(s.L.parts.size());
    if (parts == omp_get_max_threads()) {
        // Arranged for this thread count (arrange_for_decode): thread t takes
        // part t, the next stretch of its own arena.
#pragma omp parallel
        {
            const int t = omp_get_thread_num(), n = omp_get_num_threads();
            for (int j = t; j < parts; j += n)
                small_m_panels(s, s.L.parts[j].first, j + 1 < parts ? s.L.parts[j + 1].first : P);
        }
        return;
    }
    // Otherwise runs of whole panels, 2 per thread, handed out in order as the
    // threads get free: each run is one long sequential stream. Every new run
    // costs a restart of the hardware prefetcher's stream, so runs are long:
    // measured (bench-llama-125m decode, 2 threads, one run, fast-DRAM phase),
    // 1, 2, 4 and 8 runs per thread gave 1.21x, 1.22x, 1.25x and 1.30x the f32
    // floor, and 1.29-1.31x, 1.32x, 1.32x, 1.43-1.46x the bf16 floor.
    const int chunk = std::max(1, P / (2 * omp_get_max_threads()));
    const int nchunks = (P + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < nchunks; c++) small_m_panels(s, c * chunk, std::min(P, (c + 1) * chunk));
}

}  // namespace

static void reserve_bf16_split([[maybe_unused]] int in) {
#if defined(__AVX512BF16__)
    bf16_split().reserve(std::size_t(kSmallM) * ((in + 31) / 32 * 32));
#endif
}

void linear_small_m(const Linear& L, const float* x, int M, float* y) {
    SmallM s{L, x, nullptr, nullptr, 0, M, y};
#if defined(__AVX512BF16__)
    if (L.precision == Precision::bf16) {
        const int K = L.in, Kp = (K + 31) / 32 * 32;
        Bf16Split& sp = bf16_split();
        sp.reserve(std::size_t(kSmallM) * Kp);  // once per thread and largest K
        sp.place(std::size_t(M) * Kp);
        split_x_bf16(x, M, K, Kp, sp.hi, sp.lo);
        s.xh = reinterpret_cast<const std::uint32_t*>(sp.hi);
        s.xl = reinterpret_cast<const std::uint32_t*>(sp.lo);
        s.ldx = Kp / 2;
    }
#endif
    small_m(s);
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
