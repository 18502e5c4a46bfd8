// Serving metrics with vLLM's names and definitions (`vllm bench serve`), so a
// kit run reads next to a vLLM one:
//   TTFT  time to first token: first token's time - arrival
//   TPOT  time per output token after the first, per request:
//         (e2el - ttft) / (n - 1); only requests with n > 1 have one
//   ITL   inter-token latency: every gap between consecutive tokens, pooled
//         over all requests (a long answer gives more samples than a short one)
//   E2EL  end-to-end latency: last token's time - arrival
// each as mean, median, std (population, numpy's np.std), p90 and p99 (linear
// interpolation, numpy's np.percentile), in ms; and over the run:
//   request_throughput      completed requests / duration  (req/s)
//   output_throughput       output tokens / duration       (tok/s)
//   total_token_throughput  (prompt + output tokens) / duration
//   request_goodput         completed requests within every given limit / duration
// Requests that did not complete (cancelled, failed) count in none of them.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pd::serve {

// One request as its client saw it; all times in seconds on one clock.
struct RequestTiming {
    int id = 0;
    double arrival_s = 0;
    std::vector<double> token_s;  // (n) when each output token reached the client, in order
    int prompt_tokens = 0;
    bool completed = true;        // false: cancelled or failed (left out of every metric)
};

// TTFT, TPOT, E2EL and ITLs of one request, in ms. UserError when a completed
// request has no token, a token precedes the arrival or the times go backwards.
struct RequestLatency {
    double ttft_ms = 0;
    std::optional<double> tpot_ms;  // none when n == 1
    double e2el_ms = 0;
    std::vector<double> itl_ms;     // (n - 1)
};
RequestLatency request_latency(const RequestTiming& r);

struct MetricSummary {
    int n = 0;  // samples
    double mean = 0, median = 0, std = 0, p90 = 0, p99 = 0;
};
MetricSummary summarize_metric(const std::vector<double>& samples_ms);

// Goodput counts a request only when it meets every limit given (ms).
// vLLM's rule for a one-token answer: its TPOT counts as 0.
struct GoodputLimits {
    std::optional<double> ttft_ms, tpot_ms, e2el_ms;
    bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

struct ServingMetrics {
    int completed = 0, failed = 0;
    long long total_input = 0, total_output = 0;
    double duration_s = 0;
    double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
    std::optional<double> request_goodput;  // only when limits were given
    MetricSummary ttft_ms, tpot_ms, itl_ms, e2el_ms;
};

// `duration_s`: the whole run, from its start to the last token (> 0).
ServingMetrics compute_serving_metrics(std::span<const RequestTiming> requests,
                                       double duration_s, const GoodputLimits& limits = {});

// The table `vllm bench serve` prints, section by section.
std::string format_metrics_table(const ServingMetrics& m, const std::string& title);

// vLLM's JSON keys: completed, request_throughput, ..., mean_ttft_ms,
// median_ttft_ms, std_ttft_ms, p90_ttft_ms, p99_ttft_ms, ... (tpot, itl, e2el).
nlohmann::json metrics_json(const ServingMetrics& m);

}  // namespace pd::serve
