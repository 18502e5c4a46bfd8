#include "matmul.hpp"

#include <immintrin.h>
#include <omp.h>

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

Linear make_linear(std::vector<float> w, std::vector<float> bias, int in, int out,
                   Precision precision) {
    Linear L;
    L.in = in;
    L.out = out;
    L.precision = precision;
    L.bias = std::move(bias);
    L.packed = pack(L, w.data());
    if (precision == Precision::bf16) {
        L.w16.resize(w.size());
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < w.size(); i++) L.w16[i] = f32_to_bf16(w[i]);
    } else {
        L.w = std::move(w);
    }
    return L;
}

std::string linear_impl_name(const Linear& L, int M) {
    if (M <= kSmallM) return "pdlab small-M kernel";
    return L.packed->get(L, M).impl;
}

// --- small-M kernel (decode) --------------------------------------------------
//
// For each block of 4 output rows, stream the 4 weight rows once from DRAM and
// multiply them with every row of x (x stays in cache: M * in floats). Four
// independent accumulators per x row keep enough loads in flight to reach the
// memory bandwidth, which is the whole game for decode.

namespace {

constexpr int kRowBlock = 4;

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

// y[m0 .. m0+MB, n0 .. n0+R): R weight rows (row-major, length K) times MB rows
// of x. R and MB are compile-time so the R*MB accumulators live in registers.
template <typename W, int R, int MB>
inline void rows_times_x(const W* w, int K, const float* x, float* y, int ldy, int n0,
                         const float* bias) {
    __m512 acc[R][MB];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < MB; j++) acc[r][j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wr[R];
        for (int r = 0; r < R; r++) wr[r] = load16(w + std::size_t(r) * K + k);
        for (int j = 0; j < MB; j++) {
            __m512 xv = load16(x + std::size_t(j) * K + k);
            for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(wr[r], xv, acc[r][j]);
        }
    }
    if (k < K) {  // the last K % 16 columns
        __mmask16 mask = __mmask16((1u << (K - k)) - 1);
        __m512 wr[R];
        for (int r = 0; r < R; r++) wr[r] = load16(w + std::size_t(r) * K + k, mask);
        for (int j = 0; j < MB; j++) {
            __m512 xv = load16(x + std::size_t(j) * K + k, mask);
            for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(wr[r], xv, acc[r][j]);
        }
    }
    for (int j = 0; j < MB; j++)
        for (int r = 0; r < R; r++)
            y[std::size_t(j) * ldy + n0 + r] = _mm512_reduce_add_ps(acc[r][j]) + (bias ? bias[n0 + r] : 0.0f);
}
#else
template <typename W, int R, int MB>
inline void rows_times_x(const W* w, int K, const float* x, float* y, int ldy, int n0,
                         const float* bias) {
    auto val = [](W v) {
        if constexpr (std::is_same_v<W, bf16>) return bf16_to_f32(v);
        else return v;
    };
    for (int j = 0; j < MB; j++)
        for (int r = 0; r < R; r++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += val(w[std::size_t(r) * K + k]) * x[std::size_t(j) * K + k];
            y[std::size_t(j) * ldy + n0 + r] = s + (bias ? bias[n0 + r] : 0.0f);
        }
}
#endif

// All M rows of x against R weight rows, in groups of at most 4 rows of x.
template <typename W, int R>
inline void rows_times_all_x(const W* w, int K, const float* x, int M, float* y, int ldy, int n0,
                             const float* bias) {
    int m = 0;
    for (; m + 4 <= M; m += 4) rows_times_x<W, R, 4>(w, K, x + std::size_t(m) * K, y + std::size_t(m) * ldy, ldy, n0, bias);
    switch (M - m) {
        case 3: rows_times_x<W, R, 3>(w, K, x + std::size_t(m) * K, y + std::size_t(m) * ldy, ldy, n0, bias); break;
        case 2: rows_times_x<W, R, 2>(w, K, x + std::size_t(m) * K, y + std::size_t(m) * ldy, ldy, n0, bias); break;
        case 1: rows_times_x<W, R, 1>(w, K, x + std::size_t(m) * K, y + std::size_t(m) * ldy, ldy, n0, bias); break;
        default: break;
    }
}

template <typename W>
void small_m(const W* w, int K, int N, const float* x, int M, float* y, const float* bias) {
    int nblocks = (N + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblocks; b++) {
        int n0 = b * kRowBlock;
        const W* wb = w + std::size_t(n0) * K;
        if (n0 + kRowBlock <= N) {
            rows_times_all_x<W, kRowBlock>(wb, K, x, M, y, N, n0, bias);
        } else {
            for (int n = n0; n < N; n++)
                rows_times_all_x<W, 1>(w + std::size_t(n) * K, K, x, M, y, N, n, bias);
        }
    }
}

}  // namespace

void linear_small_m(const Linear& L, const float* x, int M, float* y) {
    const float* bias = L.bias.empty() ? nullptr : L.bias.data();
    if (L.precision == Precision::bf16) small_m(L.w16.data(), L.in, L.out, x, M, y, bias);
    else small_m(L.w.data(), L.in, L.out, x, M, y, bias);
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
