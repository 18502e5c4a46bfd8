// Lab 17 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1 and 2).
// Build with ./kit build (or ninja -C build), then run the tests and the program:
//   meson test -C build --suite track4-17
//   ./kit run 17
#include "exercise.hpp"

#include <algorithm>

#include "todo_exercise.hpp"

namespace pd::lab17 {

ServeConfig choose_config(const TraceSummary& t, const Slo& slo, const PrecisionCosts& costs,
                          const MemoryCap& cap) {
    (void)t, (void)slo, (void)costs, (void)cap;
    TODO_EXERCISE(
        "README task 1: what budget keeps one step under the ITL objective, what block size lets "
        "the shared prefixes be found, and which precision keeps the tokens above the quality floor?");
}

void GoodputPolicy::retire(const SchedulerState& s, std::vector<int>& out) {
    (void)s, (void)out;
    TODO_EXERCISE("README task 2: every cancelled sequence, waiting or running (lab 06's retire)");
}

void GoodputPolicy::admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) {
    (void)s, (void)lim, (void)out;
    TODO_EXERCISE(
        "README task 2: which waiting request, if started now (time_.now_s), is most likely to meet its "
        "TTFT, and which can no longer?");
}

void GoodputPolicy::build_batch(const SchedulerState& s, const StepLimits& lim, std::vector<BatchItem>& out) {
    (void)s, (void)lim, (void)out;
    TODO_EXERCISE(
        "README task 2: price the batch with the cost model as you build it: decode rows first, then "
        "prompt chunks while the step stays under the ITL objective");
}

}  // namespace pd::lab17
