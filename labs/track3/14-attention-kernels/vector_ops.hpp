// Lab 14: the vector loops that both attention kernels (the naive one and yours)
// are made of, written once in Highway (AVX-512, AVX2, NEON and a portable
// fallback, picked at run time as in src/engine/attention_kernels.cpp).
//
// Why shared: the naive and the tiled kernel then spend exactly the same per
// multiply-add and per exponential, so whatever separates their times is the
// order in which they touch memory, the lesson of the lab, and not who wrote
// the better inner loop. You may call every function here from exercise.cpp.
#pragma once

namespace pd::lab14 {

// s[j] = scale * (q . K[j]) for the n rows of K.
//   s: (n)  q: (D)  K: (n, D), contiguous rows
void scores_row(float* s, const float* q, const float* K, int n, int D, float scale);

// The largest of s[0 .. n), n >= 1.
float max_of(const float* s, int n);

// s[j] = exp(s[j] - m) in place for j < n; returns the sum of the new values.
// exp(-inf) is 0; an argument below about -104 gives 0 (no denormals).
float exp_shifted_sum(float* s, int n, float m);

// o[c] *= a for c < D.
void scale_row(float* o, float a, int D);

// o += sum_j p[j] * V[j] over the n rows of V.
//   o: (D)  p: (n)  V: (n, D), contiguous rows
void add_weighted_rows(float* o, const float* p, const float* V, int n, int D);

}  // namespace pd::lab14
