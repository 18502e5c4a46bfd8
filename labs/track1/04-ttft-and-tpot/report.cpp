// Lab 04's report: the measured services replayed on the virtual clock
// (your schedule and metrics), printed as tables and written as JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "arrivals.hpp"
#include "lab04.hpp"
#include "results.hpp"

namespace pd::lab04 {

Timeline simulate(const std::vector<Service>& svc, const std::vector<double>& arrive) {
    std::vector<ServiceTrace> traces;
    for (const Service& v : svc) traces.push_back(v.trace());
    Timeline t{schedule_fcfs(arrive, traces), {}};  // yours
    for (const Scheduled& x : t.sch) t.m.push_back(request_metrics(x.arrival_ms, x.token_times_ms));  // yours
    return t;
}

namespace {

// Every inter-token gap of every request: the ITL percentiles are over gaps,
// so a long answer weighs more than a short one (unlike the mean of TPOT).
std::vector<double> every_gap(const std::vector<RequestMetrics>& m) {
    std::vector<double> gaps;
    for (const RequestMetrics& r : m) gaps.insert(gaps.end(), r.itls_ms.begin(), r.itls_ms.end());
    return gaps;
}

}  // namespace

Report summarize_run(const std::vector<Service>& svc, const Timeline& t) {
    std::vector<double> ttft, tpot, e2el, queue, prefill, step;
    for (std::size_t i = 0; i < t.sch.size(); i++) {
        const auto& m = t.m[i];
        ttft.push_back(m.ttft_ms);
        if (m.tpot_ms) tpot.push_back(*m.tpot_ms);  // one-token answers have none
        e2el.push_back(m.e2el_ms);
        queue.push_back(t.sch[i].queue_ms);
        prefill.push_back(svc[i].prefill_ms);
        step.insert(step.end(), svc[i].decode_step_ms.begin(), svc[i].decode_step_ms.end());
    }
    return {summarize(ttft), summarize(tpot),  summarize(every_gap(t.m)),
            summarize(e2el), summarize(queue), summarize(prefill), summarize(step)};
}

namespace {

// A statistic of no samples (every answer one token long has no TPOT) is "-", not 0 ms.
std::string num(const Stats& s, double v, int width = 9, int prec = 2) {
    if (s.n == 0) return fmt::format("{:>{}}", "-", width);
    return fmt::format("{:>{}.{}f}", v, width, prec);
}

std::string summary_row(const char* name, const Stats& s) {
    return fmt::format("  {:<26} {:>5} {} {} {} {}\n", name, s.n, num(s, s.mean), num(s, s.median),
                       num(s, s.p90), num(s, s.p99));
}

nlohmann::json summary_json(const Stats& s) {
    auto v = [&](double x) { return s.n == 0 ? nlohmann::json(nullptr) : nlohmann::json(x); };
    return {{"n", s.n}, {"mean", v(s.mean)}, {"median", v(s.median)}, {"p90", v(s.p90)}, {"p99", v(s.p99)}};
}

std::string slo_text(const Slo& slo) {
    std::string s;
    auto add = [&](const char* name, const std::optional<double>& v) {
        if (v) s += fmt::format("{}{} <= {:.2f} ms", s.empty() ? "" : ", ", name, *v);
    };
    add("TTFT", slo.ttft_ms);
    add("TPOT", slo.tpot_ms);
    add("E2EL", slo.e2el_ms);
    return s.empty() ? "no limit" : s;
}

void print_throughput(const Timeline& t, int requests) {
    double first = t.sch.front().arrival_ms, last = 0;
    long tokens = 0;
    for (std::size_t i = 0; i < t.sch.size(); i++)
        last = std::max(last, t.sch[i].token_times_ms.back()), tokens += t.m[i].output_tokens;
    double span_s = (last - first) / 1000.0;
    if (span_s > 0)
        std::printf("  throughput over the run: %.2f requests/s, %.1f output tokens/s (first arrival "
                    "to last token, %.2f s)\n", requests / span_s, tokens / span_s, span_s);
}

// The end-to-end latency a TTFT and an average TPOT imply for n tokens: the
// first after ttft, then n - 1 more, one every tpot (README "The worked example").
double implied_e2el(double ttft_ms, double tpot_ms, int n) { return ttft_ms + double(n - 1) * tpot_ms; }

nlohmann::json per_request_json(const std::vector<Service>& svc, const Timeline& t) {
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t i = 0; i < t.sch.size(); i++) {
        const auto& v = svc[i];
        const auto& m = t.m[i];
        per.push_back({{"id", i},
                       {"prompt_tokens", v.prompt_tokens},
                       {"output_tokens", m.output_tokens},
                       {"arrival_ms", t.sch[i].arrival_ms},
                       {"start_ms", t.sch[i].start_ms},
                       {"queue_ms", t.sch[i].queue_ms},
                       {"tokenize_ms", v.tokenize_ms},
                       {"prefill_ms", v.prefill_ms},
                       {"first_sample_ms", v.first_sample_ms},
                       {"decode_step_ms", v.decode_step_ms},
                       {"sample_stream_ms", v.sample_stream_ms},
                       {"token_times_ms", t.sch[i].token_times_ms},
                       {"ttft_ms", m.ttft_ms},
                       {"tpot_ms", m.tpot_ms ? nlohmann::json(*m.tpot_ms) : nlohmann::json(nullptr)},
                       {"e2el_ms", m.e2el_ms},
                       {"stopped_at_eos", v.stopped_at_eos}});
    }
    return per;
}

nlohmann::json run_json(const Options& o, Engine& e, double rate, double capacity, const Report& rep) {
    nlohmann::json j = lab::run_json("04-ttft-and-tpot", o.lab, e);
    j["queue_model"] = "one server, FCFS, one request at a time; service measured, arrivals on a virtual clock";
    j["requests"] = o.requests;
    j["rate"] = std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate);
    j["offered_load"] = std::isinf(rate) ? nlohmann::json(nullptr) : nlohmann::json(rate / capacity);
    j["seed"] = o.seed;
    j["prompt_len"] = o.prompt_len;
    j["output_len"] = o.output_len;
    j["range_ratio"] = o.range_ratio;
    j["warmup"] = !o.cold;
    j["summary"] = {{"ttft", summary_json(rep.ttft)},   {"tpot", summary_json(rep.tpot)},
                    {"itl", summary_json(rep.itl)},     {"e2el", summary_json(rep.e2el)},
                    {"queue", summary_json(rep.queue)}, {"prefill", summary_json(rep.prefill)},
                    {"decode_step", summary_json(rep.decode_step)}};
    return j;
}

}  // namespace

