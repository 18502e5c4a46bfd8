#include "ops.hpp"

#include <algorithm>
#include <cmath>

#include "simd.hpp"

namespace pd {

// Rows run in parallel only when there are several. A plain branch rather than
// an OpenMP `if` clause: libgomp allocates a one-thread team for every region
// an `if` serialises, and decode (M = 1) must not allocate.
template <typename Row>
static void for_rows(int M, Row row) {
    if (M > 1) {
#pragma omp parallel for schedule(static)
        for (int m = 0; m < M; m++) row(m);
    } else if (M == 1) {
        row(0);
    }
}

void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps) {
    for_rows(M, [&](int m) {
        const float* xr = x + long(m) * D;
        float* o = out + long(m) * D;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
        float scale = 1.0f / std::sqrt(ss / D + eps);
#pragma omp simd
        for (int i = 0; i < D; i++) o[i] = w[i] * (xr[i] * scale);
    });
}

void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps) {
    for_rows(M, [&](int m) {
        const float* xr = x + long(m) * D;
        float* o = out + long(m) * D;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < D; i++) sum += xr[i];
        float mean = sum / D;
        float var = 0.0f;
#pragma omp simd reduction(+ : var)
        for (int i = 0; i < D; i++) var += (xr[i] - mean) * (xr[i] - mean);
        float scale = 1.0f / std::sqrt(var / D + eps);
#pragma omp simd
        for (int i = 0; i < D; i++) o[i] = (xr[i] - mean) * scale * w[i] + b[i];
    });
}

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3): one vector exp instead of a scalar tanhf
// (which held GPT-2's pp512 at 66% of the matrix peak: 512 x 3072 per layer).
static void gelu_tanh_range(float* x, long a, long b) {
    const float k = std::sqrt(2.0f / float(M_PI));
    long i = a;
#if defined(__AVX512F__)
    const __m512 k2 = _mm512_set1_ps(-2.0f * k), c = _mm512_set1_ps(0.044715f), one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= b; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 u = _mm512_fmadd_ps(_mm512_mul_ps(c, v), _mm512_mul_ps(v, v), v);
        const __m512 e = simd::exp512(_mm512_mul_ps(k2, u));
        _mm512_storeu_ps(x + i, _mm512_div_ps(v, _mm512_add_ps(one, e)));
    }
#endif
    for (; i < b; i++) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
    }
}

void gelu_tanh(float* x, long n) {
    constexpr long chunk = 4096;
    const long nchunks = (n + chunk - 1) / chunk;
    if (nchunks == 1) {
        gelu_tanh_range(x, 0, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) gelu_tanh_range(x, c * chunk, std::min(n, (c + 1) * chunk));
}

// silu(g) * u = g / (1 + exp(-g)) * u, with the vector exp.
void swiglu(float* out, const float* gate_up, int M, int F) {
    for_rows(M, [&](int m) {
        const float* g = gate_up + long(m) * 2 * F;
        const float* u = g + F;
        float* o = out + long(m) * F;
        int i = 0;
#if defined(__AVX512F__)
        const __m512 one = _mm512_set1_ps(1.0f);
        for (; i + 16 <= F; i += 16) {
            const __m512 gv = _mm512_loadu_ps(g + i);
            const __m512 e = simd::exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
            _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
        }
#endif
        for (; i < F; i++) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    });
}

void rope_tables(float* cos_table, float* sin_table, int max_seq, int D, float theta) {
    int half = D / 2;
    for (int p = 0; p < max_seq; p++)
        for (int i = 0; i < half; i++) {
            // Same float32 arithmetic as Hugging Face: inv_freq in f32, then pos * inv_freq.
            float inv_freq = 1.0f / std::pow(theta, float(2 * i) / float(D));
            float angle = float(p) * inv_freq;
            cos_table[long(p) * half + i] = std::cos(angle);
            sin_table[long(p) * half + i] = std::sin(angle);
        }
}

void rope(float* x, int M, int stride, int n_heads, int D, const int* pos, const float* cos_table,
          const float* sin_table) {
    int half = D / 2;
    for_rows(M, [&](int m) {
        for (int h = 0; h < n_heads; h++) {
            float* v = x + long(m) * stride + long(h) * D;
            const float* c = cos_table + long(pos[m]) * half;
            const float* s = sin_table + long(pos[m]) * half;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    });
}

void softmax(float* x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = std::max(mx, x[i]);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void add_inplace(float* y, const float* x, long n) {
    if (n > 16384) {
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) y[i] += x[i];
    } else {
#pragma omp simd
        for (long i = 0; i < n; i++) y[i] += x[i];
    }
}

}  // namespace pd
