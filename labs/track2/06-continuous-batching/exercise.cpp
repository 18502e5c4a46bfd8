// Lab 06 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-3).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track2-06
#include "exercise.hpp"

#include <algorithm>

#include "todo_exercise.hpp"

namespace pd::lab06 {

void StudentBatching::retire(const SchedulerState& s, std::vector<int>& out) {
    (void)s, (void)out;
    TODO_EXERCISE("README task 1: look at SeqState::cancelled of every waiting, then every running id");
}

void StudentBatching::admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) {
    (void)s, (void)lim, (void)out;
    TODO_EXERCISE(
        "README \"Static and continuous batching\": how many may still start, and when may a "
        "static batch start at all?");
}

void StudentBatching::build_batch(const SchedulerState& s, const StepLimits& lim,
                                  std::vector<BatchItem>& out) {
    (void)s, (void)lim, (void)out;
    TODO_EXERCISE(
        "README \"One step, one batch\": two passes over the running ids, decode rows first; "
        "keep a count of the tokens left in the budget");
}

}  // namespace pd::lab06
