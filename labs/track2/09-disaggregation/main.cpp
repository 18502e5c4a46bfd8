// Lab 09: prefill and decode on different workers, the KV cache moved between
// them over MPI, against both on one worker.
//
//   ./kit run 09 --prefill 1 --decode 1
//
// which starts it under mpirun (mpirun.sh: mpirun -n 1+P+D --oversubscribe this-program ...).
//
// Rank 0 (the router) prints everything:
//   [1] your four functions tried once (a missing one stops every rank, exit 3)
//   [2] the mixed trace colocated: one paged engine, the track-2 scheduler, --threads
//   [3] the same trace disaggregated: prefill on ranks 1..P, decode on P+1..P+D,
//       each KV transfer packed and unpacked by YOUR functions on YOUR schedule
//   [4] KV bytes per request against prompt length; transfer time, its share of TTFT
//   [5] TTFT, decode ITL p99 with and without long prompts arriving, throughput
//   [6] the shared-memory transfer rate next to DRAM; YOUR split_verdict: the exposed
//       transfer predicted against the measured, and when splitting pays on other links
//   [7] both modes' tokens compared; CSVs for plot.py
// Run alone (no mpirun): [1] and [2], and how to start [3].
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis.hpp"
#include "exercise.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "measure/roofline.hpp"
#include "plot.hpp"
#include "serve/disagg/disagg_timeline.hpp"
#include "serve/disagg/link_probe.hpp"
#include "serve/disagg/mpi_session.hpp"
#include "serve/disagg/router.hpp"
#include "serve/disagg/workers.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/replay.hpp"
#include "load/model_source.hpp"
#include "timeline_option.hpp"

using namespace pd;
namespace fs = std::filesystem;
namespace dg = pd::serve::disagg;
using nlohmann::json;

