// Lab 05's program, in two files: main.cpp reads the options, picks the sweep
// points and runs the sweeps that sweeps.cpp measures, prints and writes (a CSV
// each, and its part of --json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"

namespace pd::lab05 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    std::string out = "lab05-results";
    bool full = false;
    std::vector<std::string> sweeps = {"prefill", "decode", "output", "batch", "ragged"};
    std::vector<int> prompt_lens, cache_lens, output_lens, batches;
    int warmup = 1;
    int repeats = 3;
    int steps = 8;
    int output_prompt_len = 32;
    int batch_prompt_len = 64;
    std::uint64_t seed = 5;
    bool no_plot = false;
};

// Each sweep prints its table, writes its CSV into `dir` and returns its part
// of --json; the lengths and sizes are the points main() chose.
nlohmann::json sweep_prefill(cli::Session& s, const Options& o, const std::filesystem::path& dir,
                             const std::vector<int>& lens);
nlohmann::json sweep_decode(cli::Session& s, const Options& o, const std::filesystem::path& dir,
                            const std::vector<int>& lens);
nlohmann::json sweep_output(cli::Session& s, const Options& o, const std::filesystem::path& dir,
                            const std::vector<int>& ns);
nlohmann::json sweep_batch(cli::Session& s, const Options& o, const std::filesystem::path& dir,
                           const std::vector<int>& bs);
// [5] the engine's decode attention over a ragged batch, against it padded.
nlohmann::json ragged_batch(const Config& c, const Options& o, int ctx);

}  // namespace pd::lab05
