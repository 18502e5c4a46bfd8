// Lab 03: the KV cache and grouped-query attention.
//
// The cache (src/engine/kv_cache.hpp) keeps, for every layer, the keys and values of
// every position a sequence has seen:
//   K, V of one layer: (batch, n_kv_heads, max_seq, head_dim)  =  [B, H_kv, S_max, D]
//   seq_len[b]: how many positions of sequence b are in use (its usable shape is [1, H_kv, seq_len[b], D])
// Read and write rows ONLY through pd::kv_key(cache, layer, b, h, pos) and
// pd::kv_value(...): each returns a pointer to head_dim floats.
//
// Bad arguments (out-of-range layer, sequence, head, position) throw pd::UserError (pd::fail).
#pragma once

#include <cstddef>

#include "common.hpp"
#include "io/config.hpp"
#include "engine/kv_cache.hpp"

namespace pd::lab03 {

// ---- Task 1: which KV head serves query head h.
// The n_heads query heads are split into n_kv_heads groups of consecutive heads,
// group_size = n_heads / n_kv_heads each; every head of group g reads KV head g.
//   MHA: n_kv_heads == n_heads (each query head has its own K/V)
//   GQA: 1 < n_kv_heads < n_heads (e.g. 8 query heads, 2 KV heads: 0-3 -> 0, 4-7 -> 1)
//   MQA: n_kv_heads == 1 (all query heads share one K/V)
// Requires n_heads >= 1, n_kv_heads >= 1, n_heads divisible by n_kv_heads, 0 <= h < n_heads.
int kv_head_for_query(int h, int n_heads, int n_kv_heads);

// ---- Task 2: bytes the cache needs for `tokens` positions of `batch` sequences:
//   2 (K and V) x n_layers x batch x n_kv_heads x tokens x head_dim x bytes_per_elem
// Compute in std::size_t: real sizes overflow a 32-bit int.
// Requires batch >= 0, tokens >= 0, bytes_per_elem >= 1.
std::size_t kv_cache_bytes(const Config& c, int batch, int tokens, std::size_t bytes_per_elem);

// ---- Task 3: appending one token to the cache.
// A new token passes through every layer, and each layer appends that token's
// K and V at the SAME position: the first free one, pos = cache.seq_len[seq].
// So appending and advancing are two steps, exactly as the engine does them
// (prefill/decode write every layer, then bump seq_len once):
//
//   for (int l = 0; l < n_layers; l++) append_kv(cache, l, seq, k_new[l], v_new[l]);
//   commit_kv(cache, seq);   // seq_len[seq] += 1: the token is now part of the cache
//
// append_kv: k_new and v_new are (n_kv_heads * head_dim) floats, head after head
// (head h's row starts at h * head_dim). Copies head h's row to
// kv_key(cache, layer, seq, h, pos) (and likewise V) for every KV head h.
// Does NOT change seq_len. UserError when the layer or sequence is out of
// range or the sequence is full (seq_len[seq] == max_seq).
void append_kv(KVCache& cache, int layer, int seq, const float* k_new, const float* v_new);
// Advances seq_len[seq] by one and returns the new length. UserError when the
// sequence is out of range or already full.
int commit_kv(KVCache& cache, int seq);

// ---- Task 4: attention of one query vector over the cache, one head.
//   scores_s = (q . K[s]) / sqrt(head_dim)          for s = 0 .. n_keys-1
//   p        = softmax(scores)                       (subtract the max first)
//   out      = sum_s p_s * V[s]                      (head_dim floats)
// where K[s] = kv_key(cache, layer, seq, kv_head, s), V[s] likewise. Only the
// first n_keys positions are read: position n_keys-1 is the query's own.
// q and out: head_dim floats. Requires 1 <= n_keys <= cache.max_seq (n_keys may
// exceed seq_len: during a forward pass the new keys are written before seq_len
// is advanced), and layer, seq, kv_head in range.
void attend_one_head(float* out, const float* q, const KVCache& cache, int layer, int seq, int kv_head,
                     int n_keys);

}  // namespace pd::lab03
