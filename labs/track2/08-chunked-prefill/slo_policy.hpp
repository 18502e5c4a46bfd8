// Lab 08: the kit's side of the exercise. A StepPolicy that times every step
// and, before the next one, sets its token budget from YOUR fit_step_cost and
// budget_for_target; the batch itself is the engine's planner
// (ContinuousBatching: decode rows first, then prompt chunks, oldest first).
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "exercise.hpp"
#include "serve/step_policy.hpp"

namespace pd::lab08 {

struct SloOptions {
    double target_ms = 100;  // the p99 ITL the streams should see
    double aim = 0.8;        // the budget aims at aim * target: a step may run slower than the line says
    int lo = 8, hi = 512;    // the budgets it may pick
    int window = 32;         // the last steps the line is fitted to (it follows a change of load)
};

class SloBudgetPolicy final : public pd::serve::StepPolicy {
public:
    using Clock = std::function<double()>;  // milliseconds, monotonic (a test passes a fake one)

    SloBudgetPolicy(const SloOptions& o, Clock now_ms) : o_(o), now_ms_(std::move(now_ms)) {
        samples_.reserve(std::size_t(o.window) + 1);  // the window never allocates while serving
    }

    void retire(const pd::serve::SchedulerState& s, std::vector<int>& out) override { planner_.retire(s, out); }
    void admit(const pd::serve::SchedulerState& s, const pd::serve::StepLimits& lim, std::vector<int>& out) override {
        planner_.admit(s, lim, out);
    }

    // Called once a step, before the engine runs: the time since the last call
    // is the last step's, so it becomes a sample first.
    void build_batch(const pd::serve::SchedulerState& s, const pd::serve::StepLimits& lim,
                     std::vector<pd::serve::BatchItem>& out) override {
        const double now = now_ms_();
        if (last_tokens_ > 0) {
            samples_.push_back({last_tokens_, now - last_start_ms_});
            if (int(samples_.size()) > o_.window) samples_.erase(samples_.begin());
        }
        last_start_ms_ = now;
        pd::serve::StepLimits mine = lim;
        mine.max_tokens_per_step = budget_for_target(fit_step_cost(samples_), o_.aim * o_.target_ms, o_.lo,
                                                     std::min(o_.hi, lim.max_tokens_per_step));
        planner_.build_batch(s, mine, out);
        last_tokens_ = 0;
        for (const auto& item : out) last_tokens_ += item.n;
        budgets.push_back(mine.max_tokens_per_step);
    }

    std::vector<int> budgets;  // the budget of every step so far (for the program's report and the tests)

private:
    SloOptions o_;
    Clock now_ms_;
    pd::serve::ContinuousBatching planner_;
    std::vector<StepSample> samples_;  // the last `window` steps, oldest first
    int last_tokens_ = 0;
    double last_start_ms_ = 0;
};

}  // namespace pd::lab08
