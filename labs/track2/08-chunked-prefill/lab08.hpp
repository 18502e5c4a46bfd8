// Lab 08's program, in four files: main.cpp reads and checks the options and
// runs the steps in order, workload.cpp turns --budgets and the options into
// the rows to sweep and the prompts every row serves, sweep.cpp runs each row
// on the paged engine (the fixed budgets, then YOUR controller) and takes the
// medians over the repeats, report.cpp prints the table, the controller's
// verdict and the chunks' growth, and writes budgets.csv and the rows' JSON.
// This header holds what they share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"
#include "slo_policy.hpp"
#include "engine/model.hpp"
#include "io/config.hpp"
#include "serve/scheduler.hpp"
#include "timeline_option.hpp"

namespace pd::lab08 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    std::vector<std::string> budgets = {"32", "64", "128", "256", "512", "1024", "unchunked"};
    double slo_ms = 0;  // 0: kAutoTargetSteps decode steps (sweep.cpp)
    int streams = 4, stream_prompt = 16, stream_tokens = 0;
    int prompt_len = 1536, newcomer_tokens = 8, arrive_after = 8, repeats = 1;
    std::uint64_t seed = 1;
    std::string out = "lab08-results";
    bool no_plot = false, quiet = false;
    cli::TimelineOptions timeline;
};

// One row of the sweep; "unchunked" is 0 tokens until the model's context is
// known; "slo" is the controller, its tokens the most it may pick.
struct Budget {
    std::string label;
    int tokens = 0;
    bool slo = false;
};

// The workload: the same prompts at every budget.
struct Workload {
    std::vector<serve::Request> streams;  // short prompts, decoding all along
    serve::Request newcomer;              // the long prompt
};

// What one budget did: one run's, or the medians over the repeats (median_row).
struct Row {
    Budget budget;
    double p50_itl_ms = 0, p90_itl_ms = 0, p99_itl_ms = 0, max_stall_ms = 0, ttft_ms = 0, output_throughput = 0,
           duration_s = 0;
    std::vector<double> decode_gaps_ms;  // the streams' gaps before the prompt arrived
    // Fixed budgets: the first and the last step that ran a chunk of the long
    // prompt filling the whole budget (same tokens, so the same line says the same time), ms.
    double first_full_chunk_ms = 0, last_full_chunk_ms = 0;
    int full_chunks = 0;
    std::vector<int> slo_budgets;  // "slo": the budgets picked while the prompt went through
    double slo_spread = 0;         // "slo": the median spread of its line over those steps (a fraction; NaN: no line)
    long long steps = 0;
    std::vector<std::vector<int>> ids;  // (requests) the tokens each got
};

// The controller's target: --slo-ms, or kAutoTargetSteps times the median of
// the streams' gaps before the prompt arrived, pooled over the fixed budgets'
// runs so far (the first repeat's: the controller runs after them; auto_target).
struct Target {
    double ms = 0;
    std::string how;  // where it came from, for [3]
};

// workload.cpp. --budgets as rows, checked before anything runs, so a bad
// budget is exit 2 even in starter form.
std::vector<Budget> parse_budgets(const std::vector<std::string>& list);
// Once the model's context is known: "unchunked" takes all of it, and the
// controller's row ("slo") is appended last.
void resolve_budgets(std::vector<Budget>& budgets, int context);
// The controller's options for a run aiming at target_ms, picking at most `hi` tokens.
SloOptions slo_options(const Options& o, const Config& c, double target_ms, int hi);
// o.streams stream requests and the newcomer, seeded by o.seed.
Workload make_workload(const Options& o, int vocab, int stream_tokens);
// --stream-tokens 0: enough for the streams to outlast the newcomer.
int auto_stream_tokens(const Options& o, const std::vector<Budget>& budgets, int context);

// sweep.cpp. [2] every budget once per repeat; one row per budget (the medians),
// in the order of `budgets`. Sets target when it is 0 (--slo-ms 0), before the controller's row.
std::vector<Row> sweep(const std::shared_ptr<const Model>& model, const Options& o, const std::vector<Budget>& budgets,
                       const Workload& w, Target& target);

// report.cpp. [2] the table, each ratio against the widest fixed budget, and
// the token check: returns whether every row gave every request the same tokens.
bool print_table(const std::vector<Row>& rows);
// [2] the same full step early and late in the prompt, for budgets with 3 or more.
void print_chunk_growth(const std::vector<Row>& rows);
// [3] the controller (rows.back()) against the fixed budgets; sets j["slo"].
void print_slo(const std::vector<Row>& rows, const Target& target, const SloOptions& so, nlohmann::json& j);
// A row as --json writes it.
nlohmann::json row_json(const Row& r);
// [4] budgets.csv in `dir` (created), for plot.py.
void write_csv(const std::filesystem::path& dir, const std::vector<Row>& rows);

}  // namespace pd::lab08
