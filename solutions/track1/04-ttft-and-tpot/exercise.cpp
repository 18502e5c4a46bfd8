// Lab 04 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track1/04-ttft-and-tpot/exercise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace pd::lab04 {

namespace {

void check_service(const ServiceTrace& s, std::size_t i) {
    auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
    bool any = bad(s.first_token_ms);
    for (double d : s.step_ms) any = any || bad(d);
    if (any)
        throw std::invalid_argument("schedule_fcfs: request " + std::to_string(i) +
                                    " has a negative or non-finite service time");
}

// The serving order: by arrival time, equal arrivals by index (FCFS).
std::vector<std::size_t> arrival_order(std::span<const double> arrival_ms) {
    std::vector<std::size_t> order(arrival_ms.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return arrival_ms[a] < arrival_ms[b]; });
    return order;
}

}  // namespace

std::vector<Scheduled> schedule_fcfs(std::span<const double> arrival_ms,
                                     std::span<const ServiceTrace> services) {
    if (arrival_ms.size() != services.size())
        throw std::invalid_argument("schedule_fcfs: " + std::to_string(arrival_ms.size()) +
                                    " arrivals but " + std::to_string(services.size()) + " services");
    for (std::size_t i = 0; i < arrival_ms.size(); i++) {
        if (!std::isfinite(arrival_ms[i]) || arrival_ms[i] < 0)
            throw std::invalid_argument("schedule_fcfs: request " + std::to_string(i) +
                                        " arrives at " + std::to_string(arrival_ms[i]) + " ms");
        check_service(services[i], i);
    }
    std::vector<Scheduled> out(arrival_ms.size());
    double free_at = 0;  // when the one server finishes what it is doing
    for (std::size_t i : arrival_order(arrival_ms)) {
        Scheduled& s = out[i];
        s.arrival_ms = arrival_ms[i];
        s.start_ms = std::max(s.arrival_ms, free_at);  // wait while someone else is served
        s.queue_ms = s.start_ms - s.arrival_ms;
        double t = s.start_ms + services[i].first_token_ms;
        s.token_times_ms.push_back(t);
        for (double step : services[i].step_ms) s.token_times_ms.push_back(t += step);
        free_at = t;  // the last token is out: the next request may start
    }
    return out;
}

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

namespace {

void check_limit(const std::optional<double>& limit, const char* name) {
    if (limit && !(std::isfinite(*limit) && *limit >= 0))
        throw std::invalid_argument(std::string("goodput: the ") + name +
                                    " limit must be a finite number of ms, 0 or more, got " + std::to_string(*limit));
}

bool within(const std::optional<double>& limit, double value) { return !limit || value <= *limit; }

}  // namespace

Goodput goodput(std::span<const Scheduled> scheduled, std::span<const RequestMetrics> metrics, const Slo& slo) {
    if (scheduled.size() != metrics.size())
        throw std::invalid_argument("goodput: " + std::to_string(scheduled.size()) + " scheduled requests but " +
                                    std::to_string(metrics.size()) + " metrics");
    if (scheduled.empty()) throw std::invalid_argument("goodput: no requests");
    check_limit(slo.ttft_ms, "TTFT");
    check_limit(slo.tpot_ms, "TPOT");
    check_limit(slo.e2el_ms, "E2EL");
    double first = scheduled[0].arrival_ms, last = -std::numeric_limits<double>::infinity();
    int good = 0;
    for (std::size_t i = 0; i < scheduled.size(); i++) {
        if (scheduled[i].token_times_ms.empty()) throw std::invalid_argument("goodput: a request has no token");
        first = std::min(first, scheduled[i].arrival_ms);
        last = std::max(last, scheduled[i].token_times_ms.back());
        const RequestMetrics& m = metrics[i];
        // No TPOT (one token): nothing after the first token can be too slow.
        if (within(slo.ttft_ms, m.ttft_ms) && (!m.tpot_ms || within(slo.tpot_ms, *m.tpot_ms)) &&
            within(slo.e2el_ms, m.e2el_ms))
            good++;
    }
    const double span_ms = last - first;
    if (!(span_ms > 0)) throw std::invalid_argument("goodput: the run took no time (first arrival to last token)");
    return {good, good / (span_ms / 1000.0)};
}

}  // namespace pd::lab04
