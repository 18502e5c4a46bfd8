// The element-wise and row-wise operations of a transformer layer.
// Each has a plain twin in tests/reference/reference.hpp that the tests
// compare against.
// Shapes: M rows (tokens) of D features, row-major.
#pragma once

#include "io/config.hpp"  // RopeScaling

namespace pd {

// out = w * x / sqrt(mean(x^2) + eps)                         (Llama's RMSNorm)
void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps);

// out = w * (x - mean) / sqrt(var + eps) + b                  (GPT-2's LayerNorm)
void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps);

// x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))        (GPT-2's gelu_new), in place
void gelu_tanh(float* x, long n);

// out (M, F) = silu(gate) * up, where gate_up (M, 2F) holds [gate | up] per row (SwiGLU)
void swiglu(float* out, const float* gate_up, int M, int F);

// Rotary embedding, Hugging Face "rotate half" layout: for i < D/2 the pair is
// (x[i], x[i + D/2]) rotated by angle pos * theta^(-2i/D).
// x: (M, n_heads, D) with row stride `stride`; cos/sin: (max_seq, D/2) tables.
void rope(float* x, int M, int stride, int n_heads, int D, const int* pos, const float* cos_table,
          const float* sin_table);
// The rotary frequency of pair i: theta^(-2i/D), rescaled by Llama 3's
// scaling when it is on (Hugging Face's _compute_llama3_parameters, in f32).
float rope_inv_freq(int i, int D, float theta, const RopeScaling& scaling);
// cos/sin tables (max_seq, D/2) for rope().
void rope_tables(float* cos_table, float* sin_table, int max_seq, int D, float theta,
                 const RopeScaling& scaling = {});

// In-place softmax of one row of n values (numerically stable: subtracts the max).
void softmax(float* x, int n);

// y += x, n values (residual connection).
void add_inplace(float* y, const float* x, long n);

}  // namespace pd
