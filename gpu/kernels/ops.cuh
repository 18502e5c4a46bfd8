// The element-wise and row-wise operations of a transformer layer, on the GPU.
// Mirrors src/engine/ops.hpp: each launcher here has its CPU twin there (same name,
// same arguments, same math), and tests/gpu/test_kernels.cpp checks one
// against the other.
//
// All pointers are device pointers; every launcher enqueues its kernel on
// `stream` and returns at once (the GPU runs it later). Shapes: M rows
// (tokens) of D features, row-major.
//
// A kernel whose output feeds a matrix product with bf16 weights can write
// that output in bf16 directly (the std::uint16_t* overloads: bf16 bits, the
// same as pd::bf16), rounding to nearest-even like pd::f32_to_bf16. That saves
// a conversion pass per product in decode, where every launch counts.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace pd::gpu {

// out = w * x / sqrt(mean(x^2) + eps)                          (Llama's RMSNorm)
void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps, cudaStream_t s);
void rmsnorm(std::uint16_t* out, const float* x, const float* w, int M, int D, float eps, cudaStream_t s);

// out = w * (x - mean) / sqrt(var + eps) + b                   (GPT-2's LayerNorm)
void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps,
               cudaStream_t s);
void layernorm(std::uint16_t* out, const float* x, const float* w, const float* b, int M, int D,
               float eps, cudaStream_t s);

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))      (GPT-2's gelu_new); out may be x
void gelu_tanh(float* out, const float* x, long n, cudaStream_t s);
void gelu_tanh(std::uint16_t* out, const float* x, long n, cudaStream_t s);

// out (M, F) = silu(gate) * up, where gate_up (M, 2F) holds [gate | up] per row (SwiGLU)
void swiglu(float* out, const float* gate_up, int M, int F, cudaStream_t s);
void swiglu(std::uint16_t* out, const float* gate_up, int M, int F, cudaStream_t s);

// Rotary embedding, "rotate half" layout, in place: x is (M, n_heads, D) with
// row stride `stride`; pos (M) on the device; cos/sin tables (max_seq, D/2).
// The model runs rotary inside kv_cache.cuh's rope_kv_write, which rotates
// the same pairs with the same function (kv_write_index.cuh's rotate_pair) and writes
// K straight into the cache; this is the twin of pd::rope that
// rope_kv_write is held against (rope on n_q_heads + n_kv_heads heads, whose
// k heads follow the q heads in a [q | k | v] row, then kv_write).
void rope(float* x, int M, int stride, int n_heads, int D, const int* pos, const float* cos_table,
          const float* sin_table, cudaStream_t s);

// y += x, n values (residual connection).
void add_inplace(float* y, const float* x, long n, cudaStream_t s);

// y (M, N) += b (N) on every row (GPT-2's biases).
void add_bias(float* y, const float* b, int M, int N, cudaStream_t s);

// x (rows, D) = tok_emb[token[r]] (+ pos_emb[pos[r]] when pos_emb is not null).
void embed(float* x, const int* token, const int* pos, const float* tok_emb, const float* pos_emb,
           int rows, int D, cudaStream_t s);

// out = bf16(x), n values, round to nearest even.
void to_bf16(std::uint16_t* out, const float* x, long n, cudaStream_t s);

// Whether this build's kernels can run on the current device (it has a
// kernel image for the device's architecture). Sets *why_not when not.
bool kernels_runnable(const char** why_not);

}  // namespace pd::gpu
