// Lab 08 starter: replace each TODO_EXERCISE with your code (README.md, the tasks).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track2-08
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "todo_exercise.hpp"

namespace pd::lab08 {

StepCost fit_step_cost(std::span<const StepSample> samples) {
    (void)samples;
    TODO_EXERCISE(
        "README, task 1 (and exercise.hpp): the means of rows and ms, then the two sums of the slope; "
        "then rules a (one row count), b (a slope of 0 or less) and c (a negative intercept), in that order; "
        "then the spread of the samples about the line you return");
}

int budget_for_target(const StepCost& cost, double target_ms, double spreads, int lo, int hi) {
    (void)cost, (void)target_ms, (void)spreads, (void)lo, (void)hi;
    TODO_EXERCISE(
        "README, task 2: reject bad arguments first; then solve "
        "(weights_ms + R * per_row_ms) * (1 + spreads * spread) <= target_ms for the largest whole R and clamp it to "
        "[lo, hi]");
}

}  // namespace pd::lab08