namespace {

// The link probe: 16 MiB, 5 times (link_probe.hpp).
constexpr std::size_t kProbeBytes = std::size_t(16) << 20;
constexpr int kProbeReps = 5;

constexpr const char* kDefaultModel =
    "synthetic:llama,dim=512,ffn=1536,layers=8,heads=8,kv_heads=2,vocab=4096,ctx=1024";

struct Options {
    cli::CommonOptions lab;
    int prefill = 1, decode = 1;
    int num_requests = 32;
    double rate = 3;
    std::uint64_t seed = 1;
    std::string short_len = "uniform:16:64", output_len = "fixed:48";
    int long_len = 512;
    double long_share = 0.25;
    std::string trace_file;
    int layers_per_message = 0;  // 0: all layers, one message after the prefill
    int worker_threads = 1;
    serve::StepLimits limits{8, 256, false};
    int block_size = 16;
    double rank_timeout = 60;
    int stall_rank = -1;
    double stall_after = 1;
    std::string out = "lab09-results";
    bool no_plot = false, quiet = false;
    cli::TimelineOptions timeline;
};

// ---- [1] The exercise, through the interface the workers call.
dg::KvCodec student_codec(int layers_per_message) {
    dg::KvCodec c;
    c.schedule = [layers_per_message](int n_layers) {
        return lab09::transfer_schedule(n_layers, layers_per_message > 0 ? layers_per_message : n_layers);
    };
    c.floats = lab09::packed_floats;
    c.pack = lab09::pack_kv;
    c.unpack = lab09::unpack_kv;
    return c;
}

void try_exercises() {
    PagedKVCache c = make_paged_kv_cache(1, 1, 2, 1, 1, 8);
    const BlockTable t{{0}, 1};
    std::vector<float> msg(lab09::packed_floats(c, 1, {0, 1}));
    lab09::transfer_schedule(1, 1);
    lab09::pack_kv(c, t, {0, 1}, msg);
    lab09::unpack_kv(msg, {0, 1}, c, t);
    const dg::LayerRange one[] = {{0, 1}};
    lab09::split_verdict({1, 1, 1, 1}, one, 1);
}

// ---- The trace: short prompts, and about long_share of them long, same arrivals.
serve::Trace mixed_trace(const Options& o, int vocab) {
    if (!o.trace_file.empty()) return serve::load_trace_file(o.trace_file);
    serve::TraceSpec spec;
    spec.num_requests = o.num_requests;
    spec.rate_per_s = o.rate;
    spec.seed = o.seed;
    spec.prompt_len = serve::parse_length_dist(o.short_len, "--short-len");
    spec.output_len = serve::parse_length_dist(o.output_len, "--output-len");
    spec.token_lo = std::min(3, vocab - 1);
    spec.token_hi = vocab;
    serve::Trace t = serve::generate_trace(spec);
    spec.prompt_len = {serve::LengthDist::Kind::fixed, o.long_len, o.long_len};
    spec.seed = o.seed + 1;
    const serve::Trace longs = serve::generate_trace(spec);
    std::mt19937_64 pick(o.seed);
    for (std::size_t i = 0; i < t.size(); i++)
        if (double(pick() >> 11) * 0x1.0p-53 < o.long_share) t[i].prompt_ids = longs[i].prompt_ids;
    return t;
}

int max_len(std::span<const serve::Request> reqs, int context) {
    return int(std::min<long long>(serve::longest_request(reqs), context));
}

int blocks_for_len(int len, int block_size) { return (len + block_size - 1) / block_size; }

// ---- [2] Colocated: the track-2 scheduler on one paged engine.
serve::ReplayResult run_colocated(std::shared_ptr<const Model> model, const Options& o, const serve::Trace& trace,
                                  const std::vector<serve::Request>& reqs) {
    const Config& c = model->config;
    const int blocks = o.limits.max_seqs * blocks_for_len(max_len(reqs, c.max_seq_len), o.block_size);
    serve::PagedServingEngine engine(model, {o.block_size, blocks, 0, o.lab.threads, false});
    serve::ContinuousBatching policy;
    // ignore_eos: every request produces its max_tokens, the context allowing, in both modes (the decode
    // workers are told to ignore EOS too), and both end at the context by the engine's one stop rule.
    serve::Scheduler s(engine, policy, {o.limits, c.max_seq_len, c.eos_ids, true, std::nullopt});
    return serve::replay(s, trace, reqs, !o.quiet, "colocated");  // a process of its own on a timeline
}

// ---- Reports.
struct ModeSummary {
    serve::ServingMetrics m;
    serve::MetricSummary itl_long, itl_quiet;  // gaps with / without a long prompt arriving
};

ModeSummary summarize(std::span<const serve::RequestTiming> t, double duration_s, int long_from) {
    const lab09::ItlSplit s = lab09::split_itl(t, long_from);
    return {serve::compute_serving_metrics(t, duration_s), serve::summarize_metric(s.with_long_ms),
            serve::summarize_metric(s.without_long_ms)};
}

void print_mode(const char* mode, const ModeSummary& s) {
    std::printf("  %-14s %8.0f %8.0f %8.1f %8.1f %10.1f (%4d) %10.1f (%4d) %9.1f\n", mode, s.m.ttft_ms.median,
                s.m.ttft_ms.p99, s.m.itl_ms.median, s.m.itl_ms.p99, s.itl_long.p99, s.itl_long.n, s.itl_quiet.p99,
                s.itl_quiet.n, s.m.output_throughput);
}

json mode_json(const ModeSummary& s) {
    json j = serve::metrics_json(s.m);
    j["p99_itl_long_arriving_ms"] = s.itl_long.p99;
    j["p99_itl_none_arriving_ms"] = s.itl_quiet.p99;
    j["itl_long_arriving_n"] = s.itl_long.n;
    j["itl_none_arriving_n"] = s.itl_quiet.n;
    return j;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// [4] KV bytes against prompt length, and what moving them cost, at up to 8 prompt lengths.
void print_transfers(const dg::DisaggResult& d) {
    std::vector<std::size_t> by_len(d.timings.size());
    for (std::size_t i = 0; i < by_len.size(); i++) by_len[i] = i;
    std::sort(by_len.begin(), by_len.end(),
              [&](auto a, auto b) { return d.timings[a].prompt_tokens < d.timings[b].prompt_tokens; });
    std::printf("\n[4] the KV each request moved (a row every few requests, by prompt length)\n");
    std::printf("  prompt   KV bytes   per token   transfer ms   of which after prefill   TTFT ms   share of TTFT\n");
    const std::size_t n = by_len.size(), rows = std::min<std::size_t>(8, n);
    for (std::size_t k = 0; k < rows; k++) {
        const std::size_t i = by_len[rows > 1 ? k * (n - 1) / (rows - 1) : 0];
        const auto& x = d.transfers[i];
        const double ttft = 1e3 * (d.timings[i].token_s.front() - d.timings[i].arrival_s);
        std::printf("  %6d %10.0f %11.0f %13.2f %24.2f %9.1f %14.1f%%\n", d.timings[i].prompt_tokens, x.bytes,
                    x.bytes / d.timings[i].prompt_tokens, 1e3 * x.wire_s(), 1e3 * x.exposed_s(), ttft,
                    100 * x.exposed_s() * 1e3 / ttft);
    }
}

// [6] YOUR split_verdict on one long prompt's measured bytes, prefill time and
// stall: first at the probed link rate with this run's schedule, against the
// exposed time measured; then over 10, 100 and 400 Gb/s, with one message
// after the prefill and with one message a layer.
struct LinkRow {
    double gbps = 0;
    lab09::SplitVerdict once, per_layer;
};

std::vector<LinkRow> split_table(lab09::SplitCase c, const std::vector<dg::LayerRange>& plan, int n_layers,
                                 const std::vector<double>& measured_exposed_ms) {
    const lab09::SplitVerdict here = lab09::split_verdict(c, plan, n_layers);
    std::printf("    YOUR split_verdict on a long prompt's medians (KV %.1f MB, prefill %.1f ms, decode stall "
                "removed %.1f ms: colocated ITL p99 with long prompts arriving minus without)\n"
                "    at the probed %.1f Gb/s with this run's %zu message%s: exposed %.2f ms predicted, %.2f ms "
                "measured (median after-prefill time of the long prompts, [4])\n",
                c.kv_bytes / 1e6, c.prefill_ms, c.stall_ms, c.link_gbps, plan.size(), plan.size() > 1 ? "s" : "",
                here.exposed_ms, median(measured_exposed_ms));
    std::printf("    A MODEL for other links (bytes over rate, the pipeline of exercise.hpp; no latency, no "
                "protocol):\n    link       transfer ms   exposed, one message   exposed, a message a layer   pays "
                "(one / per layer)\n");
    std::vector<LinkRow> rows;
    for (double gbps : {10.0, 100.0, 400.0}) {
        c.link_gbps = gbps;
        rows.push_back({gbps, lab09::split_verdict(c, lab09::transfer_schedule(n_layers, n_layers), n_layers),
                        lab09::split_verdict(c, lab09::transfer_schedule(n_layers, 1), n_layers)});
        const LinkRow& r = rows.back();
        std::printf("    %4.0f Gb/s %12.2f %22.2f %28.2f   %s / %s\n", gbps, r.once.transfer_ms, r.once.exposed_ms,
                    r.per_layer.exposed_ms, r.once.pays ? "yes" : "no", r.per_layer.pays ? "yes" : "no");
    }
    return rows;
}

void write_csvs(const fs::path& dir, const serve::ReplayResult& co, const dg::DisaggResult& d, int long_from,
                const std::vector<LinkRow>& links) {
    fs::create_directories(dir);
    std::ofstream req(dir / "requests.csv"), itl(dir / "itl.csv"), link(dir / "links.csv");
    req << "id,prompt_tokens,kv_bytes,wire_ms,exposed_ms,ttft_disagg_ms,ttft_colocated_ms\n";
    for (std::size_t i = 0; i < d.timings.size(); i++)
        req << fmt::format("{},{},{},{},{},{},{}\n", i, d.timings[i].prompt_tokens, d.transfers[i].bytes,
                           1e3 * d.transfers[i].wire_s(), 1e3 * d.transfers[i].exposed_s(),
                           1e3 * (d.timings[i].token_s.front() - d.timings[i].arrival_s),
                           1e3 * (co.timings[i].token_s.front() - co.timings[i].arrival_s));
    itl << "mode,long_arriving,itl_ms\n";
    for (const auto& [mode, t] : {std::pair{"colocated", &co.timings}, std::pair{"disaggregated", &d.timings}}) {
        const lab09::ItlSplit s = lab09::split_itl(*t, long_from);
        for (double x : s.with_long_ms) itl << mode << ",1," << x << "\n";
        for (double x : s.without_long_ms) itl << mode << ",0," << x << "\n";
    }
    link << "gbps,transfer_ms,exposed_one_message_ms,exposed_per_layer_ms,pays_one_message,pays_per_layer\n";
    for (const auto& l : links)
        link << fmt::format("{},{},{},{},{},{}\n", l.gbps, l.once.transfer_ms, l.once.exposed_ms,
                            l.per_layer.exposed_ms, int(l.once.pays), int(l.per_layer.pays));
    if (!req || !itl || !link) fail("cannot write the CSV files in {}", dir.string());
}

// ---- Rank 0.
struct Prepared {
    cli::Session s;
    serve::Trace trace;
    std::vector<serve::Request> reqs;
};

// Everything that can be wrong with the input, found before any worker starts.
void check_options(const Options& o, const dg::MpiSession& mpi) {
    serve::check_limits(o.limits);
    if (o.long_share < 0 || o.long_share > 1) fail("--long-share {}: give a share between 0 and 1", o.long_share);
    const int need = 1 + o.prefill + o.decode;
    if (mpi.size() > 1 && mpi.size() != need)
        fail("mpirun started {} ranks; --prefill {} --decode {} need {} (one router and the workers): "
             "run mpirun -n {} --oversubscribe ...", mpi.size(), o.prefill, o.decode, need, need);
    if (o.stall_rank != -1 && (o.stall_rank < 1 || o.stall_rank >= need))
        fail("--stall-rank {}: give a worker rank, 1 to {}", o.stall_rank, need - 1);
}

// Rank 0 tells the workers once: go (kGo, with the pool size) or stop with an exit code.
constexpr int kGo = -1;
struct Launch {
    bool told = false;
    void tell(const dg::MpiSession& mpi, int code, int len) {
        if (told || mpi.size() < 2) return;
        told = true;
        int words[1] = {len};
        dg::broadcast_from_router(code, words, 1);
    }
};

int run_router_rank(Options& o, const dg::MpiSession& mpi, Launch& launch) {
    check_options(o, mpi);
    // Rank 0 alone records, from the times the router collects (disagg_timeline.hpp).
    const auto timeline = cli::open_timeline(o.timeline, o.lab.device, "lab 09");
    cli::Session s = cli::load_session(o.lab);
    auto model = s.loaded.model;
    const Config& c = model->config;
    const serve::Trace trace = mixed_trace(o, c.vocab_size);
    const auto reqs = serve::trace_requests(trace, s.loaded.tokenizer, c.vocab_size, c.max_seq_len);
    try_exercises();  // after the input checks: bad input says so even before the exercise is done
    const int long_from = o.trace_file.empty() ? o.long_len : 256;
    std::printf("Lab 09: disaggregated prefill and decode\nmodel    %s\nhardware %s\n", o.lab.model.c_str(),
                cpu_summary().c_str());
    std::printf("trace    %zu requests, Poisson %.1f req/s; prompts %s, %.0f%% of them %d tokens; outputs %s "
                "(EOS ignored)\n", reqs.size(), o.rate, o.short_len.c_str(), 100 * o.long_share, o.long_len,
                o.output_len.c_str());
    std::printf("\n[1] your transfer schedule, packed_floats, pack_kv, unpack_kv and split_verdict answer (ok)\n");

    std::printf("\n[2] colocated: one engine does prefill and decode (%d threads, continuous batching, "
                "%d tokens a step)\n", o.lab.threads, o.limits.max_tokens_per_step);
    const serve::ReplayResult co = run_colocated(model, o, trace, reqs);
    const ModeSummary cs = summarize(co.timings, co.duration_s, long_from);

    if (mpi.size() < 2) {
        std::printf("\n[3] disaggregated: needs workers, one MPI rank each. ./kit run 09 starts them under mpirun;\n"
                    "    by hand: mpirun -n 3 --oversubscribe %s --prefill 1 --decode 1\n", "build/labs/track2/09-disaggregation/09-disaggregation");
        std::printf("\n  mode            TTFT p50      p99  ITL p50      p99  p99 long arriving  p99 none arriving  tok/s\n");
        print_mode("colocated", cs);
        cli::finish_timeline(timeline.get(), o.timeline.path);
        return lab::finish(true);
    }
    launch.tell(mpi, kGo, max_len(reqs, c.max_seq_len));
    const double link_gbps = dg::link_probe({o.prefill, o.decode}, 0, kProbeBytes, kProbeReps);
    const std::vector<dg::LayerRange> plan = student_codec(o.layers_per_message).schedule(c.n_layers);
    std::printf("\n[3] disaggregated: %d prefill + %d decode workers (%d thread each), KV sent in %zu message%s "
                "a request%s\n", o.prefill, o.decode, o.worker_threads, plan.size(), plan.size() > 1 ? "s" : "",
                plan.size() > 1 ? ", each as its layers are computed" : ", after the prefill");
    dg::RouterOptions ro{{o.prefill, o.decode}, o.rank_timeout, !o.quiet};
    const dg::DisaggResult d = dg::run_router(trace, reqs, ro);
    if (timeline)
        dg::record_disagg_run(timeline->timeline(),
                              fmt::format("disaggregated: {} prefill + {} decode workers", o.prefill, o.decode),
                              ro.layout, d);
    cli::finish_timeline(timeline.get(), o.timeline.path);
    const ModeSummary ds = summarize(d.timings, d.duration_s, long_from);

    print_transfers(d);
    std::printf("\n[5] serving (ms; ITL split by whether a prompt of >= %d tokens was waiting for its first token)\n",
                long_from);
    std::printf("  mode            TTFT p50      p99  ITL p50      p99  p99 long arriving  p99 none arriving  tok/s\n");
    print_mode("colocated", cs);
    print_mode("disaggregated", ds);

    double bytes = 0, wire = 0;
    std::vector<double> long_bytes, long_prefill, long_exposed;
    for (std::size_t i = 0; i < d.transfers.size(); i++) {
        const dg::TransferRecord& x = d.transfers[i];
        bytes += x.bytes, wire += x.wire_s();
        if (d.timings[i].prompt_tokens >= long_from) {
            long_bytes.push_back(x.bytes);
            long_prefill.push_back(1e3 * (x.prefill_end_s - x.prefill_start_s));
            long_exposed.push_back(1e3 * x.exposed_s());
        }
    }
    const double dram = quick_bandwidth(0.3).best_gbps, in_trace = bytes / wire / 1e9;
    std::printf("\n[6] prefill worker 0 -> decode worker 0, one %zu MiB message at a time: %.2f GB/s; this machine's "
                "DRAM read bandwidth: %.1f GB/s\n    during the trace: %.3f GB/s (all KV bytes / all time from first "
                "post to last block in place: compute and polling included)\n",
                kProbeBytes >> 20, link_gbps, dram, in_trace);
    const double stall = std::max(0.0, cs.itl_long.p99 - cs.itl_quiet.p99);
    const lab09::SplitCase measured{median(long_bytes), median(long_prefill), 8 * link_gbps, stall};
    const std::vector<LinkRow> links = split_table(measured, plan, c.n_layers, long_exposed);

    const bool same = d.output_ids == co.output_ids;
    std::printf("\n[7] every request got the same tokens in both modes: %s\n",
                same ? "yes (ok)" : "NO (check failed: a block, a layer or K/V out of place?)");
    write_csvs(o.out, co, d, long_from, links);
    json j;
    j["model"] = o.lab.model;
    j["hardware"] = cpu_summary();
    j["prefill_workers"] = o.prefill;
    j["decode_workers"] = o.decode;
    j["messages_per_transfer"] = plan.size();
    j["colocated"] = mode_json(cs);
    j["disaggregated"] = mode_json(ds);
    j["link_gbps"] = link_gbps;
    j["in_trace_gbps"] = in_trace;
    j["dram_gbps"] = dram;
    j["kv_bytes"] = json::array();
    for (const auto& x : d.transfers) j["kv_bytes"].push_back(x.bytes);
    j["same_tokens"] = same;
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track2/09-disaggregation", o.out, o.no_plot,
                   "disagg.png and .svg (KV bytes, transfer share of TTFT, ITL with and without long prompts)");
    return lab::finish(same);
}

// ---- Ranks 1..P+D: wait for the router's word, then serve until it says stop.
int run_worker_rank(CLI::App& app, int argc, char** argv, Options& o, const dg::MpiSession& mpi) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError&) {
    }  // rank 0 parses the same argv and says what is wrong
    int code = kGo, words[1] = {0};
    dg::broadcast_from_router(code, words, 1);
    if (code != kGo) return code;
    const dg::Layout layout{o.prefill, o.decode};
    try {
        auto model = load_model(o.lab.model, cli::precision_of(o.lab), false).model;
        const dg::KvCodec codec = student_codec(o.layers_per_message);
        dg::link_probe(layout, mpi.rank(), kProbeBytes, kProbeReps);
        // ignore_eos, as colocated: every request produces its max_tokens in both modes.
        const dg::WorkerOptions w{o.block_size, o.limits.max_seqs, words[0], o.worker_threads,
                                  mpi.rank() == o.stall_rank ? o.stall_after : -1.0, true};
        if (layout.is_prefill(mpi.rank())) dg::run_prefill_worker(model, codec, w);
        else dg::run_decode_worker(model, codec, w);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s (rank %d): %s\n", layout.role(mpi.rank()).c_str(), mpi.rank(), e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    dg::MpiSession mpi(argc, argv);
    Options o;
    o.lab.model = kDefaultModel;
    o.lab.threads = 2;
    CLI::App app(
        "Lab 09: prefill and decode on different workers. A long prompt's prefill takes the engine\n"
        "for a long step, and every running stream waits: colocated, its inter-token latency\n"
        "jumps. Split the two phases over MPI ranks (a router, P prefill workers, D decode workers)\n"
        "and decode never waits for a prefill, at the price of moving each request's KV cache from\n"
        "a prefill worker to a decode worker. This program runs one mixed trace (short prompts and\n"
        "some long ones, streaming answers) both ways, with YOUR packing and transfer schedule\n"
        "(exercise.cpp), and prints the KV bytes moved, what moving them cost, the ITL with and\n"
        "without long prompts arriving, and YOUR model of when splitting pays. Run it with\n"
        "  ./kit run 09 --prefill 1 --decode 1\n"
        "which starts 1 + P + D ranks under mpirun (mpirun.sh shows how); alone, without\n"
        "mpirun, it runs the colocated half. CSVs go into --out; plot.py draws them.",
        "09-disaggregation");
    cli::add_common(&app, o.lab);
    app.add_option("--prefill", o.prefill, "prefill workers (MPI ranks 1..P)")->check(CLI::Range(1, 64))->capture_default_str();
    app.add_option("--decode", o.decode, "decode workers (ranks P+1..P+D)")->check(CLI::Range(1, 64))->capture_default_str();
    app.add_option("--num-requests", o.num_requests, "requests in the trace")->check(CLI::Range(1, 100000))
        ->capture_default_str();
    app.add_option("--rate", o.rate, "Poisson arrivals, requests per second")->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the trace")->capture_default_str();
    app.add_option("--short-len", o.short_len, "prompt lengths: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:LO:HI]")
        ->capture_default_str();
    app.add_option("--long-len", o.long_len, "tokens of a long prompt")->check(CLI::Range(1, 1 << 20))->capture_default_str();
    app.add_option("--long-share", o.long_share, "share of the requests with a long prompt (0 to 1)")->capture_default_str();
    app.add_option("--output-len", o.output_len, "output lengths, the same forms")->capture_default_str();
    app.add_option("--trace", o.trace_file, "a JSONL trace instead (pdlab trace writes one); prompts of >= 256 "
                   "tokens count as long")->check(CLI::ExistingFile);
    app.add_option("--layers-per-message", o.layers_per_message,
                   "layers in one KV message: 1 sends each layer as soon as it is computed; 0: all, after the prefill")
        ->check(CLI::Range(0, 1 << 16))->capture_default_str();
    app.add_option("--worker-threads", o.worker_threads, "OpenMP threads of each worker rank")->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_option("--max-seqs", o.limits.max_seqs, "sequences decoded together (colocated, and each decode worker)")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    app.add_option("--max-tokens-per-step", o.limits.max_tokens_per_step, "colocated: token budget of a step "
                   "(long prompts come in chunks of it)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
    app.add_option("--block-size", o.block_size, "positions per KV block")->check(CLI::Range(1, 4096))->capture_default_str();
    app.add_option("--rank-timeout", o.rank_timeout, "seconds a worker that owes work may stay silent before the "
                   "router names it and stops the run")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--stall-rank", o.stall_rank, "testing the watchdog: this worker rank stops answering");
    app.add_option("--stall-after", o.stall_after, "... this many seconds after it starts")->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--out,-o", o.out, "folder for the CSVs and the plot")->capture_default_str();
    app.add_flag("--no-plot", o.no_plot, "write the CSVs only; print the command that draws them");
    app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
    cli::add_timeline(&app, o.timeline,
                      "Written by rank 0: the colocated replay (its scheduler's steps, one track per request) and "
                      "the disaggregated run (a track per prefill rank, a counter of the sequences on each decode "
                      "rank, one track per request: queued, prefill, the KV transfer the prefill did not hide, "
                      "decode). --timeline-detail phases keeps it small.");
    if (mpi.rank() != 0) return run_worker_rank(app, argc, argv, o, mpi);
    Launch launch;
    const int rc = lab::run_lab(app, argc, argv, [&] { return run_router_rank(o, mpi, launch); });
    launch.tell(mpi, rc, 0);  // help, bad input, a missing exercise: the workers stop with the same code
    return rc;
}
