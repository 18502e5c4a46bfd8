#include "reference.hpp"

#include <algorithm>
#include <cmath>

namespace pd::ref {

void linear(float* y, const float* x, const float* W, const float* b, int M, int K, int N) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = b ? b[n] : 0.0;
            for (int k = 0; k < K; k++) s += double(x[long(m) * K + k]) * W[long(n) * K + k];
            y[long(m) * N + n] = float(s);
        }
}

void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps) {
    for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += double(x[long(m) * D + i]) * x[long(m) * D + i];
        double scale = 1.0 / std::sqrt(ss / D + eps);
        for (int i = 0; i < D; i++) out[long(m) * D + i] = float(w[i] * x[long(m) * D + i] * scale);
    }
}

void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps) {
    for (int m = 0; m < M; m++) {
        const float* r = x + long(m) * D;
        double mean = 0, var = 0;
        for (int i = 0; i < D; i++) mean += r[i];
        mean /= D;
        for (int i = 0; i < D; i++) var += (r[i] - mean) * (r[i] - mean);
        var /= D;
        for (int i = 0; i < D; i++)
            out[long(m) * D + i] = float((r[i] - mean) / std::sqrt(var + eps) * w[i] + b[i]);
    }
}

void gelu_tanh(float* x, long n) {
    for (long i = 0; i < n; i++) {
        double v = x[i];
        x[i] = float(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
    }
}

void swiglu(float* out, const float* gate_up, int M, int F) {
    for (int m = 0; m < M; m++)
        for (int i = 0; i < F; i++) {
            double g = gate_up[long(m) * 2 * F + i], u = gate_up[long(m) * 2 * F + F + i];
            out[long(m) * F + i] = float(g / (1.0 + std::exp(-g)) * u);
        }
}

void rope(float* x, int M, int n_heads, int D, const int* pos, float theta) {
    int half = D / 2;
    for (int m = 0; m < M; m++)
        for (int h = 0; h < n_heads; h++) {
            float* v = x + (long(m) * n_heads + h) * D;
            for (int i = 0; i < half; i++) {
                double angle = pos[m] * std::pow(double(theta), -2.0 * i / D);
                double a = v[i], b = v[i + half];
                v[i] = float(a * std::cos(angle) - b * std::sin(angle));
                v[i + half] = float(b * std::cos(angle) + a * std::sin(angle));
            }
        }
}

void softmax(float* x, int n) {
    double mx = x[0], sum = 0;
    for (int i = 1; i < n; i++) mx = std::max(mx, double(x[i]));
    for (int i = 0; i < n; i++) sum += std::exp(x[i] - mx);
    for (int i = 0; i < n; i++) x[i] = float(std::exp(x[i] - mx) / sum);
}

void attention(float* out, const float* q, const float* k, const float* v, int T, int Hq, int Hkv, int D,
               int window) {
    std::vector<double> p(T);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hq; h++) {
            int kh = h / (Hq / Hkv);
            const float* qv = q + (long(t) * Hq + h) * D;
            double mx = -1e300, sum = 0;
            const int first = window > 0 ? std::max(0, t - window + 1) : 0;
            for (int s = first; s <= t; s++) {
                double dot = 0;
                for (int i = 0; i < D; i++) dot += double(qv[i]) * k[(long(s) * Hkv + kh) * D + i];
                p[s] = dot / std::sqrt(double(D));
                mx = std::max(mx, p[s]);
            }
            for (int s = first; s <= t; s++) sum += (p[s] = std::exp(p[s] - mx));
            for (int i = 0; i < D; i++) {
                double acc = 0;
                for (int s = first; s <= t; s++) acc += p[s] / sum * v[(long(s) * Hkv + kh) * D + i];
                out[(long(t) * Hq + h) * D + i] = float(acc);
            }
        }
}

}  // namespace pd::ref
