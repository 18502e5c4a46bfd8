// The element-wise and row-wise operations, in Highway (one source for every
// instruction set; see isa.hpp). Each has a plain twin in
// tests/reference/reference.hpp that the tests compare against. The per-row
// kernels are in HWY_NAMESPACE; the public functions at the end split rows
// among the threads and dispatch.
#include "engine/ops.hpp"

#include <algorithm>
#include <cmath>

#include "engine/isa.hpp"
#include "engine/team.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {

// sum_i f(x[i]) for i < n (vector part; the tail is summed by the caller),
// two accumulators. Returns the index where the vector part ended.
template <class F>
HWY_INLINE long sum_vec(const float* x, long n, F f, float& total) {
    const D d;
    const long N = long(hn::Lanes(d));
    V a = hn::Zero(d), b = hn::Zero(d);
    long i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        a = hn::Add(a, f(hn::LoadU(d, x + i)));
        b = hn::Add(b, f(hn::LoadU(d, x + i + N)));
    }
    for (; i + N <= n; i += N) a = hn::Add(a, f(hn::LoadU(d, x + i)));
    total = LaneSum(d, hn::Add(a, b));
    return i;
}

void RmsNormRow(float* o, const float* x, const float* w, int n, float eps) {
    const D d;
    float ss;
    long i = sum_vec(x, n, [](V v) { return hn::Mul(v, v); }, ss);
    for (long j = i; j < n; j++) ss += x[j] * x[j];
    const float scale = 1.0f / std::sqrt(ss / n + eps);
    const V sv = hn::Set(d, scale);
    const long N = long(hn::Lanes(d));
    for (i = 0; i + N <= n; i += N)
        hn::StoreU(hn::Mul(hn::LoadU(d, w + i), hn::Mul(hn::LoadU(d, x + i), sv)), d, o + i);
    for (; i < n; i++) o[i] = w[i] * (x[i] * scale);
}

void LayerNormRow(float* o, const float* x, const float* w, const float* b, int n, float eps) {
    const D d;
    float sum;
    long i = sum_vec(x, n, [](V v) { return v; }, sum);
    for (long j = i; j < n; j++) sum += x[j];
    const float mean = sum / n;
    const V mv = hn::Set(d, mean);
    float var;
    i = sum_vec(x, n, [&](V v) { const V c = hn::Sub(v, mv); return hn::Mul(c, c); }, var);
    for (long j = i; j < n; j++) var += (x[j] - mean) * (x[j] - mean);
    const float scale = 1.0f / std::sqrt(var / n + eps);
    const V sv = hn::Set(d, scale);
    const long N = long(hn::Lanes(d));
    for (i = 0; i + N <= n; i += N) {
        const V c = hn::Mul(hn::Sub(hn::LoadU(d, x + i), mv), sv);
        hn::StoreU(hn::MulAdd(c, hn::LoadU(d, w + i), hn::LoadU(d, b + i)), d, o + i);
    }
    for (; i < n; i++) o[i] = (x[i] - mean) * scale * w[i] + b[i];
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3): one vector exp instead of a scalar tanhf
// (which held GPT-2's pp512 at 66% of the matrix peak: 512 x 3072 per layer).
void GeluRange(float* x, long a, long b) {
    const D d;
    const float k = std::sqrt(2.0f / float(M_PI));
    const V k2 = hn::Set(d, -2.0f * k), c = hn::Set(d, 0.044715f), one = hn::Set(d, 1.0f);
    const long N = long(hn::Lanes(d));
    long i = a;
    for (; i + N <= b; i += N) {
        const V v = hn::LoadU(d, x + i);
        const V u = hn::MulAdd(hn::Mul(c, v), hn::Mul(v, v), v);
        hn::StoreU(hn::Div(v, hn::Add(one, Exp(d, hn::Mul(k2, u)))), d, x + i);
    }
    for (; i < b; i++) x[i] = 0.5f * x[i] * (1.0f + std::tanh(k * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

// silu(g) * u = g / (1 + exp(-g)) * u.
void SwigluRow(float* o, const float* g, const float* u, int n) {
    const D d;
    const V one = hn::Set(d, 1.0f);
    const long N = long(hn::Lanes(d));
    long i = 0;
    for (; i + N <= n; i += N) {
        const V gv = hn::LoadU(d, g + i);
        const V e = Exp(d, hn::Neg(gv));
        hn::StoreU(hn::Mul(hn::Div(gv, hn::Add(one, e)), hn::LoadU(d, u + i)), d, o + i);
    }
    for (; i < n; i++) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

// One head's pairs (v[i], v[i + half]) rotated by the angles of one position.
void RopeHead(float* v, const float* cs, const float* sn, int half) {
    const D d;
    const long N = long(hn::Lanes(d));
    long i = 0;
    for (; i + N <= half; i += N) {
        const V a = hn::LoadU(d, v + i), b = hn::LoadU(d, v + i + half);
        const V c = hn::LoadU(d, cs + i), s = hn::LoadU(d, sn + i);
        hn::StoreU(hn::NegMulAdd(b, s, hn::Mul(a, c)), d, v + i);
        hn::StoreU(hn::MulAdd(a, s, hn::Mul(b, c)), d, v + i + half);
    }
    for (; i < half; i++) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = b * cs[i] + a * sn[i];
    }
}

void SoftmaxRow(float* x, int n) {
    const D d;
    const long N = long(hn::Lanes(d));
    float mx = x[0];
    long i = 0;
    if (n >= N) {
        V mv = hn::LoadU(d, x);
        for (i = N; i + N <= n; i += N) mv = hn::Max(mv, hn::LoadU(d, x + i));
        mx = LaneMax(d, mv);
    }
    for (; i < n; i++) mx = std::max(mx, x[i]);
    V sum = hn::Zero(d);
    for (i = 0; i + N <= n; i += N) {
        const V p = Exp(d, hn::Sub(hn::LoadU(d, x + i), hn::Set(d, mx)));
        hn::StoreU(p, d, x + i);
        sum = hn::Add(sum, p);
    }
    float total = LaneSum(d, sum);
    for (; i < n; i++) total += (x[i] = std::exp(x[i] - mx));
    const float inv = 1.0f / total;
    for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), hn::Set(d, inv)), d, x + i);
    for (; i < n; i++) x[i] *= inv;
}

