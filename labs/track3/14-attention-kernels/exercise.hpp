// Lab 14: what you write. The inner step of a tiled, flash-style attention
// kernel: one query row meets its keys one tile at a time and keeps only a
// running summary of what it has seen, never the whole row of scores.
// kernels.cpp calls your two functions for every (query row, key tile) pair.
#pragma once

#include <limits>

namespace pd::lab14 {

// What one query row remembers between key tiles (README "The online softmax").
// The kernel starts every row with these values and its output row o zeroed.
struct RowState {
    float m = -std::numeric_limits<float>::infinity();  // the largest score seen so far
    float l = 0.0f;                                      // sum over the keys seen of exp(score - m)
};

// Task 1: fold one tile of n >= 1 keys into the row.
//   st : the row's state before this tile; after the call, of every key seen, this tile's included
//   o  : (D) the row's unnormalised output, sum over the keys seen of exp(score - m) * v, for the
//        m in st: before the call for the old m, after it for the new one
//   s  : (n) this tile's scores q . k_j / sqrt(D) (finite; as large as +-1e4); yours to overwrite
//   V  : (n, D) the tile's value rows, contiguous (row j belongs to score s[j])
// Exact arithmetic is not required, but the result must stay finite and
// within float rounding of the true softmax weights for scores far outside
// exp's range (exp(89) is already inf in float).
// vector_ops.hpp has the loops you need (max_of, exp_shifted_sum, scale_row,
// add_weighted_rows); calling them keeps your kernel as fast as the naive one.
void tile_update(RowState& st, float* o, float* s, const float* V, int n, int D);

// Task 2: the row's attention output once every key it may see has passed:
// o (D) in, the softmax-weighted average of the values out.
// st.l >= 1 here: the largest score's own term is exp(0).
void finish_row(const RowState& st, float* o, int D);

}  // namespace pd::lab14
