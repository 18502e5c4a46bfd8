// Lab 03's program, in two files: inside.cpp holds sections 1 to 4, which look
// inside the cache (the head map, its bytes, its growth, attention over it);
// main.cpp times it through the Engine (sections 5 and 6) and runs them all.
// This header holds what both read.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"

namespace pd::lab03 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions common;
    std::string prompt = "One day, Lily went to the park. She saw a";
    int steps = 8;
    int context = 4096;
    int batch = 1;
    std::string lengths = "16,128,512";
    int reps = 10;
    std::vector<std::string> shapes = {"synthetic:llama,dim=512,heads=8,kv_heads=8",
                                       "synthetic:llama,dim=512,heads=8,kv_heads=2",
                                       "synthetic:llama,dim=512,heads=8,kv_heads=1", "synthetic:llama-1b"};
};

// What every section reads and writes: the options, the engine and its CPU
// model, the JSON, and whether every check so far passed.
struct Lab {
    const Options& o;
    Engine& engine;
    const Model& m;  // the engine's CPU copy: sections 3 and 4 look inside it
    const Config& c;
    const Tokenizer& tok;
    nlohmann::json js;
    bool all_ok = true;
};

// Section 3's pass over the CPU model: its cache, and what section 4 compares.
struct Growth {
    KVCache cache, mine;  // the engine's cache of the CPU pass, and the student's copy of it
    RunState st;          // after the last decode step: that step's q and attention output
    std::vector<float> q_prefill, att_prefill;  // [P, q_dim] of the last layer, kept from prefill
    std::vector<int> ids, out_ids;
};

// "MHA", "GQA" or "MQA".
const char* kind_of(const Config& c);

// The sections that look inside the cache (inside.cpp), in the order they run.
void section_head_map(Lab& lab);
void section_bytes(Lab& lab);
Growth section_growth(Lab& lab);  // also shows the lesson's shapes
void section_attention(Lab& lab, const Growth& g);

}  // namespace pd::lab03
