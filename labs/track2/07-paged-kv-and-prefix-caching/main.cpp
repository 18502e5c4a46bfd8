// Lab 07: the paged KV cache and prefix caching, with YOUR block allocator
// and prefix cache inside the kit's paged serving engine.
//
//   [1] your allocator and prefix cache, tried once (a missing exercise stops
//       here with exit 3)
//   [2] one trace of requests that all start with the same system prompt,
//       replayed in real time through the kit's Scheduler (continuous
//       batching) on the paged engine, once without and once with prefix
//       caching: TTFT, prefix hit rate, prompt tokens computed and skipped,
//       and a check that both runs gave every request the same tokens
//   [3] KV memory over the trace, step by step: bytes the sequences use,
//       bytes the paged cache reserves for them, and bytes contiguous
//       slots (one context per sequence, the slot engine) would reserve
//   [4] memory.csv and ttft.csv in --out, drawn by plot.py
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "exercise.hpp"
#include "lab07.hpp"
#include "lab_main.hpp"
#include "plot.hpp"
#include "trace_spec.hpp"
#include "serve/replay.hpp"

using namespace pd;
using namespace pd::lab07;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The bundled tiny model's context is 512 positions: a 512-token shared prefix
// and a question do not fit. This synthetic model has tiny's shape (4 layers,
// width 256, 8 query heads, 2 KV heads) and a context of 1024.
constexpr const char* kDefaultModel =
    "synthetic:llama,dim=256,ffn=688,layers=4,heads=8,kv_heads=2,vocab=1497,ctx=1024";

void try_exercises() {
    lab07::StudentBlockAllocator a(2);
    lab07::StudentPrefixCache p(a, 1);
    const std::vector<int> ids = {1};
    const int b = a.allocate();
    p.insert(PrefixIndex::kRoot, ids, b);
    a.retain(b);
    a.release(b);
    a.release(b);
    std::vector<int> blocks;
    std::vector<std::uint64_t> keys;
    p.match(ids, 1, blocks, keys);
    a.release(blocks.at(0));
    a.allocate(), a.allocate();  // the second evicts the parked block: forget()
}

serve::Trace make_trace(const Options& o, int vocab) {
    serve::TraceSpec spec =
        lab::poisson_trace(o.num_requests, o.rate, o.seed, o.question_len, "--question-len", o.output_len, vocab);
    spec.shared_prefix_fraction = 1;  // every request starts with the same system prompt
    spec.prefix_len = o.prefix_len;
    spec.prefix_groups = 1;
    return serve::generate_trace(spec);
}

double ttft_ms(const serve::RequestTiming& t) { return 1000 * (t.token_s.at(0) - t.arrival_s); }

// Means over the steps of a run, in MiB; and the largest gap between what
// the paged cache reserved for a sequence and what it used, in blocks.
struct MemorySummary {
    double used = 0, reserved = 0, held = 0, contiguous = 0;
    double worst_slack_blocks_per_seq = 0;
};

MemorySummary summarize_memory(const std::vector<MemoryAt>& series, std::size_t block_bytes) {
    MemorySummary s;
    const double mib = 1024.0 * 1024.0, n = double(std::max<std::size_t>(1, series.size()));
    for (const MemoryAt& m : series) {
        s.used += double(m.used) / mib / n, s.reserved += double(m.reserved) / mib / n;
        s.held += double(m.held) / mib / n, s.contiguous += double(m.contiguous) / mib / n;
        if (m.live > 0)
            s.worst_slack_blocks_per_seq = std::max(s.worst_slack_blocks_per_seq,
                                                    double(m.reserved - m.used) / double(block_bytes) / m.live);
    }
    return s;
}

json run_json(const char* name, const Run& run, const MemorySummary& mem) {
    const serve::KvCounters& k = run.kv;
    return {{"run", name}, {"p50_ttft_ms", run.m.ttft_ms.median}, {"p99_ttft_ms", run.m.ttft_ms.p99},
            {"p50_tpot_ms", run.m.tpot_ms.median}, {"prefix_hit_rate", k.hit_rate()},
            {"requests_with_hit", k.opens_with_hit}, {"prompt_tokens", k.prompt_tokens},
            {"prompt_tokens_computed", k.prompt_tokens - k.skipped_tokens},
            {"prompt_tokens_skipped", k.skipped_tokens}, {"steps", run.r.steps},
            {"used_mib_mean", mem.used}, {"paged_reserved_mib_mean", mem.reserved},
            {"paged_held_mib_mean", mem.held}, {"contiguous_reserved_mib_mean", mem.contiguous},
            {"worst_slack_blocks_per_seq", mem.worst_slack_blocks_per_seq}};
}

