// Plain, obviously-correct versions of every operation (llm.c style): no
// threads, no SIMD, double accumulators. Tests check the fast kernels against
// these with a tolerance atol + rtol * |ref|. Not part of the engine: built
// only into the tests (tests/meson.build).
#pragma once

#include <vector>

namespace pd::ref {

// y (M, N) = x (M, K) @ W^T + b, W (N, K) row-major, b (N) or nullptr.
void linear(float* y, const float* x, const float* W, const float* b, int M, int K, int N);
void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps);
void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps);
void gelu_tanh(float* x, long n);
void swiglu(float* out, const float* gate_up, int M, int F);
// x: (M, n_heads, D) contiguous; angle of pair i at position p is p * theta^(-2i/D).
void rope(float* x, int M, int n_heads, int D, const int* pos, float theta);
void softmax(float* x, int n);
// Causal attention for one sequence, no cache: q (T, Hq, D), k and v (T, Hkv, D),
// query t of head h sees keys 0..t of KV head h / (Hq / Hkv), or with a
// sliding window (window > 0) keys t-window+1..t only. out (T, Hq, D).
void attention(float* out, const float* q, const float* k, const float* v, int T, int Hq, int Hkv, int D,
               int window = 0);

}  // namespace pd::ref
