// Lab 04: what you write. The latency metrics a serving benchmark reports,
// computed from what a client can see: when it sent a request, and when each
// output token reached it. All times are in milliseconds on one clock.
//
// Names follow vLLM's benchmark (ttft, tpot, itl, e2el), so your numbers can be
// read next to theirs.
#pragma once

#include <optional>
#include <span>
#include <vector>

namespace pd::lab04 {

// One request, seen from the client.
struct RequestMetrics {
    int output_tokens = 0;          // tokens that reached the client (n)
    double ttft_ms = 0;             // time to first token: token_times[0] - submit
    std::optional<double> tpot_ms;  // time per output token after the first:
                                    //   (e2el - ttft) / (n - 1); no value when n == 1
    double e2el_ms = 0;             // end-to-end latency: token_times[n-1] - submit
    std::vector<double> itls_ms;    // (n - 1) inter-token latencies: token_times[k] - token_times[k-1]
};

// The metrics of one request from its submit time and the arrival time of
// each of its output tokens (token_times_ms: (n), in order).
// Throws std::invalid_argument when token_times_ms is empty (a request that
// produced nothing has no first token), when a token arrives before the submit
// time, or when a timestamp is earlier than the one before it.
RequestMetrics request_metrics(double submit_ms, std::span<const double> token_times_ms);

// Every inter-token gap of every request, in request order then token order:
// the population the ITL percentiles are taken over (one sample per gap, so a
// long answer weighs more than a short one, unlike the mean of TPOT).
std::vector<double> pooled_itl(std::span<const RequestMetrics> requests);

// mean, median, p90 and p99 of a metric. Percentiles use linear interpolation
// between the sorted values (numpy's default): the p-th percentile of n sorted
// values sits at rank p/100 * (n - 1), between the two values around it.
// An empty input gives n = 0 and NaN everywhere (no data is not 0 ms).
struct Summary {
    int n = 0;
    double mean = 0, median = 0, p90 = 0, p99 = 0;
};
Summary summarize_metric(std::span<const double> values);

// The end-to-end latency that a TTFT and an average TPOT imply for an answer of
// `output_tokens` tokens: the first token after ttft, then one every tpot.
// Throws std::invalid_argument when output_tokens < 1.
double e2e_latency(double ttft_ms, double tpot_ms, int output_tokens);

}  // namespace pd::lab04
