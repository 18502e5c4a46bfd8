// Lab 07's program, in two files: main.cpp reads the options, makes the
// trace and reports; replay.cpp replays it through the Scheduler on the paged
// engine built with your allocator and prefix cache, noting the KV memory at
// every step. This header holds what both read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "serve/replay.hpp"

namespace pd::lab07 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    int num_requests = 24;
    double rate = 4;
    std::uint64_t seed = 1;
    int prefix_len = 512;
    std::string question_len = "uniform:16:64", output_len = "fixed:16";
    int block_size = 16;
    serve::StepLimits limits{8, 512, false};
    std::string out = "lab07-results";
    bool no_plot = false, quiet = false;
};

// KV memory at one step (bytes, all layers, K and V).
struct MemoryAt {
    int live = 0;                    // sequences open
    std::size_t used = 0;            // positions cached, summed over sequences
    std::size_t reserved = 0;        // blocks in their tables, summed over sequences
    std::size_t held = 0;            // distinct blocks held (a shared block once)
    std::size_t contiguous = 0;      // one slot of the whole context per sequence
};

struct Run {
    serve::ReplayResult r;
    serve::ServingMetrics m;
    serve::KvCounters kv;
    std::vector<MemoryAt> memory;
};

// One replay of the trace through the Scheduler over the paged engine built
// with your allocator and prefix cache.
Run replay_once(const cli::Session& s, const Options& o, const serve::Trace& trace,
                const std::vector<serve::Request>& reqs, int total_blocks, bool prefix_caching);

}  // namespace pd::lab07
