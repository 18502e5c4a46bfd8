// pdlab loadgen: replay a request trace against an OpenAI-compatible
// completions server, streaming, and report what its clients saw: TTFT, TPOT,
// ITL and end-to-end latency, throughput and goodput, with vLLM's names.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <semaphore>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "serve/loadgen_client.hpp"

namespace pd::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct LoadgenCliOptions {
    std::string url = "http://127.0.0.1:8000";
    std::string trace_file;
    serve::TraceSpec spec;
    std::string prompt_len = "fixed:32", output_len = "fixed:32", token_range = "1:256";
    std::string goodput;  // "TTFT_MS,TPOT_MS"
    int max_concurrency = 0;
    std::string json, per_request;
    serve::ClientOptions client;
};

// What `pdlab loadgen --help` says before the options.
constexpr const char* kLoadgenAbout = R"(Send a trace of streaming completion requests to a server (pdlab serve, vLLM, llama-server...)
at their arrival times, each from its own client thread, and report the latencies the clients
observed: TTFT, TPOT, ITL, end-to-end, with mean, median, p90 and p99, and throughput.
Example: pdlab loadgen --url http://127.0.0.1:8000 --rate 4 --num-requests 64)";

CLI::App* add_loadgen_options(CLI::App& app, LoadgenCliOptions& o) {
    auto* sub = app.add_subcommand("loadgen", kLoadgenAbout);
    sub->add_option("--url", o.url, "the server: http://HOST:PORT (or a full .../v1/completions URL)")->capture_default_str();
    sub->add_option("--trace", o.trace_file, "replay this JSONL trace (the serving labs' format) instead of generating one");
    sub->add_option("--rate", o.spec.rate_per_s, "Poisson arrival rate, requests per second (inf: all at once)")
        ->capture_default_str();
    sub->add_option("--num-requests", o.spec.num_requests, "requests in the generated trace")
        ->check(CLI::Range(1, 100000))->capture_default_str();
    sub->add_option("--seed", o.spec.seed, "seed of the generated trace")->capture_default_str();
    sub->add_option("--prompt-len", o.prompt_len, "prompt tokens: fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA")
        ->capture_default_str();
    sub->add_option("--output-len", o.output_len, "max_tokens of each request, same forms")->capture_default_str();
    sub->add_option("--token-range", o.token_range, "prompt ids are drawn from LO:HI (HI excluded); keep HI <= the vocabulary")
        ->capture_default_str();
    sub->add_option("--model", o.client.model, "the \"model\" field of each request (vLLM needs it)");
    sub->add_flag("--ignore-eos", o.client.ignore_eos, "ask for exactly max_tokens tokens (vLLM and pdlab serve)");
    sub->add_option("--max-concurrency", o.max_concurrency, "at most this many requests in flight (0: no limit)")
        ->check(CLI::Range(0, 100000));
    sub->add_option("--goodput", o.goodput, "TTFT_MS,TPOT_MS: count as good only requests within both limits");
    sub->add_option("--timeout", o.client.timeout_s, "seconds a request may stay silent")->check(CLI::Range(1, 86400))
        ->capture_default_str();
    sub->add_option("--json", o.json, "write the summary (vLLM's keys) to this JSON file");
    sub->add_option("--per-request", o.per_request, "write each request's send and token times to this JSONL file");
    return sub;
}

serve::Trace make_trace(LoadgenCliOptions& o) {
    if (!o.trace_file.empty()) return serve::load_trace_file(o.trace_file);
    if (std::isnan(o.spec.rate_per_s) || o.spec.rate_per_s <= 0) fail("--rate must be above 0 (or inf), got {}", o.spec.rate_per_s);
    o.spec.prompt_len = serve::parse_length_dist(o.prompt_len, "--prompt-len");
    o.spec.output_len = serve::parse_length_dist(o.output_len, "--output-len");
    if (std::sscanf(o.token_range.c_str(), "%d:%d", &o.spec.token_lo, &o.spec.token_hi) != 2 ||
        o.spec.token_lo < 0 || o.spec.token_hi <= o.spec.token_lo)
        fail("--token-range {}: expected LO:HI with 0 <= LO < HI, e.g. 1:256", o.token_range);
    return serve::generate_trace(o.spec);
}

