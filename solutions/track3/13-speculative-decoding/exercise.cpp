// Lab 13 reference solution.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace pd::lab13 {

namespace {

// The shape rules both accept rules share; `rows` is the target's matrix (logits or p).
void check_shapes(const Proposal& pr, std::span<const float> rows, const char* what) {
    if (pr.k < 0) throw std::invalid_argument("k must be >= 0, got " + std::to_string(pr.k));
    if (pr.vocab < 1) throw std::invalid_argument("vocab must be >= 1, got " + std::to_string(pr.vocab));
    if (int(pr.draft.size()) != pr.k)
        throw std::invalid_argument("draft holds " + std::to_string(pr.draft.size()) + " tokens, k is " +
                                    std::to_string(pr.k));
    if (rows.size() != std::size_t(pr.k + 1) * pr.vocab)
        throw std::invalid_argument(std::string(what) + " must hold (k+1) * vocab values");
    for (int d : pr.draft)
        if (d < 0 || d >= pr.vocab) throw std::invalid_argument("draft token " + std::to_string(d) + " outside the vocabulary");
}

// First index of the largest value.
int first_max(std::span<const float> row) {
    return int(std::max_element(row.begin(), row.end()) - row.begin());
}

std::span<const float> row_of(std::span<const float> m, int i, int vocab) {
    return m.subspan(std::size_t(i) * vocab, std::size_t(vocab));
}

}  // namespace

Verdict accept_greedy(const Proposal& pr) {
    check_shapes(pr, pr.target_logits, "target_logits");
    for (int i = 0; i < pr.k; i++) {
        const int want = first_max(row_of(pr.target_logits, i, pr.vocab));
        if (want != pr.draft[i]) return {i, want};
    }
    return {pr.k, first_max(row_of(pr.target_logits, pr.k, pr.vocab))};
}

Verdict accept_sampled(const Proposal& pr, Rng& rng) {
    check_shapes(pr, pr.target_probs, "target_probs");
    if (pr.draft_probs.size() != std::size_t(pr.k) * pr.vocab)
        throw std::invalid_argument("draft_probs must hold k * vocab values");
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int i = 0; i < pr.k; i++) {
        std::span<const float> p = row_of(pr.target_probs, i, pr.vocab), q = row_of(pr.draft_probs, i, pr.vocab);
        const int d = pr.draft[i];
        if (!(q[d] > 0.0f)) throw std::invalid_argument("q gives draft token " + std::to_string(d) + " no mass");
        if (unit(rng) * q[d] < p[d]) continue;  // kept with probability min(1, p/q)
        std::vector<float> residual(pr.vocab);
        for (int j = 0; j < pr.vocab; j++) residual[j] = std::max(0.0f, p[j] - q[j]);
        return {i, draw_from(residual, rng)};
    }
    return {pr.k, draw_from(row_of(pr.target_probs, pr.k, pr.vocab), rng)};
}

double expected_tokens_per_pass(double alpha, int k) {
    if (!(alpha >= 0.0 && alpha <= 1.0)) throw std::invalid_argument("alpha must be in [0, 1]");
    if (k < 0) throw std::invalid_argument("k must be >= 0, got " + std::to_string(k));
    double sum = 0.0, term = 1.0;
    for (int i = 0; i <= k; i++, term *= alpha) sum += term;
    return sum;
}

}  // namespace pd::lab13
