// Lab 01's program, in two files: forward.cpp holds sections 2 to 4 (the
// embedding, one layer shape by shape, the logits), which look inside the CPU
// model; main.cpp holds the rest (tokens, your token choice, back to text) and
// runs them in order. This header holds what both read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_common.hpp"

namespace pd::lab01 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions common;
    std::string prompt = "One day, Lily went to the";
    int steps = 8;
    float temperature = 0.8f;
    int top_k = 10;
    std::uint64_t seed = 42;
    int show = 10;
};

// What every section reads: the options, the model and the prompt's ids.
struct Lab {
    const Options& o;
    Engine& engine;
    const Model& m;
    const Config& c;
    const Tokenizer& tok;
    std::vector<int> ids;
    int P = 0;
};

// ---- 2. Embeddings
void embedding(const Lab& L);

// ---- 3. One layer, shape by shape. The forward pass runs on our own cache and
// run state of the host model, so that the sections can look inside: it is a
// CPU pass whatever --device says, and its times are CPU times (the output says so).
struct Forward {
    KVCache cache;
    RunState st;
    std::vector<float> logits;  // [P, vocab]
    double cold_ms = 0, prefill_ms = 0;
};

// Sections 3 and 4: the pass, its shapes and buffers, the attention pattern and
// the logits row by row; returns the pass for section 5 to choose from.
Forward section_forward(const Lab& L);

}  // namespace pd::lab01