void AddRange(float* y, const float* x, long a, long b) {
    const D d;
    const long N = long(hn::Lanes(d));
    long i = a;
    for (; i + N <= b; i += N) hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
    for (; i < b; i++) y[i] += x[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(RmsNormRow);
HWY_EXPORT(LayerNormRow);
HWY_EXPORT(GeluRange);
HWY_EXPORT(SwigluRow);
HWY_EXPORT(RopeHead);
HWY_EXPORT(SoftmaxRow);
HWY_EXPORT(AddRange);

// One item a row (a chunk), on the threads (engine/team.hpp).
template <typename Row>
static void for_rows(int M, Row row) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    parallel_items(M, Schedule::fixed, row);
}

// [0, n) in chunks of `chunk`.
template <typename Range>
static void for_chunks(long n, long chunk, Range range) {
    kernel_isa();
    const long nchunks = (n + chunk - 1) / chunk;
    parallel_items(int(nchunks), Schedule::fixed, [&](int c) { range(c * chunk, std::min(n, (c + 1) * chunk)); });
}

void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps) {
    for_rows(M, [&](int m) { HWY_DYNAMIC_DISPATCH(RmsNormRow)(out + long(m) * D, x + long(m) * D, w, D, eps); });
}

void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps) {
    for_rows(M, [&](int m) {
        HWY_DYNAMIC_DISPATCH(LayerNormRow)(out + long(m) * D, x + long(m) * D, w, b, D, eps);
    });
}

void gelu_tanh(float* x, long n) {
    for_chunks(n, 4096, [&](long a, long b) { HWY_DYNAMIC_DISPATCH(GeluRange)(x, a, b); });
}

void swiglu(float* out, const float* gate_up, int M, int F) {
    for_rows(M, [&](int m) {
        const float* g = gate_up + long(m) * 2 * F;
        HWY_DYNAMIC_DISPATCH(SwigluRow)(out + long(m) * F, g, g + F, F);
    });
}

float rope_inv_freq(int i, int D, float theta, const RopeScaling& scaling) {
    // Same float32 arithmetic as Hugging Face: inv_freq in f32.
    const float inv_freq = 1.0f / std::pow(theta, float(2 * i) / float(D));
    if (!scaling.llama3) return inv_freq;
    // Long wavelengths (low frequencies) are slowed by `factor`, short ones
    // kept, and the band between blended linearly in old_context / wavelength.
    const float old_context = float(scaling.original_max_positions);
    const float wavelen = 2.0f * float(M_PI) / inv_freq;
    const float low_freq_wavelen = old_context / scaling.low_freq_factor;
    const float high_freq_wavelen = old_context / scaling.high_freq_factor;
    if (wavelen > low_freq_wavelen) return inv_freq / scaling.factor;
    if (wavelen < high_freq_wavelen) return inv_freq;
    const float smooth = (old_context / wavelen - scaling.low_freq_factor) /
                         (scaling.high_freq_factor - scaling.low_freq_factor);
    return (1.0f - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
}

void rope_tables(float* cos_table, float* sin_table, int max_seq, int D, float theta, const RopeScaling& scaling) {
    int half = D / 2;
    for (int p = 0; p < max_seq; p++)
        for (int i = 0; i < half; i++) {
            // Then, as Hugging Face, the angle pos * inv_freq in f32.
            float inv_freq = rope_inv_freq(i, D, theta, scaling);
            float angle = float(p) * inv_freq;
            cos_table[long(p) * half + i] = std::cos(angle);
            sin_table[long(p) * half + i] = std::sin(angle);
        }
}

void rope(float* x, int M, int stride, int n_heads, int D, const int* pos, const float* cos_table,
          const float* sin_table) {
    const int half = D / 2;
    for_rows(M, [&](int m) {
        for (int h = 0; h < n_heads; h++)
            HWY_DYNAMIC_DISPATCH(RopeHead)(x + long(m) * stride + long(h) * D, cos_table + long(pos[m]) * half,
                                           sin_table + long(pos[m]) * half, half);
    });
}

void softmax(float* x, int n) {
    kernel_isa();
    HWY_DYNAMIC_DISPATCH(SoftmaxRow)(x, n);
}

void add_inplace(float* y, const float* x, long n) {
    for_chunks(n, 16384, [&](long a, long b) { HWY_DYNAMIC_DISPATCH(AddRange)(y, x, a, b); });
}

}  // namespace pd
#endif
