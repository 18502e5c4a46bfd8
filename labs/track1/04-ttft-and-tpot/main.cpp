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
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "arrivals.hpp"
#include "lab04.hpp"
#include "lab_main.hpp"
#include "engine/stop_rule.hpp"

using namespace pd;
using namespace pd::lab04;

namespace {

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

    if (!o.lab.json.empty()) write_json(o, e, rate, capacity, rep, sweep, slo, good, svc, t);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl(
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
    cl.common(o.lab);
    cl.option("--requests,-N", o.requests, "how many requests arrive").show_default();
    cl.option("--rate", o.rate,
              "arrival rate in requests/s (Poisson: random gaps with this mean rate); auto = "
              "--load times what one server can finish; inf = all at once (a burst)").show_default();
    cl.option("--load", o.load,
              "for --rate auto: the fraction of the server's capacity that arrives (0.8 keeps it "
              "80% busy; near or above 1 the queue grows without bound)").show_default();
    cl.option("--seed", o.seed, "seed of the arrival times and the prompts").show_default();
    cl.option("--prompt-len,-P", o.prompt_len, "prompt tokens per request").show_default();
    cl.option("--output-len,-n", o.output_len, "output tokens per request").show_default();
    cl.option("--range-ratio", o.range_ratio,
              "vary lengths: each request's prompt and output length is drawn uniformly from "
              "[L(1-r), L(1+r)] (0: all the same)").show_default();
    cl.option("--temperature", o.sampler.temperature, "sampling temperature; 0 is greedy").show_default();
    cl.option("--top-k", o.sampler.top_k, "sample among the k most likely tokens (0: all)").show_default();
    cl.option("--top-p", o.sampler.top_p, "nucleus sampling threshold in (0, 1]").show_default();
    cl.flag("--stop-at-eos", o.stop_at_eos,
            "end an answer at the model's end-of-text token (default: always generate "
            "--output-len tokens, as serving benchmarks do, so every request does the same work)");
    cl.flag("--cold", o.cold,
            "skip the warm-up: the first request then pays one-time costs (kernel compilation, "
            "first touch of memory), which is why a freshly started server's first answer is slow");
    cl.flag("--no-rate-sweep", o.no_rate_sweep,
            "skip the table that replays the same services under other arrival rates");
    cl.option("--timeline", o.timeline, "show this request's tokens as streamed (-1: none)").show_default();
    cl.option("--rows", o.rows, "rows of the per-request table to print").show_default();
    cl.option("--slo-ttft", o.slo_ttft,
              "the objective's TTFT limit in ms for goodput (the requests/s served within it); auto = "
              "twice the mean service time measured; none = no TTFT limit").show_default();
    cl.option("--slo-tpot", o.slo_tpot, "the objective's TPOT limit in ms, or none").show_default();
    cl.option("--slo-e2el", o.slo_e2el, "the objective's end-to-end limit in ms, or none").show_default();
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
