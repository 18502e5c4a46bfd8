// What the server counts, served at GET /metrics in the Prometheus text format
// (version 0.0.4). Names follow vLLM's where one exists (vllm:time_to_first_token_seconds
// -> pdlab_time_to_first_token_seconds), so dashboards and students can compare.
//
// Server-side times start when the request was accepted (parsed, checked and
// queued) and end when the worker chose a token: they include queueing but
// not the network, the HTTP parsing or the client's reading; the client's
// TTFT (pdlab loadgen) includes those too. The model-side part of TTFT runs
// from the worker taking the request to its first token: the prefill pass
// (serial worker), or the scheduler steps that computed its prompt alongside
// other requests' tokens (batching worker).
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace pd::serve {

// A cumulative histogram: counts of observations <= each upper bound.
class Histogram {
public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double v);
    // "# HELP / # TYPE" and the _bucket{le=..}, _sum and _count lines.
    std::string render(const std::string& name, const std::string& help) const;
    long long count() const { return count_; }

private:
    std::vector<double> bounds_;    // increasing; +Inf is implicit
    std::vector<long long> counts_; // (bounds + 1) observations per bucket, not cumulative
    double sum_ = 0;
    long long count_ = 0;
};

class ServerMetrics {
public:
    ServerMetrics();

    void queued();                                       // a request joins the queue
    void started(double queue_s);                        // the worker takes it
    void first_token(double ttft_s, double prefill_s);   // server-side TTFT; its model-side part
    void next_token(double itl_s);                       // each later token
    // The end of a request: `reason` is its finish_reason; `ran` false when it
    // never left the queue.
    void finished(const std::string& reason, int prompt_tokens, int generated_tokens, bool ran);
    void rejected();                                     // a 4xx answer
    void kv_blocks(int used, int total);

    std::string render() const;

private:
    mutable std::mutex mu_;
    int running_ = 0, waiting_ = 0, kv_used_ = 0, kv_total_ = 0;
    long long prompt_tokens_ = 0, generation_tokens_ = 0, rejected_ = 0;
    std::vector<std::pair<std::string, long long>> finished_;  // (finish_reason, count)
    Histogram ttft_, itl_, queue_, prefill_;
};

}  // namespace pd::serve
