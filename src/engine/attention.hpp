// Causal self-attention against the KV cache, one layer at a time.
//
// window > 0 is a sliding window (Mistral's): the query at position p sees
// keys p-window+1 .. p only. The cache keeps every position; the window only
// changes what attention reads. window 0 (the default): keys 0 .. p.
//
// Query head h reads KV head h / group_size: with n_kv_heads == n_heads that
// is multi-head attention (MHA), with 1 it is multi-query (MQA), in between
// grouped-query (GQA). One code path serves all three.
#pragma once

#include <span>

#include "engine/kv_cache.hpp"
#include "engine/paged_kv_cache.hpp"

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
                       int T, int n_heads, int window = 0);

// Decode: one query per sequence; row r belongs to sequence slots[r] at
// position pos[r] and sees positions 0 .. pos[r].
// q, out: (rows, n_heads * head_dim).
void attention_decode(float* out, const float* q, const KVCache& c, int layer, const int* slots,
                      const int* pos, int rows, int n_heads, int window = 0);

// A run of one sequence's rows in a mixed batch: rows row0 .. row0+n-1 of q
// and out are its positions start .. start+n-1, whose K/V are already written
// through `table`. Each row sees positions 0 .. its own (causal). chunk: a
// run of a longer chunk's rows (a step plan may split a chunk in two runs,
// step_plan.hpp), which keeps the prefill kernel even when one row long.
struct PagedSpan {
    const BlockTable* table = nullptr;
    int row0 = 0, start = 0, n = 0;
    bool chunk = false;
};

// Attention of a mixed batch through the block tables, one pass for all
// spans: a one-row span (not of a chunk) is a decode step (the query heads of a KV head served
// together, as attention_decode), a longer one a prefill chunk attending to
// its cached prefix and causally within itself (as attention_prefill).
// q, out: (rows, n_heads * head_dim).
void attention_paged(float* out, const float* q, const PagedKVCache& c, int layer, std::span<const PagedSpan> spans,
                     int n_heads, int window = 0);

}  // namespace pd
