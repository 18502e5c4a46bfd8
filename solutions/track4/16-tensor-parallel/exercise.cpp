// Lab 16 reference solution.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common.hpp"
#include "engine/ops.hpp"

namespace pd::lab16 {

ShardPlan plan_shard(const Config& c, int ranks, int rank) {
    if (ranks < 1) fail("{} ranks: give at least 1", ranks);
    if (rank < 0 || rank >= ranks) fail("rank {}: give a rank from 0 to {}", rank, ranks - 1);
    if (c.n_kv_heads % ranks != 0)
        fail("{} ranks do not divide the model's {} KV heads: a KV head (and its cache) cannot be split; "
             "use a rank count that divides {}", ranks, c.n_kv_heads, c.n_kv_heads);
    if (c.hidden_dim % ranks != 0)
        fail("{} ranks do not divide the MLP's {} hidden units; use a rank count that divides {}", ranks,
             c.hidden_dim, c.hidden_dim);
    ShardPlan p;
    p.ranks = ranks, p.rank = rank;
    p.kv_heads = c.n_kv_heads / ranks, p.kv_first = rank * p.kv_heads;
    p.q_heads = p.kv_heads * c.group_size(), p.q_first = p.kv_first * c.group_size();
    p.hidden = c.hidden_dim / ranks, p.hidden_first = rank * p.hidden;
    return p;
}

namespace {

// Appends rows [first, first + n) of `m` (and of its bias, when it has one) to `out`.
void take_rows(const Matrix& m, int first, int n, Matrix& out) {
    out.in = m.in;
    out.out += n;
    out.w.insert(out.w.end(), m.w.begin() + std::ptrdiff_t(first) * m.in,
                 m.w.begin() + std::ptrdiff_t(first + n) * m.in);
    if (!m.bias.empty()) out.bias.insert(out.bias.end(), m.bias.begin() + first, m.bias.begin() + first + n);
}

// Columns [first, first + n) of every row of `m`.
Matrix take_columns(const Matrix& m, int first, int n) {
    Matrix out{n, m.out, {}, {}};
    out.w.reserve(std::size_t(n) * m.out);
    for (int o = 0; o < m.out; o++) {
        const auto row = m.w.begin() + std::ptrdiff_t(o) * m.in;
        out.w.insert(out.w.end(), row + first, row + first + n);
    }
    return out;
}

}  // namespace

LayerShard shard_layer(const Config& c, const LayerWeights& full, const ShardPlan& p) {
    const int hd = c.head_dim, Q = c.q_dim(), KV = c.kv_dim(), F = c.hidden_dim;
    LayerShard s;
    // q, k and v: whole heads, each head hd consecutive rows.
    take_rows(full.qkv, p.q_first * hd, p.q_heads * hd, s.qkv);
    take_rows(full.qkv, Q + p.kv_first * hd, p.kv_heads * hd, s.qkv);
    take_rows(full.qkv, Q + KV + p.kv_first * hd, p.kv_heads * hd, s.qkv);
    // The output projection reads the heads: their columns.
    s.attn_out = take_columns(full.attn_out, p.q_first * hd, p.q_heads * hd);
    // gate and up: whole hidden units; down reads them: their columns.
    take_rows(full.mlp_in, p.hidden_first, p.hidden, s.mlp_in);
    take_rows(full.mlp_in, F + p.hidden_first, p.hidden, s.mlp_in);
    s.mlp_out = take_columns(full.mlp_out, p.hidden_first, p.hidden);
    return s;
}

void tp_layer(ShardSublayers& sub, Comm& comm, std::span<float> x, std::span<float> partial) {
    // Attention: each rank's heads give a partial sum of the output; add them, then the residual.
    sub.attention(x.data(), partial.data());
    comm.allreduce_sum(partial);
    add_inplace(x.data(), partial.data(), long(x.size()));
    // MLP: the same with the hidden units.
    sub.mlp(x.data(), partial.data());
    comm.allreduce_sum(partial);
    add_inplace(x.data(), partial.data(), long(x.size()));
}

namespace {

// Chunk c (taken mod R) of n values cut into R: the first n % R chunks are one longer.
std::span<float> chunk(std::span<float> x, int R, int c) {
    const std::size_t n = x.size(), base = n / std::size_t(R), extra = n % std::size_t(R);
    const std::size_t k = std::size_t((c % R + R) % R);
    return x.subspan(k * base + std::min(k, extra), base + (k < extra ? 1 : 0));
}

}  // namespace

void ring_allreduce(Comm& comm, std::span<float> x) {
    const int R = comm.size(), r = comm.rank(), next = (r + 1) % R, prev = (r + R - 1) % R;
    if (R == 1) return;  // the sum of one
    std::vector<float> in(x.size() / std::size_t(R) + 1);
    // Reduce-scatter: at step s rank r passes its running sum of chunk r - s on
    // and adds its predecessor's sum of chunk r - s - 1 to its own. Chunk
    // r - s - 1 then holds s + 2 ranks' values; after R - 1 steps chunk r + 1
    // holds all R.
    for (int s = 0; s < R - 1; s++) {
        const std::span<float> mine = chunk(x, R, r - s - 1), got = std::span(in).first(mine.size());
        comm.send_recv(chunk(x, R, r - s), next, got, prev);
        for (std::size_t i = 0; i < mine.size(); i++) mine[i] += got[i];
    }
    // All-gather: rank r passes its whole chunk r + 1 on, then each chunk it
    // receives, storing chunk r - s from its predecessor at step s: every rank
    // ends with every chunk, each one the bits its owner summed.
    for (int s = 0; s < R - 1; s++) comm.send_recv(chunk(x, R, r + 1 - s), next, chunk(x, R, r - s), prev);
}

AllreduceCost ring_cost(double bytes, int ranks, double link_gbps, double latency_us) {
    if (!(bytes >= 0)) fail("all-reduce of {} bytes: give a size of 0 or more", bytes);
    if (ranks < 1) fail("all-reduce over {} ranks: give at least 1", ranks);
    if (!(link_gbps > 0)) fail("a link of {} Gb/s: give a rate above 0", link_gbps);
    if (!(latency_us >= 0)) fail("a latency of {} us: give 0 or more", latency_us);
    AllreduceCost a;
    a.wire_bytes = 2.0 * (ranks - 1) / ranks * bytes;
    a.ms = a.wire_bytes * 8 / link_gbps / 1e6 + 2.0 * (ranks - 1) * latency_us / 1e3;
    return a;
}

}  // namespace pd::lab16
