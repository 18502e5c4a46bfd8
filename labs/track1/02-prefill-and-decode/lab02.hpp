// Lab 02's program, in three files: trace.cpp runs section 1 (the trace),
// main.cpp measures (sections 2 and 3) and runs them all, report.cpp prints the
// report, the device's row and the JSON (sections 4 and 5). This header holds
// what they share.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "cli_common.hpp"
#include "engine/generate.hpp"
#include "timeline_option.hpp"

namespace pd::lab02 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions common;
    cli::TimelineOptions timeline;
    std::string prompt;
    int prompt_len = 4;
    int steps = 16;
    int warmup = 2;
    int repeats = 5;
    bool compare = true;
};

// What every section shares: the options, the engine, the prompt, the JSON.
struct Lab {
    const Options& o;
    Engine& engine;
    const Tokenizer& tok;
    std::vector<int> ids;  // (P) the prompt
    nlohmann::json js;
    std::string kv(int S) const {
        return fmt::format("[1, {}, {}, {}]", engine.config().n_kv_heads, S, engine.config().head_dim);
    }
    int P() const { return int(ids.size()); }
};

// The fixed setup of section 2, also the report's first rows.
struct Setup {
    std::string hardware, software;
};

// The numbers sections 2, 4 and 5 print.
struct Results {
    Stats prefill, decode, whole;
    int final_len = 0;
    bool len_ok = false;
};

// ---- 1. The trace: prefill, then two decode steps, with the student's
// decode_loop; true when the cache lengths and tokens are right.
bool section_trace(Lab& lab);

// ---- 4. The report; `with`: section 3's run with the cache (nullptr when skipped).
void section_report(Lab& lab, const Setup& setup, const Results& r, const GenerateResult* with);
// ---- 5. One row of the handout's CPU-vs-GPU table: this device's numbers.
void section_device_row(Lab& lab, const Results& r);
// Writes --json: the setup, the statistics and every section's part of lab.js.
void write_json(Lab& lab, const Setup& setup, const Results& r);

}  // namespace pd::lab02
