// Lab 05 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track1/05-length-and-batch/exercise.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace pd::lab05 {

namespace {

int greedy(const float* row, int vocab) {
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (row[i] > row[best]) best = i;  // strictly greater: the first maximum wins ties
    return best;
}

void check_batch(const Engine& engine, const Batch& b) {
    if (b.next.size() != b.slots.size() || b.remaining.size() != b.slots.size())
        throw std::invalid_argument("batched_decode_step: " + std::to_string(b.slots.size()) + " slots, " +
                                    std::to_string(b.next.size()) + " tokens, " +
                                    std::to_string(b.remaining.size()) + " remaining counts");
    for (std::size_t i = 0; i < b.slots.size(); i++) {
        if (b.remaining[i] < 0)
            throw std::invalid_argument("batched_decode_step: sequence " + std::to_string(i) +
                                        " has a negative number of steps remaining");
        if (b.remaining[i] > 0 && engine.cache_len(b.slots[i]) >= engine.max_seq())
            throw std::invalid_argument("batched_decode_step: the cache of slot " + std::to_string(b.slots[i]) +
                                        " is full (" + std::to_string(engine.max_seq()) + " positions)");
    }
}

// Gaussian elimination with partial pivoting on the augmented 3x4 matrix M;
// w = the solution.
void solve3(double M[3][4], double w[3]) {
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
    for (int c = 2; c >= 0; c--) {
        double acc = M[c][3];
        for (int k = c + 1; k < 3; k++) acc -= M[c][k] * w[k];
        w[c] = acc / M[c][c];
    }
}

}  // namespace

int batched_decode_step(Engine& engine, Batch& batch) {
    check_batch(engine, batch);
    std::vector<int> rows, slots, tokens;  // the gathered, unfinished sequences
    for (std::size_t i = 0; i < batch.slots.size(); i++)
        if (batch.remaining[i] > 0) rows.push_back(int(i)), slots.push_back(batch.slots[i]), tokens.push_back(batch.next[i]);
    if (rows.empty()) return 0;
    // One forward pass for all rows: every weight matrix is streamed once.
    const float* logits = engine.decode(slots, tokens);
    const int V = engine.config().vocab_size;
    for (std::size_t r = 0; r < rows.size(); r++) {  // scatter: row r is sequence rows[r]
        batch.next[rows[r]] = greedy(logits + r * std::size_t(V), V);
        batch.remaining[rows[r]]--;
    }
    return int(rows.size());
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
    double w[3];
    solve3(M, w);
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
