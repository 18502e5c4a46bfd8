// Lab 14: two attention kernels that compute the same thing.
//
//   naive  materialises every score: per head a (T, S) matrix in memory, then
//          a softmax over each of its rows, then P V. Three passes over T*S floats.
//   tiled  flash-style, yours (exercise.hpp): keys in tiles of Bc, queries in
//          blocks of Br; each row folds a tile into its running max, sum and
//          output at once, so only a (Br, Bc) tile of scores ever exists.
//
// Both cover prefill and decode with one shape: T queries at the LAST T of S
// positions (decode: T = 1; a whole prompt: T = S), causal, GQA heads.
#pragma once

#include <cstddef>

#include "exercise.hpp"

namespace pd::lab14 {

struct AttentionShape {
    int T = 1;           // queries; query i sits at position S - T + i and sees keys 0 .. S - T + i
    int S = 1;           // keys (cached positions), S >= T
    int n_heads = 1;     // query heads
    int n_kv_heads = 1;  // KV heads; query head h reads KV head h / (n_heads / n_kv_heads)
    int D = 1;           // head_dim
};

// Layouts, as in the engine (one sequence of src/engine/kv_cache.hpp):
//   q, out : (T, n_heads, D)
//   K, V   : (n_kv_heads, S, D)
// Heads run in parallel on the OpenMP threads, one head per thread at a time,
// each thread with its own scratch, allocated for this call. Both return that
// scratch in bytes, per thread (what one head's work needs):
//   naive: T * S floats, the score matrix;
//   tiled: R * Bc floats plus R RowStates, R = min(Br, T): the TileScratch
//          handed to your tiled_attention_head, once per head.
// Throw std::invalid_argument on a shape or tiles outside the comments above.
std::size_t naive_attention(float* out, const float* q, const float* K, const float* V, const AttentionShape& s);
std::size_t tiled_attention(float* out, const float* q, const float* K, const float* V, const AttentionShape& s,
                            Tiles t);

}  // namespace pd::lab14
