// pdlab serve-sim: replay a request trace in real time through the serving
// scheduler on the real engine, and report vLLM's serving metrics.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "serve/replay.hpp"
#include "serve/slot_serving_engine.hpp"

namespace pd::cli {

namespace {

struct ServeSimOptions {
    CommonOptions common;
    std::string trace_file, save_trace;
    serve::TraceSpec spec;
    std::string prompt_len = "uniform:16:64", output_len = "lognormal:32:0.8:4:128";
    serve::StepLimits limits{8, 256, false};
    std::string engine = "slot";
    int block_size = 16;
    bool ignore_eos = false, quiet = false;
    std::vector<std::string> goodput;
};

// A rate: a number > 0, or inf (every request at time 0).
CLI::Validator positive_or_inf() {
    return CLI::Validator(
        [](std::string& v) -> std::string {
            char* end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            return end != v.c_str() && *end == 0 && d > 0 ? "" : "must be a number > 0, or inf";
        },
        "(> 0 or inf)");
}

void add_workload_flags(CLI::App* sub, ServeSimOptions& o) {
    auto* file = sub->add_option("--trace", o.trace_file,
        "replay this JSONL trace (one request a line: id, arrival_s, prompt or prompt_ids, "
        "max_tokens[, prefix_group]) instead of generating one");
    auto gen = [&](CLI::Option* opt) { opt->excludes(file)->capture_default_str(); };
    gen(sub->add_option("--rate", o.spec.rate_per_s,
        "requests per second, Poisson arrivals (inf: all at once)")->check(positive_or_inf()));
    gen(sub->add_option("--num-requests", o.spec.num_requests, "requests in the generated trace")
        ->check(CLI::Range(1, 1000000)));
    gen(sub->add_option("--seed", o.spec.seed, "seed of the generated trace (same seed, same trace)"));
    gen(sub->add_option("--prompt-len", o.prompt_len,
        "prompt tokens: fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA[:LO:HI]"));
    gen(sub->add_option("--output-len", o.output_len, "max_tokens of each request, the same forms"));
    gen(sub->add_option("--shared-prefix-fraction", o.spec.shared_prefix_fraction,
        "share of requests whose prompt starts with a shared prefix")->check(CLI::Range(0.0, 1.0)));
    gen(sub->add_option("--prefix-len", o.spec.prefix_len, "tokens of each shared prefix")
        ->check(CLI::Range(0, 1 << 20)));
    sub->add_option("--save-trace", o.save_trace, "also write the trace replayed to this JSONL file");
}

CLI::App* add_serve_sim_options(CLI::App& app, ServeSimOptions& o) {
    auto* sub = app.add_subcommand("serve-sim",
        "Serve a stream of requests with one model: every step the scheduler puts the decode\n"
        "token of each running request and chunks of waiting prompts into ONE batch (continuous\n"
        "batching), under --max-seqs and --max-tokens-per-step. The trace is replayed in real\n"
        "time; the table uses vLLM's names (TTFT, TPOT, ITL, E2EL, throughput, goodput).\n"
        "--static admits a new batch only when the previous one has finished, for comparison.\n"
        "Example: pdlab serve-sim --rate 4 --num-requests 64 --max-seqs 8 --threads 2");
    add_common(sub, o.common);
    add_workload_flags(sub, o);
    sub->add_option("--max-seqs", o.limits.max_seqs, "sequences running at once (the batch)")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    sub->add_option("--max-tokens-per-step", o.limits.max_tokens_per_step,
        "tokens in one step: decode rows first, then prompt chunks (chunked prefill)")
        ->capture_default_str();
    sub->add_flag("--static", o.limits.static_batching,
        "static batching: wait for the whole batch to finish before admitting the next");
    sub->add_option("--engine", o.engine,
        "slot: one contiguous cache slot per sequence; paged: the paged KV cache (not built yet)")
        ->capture_default_str();
    sub->add_option("--block-size", o.block_size, "KV positions per block")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    sub->add_option("--goodput", o.goodput,
        "a limit a request must meet to count for goodput, KEY:MS with KEY ttft, tpot or e2el "
        "(repeat the flag for several)");
    sub->add_flag("--ignore-eos", o.ignore_eos, "generate max_tokens even past end-of-text");
    sub->add_flag("--quiet", o.quiet, "no progress lines on stderr");
    return sub;
}

serve::GoodputLimits parse_goodput(const std::vector<std::string>& items) {
    serve::GoodputLimits g;
    for (const std::string& item : items) {
        const auto colon = item.find(':');
        const std::string key = item.substr(0, colon);
        double ms = -1;
        try {
            ms = colon == std::string::npos ? -1 : std::stod(item.substr(colon + 1));
        } catch (const std::exception&) {
        }
        if (!(ms > 0) || (key != "ttft" && key != "tpot" && key != "e2el"))
            fail("--goodput \"{}\": use KEY:MS with KEY ttft, tpot or e2el and MS > 0, e.g. ttft:500", item);
        (key == "ttft" ? g.ttft_ms : key == "tpot" ? g.tpot_ms : g.e2el_ms) = ms;
    }
    return g;
}

serve::Trace make_trace(ServeSimOptions& o, int vocab) {
    if (!o.trace_file.empty()) return serve::load_trace_file(o.trace_file);
    o.spec.prompt_len = serve::parse_length_dist(o.prompt_len, "--prompt-len");
    o.spec.output_len = serve::parse_length_dist(o.output_len, "--output-len");
    o.spec.token_lo = std::min(3, vocab - 1);  // past the usual special ids (pad, bos, eos)
    o.spec.token_hi = vocab;
    return serve::generate_trace(o.spec);
}

nlohmann::json result_json(const ServeSimOptions& o, const Engine& engine,
                           const serve::ReplayResult& r, const serve::ServingMetrics& m) {
    nlohmann::json j;
    j["model"] = o.common.model;
    j["device"] = device_name(engine.device());
    j["hardware"] = engine.hardware();
    j["scheduler"] = {{"mode", o.limits.static_batching ? "static" : "continuous"},
                      {"max_seqs", o.limits.max_seqs},
                      {"max_tokens_per_step", o.limits.max_tokens_per_step},
                      {"engine", o.engine}, {"block_size", o.block_size}};
    j["metrics"] = serve::metrics_json(m);
    j["steps"] = r.steps;
    j["preemptions"] = r.preemptions;
    j["max_batch"] = r.max_batch;
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t i = 0; i < r.timings.size(); i++)
        per.push_back({{"index", i}, {"arrival_s", r.timings[i].arrival_s},
                       {"prompt_tokens", r.timings[i].prompt_tokens},
                       {"token_s", r.timings[i].token_s},
                       {"finish_reason", serve::finish_reason_name(r.finished[i])}});
    j["per_request"] = per;
    return j;
}

int run_serve_sim(ServeSimOptions& o) {
    if (o.engine == "paged")
        fail("--engine paged: the paged KV cache is not built into this kit yet; use --engine slot");
    if (o.engine != "slot") fail("--engine \"{}\": use slot (or paged, once it is built)", o.engine);
    serve::check_limits(o.limits);
    const serve::GoodputLimits goodput = parse_goodput(o.goodput);
    Session s = load_session(o.common);
    const Config& c = s.loaded.model->config;
    const serve::Trace trace = make_trace(o, c.vocab_size);
    const int context = o.common.max_seq > 0 ? std::min(o.common.max_seq, c.max_seq_len) : c.max_seq_len;
    const auto requests = serve::trace_requests(trace, s.loaded.tokenizer, c.vocab_size, context);
    start_engine(s, o.common, o.limits.max_seqs, serve::longest_request(requests));
    if (!o.save_trace.empty()) serve::save_trace_file(o.save_trace, trace);
    serve::SlotServingEngine serving(*s.engine, o.block_size);
    serve::ContinuousBatching policy;
    serve::SchedulerConfig sc{o.limits, s.engine->max_seq(), c.eos_id, o.ignore_eos, nullptr};
    serve::Scheduler scheduler(serving, policy, sc);
    const auto r = serve::replay(scheduler, trace, requests, !o.quiet);
    const auto m = serve::compute_serving_metrics(r.timings, r.duration_s, goodput);
    const std::string title = fmt::format("{} batching, {} req, {}", o.limits.static_batching ? "Static" : "Continuous",
                                          requests.size(), o.common.model);
    std::fputs(serve::format_metrics_table(m, title).c_str(), stdout);
    std::printf("steps %lld, largest batch %lld sequences, preemptions %lld\n", r.steps, r.max_batch,
                r.preemptions);
    if (!o.common.json.empty()) write_json_file(o.common.json, result_json(o, *s.engine, r, m));
    return 0;
}

}  // namespace

Command add_serve_sim(CLI::App& app) { return options_command(app, add_serve_sim_options, run_serve_sim); }

}  // namespace pd::cli
