#include "engine/quantize.hpp"

#include <algorithm>
#include <cmath>

#include "common.hpp"

namespace pd {

float quantize_group(const float* w, int n, std::int8_t* q, int max_q) {
    float max_abs = 0;
    for (int i = 0; i < n; i++) max_abs = std::max(max_abs, std::fabs(w[i]));
    const float scale = max_abs / float(max_q);
    for (int i = 0; i < n; i++) {
        // round(w / scale), the formula lab 12 teaches, and not w * (1 / scale):
        // the two differ in the last bit for some w, which rounds a near-tie the
        // other way (lab 12's solution did not match on bench-llama-125m's first
        // MLP matrix), and a student's quantizer must match this one exactly.
        // Weights are quantized once, at load, so the division costs nothing
        // that matters. An all-zero group: scale 0 and q = 0 stand for it
        // exactly (no 0/0). w / scale can land a hair past max_q for the
        // largest |w|: clamp.
        const float r = scale > 0 ? std::nearbyint(w[i] / scale) : 0.0f;
        q[i] = std::int8_t(std::clamp(r, -float(max_q), float(max_q)));
    }
    return scale;
}

void quantize_activations(const float* x, int n, int group, std::int16_t* q, float* scales, int max_q) {
    for (int g = 0; g * group < n; g++) {
        const int first = g * group, count = std::min(group, n - first);
        float max_abs = 0;
        for (int i = 0; i < count; i++) {
            const float a = std::fabs(x[first + i]);
            if (a > max_abs || std::isnan(a)) max_abs = a;  // a NaN sticks: nothing compares above it
        }
        const float scale = max_abs / float(max_q), inv = scale > 0 ? 1.0f / scale : 0.0f;
        for (int i = 0; i < count; i++) {
            // fmin/fmax, not clamp: they turn a NaN into a bound, never into an undefined cast.
            const float r = std::nearbyint(x[first + i] * inv);
            q[first + i] = std::int16_t(std::fmin(std::fmax(r, -float(max_q)), float(max_q)));
        }
        scales[g] = scale;
    }
}

QuantizedMatrix quantize_rows(const float* w, int rows, int cols, int group, int max_q) {
    if (group < 1 || max_q < 1 || max_q > kInt8Max) fail("internal error: group size {}, max_q {}", group, max_q);
    QuantizedMatrix m{rows, cols, group, {}, {}};
    m.q.resize(std::size_t(rows) * cols);
    m.scales.resize(std::size_t(rows) * m.groups_per_row());
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < m.groups_per_row(); g++) {
            const std::size_t at = std::size_t(r) * cols + std::size_t(g) * group;
            const int n = std::min(group, cols - g * group);
            m.scales[std::size_t(r) * m.groups_per_row() + g] = quantize_group(w + at, n, m.q.data() + at, max_q);
        }
    return m;
}

std::vector<float> dequantize_rows(const QuantizedMatrix& m) {
    std::vector<float> w(m.q.size());
    for (int r = 0; r < m.rows; r++)
        for (int c = 0; c < m.cols; c++) {
            const std::size_t i = std::size_t(r) * m.cols + c;
            w[i] = float(m.q[i]) * m.scales[std::size_t(r) * m.groups_per_row() + c / m.group];
        }
    return w;
}

}  // namespace pd
