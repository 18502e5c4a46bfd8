// Causal self-attention against the device KV cache. Mirrors src/engine/attention.hpp
// (the CPU twins: pd::attention_prefill, pd::attention_decode, and
// pd::attention_paged for the paged cache's rows).
//
// Query head h reads KV head h / (n_heads / n_kv_heads): MHA, GQA and MQA in
// one code path, as on the CPU.
//
// Queries are read with a row stride, so the model can pass the q part of its
// [q | k | v] projection rows without copying it out first. Outputs are
// contiguous (rows, n_heads * head_dim).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kv_cache.cuh"
#include "matmul.cuh"

namespace pd::gpu {

// --- decode --------------------------------------------------------------------
//
// One query per row: row r belongs to sequence slots[r] (a row of the cache's
// block table) at position pos[r] and sees cached positions 0 .. pos[r]
// (slots, pos: device arrays). Decode steps give one row per sequence; the
// paged engine also runs its prefill chunks through it, one row per prompt
// token, since every row's K/V is written before attention reads any.
//
// Split-K ("flash-decoding") with GQA: the keys are cut into splits of
// kDecodeKeysPerSplit positions; one thread block per (split, group of query
// heads, row) reads each key and value of its split ONCE for all the query
// heads it serves (up to kDecodeHeadsPerBlock of one KV head), 8 lanes per key
// with 16-byte loads (4 keys per warp in flight), keeps the scores in shared
// memory, and writes per head the split's softmax statistics (max m, sum l) and
// its unnormalised weighted sum of values o. A second kernel merges the
// splits of each (row, head) exactly, one warp finding the weights:
//   out = sum_i w_i o_i,  w_i = e^(m_i - M) / sum_j e^(m_j - M) l_j.
// The grid depends only on max_seq, not on the positions, so a captured CUDA
// graph can replay it as the cache grows. head_dim must be a multiple of 4
// and at most kDecodeMaxHeadDim (a lane's chunks of a key are a compile-time
// count, 1 to 4): a lane loads 4 elements of a row at a time, 16 bytes of an
// f32 cache or 8 bytes of a bf16 one (KVPrecision), always aligned.
// 64: on an H200 (2026-12-04, Llama-1B shapes after 2,048 tokens, 16 layers)
// splits of 64 ran the attention in 0.316 ms against 0.382 with 128 (twice
// the blocks, each with half the chain of dependent loads; 128 blocks left
// 4 of the 132 SMs idle), and a decode step in 1.283 ms against 1.350.
constexpr int kDecodeKeysPerSplit = 64;
constexpr int kDecodeHeadsPerBlock = 8;
constexpr int kDecodeMaxHeadDim = 128;

// Query heads one block serves: the largest divisor of the group size
// n_heads / n_kv_heads that is at most kDecodeHeadsPerBlock.
int decode_heads_per_block(int n_heads, int n_kv_heads);

// Floats of scratch attention_decode needs.
std::size_t attention_decode_scratch(int rows, int n_heads, int max_seq, int head_dim);

void attention_decode(float* out, const float* q, int q_stride, KVLayer c, const int* slots,
                      const int* pos, int rows, int n_heads, float* scratch, cudaStream_t s);
// The same, writing bf16 (the input of the next product with bf16 weights).
void attention_decode(std::uint16_t* out, const float* q, int q_stride, KVLayer c, const int* slots,
                      const int* pos, int rows, int n_heads, float* scratch, cudaStream_t s);

// --- prefill ---------------------------------------------------------------------
//
// T queries of sequence b at positions start .. start+T-1, whose K/V are
// already in the cache; query i sees positions 0 .. start+i (causal). The
// GEMMs read each head's keys as one matrix, so this needs the contiguous
// cache (one block per sequence); the paged engine's chunks use the decode kernel.
//
// Prefill is compute-bound, so it runs on cuBLAS: for a chunk of queries,
//   S = Q K^T / sqrt(D)    one batched GEMM over all heads (pointer arrays pick
//                          each head's KV head, which is how GQA is expressed)
//   P = causal softmax(S)  one block per row; masked keys get probability 0
//   O = P V                one batched GEMM, written straight into `out`
// Queries go in chunks so that S (n_heads x chunk x keys floats) fits the
// scratch; a chunk needs only the keys up to its last query, which skips most
// of the masked upper triangle.
//
// allow_tf32: let the GEMMs use TF32 tensor cores (for bf16 models, whose
// other products are bf16 already); f32 models keep exact f32. The GEMMs read
// an f32 cache only.

// Default scratch budget for S: 64 Mi floats (256 MiB).
constexpr std::size_t kPrefillScoreBudget = std::size_t(64) << 20;

// Queries per chunk for a scratch budget of `budget_floats` (at least 1).
int attention_prefill_chunk(int T, int start, int n_heads, std::size_t budget_floats);
// Floats of scratch attention_prefill needs with that budget (scores + pointer arrays).
std::size_t attention_prefill_scratch(int T, int start, int n_heads,
                                      std::size_t budget_floats = kPrefillScoreBudget);

void attention_prefill(const Blas& blas, float* out, const float* q, int q_stride, KVLayer c, int b,
                       int start, int T, int n_heads, float* scratch, bool allow_tf32,
                       std::size_t budget_floats = kPrefillScoreBudget);

// The same attention on the flash kernel (attention_pair.cuh's tiled_attention):
// no score matrix and no scratch, q, K and V rounded to bf16 for the tensor
// cores, f32 sums, and the output in bf16, the input of the next product. The
// prefill of bf16 models whose head_dim it supports (model.cu). It reads an
// f32 or a bf16 cache, with the same result for the same bf16 values.
bool attention_prefill_flash_supports(int head_dim);
void attention_prefill_flash(std::uint16_t* out, const float* q, int q_stride, KVLayer c, int b, int start,
                             int T, int n_heads, cudaStream_t s);

}  // namespace pd::gpu
