// Lab 01 starter: replace each TODO_EXERCISE with your implementation.
// The declarations, with shapes and rules, are in exercise.hpp.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "todo_exercise.hpp"  // TODO_EXERCISE and pd::lab::NotImplemented

namespace pd::lab01 {

int greedy(std::span<const float> logits) {
    (void)logits;
    TODO_EXERCISE("return the index of the largest logit; on a tie keep the first (lowest) index, "
                  "and fail with pd::fail(...) when the span is empty");
}

std::vector<float> softmax_with_temperature(std::span<const float> logits, float T) {
    (void)logits, (void)T;
    TODO_EXERCISE("check T > 0 and finite, then p_i = exp((x_i - max) / T) / sum_j exp((x_j - max) / T); "
                  "subtracting the max keeps exp() from overflowing");
}

int sample_top_k(std::span<const float> logits, float T, int k, std::mt19937_64& rng) {
    (void)logits, (void)T, (void)k, (void)rng;
    TODO_EXERCISE("check T and 1 <= k <= vocab; sort ids by logit (ties: lower id first) and keep k; "
                  "weights exp((x - max) / T) over those k; draw u in [0, total) with rng and walk the "
                  "running sum until it passes u");
}

}  // namespace pd::lab01