void print_run(const json& j) {
    std::printf("  %-10s %9.1f %9.1f %9.1f %8.1f%% %10lld %9lld\n", j["run"].get<std::string>().c_str(),
                j["p50_ttft_ms"].get<double>(), j["p99_ttft_ms"].get<double>(), j["p50_tpot_ms"].get<double>(),
                100 * j["prefix_hit_rate"].get<double>(), j["prompt_tokens_computed"].get<long long>(),
                j["prompt_tokens_skipped"].get<long long>());
}

void print_memory(const json& j) {
    std::printf("  %-10s %9.2f %9.2f %9.2f %12.2f %11.2f\n", j["run"].get<std::string>().c_str(),
                j["used_mib_mean"].get<double>(), j["paged_reserved_mib_mean"].get<double>(),
                j["paged_held_mib_mean"].get<double>(), j["contiguous_reserved_mib_mean"].get<double>(),
                j["worst_slack_blocks_per_seq"].get<double>());
}

// Before the replays, so that a bad --out stops the lab at once.
void make_out_dir(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail("cannot make the folder {} for the CSVs: {} (give another --out)", dir.string(), ec.message());
}

// [4] The per-step memory of both runs and every request's TTFT.
void write_csvs(const fs::path& dir, const Run& off, const Run& on) {
    std::ofstream mem(dir / "memory.csv"), ttft(dir / "ttft.csv");
    mem << "run,step,live,used_bytes,paged_reserved_bytes,paged_held_bytes,contiguous_bytes\n";
    ttft << "run,request,ttft_ms\n";
    for (const auto& [name, run] : {std::pair{"off", &off}, std::pair{"on", &on}}) {
        for (std::size_t i = 0; i < run->memory.size(); i++) {
            const MemoryAt& m = run->memory[i];
            mem << fmt::format("{},{},{},{},{},{},{}\n", name, i, m.live, m.used, m.reserved, m.held, m.contiguous);
        }
        for (std::size_t i = 0; i < run->r.timings.size(); i++)
            ttft << fmt::format("{},{},{}\n", name, i, ttft_ms(run->r.timings[i]));
    }
    if (!mem || !ttft) fail("cannot write memory.csv and ttft.csv into {}", dir.string());
}

