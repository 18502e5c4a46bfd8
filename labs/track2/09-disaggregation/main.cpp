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
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lab09.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "plot.hpp"
#include "trace_spec.hpp"
#include "serve/disagg/disagg_timeline.hpp"
#include "serve/disagg/link_probe.hpp"
#include "serve/paged_serving_engine.hpp"

using namespace pd;
using namespace pd::lab09;
using nlohmann::json;

namespace {

constexpr const char* kDefaultModel =
    "synthetic:llama,dim=512,ffn=1536,layers=8,heads=8,kv_heads=2,vocab=4096,ctx=1024";

// [1] YOUR functions, once on tiny inputs.
void try_exercises() {
    PagedKVCache c = make_paged_kv_cache(1, 1, 2, 1, 1, 8);
    const BlockTable t{{0}, 1};
    std::vector<float> msg(packed_floats(c, 1, {0, 1}));
    transfer_schedule(1, 1);
    pack_kv(c, t, {0, 1}, msg);
    unpack_kv(msg, {0, 1}, c, t);
    const dg::LayerRange one[] = {{0, 1}};
    split_verdict({1, 1, 1, 1}, one, 1);
}

// ---- The trace: short prompts, and about long_share of them long, same arrivals.
serve::Trace mixed_trace(const Options& o, int vocab) {
    if (!o.trace_file.empty()) return serve::load_trace_file(o.trace_file);
    serve::TraceSpec spec =
        lab::poisson_trace(o.num_requests, o.rate, o.seed, o.short_len, "--short-len", o.output_len, vocab);
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

// ---- Rank 0.

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

    const LinkReport links = print_links(d, cs, link_gbps, plan, c.n_layers, long_from);

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
    j["in_trace_gbps"] = links.in_trace_gbps;
    j["dram_gbps"] = links.dram_gbps;
    j["kv_bytes"] = json::array();
    for (const auto& x : d.transfers) j["kv_bytes"].push_back(x.bytes);
    j["same_tokens"] = same;
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track2/09-disaggregation", o.out, o.no_plot,
                   "disagg.png and .svg (KV bytes, transfer share of TTFT, ITL with and without long prompts)");
    return lab::finish(same);
}

}  // namespace

int main(int argc, char** argv) {
    dg::MpiSession mpi(argc, argv);
    Options o;
    o.lab.model = kDefaultModel;
    o.lab.threads = 2;
    lab::CommandLine cl(
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
    cl.common(o.lab);
    cl.option("--prefill", o.prefill, "prefill workers (MPI ranks 1..P)").range(1, 64).show_default();
    cl.option("--decode", o.decode, "decode workers (ranks P+1..P+D)").range(1, 64).show_default();
    cl.option("--num-requests", o.num_requests, "requests in the trace").range(1, 100000).show_default();
    cl.option("--rate", o.rate, "Poisson arrivals, requests per second").positive().show_default();
    cl.option("--seed", o.seed, "seed of the trace").show_default();
    cl.option("--short-len", o.short_len, "prompt lengths: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:LO:HI]")
        .show_default();
    cl.option("--long-len", o.long_len, "tokens of a long prompt").range(1, 1 << 20).show_default();
    cl.option("--long-share", o.long_share, "share of the requests with a long prompt (0 to 1)").show_default();
    cl.option("--output-len", o.output_len, "output lengths, the same forms").show_default();
    cl.option("--trace", o.trace_file, "a JSONL trace instead (pdlab trace writes one); prompts of >= 256 "
              "tokens count as long").existing_file();
    cl.option("--layers-per-message", o.layers_per_message,
              "layers in one KV message: 1 sends each layer as soon as it is computed; 0: all, after the prefill")
        .range(0, 1 << 16).show_default();
    cl.option("--worker-threads", o.worker_threads, "OpenMP threads of each worker rank").range(1, 1024).show_default();
    cl.option("--max-seqs", o.limits.max_seqs, "sequences decoded together (colocated, and each decode worker)")
        .range(1, 4096).show_default();
    cl.option("--max-tokens-per-step", o.limits.max_tokens_per_step, "colocated: token budget of a step "
              "(long prompts come in chunks of it)").range(1, 1 << 20).show_default();
    cl.option("--block-size", o.block_size, "positions per KV block").range(1, 4096).show_default();
    cl.option("--rank-timeout", o.rank_timeout, "seconds a worker that owes work may stay silent before the "
              "router names it and stops the run").positive().show_default();
    cl.option("--stall-rank", o.stall_rank, "testing the watchdog: this worker rank stops answering");
    cl.option("--stall-after", o.stall_after, "... this many seconds after it starts").non_negative().show_default();
    cl.option("--out,-o", o.out, "folder for the CSVs and the plot").show_default();
    cl.flag("--no-plot", o.no_plot, "write the CSVs only; print the command that draws them");
    cl.flag("--quiet", o.quiet, "no progress lines on stderr");
    cl.timeline(o.timeline,
                "Written by rank 0: the colocated replay (its scheduler's steps, one track per request) and "
                "the disaggregated run (a track per prefill rank, a counter of the sequences on each decode "
                "rank, one track per request: queued, prefill, the KV transfer the prefill did not hide, "
                "decode). --timeline-detail phases keeps it small.");
    if (mpi.rank() != 0) return run_worker_rank(cl, argc, argv, o, mpi);
    Launch launch;
    const int rc = lab::run_lab(cl, argc, argv, [&] { return run_router_rank(o, mpi, launch); });
    launch.tell(mpi, rc, 0);  // help, bad input, a missing exercise: the workers stop with the same code
    return rc;
}