void print_header(const Options& o, Engine& e, bool spelled) {
    const Config& c = e.config();
    std::printf("Lab 04: TTFT and TPOT, seen by a client\n");
    std::printf("model    %s (%s, %d layers, dim %d, vocab %d), %s, %s: %s\n", o.lab.model.c_str(),
                family_name(c.family), c.n_layers, c.dim, c.vocab_size, o.lab.precision.c_str(),
                device_name(e.device()), e.hardware().c_str());
    if (!spelled)
        std::printf("note     this model's vocabulary cannot spell text, so prompts are random token "
                    "ids and tokenize shows 0\n");
}

void print_workload(const Options& o, double rate, bool auto_rate, double capacity, double mean_service) {
    std::printf("workload %d requests, prompt %d tokens, %d output tokens%s, %s%s\n", o.requests,
                o.prompt_len, o.output_len,
                o.range_ratio > 0 ? fmt::format(" (each x [{:.2f}, {:.2f}])", 1 - o.range_ratio, 1 + o.range_ratio).c_str() : "",
                o.sampler.temperature == 0 ? "greedy" : fmt::format("temperature {}", o.sampler.temperature).c_str(),
                o.stop_at_eos ? ", stop at eos" : "");
    if (std::isinf(rate))
        std::printf("arrivals all %d requests at t = 0 (--rate inf: a burst)\n", o.requests);
    else
        std::printf("arrivals Poisson, %.2f requests/s (seed %llu)%s: offered load %.2f of the %.2f "
                    "requests/s one server finishes (mean service %.2f ms)\n",
                    rate, (unsigned long long)o.seed, auto_rate ? " from --rate auto" : "",
                    rate / capacity, capacity, mean_service);
    std::printf("server   ONE model, first come first served, one request at a time; service phases "
                "measured for real,\n         arrivals and queueing on a virtual clock (README.md, "
                "\"How the queue is simulated\")\n\n");
}

