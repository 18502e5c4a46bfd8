// Lab 01 reference solution.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pd::lab01 {

namespace {

void check_temperature(float T) {
    if (!std::isfinite(T) || !(T > 0.0f))
        fail("temperature must be a finite number > 0, got {} (temperature 0 means greedy: use greedy())", T);
}

}  // namespace

int greedy(std::span<const float> logits) {
    if (logits.empty()) fail("greedy() needs at least one logit, got an empty row");
    int best = 0;
    for (int i = 1; i < int(logits.size()); i++)
        if (logits[i] > logits[best]) best = i;  // strict >: a tie keeps the earlier index
    return best;
}

std::vector<float> softmax_with_temperature(std::span<const float> logits, float T) {
    check_temperature(T);
    if (logits.empty()) fail("softmax needs at least one logit, got an empty row");
    const float mx = *std::max_element(logits.begin(), logits.end());
    std::vector<float> p(logits.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < logits.size(); i++) {
        p[i] = std::exp((logits[i] - mx) / T);  // <= 1: the largest becomes exp(0)
        sum += p[i];
    }
    for (float& x : p) x = float(x / sum);
    return p;
}

int sample_top_k(std::span<const float> logits, float T, int k, std::mt19937_64& rng) {
    check_temperature(T);
    const int n = int(logits.size());
    if (n == 0) fail("sampling needs at least one logit, got an empty row");
    if (k < 1 || k > n) fail("top-k must be between 1 and the vocabulary size {}, got {}", n, k);
    // The k best ids, best first; equal logits keep the lower id first.
    std::vector<int> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    // Unnormalised softmax weights over the candidates; the draw does the normalising.
    std::vector<double> w(k);
    double total = 0.0;
    for (int i = 0; i < k; i++) {
        w[i] = std::exp(double(logits[ids[i]] - logits[ids[0]]) / T);
        total += w[i];
    }
    double u = std::uniform_real_distribution<double>(0.0, total)(rng);
    for (int i = 0; i < k; i++) {
        u -= w[i];
        if (u < 0.0) return ids[i];
    }
    return ids[k - 1];  // rounding left u a hair above zero
}

}  // namespace pd::lab01
