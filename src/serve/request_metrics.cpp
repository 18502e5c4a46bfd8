#include "serve/request_metrics.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common.hpp"
#include "base/timing.hpp"

namespace pd::serve {

RequestLatency request_latency(const RequestTiming& r) {
    const auto& t = r.token_s;
    if (t.empty()) fail("request {} completed without an output token", r.id);
    if (t[0] < r.arrival_s) fail("request {}: its first token precedes its arrival", r.id);
    RequestLatency l;
    l.ttft_ms = (t[0] - r.arrival_s) * 1e3;
    l.e2el_ms = (t.back() - r.arrival_s) * 1e3;
    l.itl_ms.reserve(t.size() - 1);
    for (std::size_t k = 1; k < t.size(); k++) {
        if (t[k] < t[k - 1]) fail("request {}: token {} precedes token {}", r.id, k, k - 1);
        l.itl_ms.push_back((t[k] - t[k - 1]) * 1e3);
    }
    if (t.size() > 1) l.tpot_ms = (l.e2el_ms - l.ttft_ms) / double(t.size() - 1);
    return l;
}

MetricSummary summarize_metric(const std::vector<double>& x) {
    MetricSummary s;
    s.n = int(x.size());
    if (x.empty()) return s;
    double sum = 0, ss = 0;
    for (double v : x) sum += v;
    s.mean = sum / double(s.n);
    for (double v : x) ss += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(ss / double(s.n));  // population, as np.std
    s.median = percentile(x, 50);
    s.p90 = percentile(x, 90);
    s.p99 = percentile(x, 99);
    return s;
}

namespace {

bool within(const RequestLatency& l, const GoodputLimits& g) {
    if (g.ttft_ms && l.ttft_ms > *g.ttft_ms) return false;
    if (g.tpot_ms && l.tpot_ms.value_or(0.0) > *g.tpot_ms) return false;
    if (g.e2el_ms && l.e2el_ms > *g.e2el_ms) return false;
    return true;
}

}  // namespace

ServingMetrics compute_serving_metrics(std::span<const RequestTiming> requests, double duration_s,
                                       const GoodputLimits& limits) {
    if (!(duration_s > 0) || !std::isfinite(duration_s))
        fail("the run's duration must be a positive number of seconds, got {}", duration_s);
    ServingMetrics m;
    m.duration_s = duration_s;
    std::vector<double> ttft, tpot, itl, e2el;
    int good = 0;
    for (const RequestTiming& r : requests) {
        if (!r.completed) {
            m.failed++;
            continue;
        }
        const RequestLatency l = request_latency(r);
        m.completed++;
        m.total_input += r.prompt_tokens;
        m.total_output += (long long)r.token_s.size();
        ttft.push_back(l.ttft_ms);
        if (l.tpot_ms) tpot.push_back(*l.tpot_ms);
        itl.insert(itl.end(), l.itl_ms.begin(), l.itl_ms.end());
        e2el.push_back(l.e2el_ms);
        good += within(l, limits) ? 1 : 0;
    }
    m.request_throughput = m.completed / duration_s;
    m.output_throughput = double(m.total_output) / duration_s;
    m.total_token_throughput = double(m.total_input + m.total_output) / duration_s;
    if (limits.any()) m.request_goodput = good / duration_s;
    m.ttft_ms = summarize_metric(ttft);
    m.tpot_ms = summarize_metric(tpot);
    m.itl_ms = summarize_metric(itl);
    m.e2el_ms = summarize_metric(e2el);
    return m;
}

namespace {

void add_row(std::string& out, const std::string& label, const std::string& value) {
    out += fmt::format("{:<40} {:<10}\n", label + ":", value);
}

void add_section(std::string& out, const std::string& heading, const std::string& name,
                 const MetricSummary& s) {
    out += fmt::format("{:-^50}\n", heading);
    add_row(out, "Mean " + name + " (ms)", fmt::format("{:.2f}", s.mean));
    add_row(out, "Median " + name + " (ms)", fmt::format("{:.2f}", s.median));
    add_row(out, "P90 " + name + " (ms)", fmt::format("{:.2f}", s.p90));
    add_row(out, "P99 " + name + " (ms)", fmt::format("{:.2f}", s.p99));
}

}  // namespace

std::string format_metrics_table(const ServingMetrics& m, const std::string& title) {
    std::string out = fmt::format("{:=^50}\n", " " + title + " ");
    add_row(out, "Successful requests", fmt::format("{}", m.completed));
    if (m.failed > 0) add_row(out, "Failed or cancelled requests", fmt::format("{}", m.failed));
    add_row(out, "Benchmark duration (s)", fmt::format("{:.2f}", m.duration_s));
    add_row(out, "Total input tokens", fmt::format("{}", m.total_input));
    add_row(out, "Total generated tokens", fmt::format("{}", m.total_output));
    add_row(out, "Request throughput (req/s)", fmt::format("{:.2f}", m.request_throughput));
    if (m.request_goodput)
        add_row(out, "Request goodput (req/s)", fmt::format("{:.2f}", *m.request_goodput));
    add_row(out, "Output token throughput (tok/s)", fmt::format("{:.2f}", m.output_throughput));
    add_row(out, "Total token throughput (tok/s)", fmt::format("{:.2f}", m.total_token_throughput));
    add_section(out, "Time to First Token", "TTFT", m.ttft_ms);
    add_section(out, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot_ms);
    add_section(out, "Inter-token Latency", "ITL", m.itl_ms);
    add_section(out, "End-to-end Latency", "E2EL", m.e2el_ms);
    out += std::string(50, '=') + "\n";
    return out;
}

nlohmann::json metrics_json(const ServingMetrics& m) {
    nlohmann::json j = {
        {"completed", m.completed},
        {"failed", m.failed},
        {"duration", m.duration_s},
        {"total_input_tokens", m.total_input},
        {"total_output_tokens", m.total_output},
        {"request_throughput", m.request_throughput},
        {"output_throughput", m.output_throughput},
        {"total_token_throughput", m.total_token_throughput},
    };
    j["request_goodput"] = m.request_goodput ? nlohmann::json(*m.request_goodput) : nullptr;
    const std::pair<const char*, const MetricSummary*> metrics[] = {
        {"ttft", &m.ttft_ms}, {"tpot", &m.tpot_ms}, {"itl", &m.itl_ms}, {"e2el", &m.e2el_ms}};
    for (const auto& [name, s] : metrics) {
        j[fmt::format("mean_{}_ms", name)] = s->mean;
        j[fmt::format("median_{}_ms", name)] = s->median;
        j[fmt::format("std_{}_ms", name)] = s->std;
        j[fmt::format("p90_{}_ms", name)] = s->p90;
        j[fmt::format("p99_{}_ms", name)] = s->p99;
        j[fmt::format("n_{}", name)] = s->n;
    }
    return j;
}

}  // namespace pd::serve
