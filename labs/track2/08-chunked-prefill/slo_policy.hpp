// Lab 08: the kit's side of the exercise. A StepPolicy that times every step
// and, before the next one, sets its token budget from YOUR fit_step_cost and
// budget_for_target; the batch itself is the engine's planner
// (ContinuousBatching: decode rows first, then prompt chunks, oldest first).
//
// A step's work is counted in rows: one per token, plus its attention. The
// rows of a chunk attend to the prompt already cached, which grows as the
// prompt goes through, so the same number of tokens costs more late in a
// prompt than early (the program's "same full step" lines). Counted in
// tokens, a line fitted to the steps behind would say each chunk costs what
// the earlier ones did, and each would run over; counted in rows, a late
// chunk is more rows, and the same line holds.
//
// The line gives a step's mean time; the target is on a tail (the p90 of the
// streams' gaps), so the budget keeps `spreads` times the steps' measured
// spread about the line (a fraction of a step) as margin: small on a quiet
// machine, large on a busy one, where the budget shrinks instead of missing.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "exercise.hpp"
#include "serve/step_policy.hpp"

namespace pd::lab08 {

struct SloOptions {
    double target_ms = 100;  // the p90 ITL the streams should see
    // The margin below the target, in spreads of the steps about the line
    // (exercise.hpp). Whatever the shape of the steps' noise, at most
    // 1 / (1 + k^2) of them run k spreads above the line (Cantelli's
    // inequality, for a line at their mean): at k = 3, one step in ten, what
    // a p90 target allows.
    double spreads = 3;
    int lo = 8, hi = 512;    // the budgets it may pick
    int window = 32;         // the last steps the line is fitted to (it follows a change of load)
    // (row, cached position) pairs of attention that cost about one row of
    // the weights' products (the program derives it from the model's shapes);
    // 0: attention is not counted, a row is a token.
    double pairs_per_row = 0;
    // A budget at most `grow` times the most tokens of a step in the window:
    // a line fitted to small steps only (a few decode rows, the streams'
    // short prompts) is far from its samples at a big one, so the budget
    // grows by measured doublings instead of trusting it there.
    int grow = 2;
};

class SloBudgetPolicy final : public pd::serve::StepPolicy {
public:
    using Clock = std::function<double()>;  // milliseconds, monotonic (a test passes a fake one)

    SloBudgetPolicy(const SloOptions& o, Clock now_ms) : o_(o), now_ms_(std::move(now_ms)) {
        samples_.reserve(std::size_t(o.window) + 1);  // the window never allocates while serving
        tokens_.reserve(std::size_t(o.window) + 1);
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
            samples_.push_back({last_rows_, now - last_start_ms_});
            tokens_.push_back(last_tokens_);
            if (int(samples_.size()) > o_.window) samples_.erase(samples_.begin()), tokens_.erase(tokens_.begin());
        }
        last_start_ms_ = now;
        const int most = tokens_.empty() ? 0 : *std::max_element(tokens_.begin(), tokens_.end());
        const int cap = std::max(o_.lo, std::min({o_.hi, lim.max_tokens_per_step, o_.grow * most}));
        const int top_rows = std::max(o_.lo, plan(s, lim, cap, out));
        const StepCost cost = fit_step_cost(samples_);
        const int rows = budget_for_target(cost, o_.target_ms, o_.spreads, o_.lo, top_rows);
        const int budget = largest_budget(s, lim, rows, cap, out);
        last_rows_ = plan(s, lim, budget, out);
        last_tokens_ = 0;
        for (const auto& item : out) last_tokens_ += item.n;
        budgets.push_back(budget);
        line_spreads.push_back(cost.known ? cost.spread : NAN);
    }

    // Every step so far (for the program's report and the tests): its budget,
    // and the spread of the line it was planned from (NaN: no line, lo).
    std::vector<int> budgets;
    std::vector<double> line_spreads;

private:
    // The engine's planner at `budget` tokens into out; returns the step's rows.
    int plan(const pd::serve::SchedulerState& s, const pd::serve::StepLimits& lim, int budget,
             std::vector<pd::serve::BatchItem>& out) {
        pd::serve::StepLimits mine = lim;
        mine.max_tokens_per_step = budget;
        out.clear();
        planner_.build_batch(s, mine, out);
        return rows_of(s, out);
    }

    // Tokens, plus attention in rows: n rows from cached position p attend to
    // p+1 .. p+n positions, n p + n (n + 1) / 2 pairs (a sliding-window model
    // attends fewer: the count errs on the slow side).
    int rows_of(const pd::serve::SchedulerState& s, const std::vector<pd::serve::BatchItem>& items) const {
        double rows = 0;
        for (const auto& item : items) {
            const double n = item.n, p = s.seqs[std::size_t(item.seq)].computed;
            rows += n + (o_.pairs_per_row > 0 ? (n * p + n * (n + 1) / 2) / o_.pairs_per_row : 0);
        }
        return int(std::lround(rows));
    }

    // The largest budget in [lo, cap] whose step is at most `rows` rows (lo
    // when none is): more budget never plans less work, so bisect.
    int largest_budget(const pd::serve::SchedulerState& s, const pd::serve::StepLimits& lim, int rows, int cap,
                       std::vector<pd::serve::BatchItem>& out) {
        int good = o_.lo, bad = cap + 1;
        if (plan(s, lim, cap, out) <= rows) return cap;
        while (bad - good > 1) {
            const int mid = good + (bad - good) / 2;
            (plan(s, lim, mid, out) <= rows ? good : bad) = mid;
        }
        return good;
    }

    SloOptions o_;
    Clock now_ms_;
    pd::serve::ContinuousBatching planner_;
    std::vector<StepSample> samples_;  // the last `window` steps, oldest first
    std::vector<int> tokens_;          // their tokens
    int last_tokens_ = 0, last_rows_ = 0;
    double last_start_ms_ = 0;
};

}  // namespace pd::lab08
