// The two kernels of kernels.hpp: the naive one, and the frame of the tiled
// one around your tiled_attention_head (the heads, the threads, the scratch).
// Every inner loop is a vector_ops.hpp call, the same for both (yours too, if
// you call them), so their times differ only by how they use memory.
#include "kernels.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "exercise.hpp"
#include "vector_ops.hpp"

namespace pd::lab14 {
namespace {

void check_shape(const AttentionShape& s) {
    if (s.T < 1 || s.S < s.T || s.n_heads < 1 || s.n_kv_heads < 1 || s.D < 1 || s.n_heads % s.n_kv_heads)
        throw std::invalid_argument(fmt::format(
            "attention shape T={} S={} heads={} kv_heads={} D={}: need 1 <= T <= S, D >= 1 and heads a "
            "multiple of kv_heads", s.T, s.S, s.n_heads, s.n_kv_heads, s.D));
}

// Keys query i may see: positions 0 .. S - T + i.
int visible(const AttentionShape& s, int i) { return s.S - s.T + i + 1; }

// Head h's part of the tensors: its query and output rows (stride ld), its KV head's K and V.
struct Head {
    const float* q;
    float* out;
    std::size_t ld;
    const float *K, *V;  // (S, D)
};

Head head_of(float* out, const float* q, const float* K, const float* V, const AttentionShape& s, int h) {
    const std::size_t kv = std::size_t(h / (s.n_heads / s.n_kv_heads)) * s.S * s.D;
    return {q + std::size_t(h) * s.D, out + std::size_t(h) * s.D, std::size_t(s.n_heads) * s.D, K + kv, V + kv};
}

// One thread's scratch, allocated uninitialised: the kernels write before they read.
struct Scratch {
    std::size_t floats = 0, rows = 0;
    std::unique_ptr<float[]> scores;
    std::unique_ptr<RowState[]> states;
    std::size_t bytes() const { return floats * sizeof(float) + rows * sizeof(RowState); }
};

// Runs work(h, scratch) for every head on the OpenMP threads, each thread with
// its own scratch of this size. An exception (an exercise not written yet, a
// failed allocation) may not leave a parallel region: the first is kept and
// rethrown after it.
template <class Work>
void for_each_head(int n_heads, std::size_t floats, std::size_t rows, Work work) {
    std::exception_ptr error;
    auto guarded = [&](auto&& f) {
        try {
            f();
        } catch (...) {
#pragma omp critical(lab14_first_error)
            if (!error) error = std::current_exception();
        }
    };
#pragma omp parallel
    {
        Scratch scratch{floats, rows, nullptr, nullptr};
        guarded([&] { scratch.scores.reset(new float[floats]), scratch.states.reset(new RowState[rows]); });
#pragma omp for schedule(dynamic)
        for (int h = 0; h < n_heads; h++)
            if (scratch.scores) guarded([&] { work(h, scratch); });
    }
    if (error) std::rethrow_exception(error);
}

// One head, as three separate framework operations would run it: the whole
// (T, S) matrix P is written, then read and rewritten, then read again.
void naive_head(const Head& v, const AttentionShape& s, float* P) {
    const float scale = 1.0f / std::sqrt(float(s.D));
    // 1. P[i][j] = q_i . k_j * scale. The causal mask is a loop bound: the
    //    upper triangle is allocated but never touched.
    for (int i = 0; i < s.T; i++)
        scores_row(P + std::size_t(i) * s.S, v.q + i * v.ld, v.K, visible(s, i), s.D, scale);
    // 2. Softmax of each row: subtract its max, exponentiate, divide by the sum.
    for (int i = 0; i < s.T; i++) {
        float* p = P + std::size_t(i) * s.S;
        const int n = visible(s, i);
        const float l = exp_shifted_sum(p, n, max_of(p, n));
        scale_row(p, 1.0f / l, n);
    }
    // 3. out_i = sum_j P[i][j] V_j.
    for (int i = 0; i < s.T; i++) {
        float* o = v.out + i * v.ld;
        std::fill(o, o + s.D, 0.0f);
        add_weighted_rows(o, P + std::size_t(i) * s.S, v.V, visible(s, i), s.D);
    }
}

}  // namespace

std::size_t naive_attention(float* out, const float* q, const float* K, const float* V, const AttentionShape& s) {
    check_shape(s);
    const Scratch need{std::size_t(s.T) * s.S, 0, nullptr, nullptr};
    for_each_head(s.n_heads, need.floats, need.rows,
                  [&](int h, Scratch& w) { naive_head(head_of(out, q, K, V, s, h), s, w.scores.get()); });
    return need.bytes();
}

std::size_t tiled_attention(float* out, const float* q, const float* K, const float* V, const AttentionShape& s,
                            Tiles t) {
    check_shape(s);
    if (t.Br < 1 || t.Bc < 1)
        throw std::invalid_argument(fmt::format("tiles Br={} Bc={}: both must be at least 1", t.Br, t.Bc));
    const int rows = std::min(t.Br, s.T);
    const Scratch need{std::size_t(rows) * t.Bc, std::size_t(rows), nullptr, nullptr};
    const HeadShape one{s.T, s.S, s.D, std::size_t(s.n_heads) * s.D};
    for_each_head(s.n_heads, need.floats, need.rows, [&](int h, Scratch& w) {
        const Head v = head_of(out, q, K, V, s, h);
        tiled_attention_head(v.out, v.q, v.K, v.V, one, t,
                             {{w.scores.get(), need.floats}, {w.states.get(), need.rows}});
    });
    return need.bytes();
}

}  // namespace pd::lab14