serve::GoodputLimits parse_goodput(const std::string& spec) {
    serve::GoodputLimits g;
    if (spec.empty()) return g;
    double ttft = 0, tpot = 0;
    char extra = 0;
    if (std::sscanf(spec.c_str(), "%lf,%lf%c", &ttft, &tpot, &extra) != 2 || !(ttft > 0) || !(tpot > 0))
        fail("--goodput {}: expected TTFT_MS,TPOT_MS, two positive numbers, e.g. 500,50", spec);
    g.ttft_ms = ttft;
    g.tpot_ms = tpot;
    return g;
}

// One thread per request: it sleeps until the request's arrival time, waits
// for a slot under --max-concurrency, then sends it and reads its stream.
std::vector<serve::StreamResult> replay(const serve::Trace& trace, const serve::Endpoint& to,
                                        const LoadgenCliOptions& o, Clock::time_point start) {
    std::vector<serve::StreamResult> results(trace.size());
    std::counting_semaphore<> slots(o.max_concurrency > 0 ? o.max_concurrency : std::ptrdiff_t(trace.size()));
    std::vector<std::thread> clients;
    clients.reserve(trace.size());
    for (std::size_t i = 0; i < trace.size(); ++i)
        clients.emplace_back([&, i] {
            std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(trace[i].arrival_s)));
            slots.acquire();
            results[i] = serve::send_streaming(to, trace[i], o.client, start);
            slots.release();
        });
    for (auto& t : clients) t.join();
    return results;
}

void write_per_request(const std::string& path, const std::vector<serve::StreamResult>& results) {
    std::ofstream out(path);
    if (!out) fail("--per-request {}: cannot write there", path);
    for (const auto& r : results)
        out << nlohmann::json{{"id", r.timing.id},           {"send_s", r.timing.arrival_s},
                              {"token_s", r.timing.token_s}, {"prompt_tokens", r.timing.prompt_tokens},
                              {"output_tokens", r.output_tokens}, {"completed", r.timing.completed},
                              {"error", r.error}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
}

int run_loadgen(LoadgenCliOptions& o) {
    const serve::Endpoint to = serve::parse_endpoint(o.url);
    const serve::GoodputLimits limits = parse_goodput(o.goodput);
    const serve::Trace trace = make_trace(o);
    std::fprintf(stderr, "pdlab loadgen: %zu requests to %s%s%s\n", trace.size(), to.origin.c_str(), to.path.c_str(),
                 o.trace_file.empty() ? fmt::format(" at {} req/s (Poisson)", o.spec.rate_per_s).c_str() : "");
    const Clock::time_point start = Clock::now();
    const std::vector<serve::StreamResult> results = replay(trace, to, o, start);
    const double duration_s = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<serve::RequestTiming> timings;
    for (const auto& r : results) timings.push_back(r.timing);
    const auto failed = std::find_if(results.begin(), results.end(), [](const auto& r) { return !r.error.empty(); });
    if (failed != results.end())
        std::fprintf(stderr, "pdlab loadgen: %td requests failed; the first: %s\n",
                     std::count_if(results.begin(), results.end(), [](const auto& r) { return !r.error.empty(); }),
                     failed->error.c_str());
    if (std::none_of(results.begin(), results.end(), [](const auto& r) { return r.error.empty(); }))
        fail("no request completed (is the server running at {}?)", o.url);
    const serve::ServingMetrics m = serve::compute_serving_metrics(timings, duration_s, limits);
    std::fputs(serve::format_metrics_table(m, "Serving Benchmark Result").c_str(), stdout);
    if (!o.json.empty()) write_json_file(o.json, serve::metrics_json(m));
    if (!o.per_request.empty()) write_per_request(o.per_request, results);
    return 0;
}

}  // namespace

Command add_loadgen(CLI::App& app) { return options_command(app, add_loadgen_options, run_loadgen); }

}  // namespace pd::cli
