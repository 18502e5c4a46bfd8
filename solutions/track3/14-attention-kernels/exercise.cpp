// Lab 14 reference solution: the tile update of a flash-style kernel.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "vector_ops.hpp"

namespace pd::lab14 {

// With m' = max(m, max_j s_j) and alpha = exp(m - m'):
//   l' = alpha * l + sum_j exp(s_j - m')
//   o' = alpha * o + sum_j exp(s_j - m') V_j
// Every exponent is <= 0, so nothing overflows whatever the scores; on the
// first tile m = -inf and alpha = exp(-inf) = 0 drops the (zero) old state.
void tile_update(RowState& st, float* o, float* s, const float* V, int n, int D) {
    const float m_new = std::max(st.m, max_of(s, n));
    const float alpha = std::exp(st.m - m_new);
    const float tile_sum = exp_shifted_sum(s, n, m_new);  // s now holds exp(s_j - m')
    st.l = alpha * st.l + tile_sum;
    if (alpha != 1.0f) scale_row(o, alpha, D);  // most tiles leave the max where it was
    add_weighted_rows(o, s, V, n, D);
    st.m = m_new;
}

void finish_row(const RowState& st, float* o, int D) { scale_row(o, 1.0f / st.l, D); }

}  // namespace pd::lab14
