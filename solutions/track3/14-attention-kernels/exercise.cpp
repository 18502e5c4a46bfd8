// Lab 14 reference solution: the tiled, flash-style attention of one head.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vector_ops.hpp"

namespace pd::lab14 {

namespace {

// One tile of n >= 1 keys folded into one row. With m' = max(m, max_j s_j)
// and alpha = exp(m - m'):
//   l' = alpha * l + sum_j exp(s_j - m')
//   o' = alpha * o + sum_j exp(s_j - m') V_j
// Every exponent is <= 0, so nothing overflows whatever the scores; on the
// first tile m = -inf and alpha = exp(-inf) = 0 drops the (zero) old state.
//   s: (n) the row's scores, overwritten with their weights   V: (n, D)   o: (D)
void fold_tile(RowState& st, float* o, float* s, const float* V, int n, int D) {
    const float m_new = std::max(st.m, max_of(s, n));
    const float alpha = std::exp(st.m - m_new);
    st.l = alpha * st.l + exp_shifted_sum(s, n, m_new);
    if (alpha != 1.0f) scale_row(o, alpha, D);  // most tiles leave the max where it was
    add_weighted_rows(o, s, V, n, D);
    st.m = m_new;
}

// Queries i0 .. i0 + R - 1: for each key tile, the block's (R, Bc) scores, then
// each row folds its own. Causal: row i sees keys up to S - T + i, so near the
// diagonal a row takes only the first n(r) keys of a tile, or none.
void block(float* out, const float* q, const float* K, const float* V, const HeadShape& s, Tiles t, int i0,
           TileScratch w) {
    const int R = std::min(t.Br, s.T - i0);
    const float scale = 1.0f / std::sqrt(float(s.D));
    auto row = [&](auto* base, int r) { return base + std::size_t(i0 + r) * s.ld; };
    auto visible = [&](int r) { return s.S - s.T + i0 + r + 1; };
    for (int r = 0; r < R; r++) {
        w.rows[r] = {-std::numeric_limits<float>::infinity(), 0.0f};
        std::fill(row(out, r), row(out, r) + s.D, 0.0f);
    }
    for (int j0 = 0; j0 < visible(R - 1); j0 += t.Bc) {
        const std::size_t k0 = std::size_t(j0) * s.D;
        auto n = [&](int r) { return std::min(t.Bc, visible(r) - j0); };  // <= 0: the tile is after row r
        auto sc = [&](int r) { return w.scores.data() + std::size_t(r) * t.Bc; };
        // The tile's K serves every row's scores, then its V every row's fold, from cache.
        for (int r = 0; r < R; r++)
            if (n(r) > 0) scores_row(sc(r), row(q, r), K + k0, n(r), s.D, scale);
        for (int r = 0; r < R; r++)
            if (n(r) > 0) fold_tile(w.rows[r], row(out, r), sc(r), V + k0, n(r), s.D);
    }
    for (int r = 0; r < R; r++) scale_row(row(out, r), 1.0f / w.rows[r].l, s.D);  // l >= 1: the max's own term
}

}  // namespace

void tiled_attention_head(float* out, const float* q, const float* K, const float* V, const HeadShape& shape,
                          Tiles tiles, TileScratch scratch) {
    for (int i0 = 0; i0 < shape.T; i0 += tiles.Br) block(out, q, K, V, shape, tiles, i0, scratch);
}

}  // namespace pd::lab14
