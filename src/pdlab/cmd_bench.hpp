// pdlab bench's options and JSON fields, shared by its two modes: one
// precision (cmd_bench.cpp), and several with their decode steps taken in
// turns (cmd_bench_turns.cpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "measure/bench.hpp"
#include "timeline_option.hpp"

namespace pd::cli {

struct BenchCliOptions {
    CommonOptions common;   // common.precision: one precision, or a comma list (turns)
    BenchOptions bench;
    TimelineOptions timeline;
    const CLI::Option* group_size = nullptr;  // --group-size: asks whether it was given
};

// Measured decode step over its floor, and the GB/s it reached.
double decode_vs_floor(const BenchResult& r);
double decode_effective_gbps(const BenchResult& r);

// What ran, where, and how it was timed.
void add_run_fields(nlohmann::json& j, const BenchCliOptions& o, const Engine& engine);
// The workload: batch, prompt_len, steps, warmup, repeats.
void add_workload_fields(nlohmann::json& j, const BenchOptions& b);
// The speeds bench and compare both report: medians, stdevs, tokens/s, final cache length.
void add_speed_fields(nlohmann::json& j, const BenchResult& r);
// One result's samples, statistics and checks (the speeds and the rest).
void add_timing_fields(nlohmann::json& j, const BenchResult& r);
// The ceilings of this run and the floors they imply (0 when not measured).
void add_floor_fields(nlohmann::json& j, const BenchOptions& b, const BenchResult& r);
// The kernels the CPU engine's products run ("" on another device).
std::string cpu_kernels(const Engine& engine);

// The turns mode: `precisions` (two or more, checked) of the same model,
// their decode steps in turns; prints and writes --json.
int run_bench_turns_command(const BenchCliOptions& o, const std::vector<std::string>& precisions);

}  // namespace pd::cli
