// Lab 04: TTFT and TPOT as a client sees them.
//
// A queue of requests arrives at random (Poisson) times in front of ONE model
// that serves them first come, first served, one at a time. Every phase of a
// request's service is measured for real: tokenization, prefill, the first
// sample, every decode step, sampling and streaming of each later token. The
// arrivals and the queue run on a virtual clock: since nothing else competes
// for the model, a request's service takes the same time whether or not others
// wait, so start = max(arrival, previous finish) gives the queueing a real
// server would add, without sleeping until each arrival.
//
// Your functions (exercise.cpp) run that virtual clock (schedule_fcfs), turn
// the per-token timestamps into TTFT, TPOT, ITL and E2EL (request_metrics),
// and count the requests served within a latency objective (goodput);
// src/base/timing.hpp's summarize() gives the metrics' mean, median, p90 and p99.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arrivals.hpp"
#include "exercise.hpp"
#include "lab_main.hpp"
#include "engine/sampler.hpp"
#include "engine/stop_rule.hpp"
#include "base/timing.hpp"
#include "io/tokenizer.hpp"

using namespace pd;
using namespace pd::lab04;

namespace {

struct Options {
    cli::CommonOptions lab;
    int requests = 32;
    std::string rate = "auto";
    double load = 0.8;
    std::uint64_t seed = 1;
    int prompt_len = 64;
    int output_len = 16;
    double range_ratio = 0.0;
    SamplerConfig sampler{0.0f, 0, 1.0f, 42};
    bool stop_at_eos = false;
    bool cold = false;
    bool no_rate_sweep = false;
    int timeline = 0;
    int rows = 24;
    std::string slo_ttft = "auto", slo_tpot = "none", slo_e2el = "none";
};

// What a request asks for.
struct RequestSpec {
    int id = 0;
    int prompt_len = 0;      // tokens the prompt is cut to
    int output_len = 0;      // tokens to generate (fewer if it stops at eos)
    std::string text;        // the prompt as the client sends it
    std::vector<int> ids;    // used instead of text when the vocabulary cannot spell text
};

// What serving one request took, measured, relative to the moment the server
// picked it up (ms).
struct Service {
    int prompt_tokens = 0;
    double tokenize_ms = 0;        // text -> ids (wall clock)
    double prefill_ms = 0;         // model-side prefill (engine.time_ms)
    double first_sample_ms = 0;    // choosing token 1 from prefill's logits + streaming it
    std::vector<double> decode_step_ms;  // model-side time of each decode step
    double sample_stream_ms = 0;   // choosing and streaming tokens 2..n
    std::vector<double> token_rel_ms;    // when token k was streamed, since service start
    std::string text;              // the streamed answer
    std::vector<std::string> pieces;     // what each token added to it (may be "" mid-character)
    bool stopped_at_eos = false;
    double total_ms() const { return token_rel_ms.empty() ? 0.0 : token_rel_ms.back(); }
    double decode_ms() const {
        double s = 0;
        for (double d : decode_step_ms) s += d;
        return s;
    }
    // The service as the virtual clock needs it: token 1, then each gap.
    ServiceTrace trace() const {
        ServiceTrace t{token_rel_ms.front(), {}};
        for (std::size_t k = 1; k < token_rel_ms.size(); k++)
            t.step_ms.push_back(token_rel_ms[k] - token_rel_ms[k - 1]);
        return t;
    }
};

const char* kWords[] = {
    "the", "little", "cat", "dog", "girl", "boy", "was", "very", "happy", "sad", "went", "to",
    "park", "and", "saw", "a", "big", "red", "ball", "tree", "she", "he", "said", "hello",
    "friend", "they", "played", "all", "day", "sun", "was", "bright", "mom", "home", "ate",
    "cake", "bird", "sang", "song", "with", "fun", "found", "box", "in", "garden", "then",
    "smiled", "ran", "fast", "jumped", "over", "river", "one", "time", "upon", "there",
};

std::string random_words(std::mt19937_64& rng, int n) {
    std::uniform_int_distribution<int> pick(0, int(std::size(kWords)) - 1);
    std::string s;
    for (int i = 0; i < n; i++) {
        if (i) s += ' ';
        s += kWords[pick(rng)];
    }
    return s;
}

// Prompt lengths and output lengths, uniform in [L(1 - r), L(1 + r)].
int jitter(std::mt19937_64& rng, int L, double r) {
    if (r <= 0) return L;
    int lo = std::max(1, int(std::lround(L * (1 - r)))), hi = std::max(lo, int(std::lround(L * (1 + r))));
    return std::uniform_int_distribution<int>(lo, hi)(rng);
}

std::vector<RequestSpec> make_requests(const Options& o, const Tokenizer& tok, int vocab, bool& spelled) {
    std::vector<RequestSpec> out;
    std::mt19937_64 rng(o.seed * 7919 + 17);
    spelled = true;
    for (int i = 0; i < o.requests; i++) {
        RequestSpec r;
        r.id = i;
        r.prompt_len = jitter(rng, o.prompt_len, o.range_ratio);
        r.output_len = jitter(rng, o.output_len, o.range_ratio);
        std::string words = random_words(rng, r.prompt_len + 4);  // every word is >= 1 token
        if (spelled) {
            try {
                std::vector<int> ids = tok.encode(words);
                if (int(ids.size()) > r.prompt_len) ids.resize(r.prompt_len);
                r.text = tok.decode(ids);  // the text of exactly the first prompt_len tokens
            } catch (const UserError&) {
                spelled = false;  // e.g. a synthetic model whose vocabulary is < 128 bytes
            }
        }
        if (!spelled) {
            std::uniform_int_distribution<int> id(0, vocab - 1);
            r.ids.resize(r.prompt_len);
            for (int& t : r.ids) t = id(rng);
        }
        out.push_back(std::move(r));
    }
    return out;
}

Service serve(Engine& e, const Tokenizer& tok, const RequestSpec& r, SamplerConfig sc, bool stop_at_eos) {
    const Config& c = e.config();
    sc.seed += std::uint64_t(r.id);  // each request its own, reproducible, random stream
    Sampler sampler = make_sampler(sc, c.vocab_size);
    StreamDecoder stream(tok);
    Service s;
    int slot = 0;
    const float* logits = nullptr;

    const double t0 = now_ms();
    // 1. Tokenize (the client sent text).
    std::vector<int> ids = r.ids;
    if (ids.empty()) {
        ids = tok.encode(r.text);
        if (int(ids.size()) > r.prompt_len) ids.resize(r.prompt_len);
    }
    const double t1 = now_ms();
    s.tokenize_ms = t1 - t0;
    s.prompt_tokens = int(ids.size());
    // 2. Prefill: the whole prompt in one pass; its last row's logits pick token 1.
    e.reset(slot);
    s.prefill_ms = e.time_ms([&] { logits = e.prefill(slot, ids); });
    // 3. First sample, streamed to the client: this is the moment TTFT ends.
    const double t2 = now_ms();
    int next = sample(sampler, logits, c.vocab_size);
    s.pieces.push_back(stream.push(next));
    const double t3 = now_ms();
    s.first_sample_ms = t3 - t2;
    s.token_rel_ms.push_back(t3 - t0);
    // 4. Decode: one token per step, each streamed as soon as it is chosen,
    // until the engine's stop rule says the request is done (its output_len,
    // or any of the model's EOS ids).
    const StopLimits stop{eos_ids(c.eos_ids, stop_at_eos), r.output_len, e.max_seq()};
    int generated = 1;
    StopReason why = stop_after(stop, s.prompt_tokens, generated, next);
    for (; why == StopReason::none; why = stop_after(stop, s.prompt_tokens, ++generated, next)) {
        double ms = e.time_ms([&] { logits = e.decode({&slot, 1}, {&next, 1}); });
        const double a = now_ms();
        next = sample(sampler, logits, c.vocab_size);
        s.pieces.push_back(stream.push(next));
        const double b = now_ms();
        s.decode_step_ms.push_back(ms);
        s.sample_stream_ms += b - a;
        s.token_rel_ms.push_back(b - t0);
    }
    s.stopped_at_eos = why == StopReason::eos;
    for (const auto& p : s.pieces) s.text += p;
    s.text += stream.flush();
    return s;
}

// One run on the virtual clock: your schedule, then your metrics per request.
struct Timeline {
    std::vector<Scheduled> sch;
    std::vector<RequestMetrics> m;
};

Timeline simulate(const std::vector<Service>& svc, const std::vector<double>& arrive) {
    std::vector<ServiceTrace> traces;
    for (const Service& v : svc) traces.push_back(v.trace());
    Timeline t{schedule_fcfs(arrive, traces), {}};  // yours
    for (const Scheduled& x : t.sch) t.m.push_back(request_metrics(x.arrival_ms, x.token_times_ms));  // yours
    return t;
}

struct Report {
    Stats ttft, tpot, itl, e2el, queue, prefill, decode_step;
};

// Every inter-token gap of every request: the ITL percentiles are over gaps,
// so a long answer weighs more than a short one (unlike the mean of TPOT).
std::vector<double> every_gap(const std::vector<RequestMetrics>& m) {
    std::vector<double> gaps;
    for (const RequestMetrics& r : m) gaps.insert(gaps.end(), r.itls_ms.begin(), r.itls_ms.end());
    return gaps;
}

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

double parse_rate(const std::string& s) {
    if (s == "auto") return 0.0;
    if (s == "inf" || s == "burst") return std::numeric_limits<double>::infinity();
    try {
        std::size_t used = 0;
        double r = std::stod(s, &used);
        if (used == s.size() && r > 0 && std::isfinite(r)) return r;
    } catch (const std::exception&) {
    }
    fail("--rate must be a positive number of requests per second, auto or inf, got \"{}\"", s);
}

// One limit of the objective: a number of ms, none (not part of it), or, for
// TTFT only, auto (`auto_ms`: twice the mean service time, measured).
std::optional<double> parse_limit(const char* option, const std::string& s, double auto_ms) {
    if (s == "none") return std::nullopt;
    if (s == "auto" && auto_ms > 0) return auto_ms;
    try {
        std::size_t used = 0;
        double ms = std::stod(s, &used);
        if (used == s.size() && ms >= 0 && std::isfinite(ms)) return ms;
    } catch (const std::exception&) {
    }
    fail("{} must be a number of ms (0 or more){}, got \"{}\"", option,
         auto_ms > 0 ? ", auto or none" : " or none", s);
}

Slo parse_slo(const Options& o, double mean_service_ms) {
    return {parse_limit("--slo-ttft", o.slo_ttft, 2 * mean_service_ms), parse_limit("--slo-tpot", o.slo_tpot, 0),
            parse_limit("--slo-e2el", o.slo_e2el, 0)};
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

void check_options(const Options& o) {
    if (o.requests < 1) fail("--requests must be at least 1, got {}", o.requests);
    if (o.prompt_len < 1) fail("--prompt-len must be at least 1, got {}", o.prompt_len);
    if (o.output_len < 1) fail("--output-len must be at least 1, got {}", o.output_len);
    if (!(o.range_ratio >= 0 && o.range_ratio < 1)) fail("--range-ratio must be in [0, 1), got {}", o.range_ratio);
    if (!(o.load > 0 && o.load < 10)) fail("--load must be in (0, 10), got {}", o.load);
    validate(o.sampler);
}

// Your three functions, once on tiny inputs before anything is served: a
// missing exercise stops the lab here with its hint, in task order.
void try_exercises() {
    const std::vector<double> arrive = {0.0};
    const std::vector<ServiceTrace> one = {{1.0, {1.0}}};
    std::vector<Scheduled> s = schedule_fcfs(arrive, one);
    std::vector<RequestMetrics> m = {request_metrics(0.0, s[0].token_times_ms)};
    goodput(s, m, Slo{});
}

// Warm-up: one prefill per distinct prompt length (oneDNN compiles a kernel
// the first time it sees a row count) and a few decode steps, thrown away.
void warm_up(Engine& e, const Tokenizer& tok, const std::vector<RequestSpec>& reqs, const Options& o,
             int max_out) {
    std::set<int> lens;
    for (auto& r : reqs) lens.insert(r.prompt_len);
    for (int L : lens) {
        RequestSpec w = reqs[0];
        w.prompt_len = L;
        w.output_len = std::min(4, max_out);
        std::mt19937_64 wrng{std::uint64_t(L)};
        if (!w.ids.empty()) w.ids.assign(L, 1 % e.config().vocab_size);
        else w.text = random_words(wrng, L + 4);
        serve(e, tok, w, o.sampler, false);
    }
}

// Serve every request once, for real, back to back.
std::vector<Service> serve_all(Engine& e, const Tokenizer& tok, const std::vector<RequestSpec>& reqs,
                               const Options& o) {
    std::vector<Service> svc;
    for (std::size_t i = 0; i < reqs.size(); i++) {
        if (reqs.size() >= 8 && i % std::max<std::size_t>(1, reqs.size() / 4) == 0)
            std::fprintf(stderr, "serving request %zu/%zu...\n", i + 1, reqs.size());
        svc.push_back(serve(e, tok, reqs[i], o.sampler, o.stop_at_eos));
    }
    return svc;
}

double mean_service_ms(const std::vector<Service>& svc) {
    double sum = 0;
    for (auto& v : svc) sum += v.total_ms();
    return sum / double(svc.size());
}

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

// The end-to-end latency a TTFT and an average TPOT imply for n tokens: the
// first after ttft, then n - 1 more, one every tpot (README "The worked example").
double implied_e2el(double ttft_ms, double tpot_ms, int n) { return ttft_ms + double(n - 1) * tpot_ms; }

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
    nlohmann::json j;
    j["lab"] = "04-ttft-and-tpot";
    j["model"] = o.lab.model;
    j["precision"] = o.lab.precision;
    j["device"] = device_name(e.device());
    j["hardware"] = e.hardware();
    j["threads"] = omp_get_max_threads();
    j["timing_method"] = e.timing_method();
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

int run(const Options& o) {
    check_options(o);
    double rate = parse_rate(o.rate);
    parse_slo(o, 1.0);  // bad limits are refused before anything is served
    try_exercises();

    const int max_prompt = std::max(1, int(std::lround(o.prompt_len * (1 + o.range_ratio))));
    const int max_out = std::max(1, int(std::lround(o.output_len * (1 + o.range_ratio))));
    cli::Session s = cli::open_session(o.lab, 1, max_prompt + max_out);
    Engine& e = *s.engine;
    if (max_prompt + max_out > e.max_seq())
        fail("prompts of up to {} tokens plus {} output tokens need {} positions, more than the "
             "context length of {}: lower --prompt-len or --output-len", max_prompt, max_out,
             max_prompt + max_out, e.max_seq());
    const Tokenizer& tok = s.loaded.tokenizer;
    bool spelled = true;
    std::vector<RequestSpec> reqs = make_requests(o, tok, e.config().vocab_size, spelled);
    print_header(o, e, spelled);

    if (!o.cold) warm_up(e, tok, reqs, o, max_out);
    std::vector<Service> svc = serve_all(e, tok, reqs, o);
    const double mean_service = mean_service_ms(svc);
    const double capacity = 1000.0 / mean_service;  // requests/s one server can finish
    const bool auto_rate = rate == 0.0;
    if (auto_rate) rate = o.load * capacity;
    const Slo slo = parse_slo(o, mean_service);
    const std::vector<double> gaps = unit_gaps(o.seed, o.requests);  // arrivals.hpp
    Timeline t = simulate(svc, arrivals(gaps, rate));
    Report rep = summarize_run(svc, t);

    print_workload(o, rate, auto_rate, capacity, mean_service);
    print_per_request(svc, t, o.rows);
    const Goodput good = goodput(t.sch, t.m, slo);  // yours
    print_summaries(rep, t, o.requests, slo, good);
    nlohmann::json sweep = o.no_rate_sweep ? nlohmann::json::array() : print_rate_sweep(svc, gaps, capacity, slo);
    print_worked_example(rep, o.output_len);
    if (o.timeline >= 0 && o.timeline < int(t.sch.size())) print_stream(svc[o.timeline], t.sch[o.timeline], o.timeline);

    if (!o.lab.json.empty()) {
        nlohmann::json j = run_json(o, e, rate, capacity, rep);
        j["rate_sweep"] = sweep;
        j["slo"] = {{"ttft_ms", slo.ttft_ms ? nlohmann::json(*slo.ttft_ms) : nlohmann::json(nullptr)},
                    {"tpot_ms", slo.tpot_ms ? nlohmann::json(*slo.tpot_ms) : nlohmann::json(nullptr)},
                    {"e2el_ms", slo.e2el_ms ? nlohmann::json(*slo.e2el_ms) : nlohmann::json(nullptr)}};
        j["goodput"] = {{"good", good.good}, {"requests_per_s", good.requests_per_s}};
        j["per_request"] = per_request_json(svc, t);
        lab::write_lab_json(o.lab, j);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app(
        "Lab 04: TTFT and TPOT. A queue of requests arrives at random times (Poisson, --rate per\n"
        "second) in front of ONE model that serves them one at a time, first come first served.\n"
        "Each request is tokenized, prefilled, sampled and decoded for real, its tokens streamed\n"
        "with timestamps; your functions (exercise.cpp) turn those timestamps into the metrics a\n"
        "serving benchmark reports: TTFT, TPOT, ITL and E2EL, with mean, median, p90 and p99,\n"
        "and goodput: the requests per second served within a latency objective (--slo-*).\n"
        "The queueing time is shown apart from the prefill time, because TTFT includes both.\n\n"
        "Example: 04-ttft-and-tpot --requests 64 --rate auto --load 0.95\n"
        "         04-ttft-and-tpot --model synthetic:bench-llama-125m --requests 16 --prompt-len 256",
        "04-ttft-and-tpot");
    cli::add_common(&app, o.lab);
    app.add_option("--requests,-N", o.requests, "how many requests arrive")->capture_default_str();
    app.add_option("--rate", o.rate,
                   "arrival rate in requests/s (Poisson: random gaps with this mean rate); auto = "
                   "--load times what one server can finish; inf = all at once (a burst)")
        ->capture_default_str();
    app.add_option("--load", o.load,
                   "for --rate auto: the fraction of the server's capacity that arrives (0.8 keeps it "
                   "80% busy; near or above 1 the queue grows without bound)")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the arrival times and the prompts")->capture_default_str();
    app.add_option("--prompt-len,-P", o.prompt_len, "prompt tokens per request")->capture_default_str();
    app.add_option("--output-len,-n", o.output_len, "output tokens per request")->capture_default_str();
    app.add_option("--range-ratio", o.range_ratio,
                   "vary lengths: each request's prompt and output length is drawn uniformly from "
                   "[L(1-r), L(1+r)] (0: all the same)")
        ->capture_default_str();
    app.add_option("--temperature", o.sampler.temperature, "sampling temperature; 0 is greedy")
        ->capture_default_str();
    app.add_option("--top-k", o.sampler.top_k, "sample among the k most likely tokens (0: all)")
        ->capture_default_str();
    app.add_option("--top-p", o.sampler.top_p, "nucleus sampling threshold in (0, 1]")->capture_default_str();
    app.add_flag("--stop-at-eos", o.stop_at_eos,
                 "end an answer at the model's end-of-text token (default: always generate "
                 "--output-len tokens, as serving benchmarks do, so every request does the same work)");
    app.add_flag("--cold", o.cold,
                 "skip the warm-up: the first request then pays one-time costs (kernel compilation, "
                 "first touch of memory), which is why a freshly started server's first answer is slow");
    app.add_flag("--no-rate-sweep", o.no_rate_sweep,
                 "skip the table that replays the same services under other arrival rates");
    app.add_option("--timeline", o.timeline, "show this request's tokens as streamed (-1: none)")
        ->capture_default_str();
    app.add_option("--rows", o.rows, "rows of the per-request table to print")->capture_default_str();
    app.add_option("--slo-ttft", o.slo_ttft,
                   "the objective's TTFT limit in ms for goodput (the requests/s served within it); auto = "
                   "twice the mean service time measured; none = no TTFT limit")
        ->capture_default_str();
    app.add_option("--slo-tpot", o.slo_tpot, "the objective's TPOT limit in ms, or none")->capture_default_str();
    app.add_option("--slo-e2el", o.slo_e2el, "the objective's end-to-end limit in ms, or none")
        ->capture_default_str();
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
