// Model-side timing of the two phases, measured the careful way: fixed
// inputs, warm-up runs that are thrown away, repeats, and statistics.
#pragma once

#include <cstdint>
#include <vector>

#include "engine.hpp"
#include "timing.hpp"

namespace pd {

struct BenchOptions {
    int prompt_len = 128;   // P
    int gen = 32;           // decode steps after the prompt
    int batch = 1;          // B sequences, prefilled one after another, decoded together
    int warmup = 2;         // runs discarded before measuring
    int repeats = 5;        // measured runs
    std::uint64_t seed = 7; // the prompt's token ids are drawn from this seed
};

struct BenchResult {
    std::vector<double> prefill_ms;      // (repeats) all B prompts
    std::vector<double> decode_step_ms;  // (repeats * gen) one step for all B sequences
    Stats prefill, decode_step;
    double prefill_tokens_per_s = 0;     // B * P / median prefill
    double decode_tokens_per_s = 0;      // B / median step
    int final_cache_len = 0;             // checked against P + gen
};

void validate(const BenchOptions& o, const Engine& e);
BenchResult run_bench(Engine& engine, const BenchOptions& o);

}  // namespace pd
