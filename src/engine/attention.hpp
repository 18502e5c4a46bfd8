// Causal self-attention against the KV cache, one layer at a time.
//
// Query head h reads KV head h / group_size: with n_kv_heads == n_heads that
// is multi-head attention (MHA), with 1 it is multi-query (MQA), in between
// grouped-query (GQA). One code path serves all three.
#pragma once

#include "engine/kv_cache.hpp"

namespace pd {

// The KV head that serves query head h.
inline int kv_head_for(int h, int n_heads, int n_kv_heads) { return h / (n_heads / n_kv_heads); }

// Attention of one query vector over the first n_keys cached positions of one
// KV head. q, out: (head_dim). scores: scratch of n_keys floats.
void attend_one(float* out, const float* q, const KVCache& c, int layer, int b, int kv_h,
                int n_keys, float* scores);

// Prefill: T queries of sequence b at positions start .. start+T-1, whose K/V
// are already in the cache. Query i sees positions 0 .. start+i (causal).
// q, out: (T, n_heads * head_dim).
void attention_prefill(float* out, const float* q, const KVCache& c, int layer, int b, int start,
                       int T, int n_heads);

// Decode: one query per sequence; row r belongs to sequence slots[r] at
// position pos[r] and sees positions 0 .. pos[r].
// q, out: (rows, n_heads * head_dim).
void attention_decode(float* out, const float* q, const KVCache& c, int layer, const int* slots,
                      const int* pos, int rows, int n_heads);

}  // namespace pd
