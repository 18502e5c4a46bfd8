// Lab 10's program, in two files: main.cpp measures the ceilings, prints the
// counts and the turn and runs the lab; phases.cpp times the model's prefill
// and decode and places each run under the roof ([3]). This header holds what
// both read.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"
#include "exercise.hpp"
#include "measure/roofline.hpp"

namespace pd::lab10 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    std::string synthetic = "synthetic:bench-llama-125m";
    int prompt_len = 128;
    std::vector<int> batches{1, 4, 16};
    int gen = 16;
    int warmup = 1;
    int repeats = 3;
    int bandwidth_mib = 512;
    int peak_n = 2048;
    double seconds = 0.5;
    std::string out = "lab10-results";
    bool no_plot = false;
};

// The sum of one field over every product, e.g. total(rows, &Count::flops).
inline double total(const std::vector<Count>& rows, double Count::*field) {
    double s = 0;
    for (const Count& r : rows) s += r.*field;
    return s;
}

// [3] prefill and decode of `model` (loaded in `s`) timed at every --batches
// size, each placed at your counted intensity under your roof; the points as JSON.
nlohmann::json measure_model(cli::Session& s, const Options& o, const std::string& model, const Ceilings& roof);

}  // namespace pd::lab10
