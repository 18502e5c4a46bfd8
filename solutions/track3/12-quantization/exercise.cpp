// Lab 12 reference solution.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pd::lab12 {

namespace {

int n_groups(std::size_t n, int group) { return int((n + std::size_t(group) - 1) / std::size_t(group)); }

}  // namespace

QuantizedRow quantize_row(std::span<const float> w, int group) {
    if (w.empty()) throw std::invalid_argument("quantize_row: the row is empty");
    if (group < 1) throw std::invalid_argument("quantize_row: the group size must be at least 1");
    QuantizedRow r{group, std::vector<std::int8_t>(w.size()), std::vector<float>(n_groups(w.size(), group))};
    for (std::size_t g = 0; g < r.scales.size(); g++) {
        const std::size_t a = g * group, b = std::min(w.size(), a + group);
        float max_abs = 0;
        for (std::size_t k = a; k < b; k++) max_abs = std::max(max_abs, std::fabs(w[k]));
        const float scale = max_abs / 127.0f;
        r.scales[g] = scale;
        for (std::size_t k = a; k < b; k++) {
            const float v = scale > 0 ? std::nearbyint(w[k] / scale) : 0.0f;
            r.q[k] = std::int8_t(std::clamp(v, -127.0f, 127.0f));
        }
    }
    return r;
}

std::vector<float> dequantize_row(const QuantizedRow& row) {
    std::vector<float> w(row.q.size());
    for (std::size_t k = 0; k < w.size(); k++) w[k] = float(row.q[k]) * row.scales[k / row.group];
    return w;
}

double dot_int8(const QuantizedRow& row, std::span<const float> x) {
    if (x.size() != row.q.size())
        throw std::invalid_argument("dot_int8: x and the row differ in length");
    double total = 0;
    for (std::size_t g = 0; g < row.scales.size(); g++) {
        const std::size_t a = g * row.group, b = std::min(x.size(), a + row.group);
        double sum = 0;
        for (std::size_t k = a; k < b; k++) sum += double(row.q[k]) * x[k];
        total += sum * row.scales[g];
    }
    return total;
}

}  // namespace pd::lab12