int run(Options& o) {
    serve::check_limits(o.limits);
    if (o.block_size < 1) fail("--block-size {}: give at least 1 position (16 is the usual)", o.block_size);
    try_exercises();
    make_out_dir(o.out);
    cli::Session s = cli::load_session(o.lab);
    const Config& c = s.loaded.model->config;
    const serve::Trace trace = make_trace(o, c.vocab_size);
    const auto reqs = serve::trace_requests(trace, s.loaded.tokenizer, c.vocab_size, c.max_seq_len);
    const long long longest = serve::longest_request(reqs);
    if (longest > c.max_seq_len)
        fail("a request of {} positions (--prefix-len {} + question + output) does not fit the context of {}: "
             "ask for less, or give a model with a longer context", longest, o.prefix_len, c.max_seq_len);
    // Room for max_seqs of the longest request: the trace never waits for memory.
    const int blocks = int((longest + o.block_size - 1) / o.block_size) * o.limits.max_seqs;
    std::printf("Lab 07: paged KV cache and prefix caching\nmodel    %s (context %d)\n", o.lab.model.c_str(),
                c.max_seq_len);
    std::printf("trace    %d requests at %.1f req/s: a shared %d-token system prompt + a question of %s, "
                "outputs %s (EOS ignored), seed %llu\n", o.num_requests, o.rate, o.prefix_len,
                o.question_len.c_str(), o.output_len.c_str(), (unsigned long long)o.seed);
    std::printf("engine   paged, %d blocks of %d positions, YOUR allocator and prefix cache; continuous "
                "batching, max %d sequences, %d tokens a step\n", blocks, o.block_size, o.limits.max_seqs,
                o.limits.max_tokens_per_step);
    std::printf("\n[1] your StudentBlockAllocator and StudentPrefixCache answer (ok)\n");

    std::printf("\n[2] the trace without, then with prefix caching\n");
    const Run off = replay_once(s, o, trace, reqs, blocks, false);
    const Run on = replay_once(s, o, trace, reqs, blocks, true);
    const std::size_t block_bytes = kv_bytes(c.n_layers, c.n_kv_heads, c.head_dim, o.block_size, sizeof(float));
    const MemorySummary mem_off = summarize_memory(off.memory, block_bytes);
    const MemorySummary mem_on = summarize_memory(on.memory, block_bytes);
    json runs = {run_json("no prefix", off, mem_off), run_json("prefix", on, mem_on)};
    std::printf("  run         p50 TTFT  p99 TTFT  p50 TPOT  hit rate   computed   skipped\n");
    std::printf("                    ms        ms        ms             prompt tokens\n");
    print_run(runs[0]), print_run(runs[1]);
    const bool same = off.r.output_ids == on.r.output_ids;
    const double speedup = off.m.ttft_ms.median / on.m.ttft_ms.median;
    std::printf("  prefix caching: p50 TTFT x%.1f faster; %s\n", speedup,
                same ? "same tokens for every request (ok)" : "TOKENS DIFFER (check failed)");

    std::printf("\n[3] KV memory, mean over the steps (MiB; a block is %.3f MiB)\n", double(block_bytes) / (1 << 20));
    std::printf("  run             used  reserved      held   contiguous  worst slack\n");
    std::printf("                       (paged)   (paged)       (slot)  blocks/seq\n");
    print_memory(runs[0]), print_memory(runs[1]);
    const bool within_a_block = mem_off.worst_slack_blocks_per_seq < 1 && mem_on.worst_slack_blocks_per_seq < 1;
    std::printf("  paged reserves less than one block per sequence beyond what it uses: %s\n",
                within_a_block ? "yes (ok)" : "NO (check failed)");

    json j;
    j["model"] = o.lab.model;
    j["prefix_len"] = o.prefix_len;
    j["num_requests"] = o.num_requests;
    j["runs"] = runs;
    j["p50_ttft_speedup"] = speedup;
    j["same_tokens"] = same;
    j["paged_within_one_block_per_seq"] = within_a_block;
    j["prompt_tokens"] = on.kv.prompt_tokens;
    write_csvs(o.out, off, on);
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track2/07-paged-kv-and-prefix-caching", o.out, o.no_plot,
                   "memory.png and .svg (KV bytes over the steps; TTFT per request)");
    return lab::finish(same && within_a_block);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    o.lab.model = kDefaultModel;
    lab::CommandLine cl(
        "Lab 07: KV memory in blocks. A paged cache hands a sequence one block of positions at a\n"
        "time instead of a whole context up front, so it reserves little more than it uses; and a\n"
        "block full of a prompt's K/V depends only on the tokens up to it, so requests that share a\n"
        "system prompt can share its blocks and skip computing it. This program replays one trace\n"
        "of requests sharing a --prefix-len system prompt through the kit's scheduler and paged\n"
        "engine, with YOUR block allocator and prefix cache (exercise.cpp), without and with prefix\n"
        "caching: TTFT, hit rate, prompt tokens computed and skipped, and KV bytes used against\n"
        "reserved (paged blocks, and the contiguous slots the slot engine would take). memory.csv\n"
        "and ttft.csv go into --out; plot.py draws them. The default model is a synthetic one of the\n"
        "bundled tiny model's shape with a context of 1024 (tiny's 512 cannot hold a 512-token prefix).",
        "07-paged-kv-and-prefix-caching");
    cl.common(o.lab);
    cl.option("--num-requests", o.num_requests, "requests in the trace").range(1, 100000).show_default();
    // Not below 0.05: the replay waits for each arrival in real time.
    cl.option("--rate", o.rate, "request rate (req/s, Poisson arrivals; 0.05 to 1e6)").range(0.05, 1e6).show_default();
    cl.option("--seed", o.seed, "seed of the trace").show_default();
    cl.option("--prefix-len", o.prefix_len, "tokens of the system prompt every request starts with")
        .range(1, 1 << 20).show_default();
    cl.option("--question-len", o.question_len,
              "each request's own tokens after it: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:LO:HI]")
        .show_default();
    cl.option("--output-len", o.output_len, "output lengths, the same forms").show_default();
    cl.option("--block-size", o.block_size, "positions per KV block").range(1, 4096).show_default();
    cl.option("--max-seqs", o.limits.max_seqs, "sequences running at once").show_default();
    cl.option("--max-tokens-per-step", o.limits.max_tokens_per_step, "token budget of a step").show_default();
    cl.option("--out,-o", o.out, "folder for memory.csv, ttft.csv and the plot").show_default();
    cl.flag("--no-plot", o.no_plot, "write the CSVs only; print the command that draws them");
    cl.flag("--quiet", o.quiet, "no progress lines on stderr");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
