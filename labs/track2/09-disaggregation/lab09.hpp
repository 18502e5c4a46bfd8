// Lab 09's program, in three files: main.cpp reads the options and runs the
// router (rank 0: the trace, colocated, then disaggregated), workers.cpp runs
// ranks 1..P+D with YOUR codec, report.cpp prints, writes and judges both runs.
// This header holds what they share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"
#include "command_line.hpp"
#include "exercise.hpp"
#include "serve/disagg/mpi_session.hpp"
#include "serve/disagg/router.hpp"
#include "serve/replay.hpp"
#include "timeline_option.hpp"

namespace pd::lab09 {

namespace dg = pd::serve::disagg;

// The link probe: 16 MiB, 5 times (link_probe.hpp).
constexpr std::size_t kProbeBytes = std::size_t(16) << 20;
constexpr int kProbeReps = 5;

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    int prefill = 1, decode = 1;
    int num_requests = 32;
    double rate = 3;
    std::uint64_t seed = 1;
    std::string short_len = "uniform:16:64", output_len = "fixed:48";
    int long_len = 512;
    double long_share = 0.25;
    std::string trace_file;
    int layers_per_message = 0;  // 0: all layers, one message after the prefill
    int worker_threads = 1;
    serve::StepLimits limits{8, 256, false};
    int block_size = 16;
    double rank_timeout = 60;
    int stall_rank = -1;
    double stall_after = 1;
    std::string out = "lab09-results";
    bool no_plot = false, quiet = false;
    cli::TimelineOptions timeline;
};

// workers.cpp. YOUR exercise, through the interface the workers call.
dg::KvCodec student_codec(int layers_per_message);

// Rank 0 tells the workers once: go (kGo, with the pool size) or stop with an exit code.
constexpr int kGo = -1;

// Ranks 1..P+D: parse argv as rank 0 does (it reports what is wrong), wait for
// its word, then serve until it says stop.
int run_worker_rank(lab::CommandLine& cl, int argc, char** argv, Options& o, const dg::MpiSession& mpi);

// report.cpp. One mode's serving metrics, with the ITL split by whether a long prompt was arriving.
struct ModeSummary {
    serve::ServingMetrics m;
    serve::MetricSummary itl_long, itl_quiet;  // gaps with / without a long prompt arriving
};
ModeSummary summarize(std::span<const serve::RequestTiming> t, double duration_s, int long_from);
void print_mode(const char* mode, const ModeSummary& s);
nlohmann::json mode_json(const ModeSummary& s);

// [4] KV bytes against prompt length, and what moving them cost, at up to 8 prompt lengths.
void print_transfers(const dg::DisaggResult& d);

// [6] what the transfer cost: the link probed, DRAM, the KV rate during the
// trace, and YOUR split_verdict on the long prompts' medians.
struct LinkRow {
    double gbps = 0;
    SplitVerdict once, per_layer;
};
struct LinkReport {
    double dram_gbps = 0, in_trace_gbps = 0;
    std::vector<LinkRow> rows;  // YOUR verdicts at 10, 100 and 400 Gb/s
};
LinkReport print_links(const dg::DisaggResult& d, const ModeSummary& colocated, double link_gbps,
                       const std::vector<dg::LayerRange>& plan, int n_layers, int long_from);

// [7] requests.csv, itl.csv and links.csv in `dir`, for plot.py.
void write_csvs(const std::filesystem::path& dir, const serve::ReplayResult& co, const dg::DisaggResult& d,
                int long_from, const LinkReport& links);

}  // namespace pd::lab09
