// Lab 04 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track1/04-ttft-and-tpot/exercise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace pd::lab04 {

RequestMetrics request_metrics(double submit_ms, std::span<const double> token_times_ms) {
    const std::size_t n = token_times_ms.size();
    if (n == 0)
        throw std::invalid_argument(
            "request_metrics: no output tokens, so there is no first token to time");
    if (token_times_ms[0] < submit_ms)
        throw std::invalid_argument("request_metrics: the first token (at " +
                                    std::to_string(token_times_ms[0]) +
                                    " ms) arrives before the request was submitted (at " +
                                    std::to_string(submit_ms) + " ms)");
    RequestMetrics m;
    m.output_tokens = int(n);
    m.ttft_ms = token_times_ms[0] - submit_ms;
    m.e2el_ms = token_times_ms[n - 1] - submit_ms;
    m.itls_ms.reserve(n - 1);
    for (std::size_t k = 1; k < n; k++) {
        if (token_times_ms[k] < token_times_ms[k - 1])
            throw std::invalid_argument("request_metrics: token " + std::to_string(k) +
                                        " arrives before token " + std::to_string(k - 1));
        m.itls_ms.push_back(token_times_ms[k] - token_times_ms[k - 1]);
    }
    // One token: the answer was over at its first token, there is no "per
    // output token after the first" to average.
    if (n > 1) m.tpot_ms = (m.e2el_ms - m.ttft_ms) / double(n - 1);
    return m;
}

std::vector<double> pooled_itl(std::span<const RequestMetrics> requests) {
    std::vector<double> all;
    std::size_t total = 0;
    for (const auto& r : requests) total += r.itls_ms.size();
    all.reserve(total);
    for (const auto& r : requests) all.insert(all.end(), r.itls_ms.begin(), r.itls_ms.end());
    return all;
}

namespace {

// v sorted ascending, not empty.
double percentile_sorted(const std::vector<double>& v, double p) {
    const double rank = p / 100.0 * double(v.size() - 1);
    const std::size_t lo = std::size_t(std::floor(rank)), hi = std::size_t(std::ceil(rank));
    return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

}  // namespace

Summary summarize_metric(std::span<const double> values) {
    Summary s;
    s.n = int(values.size());
    if (values.empty()) {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        s.mean = s.median = s.p90 = s.p99 = nan;
        return s;
    }
    std::vector<double> v(values.begin(), values.end());
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / double(v.size());
    s.median = percentile_sorted(v, 50);
    s.p90 = percentile_sorted(v, 90);
    s.p99 = percentile_sorted(v, 99);
    return s;
}

double e2e_latency(double ttft_ms, double tpot_ms, int output_tokens) {
    if (output_tokens < 1)
        throw std::invalid_argument("e2e_latency: an answer has at least one output token, got " +
                                    std::to_string(output_tokens));
    return ttft_ms + double(output_tokens - 1) * tpot_ms;
}

}  // namespace pd::lab04
