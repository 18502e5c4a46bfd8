// Lab 08 starter: replace the TODO_EXERCISE with your code (README.md, the task).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track2-08
#include "exercise.hpp"

#include <algorithm>

#include "common.hpp"
#include "todo_exercise.hpp"

namespace pd::lab08 {

void plan_step(const SchedulerState& s, int budget, std::vector<BatchItem>& out) {
    (void)s, (void)budget, (void)out;
    TODO_EXERCISE(
        "README \"The planner's rules\": reject a budget below 1 token first; then two passes over the "
        "running ids (decode rows, then prefill chunks) with a count of the tokens left");
}

}  // namespace pd::lab08
