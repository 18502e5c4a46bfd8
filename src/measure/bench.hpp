// Model-side timing of the two phases, measured the careful way: fixed
// inputs, warm-up runs that are thrown away, repeats, and statistics; and,
// next to every timing, the floor this machine allows for it (roofline.hpp),
// with the DRAM bandwidth measured right before and right after the timed
// runs, since on a shared machine it drifts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.hpp"
#include "measure/roofline.hpp"
#include "base/timing.hpp"

namespace pd {

struct BenchOptions {
    int prompt_len = 128;   // P
    int gen = 32;           // decode steps after the prompt
    int batch = 1;          // B sequences, prefilled one after another, decoded together
    int warmup = 2;         // runs discarded before measuring
    int repeats = 5;        // measured runs
    std::uint64_t seed = 7; // the prompt's token ids are drawn from this seed
    // The ceilings for the floors: a peak of 0 is measured with a quick oneDNN
    // probe; bandwidth_probe_s 0 skips the bandwidth probes (no floors then).
    double peak_gflops = 0;
    double bandwidth_probe_s = 0.3;
};

struct BenchResult {
    std::vector<double> prefill_ms;      // (repeats) all B prompts
    std::vector<double> decode_step_ms;  // (repeats * gen) one step for all B sequences
    Stats prefill, decode_step;
    double prefill_tokens_per_s = 0;     // B * P / median prefill
    double decode_tokens_per_s = 0;      // B / median step
    int final_cache_len = 0;             // checked against P + gen

    // Ceilings measured in this run, and the floors they imply.
    BandwidthResult bandwidth_before, bandwidth_after;
    double bandwidth_gbps = 0;           // mean of the best passes before and after: the floors use it
    double peak_gflops = 0;              // matrix peak in this precision (measured or given)
    std::string peak_source;             // "oneDNN probe, n=2048 (brg:avx512_core)" or "--peak-gflops"
    double decode_context = 0;           // mean positions each decode step attends to: P + (gen+1)/2
    PhaseCost prefill_floor;             // all B prompts
    PhaseCost decode_floor;              // one step for all B sequences
    // Checks of the decode loop: heap allocations (only when the process runs
    // with bench/malloc_count.so preloaded, else -1) and thread count change.
    long decode_allocations = -1;
    long decode_threads_created = -1;
    int threads_before = 0, threads_after = 0;
    // (B, 1 + gen) the greedy tokens of the last run: the argmax of each
    // prompt's last logits, then of each decode step's (each is the token
    // the next step decodes).
    std::vector<std::vector<int>> greedy_ids;
};

void validate(const BenchOptions& o, const Engine& e);
BenchResult run_bench(Engine& engine, const BenchOptions& o);

// run_bench on the same model in several engines (e.g. one per precision),
// each with its own KV cache and the same prompts, their decode steps taken
// in turns: engine 0, 1, 2, 0, 1, 2, ... one step each. Sample k of every
// result's decode_step_ms comes from the same round, so a ratio between two
// engines can be taken per round, under the same DRAM bandwidth, which on a
// shared machine drifts within seconds. The bandwidth is probed once before
// and once after all of them. One result per engine, in order.
std::vector<BenchResult> run_bench_turns(std::span<Engine* const> engines, const BenchOptions& o);

// The B prompts of P token ids every run feeds (drawn from o.seed): (B, P).
std::vector<std::vector<int>> bench_prompts(const BenchOptions& o, int vocab);

// Threads of this process now (from /proc/self/status; 0 if unknown).
int process_threads();

}  // namespace pd
