// Lab 05 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-2).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track1-05
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "todo_exercise.hpp"
#include "sampler.hpp"  // pd::argmax(logits, n)

namespace pd::lab05 {

const float* batched_decode_step(Engine& engine, std::span<const int> slots, std::span<int> tokens) {
    (void)engine, (void)slots, (void)tokens;
    TODO_EXERCISE(
        "one call: const float* logits = engine.decode(slots, tokens); it returns (B, vocab) "
        "logits, row r for slots[r]. Then tokens[r] = pd::argmax(logits + r * vocab, vocab) for "
        "each r (vocab = engine.config().vocab_size), and return logits");
}

Fit fit_linear_quadratic(std::span<const double> P, std::span<const double> ms) {
    (void)P, (void)ms;
    TODO_EXERCISE(
        "check sizes and that there are >= 3 distinct P (std::invalid_argument); scale x = P / "
        "max|P| so the numbers stay near 1; build the 3x3 normal equations A^T A w = A^T y for "
        "the columns [1, x, x^2]; solve (Gaussian elimination or Cramer's rule); undo the "
        "scaling: a = w1 / s, b = w2 / s^2; then r2 = 1 - SS_res / SS_tot");
}

}  // namespace pd::lab05