// Task 5: where each request's TTFT went.
void print_per_request(const std::vector<Service>& svc, const Timeline& t, int rows) {
    std::printf("per request (ms; arrive is since the first arrival)\n");
    std::printf("  %4s %9s %9s %8s %8s %7s %6s | %8s | %6s %9s %8s | %7s %9s\n", "id", "arrive", "queue",
                "tokenize", "prefill", "1st smp", "other", "TTFT", "steps", "decode", "smp+strm", "TPOT",
                "E2EL");
    const int shown = std::min<int>(rows, int(t.sch.size()));
    for (int i = 0; i < shown; i++) {
        const auto& v = svc[i];
        const auto& m = t.m[i];
        double other = m.ttft_ms - t.sch[i].queue_ms - v.tokenize_ms - v.prefill_ms - v.first_sample_ms;
        std::printf("  %4d %9.2f %9.2f %8.3f %8.2f %7.3f %6.3f | %8.2f | %6zu %9.2f %8.3f | %7s %9.2f\n", i,
                    t.sch[i].arrival_ms, t.sch[i].queue_ms, v.tokenize_ms, v.prefill_ms, v.first_sample_ms,
                    other, m.ttft_ms, v.decode_step_ms.size(), v.decode_ms(), v.sample_stream_ms,
                    m.tpot_ms ? fmt::format("{:.2f}", *m.tpot_ms).c_str() : "-", m.e2el_ms);
    }
    if (shown < int(t.sch.size()))
        std::printf("  ... %zu more (--rows N to show them, --json FILE for all)\n", t.sch.size() - shown);
    std::printf("  TTFT = queue + tokenize + prefill + 1st smp + other (reset, timers); TPOT = (E2EL - "
                "TTFT) / (n - 1)\n\n");
}

void print_summaries(const Report& rep, const Timeline& t, int requests, const Slo& slo, const Goodput& good) {
    std::printf("client-observed latency (ms, vLLM's names)   n      mean    median       p90       p99\n");
    std::fputs(summary_row("ttft", rep.ttft).c_str(), stdout);
    std::fputs(summary_row("tpot", rep.tpot).c_str(), stdout);
    std::fputs(summary_row("itl (every gap, pooled)", rep.itl).c_str(), stdout);
    std::fputs(summary_row("e2el", rep.e2el).c_str(), stdout);
    std::printf("inside them (ms)\n");
    std::fputs(summary_row("queue (waiting, no work)", rep.queue).c_str(), stdout);
    std::fputs(summary_row("prefill (model-side)", rep.prefill).c_str(), stdout);
    std::fputs(summary_row("decode step (model-side)", rep.decode_step).c_str(), stdout);
    print_throughput(t, requests);
    std::printf("  goodput under the objective (%s): %d of %d requests met it, %.2f requests/s\n",
                slo_text(slo).c_str(), good.good, requests, good.requests_per_s);
    if (rep.ttft.n > 0 && rep.ttft.mean > 0)
        std::printf("  of the mean TTFT, %.0f%% is queueing and %.0f%% is prefill: TTFT is not prefill time\n",
                    100.0 * rep.queue.mean / rep.ttft.mean, 100.0 * rep.prefill.mean / rep.ttft.mean);
    std::printf("\n");
}

