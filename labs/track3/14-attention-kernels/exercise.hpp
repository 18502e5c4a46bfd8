// Lab 14: what you write. The tiled, flash-style attention of one head: the
// keys pass in tiles of Bc, the queries in blocks of Br, and each query row
// keeps a running summary of what it has seen, never its whole row of scores.
// kernels.cpp's tiled_attention calls your function once per head (the heads
// run in parallel, each thread with the scratch it hands you).
#pragma once

#include <cstddef>
#include <span>

namespace pd::lab14 {

struct Tiles {
    int Br = 16;  // query rows per block: they share each key tile while it is in cache
    int Bc = 64;  // keys per tile
};

// One head of one attention call.
struct HeadShape {
    int T = 1;           // queries; query i sits at position S - T + i and sees keys 0 .. S - T + i (causal)
    int S = 1;           // keys, S >= T
    int D = 1;           // head dimension
    std::size_t ld = 1;  // floats from one query row (and one output row) to the next, >= D:
                         // the heads of a call are interleaved, (T, n_heads, D)
};

// What one query row remembers between key tiles (README "The online softmax").
struct RowState {
    float m;  // the largest score seen so far
    float l;  // sum over the keys seen of exp(score - m)
};

// The memory your kernel may use besides a few scalars and its output rows,
// handed in by the caller, uninitialised, for R = min(Br, T) rows:
struct TileScratch {
    std::span<float> scores;  // (R, Bc): one query block's scores against one key tile
    std::span<RowState> rows;  // (R): that block's running states
};

// The task: out = softmax(q K^T / sqrt(D)) V for one head, causal.
//   out : (T, D), row i at out + i * ld; write exactly its D floats per row
//         (between rows lie the other heads' outputs); a row may serve as its
//         running output o until the row is finished
//   q   : (T, D), row i at q + i * ld
//   K, V: (S, D), contiguous rows
//   shape, tiles: valid (1 <= T <= S, D >= 1, ld >= D, Br >= 1, Bc >= 1):
//         tiled_attention checks them before it calls you
//   scratch: everything above; the tests run your kernel with no other memory
//         to spare: a row of S scores, on the heap or the stack, fails them
// Scores may lie far outside exp's range (+-1000; exp(89) is already inf in
// float): the result must stay finite and within float rounding of the exact one.
// vector_ops.hpp has the loops you need; calling them keeps your kernel as fast
// per multiply-add and per exponential as the naive one.
void tiled_attention_head(float* out, const float* q, const float* K, const float* V, const HeadShape& shape,
                          Tiles tiles, TileScratch scratch);

}  // namespace pd::lab14
