// Lab 08 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track2/08-chunked-prefill/exercise.hpp"

#include <algorithm>
#include <cmath>

#include "common.hpp"

namespace pd::lab08 {

namespace {

// The root mean square of the samples' distances from the line w + b x,
// each relative to the line there (above 0: w >= 0, b > 0, a row or more).
double spread(std::span<const StepSample> samples, double w, double b) {
    double sq = 0;
    for (const StepSample& s : samples) {
        const double line = w + b * s.rows, off = (s.ms - line) / line;
        sq += off * off;
    }
    return std::sqrt(sq / double(samples.size()));
}

}  // namespace

StepCost fit_step_cost(std::span<const StepSample> samples) {
    if (samples.empty()) return {};
    double mean_x = 0, mean_y = 0;
    for (const StepSample& s : samples) mean_x += s.rows, mean_y += s.ms;
    mean_x /= double(samples.size()), mean_y /= double(samples.size());
    double sxy = 0, sxx = 0;
    for (const StepSample& s : samples) {
        sxy += (s.rows - mean_x) * (s.ms - mean_y);
        sxx += (s.rows - mean_x) * (s.rows - mean_x);
    }
    // Rule a: one row count says nothing about the slope.
    if (sxx == 0) return {};
    const double slope = sxy / sxx;
    // Rule b: noise made bigger steps look no dearer: no line to trust.
    if (slope <= 0) return {};
    const double intercept = mean_y - slope * mean_x;
    if (intercept >= 0) return {intercept, slope, true, spread(samples, intercept, slope)};
    // Rule c: no step costs less than nothing: the line through the origin.
    double x2 = 0, xy = 0;
    for (const StepSample& s : samples) x2 += double(s.rows) * s.rows, xy += s.rows * s.ms;
    return {0, xy / x2, true, spread(samples, 0, xy / x2)};
}

int budget_for_target(const StepCost& cost, double target_ms, double spreads, int lo, int hi) {
    if (!(target_ms > 0)) fail("the latency target must be a positive number of ms, got {}", target_ms);
    if (!(spreads >= 0)) fail("the margin must be 0 or more spreads, got {}", spreads);
    if (lo < 1) fail("the smallest budget must be at least 1 row, got {}", lo);
    if (lo > hi) fail("the smallest budget {} is above the largest {}", lo, hi);
    if (!cost.known) return lo;
    // What the line may spend: the target less the margin a step's noise needs.
    const double line_ms = target_ms / (1 + spreads * cost.spread);
    if (cost.per_row_ms == 0) return cost.weights_ms <= line_ms ? hi : lo;
    // Solve weights + R * per_row <= line_ms for the largest whole R, in
    // doubles first: a target far above the line overflows an int.
    const double fits = std::floor((line_ms - cost.weights_ms) / cost.per_row_ms);
    return int(std::clamp(fits, double(lo), double(hi)));
}

}  // namespace pd::lab08
