// pdlab bench --precision A,B,...: the same model loaded in several
// precisions in one process, each engine with its own KV cache and the same
// prompt, their decode steps taken in turns (pd::run_bench_turns), so that
// every pair's speed-up is measured round by round under the same DRAM
// bandwidth, which drifts within seconds on a shared machine.
#include <cstdint>
#include <cstdio>
#include <utility>

#include "cmd_bench.hpp"
#include "startup_load.hpp"

namespace pd::cli {

namespace {

// One precision's engine, with a cache of B sequences of P + gen positions.
struct Entry {
    std::string precision;  // as listed: "f32", "bf16", "int8", "int4"
    Session session;
};

std::vector<Entry> open_entries(const BenchCliOptions& o, const std::vector<std::string>& precisions) {
    std::vector<Entry> entries;
    for (const std::string& p : precisions) {
        CommonOptions c = o.common;
        c.precision = p;
        Entry e{p, load_session(c)};
        start_engine(e.session, c, o.bench.batch, std::int64_t(o.bench.prompt_len) + o.bench.gen);
        entries.push_back(std::move(e));
    }
    return entries;
}

// A pair's speed-up; `slow` is the one whose decode step reads more bytes.
struct PairRatio {
    std::size_t slow = 0, fast = 0;  // indices into the entries
    double median_of_rounds = 0;     // median over rounds of slow's step ms / fast's in the same round
    double ratio_of_medians = 0;     // slow's median step / fast's
    double bytes_ratio = 0;          // slow's bytes per step / fast's: the speed-up with both at their floors
    std::size_t rounds = 0;
};

PairRatio pair_ratio(const std::vector<BenchResult>& r, std::size_t a, std::size_t b) {
    if (r[a].decode_floor.bytes < r[b].decode_floor.bytes) std::swap(a, b);
    const std::vector<double>& slow = r[a].decode_step_ms;  // (repeats * gen) in round order
    const std::vector<double>& fast = r[b].decode_step_ms;
    std::vector<double> per_round(slow.size());
    for (std::size_t k = 0; k < slow.size(); k++) per_round[k] = slow[k] / fast[k];
    return {a, b, summarize(per_round).median, r[a].decode_step.median / r[b].decode_step.median,
            r[a].decode_floor.bytes / r[b].decode_floor.bytes, per_round.size()};
}

// Every pair of entries, in list order.
std::vector<PairRatio> all_pairs(const std::vector<BenchResult>& r) {
    std::vector<PairRatio> pairs;
    for (std::size_t a = 0; a < r.size(); a++)
        for (std::size_t b = a + 1; b < r.size(); b++) pairs.push_back(pair_ratio(r, a, b));
    return pairs;
}

// The floor in ms and the measured step over it ("15.340   1.03x"), or "-"
// when no floor was measured (--probe-seconds 0).
std::string floor_cell(const BenchResult& r) {
    return r.bandwidth_gbps > 0 ? fmt::format("{:.3f} {:6.2f}x", r.decode_floor.floor_ms, decode_vs_floor(r)) : "-";
}

void print_turns(const BenchOptions& b, const std::vector<Entry>& e, const std::vector<BenchResult>& r,
                 const std::vector<PairRatio>& pairs) {
    const BenchResult& r0 = r.front();  // the ceilings are the same for all
    std::printf("turns    one decode step of each precision per round: %d rounds (%d steps x %d runs, after %d "
                "warm-up), batch %d, P=%d\n", b.gen * b.repeats, b.gen, b.repeats, b.warmup, b.batch, b.prompt_len);
    if (r0.bandwidth_gbps > 0)
        std::printf("ceilings DRAM read %.1f GB/s before, %.1f after (floors use %.1f)\n",
                    r0.bandwidth_before.best_gbps, r0.bandwidth_after.best_gbps, r0.bandwidth_gbps);
    std::printf("%-9s %-9s %24s %9s %17s %10s %11s %6s\n", "", "precision", "ms/step (median ± stdev)", "MB/step",
                "floor ms  x floor", "GB/s eff.", "prefill ms", "cache");
    for (std::size_t i = 0; i < e.size(); i++)
        std::printf("%-9s %-9s %11.3f ± %-10.3f %9.1f %17s %10.1f %11.2f %6d\n", "decode", e[i].precision.c_str(),
                    r[i].decode_step.median, r[i].decode_step.stdev, r[i].decode_floor.bytes / 1e6,
                    floor_cell(r[i]).c_str(), decode_effective_gbps(r[i]), r[i].prefill.median, r[i].final_cache_len);
    for (const PairRatio& p : pairs)
        std::printf("speed-up %s over %s: %.2fx (median of %zu per-round ratios; the medians give %.2fx; "
                    "the bytes allow %.2fx)\n", e[p.fast].precision.c_str(), e[p.slow].precision.c_str(),
                    p.median_of_rounds, p.rounds, p.ratio_of_medians, p.bytes_ratio);
    if (r0.decode_allocations >= 0)
        for (std::size_t i = 0; i < e.size(); i++)
            std::printf("checks   %s decode steps: %ld heap allocations, %ld threads created\n",
                        e[i].precision.c_str(), r[i].decode_allocations, r[i].decode_threads_created);
}

nlohmann::json entry_json(const BenchOptions& b, const Entry& e, const BenchResult& r) {
    nlohmann::json j;
    j["precision"] = e.precision;
    add_timing_fields(j, r);
    add_floor_fields(j, b, r);
    j["greedy_ids"] = r.greedy_ids;
    j["cpu_kernels"] = cpu_kernels(*e.session.engine);
    return j;
}

nlohmann::json pair_json(const std::vector<Entry>& e, const PairRatio& p) {
    return {{"slow", e[p.slow].precision},           {"fast", e[p.fast].precision},
            {"speedup", p.median_of_rounds},         {"speedup_of_medians", p.ratio_of_medians},
            {"bytes_ratio", p.bytes_ratio},          {"rounds", p.rounds}};
}

// The run's fields, then one entry per precision (the fields of a
// one-precision run, plus its greedy tokens) and one per pair.
nlohmann::json turns_json(const BenchCliOptions& o, const std::vector<Entry>& e, const std::vector<BenchResult>& r,
                          const std::vector<PairRatio>& pairs) {
    const Engine& first = *e.front().session.engine;
    nlohmann::json j;
    add_run_fields(j, o, first);
    j["mode"] = "turns";
    j["prompt_ids"] = bench_prompts(o.bench, first.config().vocab_size);
    j["bandwidth_gbps_before"] = r.front().bandwidth_before.best_gbps;
    j["bandwidth_gbps_after"] = r.front().bandwidth_after.best_gbps;
    j["bandwidth_gbps"] = r.front().bandwidth_gbps;
    j["entries"] = nlohmann::json::array();
    for (std::size_t i = 0; i < e.size(); i++) j["entries"].push_back(entry_json(o.bench, e[i], r[i]));
    j["ratios"] = nlohmann::json::array();
    for (const PairRatio& p : pairs) j["ratios"].push_back(pair_json(e, p));
    return j;
}

// What the turns mode cannot do, refused before anything loads.
void check_turns_options(const BenchCliOptions& o) {
    if (parse_device(o.common.device) != Device::cpu)
        fail("--precision {} (several precisions, taken in turns) runs on the CPU only: its floors come "
             "from the CPU's DRAM bandwidth. Use --device cpu, or one precision at a time on {}",
             o.common.precision, o.common.device);
    if (o.bench.gen < 1)
        fail("--precision {} compares decode steps taken in turns: --gen must be at least 1", o.common.precision);
}

}  // namespace

int run_bench_turns_command(const BenchCliOptions& o, const std::vector<std::string>& precisions) {
    check_turns_options(o);
    const BenchOptions& b = o.bench;
    std::vector<Entry> entries = open_entries(o, precisions);
    std::vector<Engine*> engines;
    for (Entry& e : entries) engines.push_back(e.session.engine.get());
    std::fprintf(stderr, "benchmarking %s in turns (%s) on %s: P=%d, %d decode steps, batch %d, %d warm-up + %d "
                 "runs\n", o.common.model.c_str(), o.common.precision.c_str(), engines[0]->hardware().c_str(),
                 b.prompt_len, b.gen, b.batch, b.warmup, b.repeats);
    for (const Entry& e : entries)
        std::fprintf(stderr, "kernels %s: %s\n", e.precision.c_str(), cpu_kernels(*e.session.engine).c_str());
    print_threads_note(o.common.threads);
    const std::vector<BenchResult> results = run_bench_turns(engines, b);
    const std::vector<PairRatio> pairs = all_pairs(results);
    print_turns(b, entries, results, pairs);
    warn_if_timings_unreliable();
    if (!o.common.json.empty()) write_json_file(o.common.json, turns_json(o, entries, results, pairs));
    return 0;
}

}  // namespace pd::cli
