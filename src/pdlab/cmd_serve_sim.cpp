// pdlab serve-sim: replay a request trace in real time through the serving
// scheduler on the real engine, and report vLLM's serving metrics.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/replay.hpp"
#include "serve/slot_serving_engine.hpp"
#include "timeline_option.hpp"

namespace pd::cli {

namespace {

struct ServeSimOptions {
    CommonOptions common;
    TimelineOptions timeline;
    std::string trace_file, save_trace;
    serve::TraceSpec spec;
    std::string prompt_len = "uniform:16:64", output_len = "lognormal:32:0.8:4:128";
    serve::StepLimits limits{8, 256, false};
    std::string engine = "paged";
    int block_size = 16;
    int kv_blocks = 0;      // 0: from --kv-mb, else room for --max-seqs of the longest request
    double kv_mb = 0;
    bool no_prefix_cache = false;
    serve::NgramSpeculation speculative;
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

// A number in [lo, hi]; the message says what to give.
CLI::Validator in_range(const std::string& what, double lo, double hi) {
    return CLI::Validator(
        [=](std::string& v) -> std::string {
            char* end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            return end != v.c_str() && *end == 0 && d >= lo && d <= hi ? "" : "must be " + what;
        },
        "(" + what + ")");
}

void add_kv_flags(CLI::App* sub, ServeSimOptions& o) {
    sub->add_option("--engine", o.engine,
        "paged: KV memory in blocks, shared prefixes computed once, one forward pass a step; "
        "slot: one contiguous cache slot per sequence (no prefix cache; also on --device cuda)")
        ->capture_default_str();
    sub->add_option("--block-size", o.block_size, "KV positions per block")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    auto* blocks = sub->add_option("--kv-blocks", o.kv_blocks,
        "paged: blocks in the KV pool (default: room for --max-seqs of the longest request); "
        "fewer makes the scheduler preempt")->check(in_range("a number of blocks >= 1", 1, INT_MAX));
    sub->add_option("--kv-mb", o.kv_mb, "paged: KV memory in MiB instead of --kv-blocks")
        ->excludes(blocks)->check(in_range("a size in MiB > 0", 1e-9, 1e9));
    sub->add_flag("--no-prefix-cache", o.no_prefix_cache,
        "paged: compute every prompt in full, even a prefix another request already computed");
}

void add_speculation_flags(CLI::App* sub, ServeSimOptions& o) {
    auto* k = sub->add_option("--speculative-k", o.speculative.k,
        "speculative decoding without a draft model (prompt lookup): each decode row also brings up to K "
        "tokens that followed the latest earlier occurrence of its last n tokens, the model checks them in "
        "the same pass and keeps those it would have picked itself, so the output stays greedy decoding's "
        "(up to a near tie: a pass of more rows may round differently, most often in bf16). "
        "Pays when outputs repeat their prompt or themselves (quoting, code edits, a small model's loops): "
        "a memory-bound decode step (a large model's) costs about the same with K more rows. Where nothing "
        "repeats, the rows are wasted; where a step's cost grows with its rows (tiny on a CPU: its weights "
        "stay in cache), fewer steps need not mean less time: the summary says both. 0: off")
        ->check(CLI::Range(0, 64))->capture_default_str();
    sub->add_option("--ngram-max", o.speculative.max_n,
        "with --speculative-k: the longest suffix looked up (longer matches predict better)")
        ->check(CLI::Range(1, 64))->needs(k)->capture_default_str();
    sub->add_option("--ngram-min", o.speculative.min_n,
        "with --speculative-k: the shortest suffix looked up when no longer one occurs (1 proposes more "
        "often, and is right far less often: on tiny's repeating stories 31% of proposed tokens kept against 85% with 3)")
        ->check(CLI::Range(1, 64))->needs(k)->capture_default_str();
}

// What `pdlab serve-sim --help` says before the options.
constexpr const char* kServeSimAbout = R"(Serve a stream of requests with one model: every step the scheduler puts the decode
token of each running request and chunks of waiting prompts into ONE batch (continuous
batching), under --max-seqs and --max-tokens-per-step. The trace is replayed in real
time; the table uses vLLM's names (TTFT, TPOT, ITL, E2EL, throughput, goodput).
--static admits a new batch only when the previous one has finished, for comparison.
--engine paged (the default) keeps K/V in blocks of --block-size positions and computes a
prompt prefix that an earlier request already computed only once (prefix caching).
--speculative-k K checks up to K guessed tokens (prompt lookup) with each decode row.
Example: pdlab serve-sim --rate 4 --num-requests 64 --max-seqs 8 --threads 2)";

CLI::App* add_serve_sim_options(CLI::App& app, ServeSimOptions& o) {
    auto* sub = app.add_subcommand("serve-sim", kServeSimAbout);
    add_common(sub, o.common);
    add_workload_flags(sub, o);
    sub->add_option("--max-seqs", o.limits.max_seqs, "sequences running at once (the batch)")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    sub->add_option("--max-tokens-per-step", o.limits.max_tokens_per_step,
        "tokens in one step: decode rows first, then prompt chunks (chunked prefill)")
        ->capture_default_str();
    sub->add_flag("--static", o.limits.static_batching,
        "static batching: wait for the whole batch to finish before admitting the next");
    add_kv_flags(sub, o);
    add_speculation_flags(sub, o);
    sub->add_option("--goodput", o.goodput,
        "a limit a request must meet to count for goodput, KEY:MS with KEY ttft, tpot or e2el "
        "(repeat the flag for several)");
    sub->add_flag("--ignore-eos", o.ignore_eos, "generate max_tokens even past end-of-text");
    sub->add_flag("--quiet", o.quiet, "no progress lines on stderr");
    add_timeline(sub, o.timeline,
                 "Tracks: \"scheduler\" (each step, its batch as args, the engine's pass inside), one "
                 "\"request N\" per request (queued, prefill chunks, decode steps, preempted, finished and "
                 "why), counters of KV blocks used and of running and waiting requests.");
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

// The paged engine's size: --kv-blocks, --kv-mb, else room for max_seqs of the longest request.
serve::PagedOptions paged_options(const ServeSimOptions& o, long long longest) {
    serve::PagedOptions p;
    p.block_size = o.block_size;
    p.threads = o.common.threads;
    p.prefix_caching = !o.no_prefix_cache;
    if (o.kv_mb > 0) {  // the pool then holds as many blocks as fit (none: a message)
        p.kv_bytes = std::size_t(o.kv_mb * 1024 * 1024);
        return p;
    }
    const long long per_seq = (longest + o.block_size - 1) / o.block_size;
    p.total_blocks = o.kv_blocks > 0 ? o.kv_blocks : int(std::min<long long>(INT_MAX, per_seq * o.limits.max_seqs));
    return p;
}

// Before anything loads: an engine that exists, and flags it can use.
void check_engine_flags(const ServeSimOptions& o) {
    if (o.engine != "paged" && o.engine != "slot") fail("--engine \"{}\": use paged or slot", o.engine);
    if (o.engine == "slot" && (o.kv_blocks > 0 || o.kv_mb > 0))
        fail("--kv-blocks and --kv-mb size the paged KV cache: use them with --engine paged");
}

// The engine the scheduler drives (--engine slot: it borrows s.engine).
struct Serving {
    std::unique_ptr<serve::ServingEngine> engine;
    std::size_t bytes_per_position = 0;   // K and V of one position, every layer
    std::string hardware;
};

Serving make_serving(Session& s, const ServeSimOptions& o, long long longest, int context) {
    const Config& c = s.loaded.model->config;
    Serving out;
    out.bytes_per_position = kv_bytes(c.n_layers, c.n_kv_heads, c.head_dim, 1, sizeof(float));
    if (o.engine == "slot") {
        start_engine(s, o.common, o.limits.max_seqs, longest);
        out.hardware = s.engine->hardware();
        out.engine = std::make_unique<serve::SlotServingEngine>(*s.engine, o.block_size);
        return out;
    }
    serve::PagedOptions p = paged_options(o, std::min<long long>(longest, context));
    p.device = parse_device(o.common.device);
    auto paged = serve::make_paged_serving_engine(s.loaded.model, p);
    out.hardware = paged->hardware();
    out.engine = std::move(paged);
    return out;
}

nlohmann::json kv_json(const ServeSimOptions& o, const Serving& sv, const serve::KvCounters& k) {
    const double steps = double(std::max(1LL, k.steps)), block_bytes = double(sv.bytes_per_position) * o.block_size;
    return {{"engine", o.engine}, {"block_size", o.block_size},
            {"prefix_caching", o.engine == "paged" && !o.no_prefix_cache},
            {"total_blocks", sv.engine->total_blocks()}, {"blocks_peak", k.blocks_peak},
            {"reserved_bytes_mean", double(k.block_steps) / steps * block_bytes},
            {"used_bytes_mean", double(k.position_steps) / steps * double(sv.bytes_per_position)},
            {"prefix_hit_rate", k.hit_rate()}, {"sequences_opened", k.opens},
            {"sequences_with_prefix_hit", k.opens_with_hit},
            {"prompt_tokens_computed", k.prompt_tokens - k.skipped_tokens},
            {"prompt_tokens_skipped", k.skipped_tokens}};
}

nlohmann::json speculation_json(const ServeSimOptions& o, const serve::SpeculationStats& st) {
    return {{"k", o.speculative.k}, {"ngram_max", o.speculative.max_n}, {"ngram_min", o.speculative.min_n},
            {"decode_rows", st.decode_rows}, {"verifying_rows", st.verifies}, {"proposed", st.proposed},
            {"accepted", st.accepted}, {"acceptance_rate", st.acceptance_rate()},
            {"tokens_per_verifying_row", st.tokens_per_verify()}};
}

void print_speculation(const ServeSimOptions& o, const serve::SpeculationStats& st) {
    if (o.speculative.k == 0) return;
    std::printf("speculation (n-gram, k %d, n %d..%d): %lld of %lld decode rows had a proposal; %lld tokens "
                "proposed, %lld accepted (%.1f%%); %.2f tokens per verifying row\n",
                o.speculative.k, o.speculative.max_n, o.speculative.min_n, st.verifies, st.decode_rows, st.proposed,
                st.accepted, 100 * st.acceptance_rate(), st.tokens_per_verify());
}

nlohmann::json result_json(const ServeSimOptions& o, const Serving& sv, const serve::KvCounters& k,
                           const serve::ReplayResult& r, const serve::ServingMetrics& m,
                           const serve::SpeculationStats& spec) {
    nlohmann::json j;
    j["model"] = o.common.model;
    j["device"] = o.common.device;
    j["hardware"] = sv.hardware;
    j["scheduler"] = {{"mode", o.limits.static_batching ? "static" : "continuous"},
                      {"max_seqs", o.limits.max_seqs},
                      {"max_tokens_per_step", o.limits.max_tokens_per_step},
                      {"engine", o.engine}, {"block_size", o.block_size}};
    j["metrics"] = serve::metrics_json(m);
    j["kv_cache"] = kv_json(o, sv, k);
    j["speculation"] = speculation_json(o, spec);
    j["steps"] = r.steps;
    j["preemptions"] = r.preemptions;
    j["max_batch"] = r.max_batch;
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t i = 0; i < r.timings.size(); i++)
        per.push_back({{"index", i}, {"arrival_s", r.timings[i].arrival_s},
                       {"prompt_tokens", r.timings[i].prompt_tokens},
                       {"token_s", r.timings[i].token_s}, {"output_ids", r.output_ids[i]},
                       {"finish_reason", serve::finish_reason_name(r.finished[i])}});
    j["per_request"] = per;
    return j;
}

void print_kv_summary(const ServeSimOptions& o, const Serving& sv, const serve::KvCounters& k,
                      const serve::ReplayResult& r) {
    const auto kv = kv_json(o, sv, k);
    std::printf("steps %lld, largest batch %lld sequences, preemptions %lld\n", r.steps, r.max_batch,
                r.preemptions);
    std::printf("prefix cache %s: hit rate %.1f%%, prompt tokens computed %lld, skipped %lld\n",
                kv["prefix_caching"].get<bool>() ? "on" : "off", 100 * k.hit_rate(),
                k.prompt_tokens - k.skipped_tokens, k.skipped_tokens);
    std::printf("KV (%s, blocks of %d): peak %d of %d blocks; mean reserved %.2f MiB, used %.2f MiB\n",
                o.engine.c_str(), o.block_size, k.blocks_peak, sv.engine->total_blocks(),
                kv["reserved_bytes_mean"].get<double>() / (1 << 20), kv["used_bytes_mean"].get<double>() / (1 << 20));
}

int run_serve_sim(ServeSimOptions& o) {
    check_engine_flags(o);
    serve::check_limits(o.limits);
    serve::check_ngram(o.speculative);
    const serve::GoodputLimits goodput = parse_goodput(o.goodput);
    const auto timeline = open_timeline(o.timeline, o.common.device, "pdlab serve-sim");
    Session s = load_session(o.common);
    const Config& c = s.loaded.model->config;
    const serve::Trace trace = make_trace(o, c.vocab_size);
    const int context = o.common.max_seq > 0 ? std::min(o.common.max_seq, c.max_seq_len) : c.max_seq_len;
    const auto requests = serve::trace_requests(trace, s.loaded.tokenizer, c.vocab_size, context);
    Serving sv = make_serving(s, o, serve::longest_request(requests), context);
    if (!o.save_trace.empty()) serve::save_trace_file(o.save_trace, trace);
    serve::CountingServingEngine counted(*sv.engine);
    serve::ContinuousBatching policy;
    const int max_model_len = o.engine == "slot" ? s.engine->max_seq() : context;
    serve::SchedulerConfig sc{o.limits, max_model_len, c.eos_ids, o.ignore_eos, std::nullopt, o.speculative};
    serve::Scheduler scheduler(counted, policy, sc);
    const auto r = serve::replay(scheduler, trace, requests, !o.quiet);
    finish_timeline(timeline.get(), o.timeline.path);
    const auto m = serve::compute_serving_metrics(r.timings, r.duration_s, goodput);
    const std::string title = fmt::format("{} batching, {} req, {}", o.limits.static_batching ? "Static" : "Continuous",
                                          requests.size(), o.common.model);
    std::fputs(serve::format_metrics_table(m, title).c_str(), stdout);
    print_kv_summary(o, sv, counted.counters(), r);
    print_speculation(o, scheduler.speculation());
    if (!o.common.json.empty())
        write_json_file(o.common.json, result_json(o, sv, counted.counters(), r, m, scheduler.speculation()));
    return 0;
}

}  // namespace

Command add_serve_sim(CLI::App& app) { return options_command(app, add_serve_sim_options, run_serve_sim); }

}  // namespace pd::cli
