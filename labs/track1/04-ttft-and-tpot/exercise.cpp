// Lab 04 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-4).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track1-04
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab04 {

RequestMetrics request_metrics(double submit_ms, std::span<const double> token_times_ms) {
    (void)submit_ms, (void)token_times_ms;
    TODO_EXERCISE(
        "check the input (empty, before submit, going backwards: std::invalid_argument), then "
        "ttft = t[0] - submit, e2el = t[n-1] - submit, itls[k-1] = t[k] - t[k-1], and "
        "tpot = (e2el - ttft) / (n - 1) only when n > 1 (leave the optional empty for n == 1)");
}

std::vector<double> pooled_itl(std::span<const RequestMetrics> requests) {
    (void)requests;
    TODO_EXERCISE("append every request's itls_ms, in request order, to one vector");
}

Summary summarize_metric(std::span<const double> values) {
    (void)values;
    TODO_EXERCISE(
        "copy and sort the values; mean = sum / n; percentile p sits at rank r = p/100 * (n - 1): "
        "take v[floor(r)] + (v[ceil(r)] - v[floor(r)]) * (r - floor(r)); median is p = 50. "
        "Empty input: n = 0 and NaN (std::numeric_limits<double>::quiet_NaN()) for the rest");
}

double e2e_latency(double ttft_ms, double tpot_ms, int output_tokens) {
    (void)ttft_ms, (void)tpot_ms, (void)output_tokens;
    TODO_EXERCISE(
        "the first token arrives at ttft, each of the other n - 1 one tpot later; throw "
        "std::invalid_argument for n < 1");
}

}  // namespace pd::lab04
