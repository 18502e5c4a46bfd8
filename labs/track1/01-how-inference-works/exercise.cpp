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
    TODO_EXERCISE("handout task 2 and the paragraph \"From logits to a token\"; exercise.hpp gives the tie rule and what an "
                  "empty row must do");
}

std::vector<float> softmax_with_temperature(std::span<const float> logits, float T) {
    (void)logits, (void)T;
    TODO_EXERCISE("handout task 3 and the paragraph \"From logits to a token\"; exercise.hpp has the formula and the valid "
                  "temperatures; the tests' huge-logits case says why the max matters");
}

int sample_top_k(std::span<const float> logits, float T, int k, std::mt19937_64& rng) {
    (void)logits, (void)T, (void)k, (void)rng;
    TODO_EXERCISE("handout task 4 and the paragraph \"From logits to a token\"; exercise.hpp says which ids may come out and where "
                  "all randomness must come from");
}

}  // namespace pd::lab01
