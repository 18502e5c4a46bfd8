#include "serve/server_metrics.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pd::serve {

namespace {

// From 0.5 ms (one tiny-model decode step) to a minute of queueing.
std::vector<double> latency_buckets() {
    return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
            0.5,    0.75,  1.0,    2.5,   5.0,  7.5,   10.0, 20.0,  40.0, 60.0};
}

std::string gauge(const char* name, const char* help, double v) {
    return fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, v);
}

std::string counter(const char* name, const char* help, long long v) {
    return fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, v);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
    counts_[std::size_t(it - bounds_.begin())] += 1;
    sum_ += v;
    count_ += 1;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
    std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
    long long cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
    }
    out += fmt::format("{0}_bucket{{le=\"+Inf\"}} {1}\n{0}_sum {2}\n{0}_count {1}\n", name, count_, sum_);
    return out;
}

ServerMetrics::ServerMetrics()
    : ttft_(latency_buckets()), itl_(latency_buckets()), queue_(latency_buckets()), prefill_(latency_buckets()) {}

void ServerMetrics::queued() {
    std::lock_guard lock(mu_);
    waiting_ += 1;
}

void ServerMetrics::started(double queue_s) {
    std::lock_guard lock(mu_);
    waiting_ -= 1;
    running_ += 1;
    queue_.observe(queue_s);
}

void ServerMetrics::first_token(double ttft_s, double prefill_s) {
    std::lock_guard lock(mu_);
    ttft_.observe(ttft_s);
    prefill_.observe(prefill_s);
}

void ServerMetrics::next_token(double itl_s) {
    std::lock_guard lock(mu_);
    itl_.observe(itl_s);
}

void ServerMetrics::finished(const std::string& reason, int prompt_tokens, int generated_tokens, bool ran) {
    std::lock_guard lock(mu_);
    (ran ? running_ : waiting_) -= 1;
    prompt_tokens_ += prompt_tokens;
    generation_tokens_ += generated_tokens;
    auto it = std::find_if(finished_.begin(), finished_.end(), [&](const auto& f) { return f.first == reason; });
    if (it == finished_.end()) it = finished_.insert(finished_.end(), {reason, 0});
    it->second += 1;
}

void ServerMetrics::rejected() {
    std::lock_guard lock(mu_);
    rejected_ += 1;
}

void ServerMetrics::kv_blocks(int used, int total) {
    std::lock_guard lock(mu_);
    kv_used_ = used;
    kv_total_ = total;
}

std::string ServerMetrics::render() const {
    std::lock_guard lock(mu_);
    std::string out = gauge("pdlab_num_requests_running", "Requests the worker is generating now.", running_) +
                      gauge("pdlab_num_requests_waiting", "Requests queued for the worker.", waiting_) +
                      gauge("pdlab_kv_blocks_used", "KV cache blocks held by running requests.", kv_used_) +
                      gauge("pdlab_kv_blocks_free", "KV cache blocks a new request can take (cached prefixes included).",
                            kv_total_ - kv_used_) +
                      gauge("pdlab_kv_blocks_total", "KV cache blocks the server has.", kv_total_) +
                      counter("pdlab_prompt_tokens_total", "Prompt tokens of finished requests.", prompt_tokens_) +
                      counter("pdlab_generation_tokens_total", "Tokens generated, all requests.", generation_tokens_) +
                      counter("pdlab_requests_rejected_total", "Requests answered 4xx.", rejected_);
    out += "# HELP pdlab_request_success_total Requests ended, by finish_reason.\n"
           "# TYPE pdlab_request_success_total counter\n";
    for (const auto& [reason, n] : finished_)
        out += fmt::format("pdlab_request_success_total{{finished_reason=\"{}\"}} {}\n", reason, n);
    out += ttft_.render("pdlab_time_to_first_token_seconds", "From acceptance to the first token, queueing included.");
    out += itl_.render("pdlab_inter_token_latency_seconds", "Between consecutive tokens of a request.");
    out += queue_.render("pdlab_request_queue_time_seconds", "From acceptance until the worker takes it (serial) or the scheduler admits it.");
    out += prefill_.render("pdlab_request_prefill_time_seconds", "Model-side: from the worker taking the request to its first token (its prefill).");
    return out;
}

}  // namespace pd::serve