// Task 6: the same measured services under other arrival rates.
nlohmann::json print_rate_sweep(const std::vector<Service>& svc, const std::vector<double>& gaps,
                                double capacity, const Slo& slo) {
    nlohmann::json sweep = nlohmann::json::array();
    std::printf("the same %zu services under other arrival rates (virtual clock: the model is not re-run)\n",
                svc.size());
    std::printf("  %6s %9s %11s %11s %10s %10s %11s %10s %9s %11s\n", "load", "req/s", "queue mean", "ttft median",
                "ttft p90", "ttft p99", "tpot median", "e2el p90", "good", "goodput/s");
    for (double load : {0.25, 0.5, 0.8, 0.95, 1.2, -1.0}) {
        const bool burst = load < 0;
        double r = burst ? std::numeric_limits<double>::infinity() : load * capacity;
        Timeline run = simulate(svc, arrivals(gaps, r));
        Report x = summarize_run(svc, run);
        Goodput g = goodput(run.sch, run.m, slo);  // yours
        std::printf("  %6s %9s %11s %11s %10s %10s %11s %10s %9s %11.2f\n",
                    burst ? "burst" : fmt::format("{:.2f}", load).c_str(),
                    burst ? "inf" : fmt::format("{:.2f}", r).c_str(), num(x.queue, x.queue.mean, 11).c_str(),
                    num(x.ttft, x.ttft.median, 11).c_str(), num(x.ttft, x.ttft.p90, 10).c_str(),
                    num(x.ttft, x.ttft.p99, 10).c_str(), num(x.tpot, x.tpot.median, 11).c_str(),
                    num(x.e2el, x.e2el.p90, 10).c_str(), fmt::format("{}/{}", g.good, svc.size()).c_str(),
                    g.requests_per_s);
        sweep.push_back({{"load", burst ? nlohmann::json("burst") : nlohmann::json(load)},
                         {"rate", burst ? nlohmann::json("inf") : nlohmann::json(r)},
                         {"queue", summary_json(x.queue)}, {"ttft", summary_json(x.ttft)},
                         {"tpot", summary_json(x.tpot)}, {"e2el", summary_json(x.e2el)},
                         {"goodput", {{"good", g.good}, {"requests_per_s", g.requests_per_s}}}});
    }
    std::printf("  load = arrival rate x mean service time; TPOT does not move (one request at a time), "
                "TTFT does;\n  good: requests within the objective (%s), goodput/s: their rate\n\n",
                slo_text(slo).c_str());
    return sweep;
}

void print_worked_example(const Report& rep, int output_len) {
    std::printf("worked example: 2,000 prompt tokens, 200 output tokens, TTFT 600 ms, average TPOT 35 ms\n");
    std::printf("  600 + 199 x 35 = %.1f ms, about %.2f s (0.6 s to the first token, then 199 x 35 ms)\n",
                implied_e2el(600, 35, 200), implied_e2el(600, 35, 200) / 1000.0);
    if (rep.tpot.n > 0) {
        std::printf("  this run: mean ttft %.2f + %d x mean tpot %.2f = %.2f ms; measured mean e2el %.2f ms\n",
                    rep.ttft.mean, output_len - 1, rep.tpot.mean,
                    implied_e2el(rep.ttft.mean, rep.tpot.mean, output_len), rep.e2el.mean);
        std::printf("  (means add up when every answer has the same length; medians and percentiles do "
                    "not: median e2el is %.2f ms)\n", rep.e2el.median);
    }
    std::printf("\n");
}

// One request as the client saw it stream.
void print_stream(const Service& v, const Scheduled& t, int id) {
    std::printf("request %d as streamed (submitted at %.2f ms, waited %.2f ms in the queue)\n", id,
                t.arrival_ms, t.queue_ms);
    std::printf("  %5s %12s %10s  %s\n", "token", "since submit", "ITL", "text streamed");
    const int n = int(t.token_times_ms.size());
    for (int k = 0; k < n && k < 24; k++) {
        std::string piece = v.pieces[k];
        for (char& ch : piece)
            if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
        std::printf("  %5d %12.2f %10s  \"%s\"\n", k + 1, t.token_times_ms[k] - t.arrival_ms,
                    k == 0 ? "(TTFT)" : fmt::format("{:.2f}", t.token_times_ms[k] - t.token_times_ms[k - 1]).c_str(),
                    piece.c_str());
    }
    if (n > 24) std::printf("  ... %d more tokens\n", n - 24);
    if (v.stopped_at_eos) std::printf("  (the last token was the end-of-text token)\n");
}

void write_json(const Options& o, Engine& e, double rate, double capacity, const Report& rep,
                const nlohmann::json& sweep, const Slo& slo, const Goodput& good,
                const std::vector<Service>& svc, const Timeline& t) {
    nlohmann::json j = run_json(o, e, rate, capacity, rep);
    j["rate_sweep"] = sweep;
    j["slo"] = {{"ttft_ms", slo.ttft_ms ? nlohmann::json(*slo.ttft_ms) : nlohmann::json(nullptr)},
                {"tpot_ms", slo.tpot_ms ? nlohmann::json(*slo.tpot_ms) : nlohmann::json(nullptr)},
                {"e2el_ms", slo.e2el_ms ? nlohmann::json(*slo.e2el_ms) : nlohmann::json(nullptr)}};
    j["goodput"] = {{"good", good.good}, {"requests_per_s", good.requests_per_s}};
    j["per_request"] = per_request_json(svc, t);
    lab::write_lab_json(o.lab, j);
}

}  // namespace pd::lab04
