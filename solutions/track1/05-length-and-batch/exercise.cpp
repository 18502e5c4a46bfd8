// Lab 05 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track1/05-length-and-batch/exercise.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "sampler.hpp"

namespace pd::lab05 {

const float* batched_decode_step(Engine& engine, std::span<const int> slots, std::span<int> tokens) {
    if (slots.size() != tokens.size())
        throw std::invalid_argument("batched_decode_step: " + std::to_string(slots.size()) + " slots but " +
                                    std::to_string(tokens.size()) + " tokens");
    const int V = engine.config().vocab_size;
    // One forward pass for all B rows: every weight matrix is streamed once.
    const float* logits = engine.decode(slots, tokens);
    // Greedy choice per row; row r belongs to slots[r].
    for (std::size_t r = 0; r < tokens.size(); r++) tokens[r] = argmax(logits + r * std::size_t(V), V);
    return logits;
}

Fit fit_linear_quadratic(std::span<const double> P, std::span<const double> ms) {
    if (P.size() != ms.size())
        throw std::invalid_argument("fit_linear_quadratic: " + std::to_string(P.size()) + " lengths but " +
                                    std::to_string(ms.size()) + " times");
    if (std::set<double>(P.begin(), P.end()).size() < 3)
        throw std::invalid_argument(
            "fit_linear_quadratic: three unknowns (c0, a, b) need at least three distinct lengths");
    const std::size_t n = P.size();

    // Scale the lengths to at most 1: P^4 for P = 4096 is 3e14, and normal
    // equations built from raw P lose most of their digits.
    double s = 0;
    for (double p : P) s = std::max(s, std::fabs(p));
    // Normal equations M w = r for the columns [1, x, x^2], x = P / s.
    double M[3][4] = {};
    for (std::size_t i = 0; i < n; i++) {
        const double x = P[i] / s, col[3] = {1.0, x, x * x};
        for (int j = 0; j < 3; j++) {
            for (int k = 0; k < 3; k++) M[j][k] += col[j] * col[k];
            M[j][3] += col[j] * ms[i];
        }
    }
    // Gaussian elimination with partial pivoting on the augmented 3x4 matrix.
    for (int c = 0; c < 3; c++) {
        int piv = c;
        for (int r = c + 1; r < 3; r++)
            if (std::fabs(M[r][c]) > std::fabs(M[piv][c])) piv = r;
        if (M[piv][c] == 0.0) throw std::invalid_argument("fit_linear_quadratic: singular system");
        if (piv != c)
            for (int k = 0; k < 4; k++) std::swap(M[c][k], M[piv][k]);
        for (int r = c + 1; r < 3; r++) {
            const double f = M[r][c] / M[c][c];
            for (int k = c; k < 4; k++) M[r][k] -= f * M[c][k];
        }
    }
    double w[3];
    for (int c = 2; c >= 0; c--) {
        double acc = M[c][3];
        for (int k = c + 1; k < 3; k++) acc -= M[c][k] * w[k];
        w[c] = acc / M[c][c];
    }
    Fit f;
    f.c0 = w[0];
    f.a = w[1] / s;
    f.b = w[2] / (s * s);

    double mean = 0;
    for (double y : ms) mean += y;
    mean /= double(n);
    double ss_res = 0, ss_tot = 0;
    for (std::size_t i = 0; i < n; i++) {
        const double e = ms[i] - f.at(P[i]), d = ms[i] - mean;
        ss_res += e * e;
        ss_tot += d * d;
    }
    f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    return f;
}

}  // namespace pd::lab05
