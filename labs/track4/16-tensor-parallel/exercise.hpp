// Lab 16: what you write. One Llama-family model split over R ranks, Megatron
// style: each rank holds a slice of every weight matrix of every layer, runs
// its slice of each product, and the ranks add up their partial results
// twice a layer. You write which slice each rank gets (tasks 1 and 2), where
// the sums go (task 3), the ring all-reduce that adds them (task 4), and what
// it costs on a link (task 5).
//
// Shapes (Config c: D = dim, hd = head_dim, F = hidden_dim; weights.hpp):
//   qkv       (n_heads*hd + 2*n_kv_heads*hd, D)  rows [q heads | k heads | v heads]
//   attn_out  (D, n_heads*hd)                    its inputs (columns) are the query heads
//   mlp_in    (2F, D)                            rows [gate | up], F each
//   mlp_out   (D, F)                             its inputs (columns) are the hidden units
// Every Matrix is row-major (out, in): row o, column i is w[o * in + i].
#pragma once

#include <span>

#include "comm.hpp"
#include "engine/weights.hpp"
#include "io/config.hpp"

namespace pd::lab16 {

// Task 1: what rank `rank` of `ranks` owns, in contiguous runs:
//   KV heads     [kv_first, kv_first + kv_heads)
//   query heads  [q_first, q_first + q_heads): the group_size() query heads of
//                each of its KV heads, so no query head needs another rank's K/V
//   MLP hidden   [hidden_first, hidden_first + hidden)
// Rank r's runs come right after rank r-1's; all ranks together cover each
// range exactly once.
struct ShardPlan {
    int ranks = 1, rank = 0;
    int kv_first = 0, kv_heads = 0;
    int q_first = 0, q_heads = 0;
    int hidden_first = 0, hidden = 0;
};
// Throws pd::UserError (pd::fail) naming the value when ranks < 1, rank is
// outside 0..ranks-1, ranks does not divide n_kv_heads (a KV head and the
// cache behind it cannot be split: say so) or does not divide hidden_dim.
ShardPlan plan_shard(const Config& c, int ranks, int rank);

// Task 2: the rank's slices of one layer's four matrices, row-major (out, in):
//   qkv       (q_heads*hd + 2*kv_heads*hd, D): the rows of its q heads, then of
//             its k heads, then of its v heads; the bias (Qwen2 has one) sliced
//             the same way, empty when the layer has none
//   attn_out  (D, q_heads*hd): the columns of its query heads
//   mlp_in    (2*hidden, D): its gate rows, then its up rows
//   mlp_out   (D, hidden): the columns of its hidden units
// The row slices give each rank whole outputs (its heads, its hidden units);
// the column slices give it a partial sum of every output: task 3 adds them.
// Llama-family layers only (attn_out and mlp_out have no bias: a bias there
// would be added once per rank).
struct LayerShard {
    Matrix qkv, attn_out, mlp_in, mlp_out;
};
LayerShard shard_layer(const Config& c, const LayerWeights& full, const ShardPlan& p);

// Task 3: one layer on one rank. The kit runs the slices (tp_forward.cpp):
class ShardSublayers {
public:
    virtual ~ShardSublayers() = default;
    // partial (rows, D) = this rank's heads' share of the attention sublayer:
    // RMSNorm(x), its q/k/v rows, rotary, its KV heads' cache, attention, and
    // its columns of attn_out. Summed over the ranks: attn_out(attention(...)).
    virtual void attention(const float* x, float* partial) = 0;
    // partial (rows, D) = its hidden units' share of the MLP sublayer:
    // RMSNorm(x), its gate/up rows, SwiGLU, its columns of mlp_out.
    virtual void mlp(const float* x, float* partial) = 0;
};
// x (rows, D): the residual stream, the same on every rank before and after.
// partial: scratch of x's size. Both sublayers add their output to x (the
// residuals); every rank must call comm the same number of times, in the same
// order, with the same sizes.
void tp_layer(ShardSublayers& sub, Comm& comm, std::span<float> x, std::span<float> partial);

// Task 4: the ring all-reduce, on point-to-point messages only. Every rank
// passes its own x (the same length n on every rank, any n >= 0); on return
// each holds the element-wise sum over the R ranks, the same bits on every
// rank. Cut x into R chunks (their lengths differ by at most one: n need not
// be a multiple of R, and may be shorter), then
//   reduce-scatter: R-1 steps; at each, send one chunk's running sum to the
//                   next rank and add the chunk the previous rank sends;
//                   after them each rank holds one chunk summed over all ranks
//   all-gather:     R-1 steps; at each, send a summed chunk on and store the
//                   one received
// One comm.send_recv per step, each to the next rank and from the previous
// one: every rank sends 2 messages, about 2 (R-1)/R of x's bytes. R = 1
// sends nothing. Build it from send_recv alone: not comm.allreduce_sum (which
// runs this function) and no MPI call (the tests' ranks are threads).
void ring_allreduce(Comm& comm, std::span<float> x);

// Task 5: the cost of one all-reduce of `bytes` (each rank's buffer) over
// `ranks` ranks with the ring algorithm, each rank's link at `link_gbps`
// gigabits per second and `latency_us` microseconds per message: every rank
// sends (and receives) 2 (R - 1) / R * bytes in 2 (R - 1) steps, one after
// the other. R = 1 sends nothing and costs nothing.
struct AllreduceCost {
    double wire_bytes = 0;  // bytes one rank sends
    double ms = 0;          // wire_bytes * 8 / link_gbps ns + 2 (R - 1) * latency_us us, in ms
};
// Throws pd::UserError naming the value when bytes < 0, ranks < 1,
// link_gbps is not above 0 or latency_us is below 0 (or either not a number).
AllreduceCost ring_cost(double bytes, int ranks, double link_gbps, double latency_us);

}  // namespace pd::lab16
