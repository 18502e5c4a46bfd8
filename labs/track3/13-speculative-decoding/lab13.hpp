// Lab 13's program, in two files: main.cpp reads the options, loads both
// models and runs the sections; sweep.cpp measures each k (plain against
// speculative) and prints, explains and writes the results. This header holds
// what both read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"
#include "exercise.hpp"

namespace pd::lab13 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    std::string draft = "tiny-draft";
    std::vector<int> ks = {1, 2, 3, 4, 5, 6, 7, 8};
    int n = 128;                 // tokens generated per prompt
    int prompts = 3;
    int repeats = 3;
    float temperature = 0.8f;    // the sampling section
    std::uint64_t seed = 13;
    std::string out = "lab13-results";
    bool no_plot = false;
};

// Both models and their engines (one sequence each).
struct Models {
    cli::Session target, draft;
};

// One k over every prompt. Each prompt runs plain, then speculative, back to
// back: the pair sees the same machine load, so its time ratio is the
// speed-up; the median over pairs ignores a pair a load spike hit.
struct KResult {
    int k = 0;
    SpeculativeStats stats;      // summed over the prompts (last repeat)
    int tokens = 0;              // generated over the prompts (last repeat)
    double plain_ms = 0, spec_ms = 0;  // medians over repeats of the time for all prompts
    double ratio = 0;            // median over pairs of plain ms / speculative ms
    double cpu_ratio = 0;        // the same with the process's CPU time (std::clock): blind to
                                 // the time other jobs held the core, which wall time counts
    bool identical = true;       // greedy: speculative tokens == plain tokens
    double decode_ms = 0;        // the plain runs' model-side decode steps (last repeat) ...
    int decode_steps = 0;        // ... and how many
    int draft_steps = 0;         // the draft's passes after the prompt (last repeat)
    // Tokens per verify pass: what each round emitted (its kept draft tokens and
    // the target's own), the prompt's pass and its one token left out, since
    // expected_tokens_per_pass predicts a round.
    double tokens_per_pass() const { return stats.rounds ? double(stats.accepted + stats.rounds) / stats.rounds : 0; }
    double predicted() const { return expected_tokens_per_pass(stats.per_token_acceptance(), k); }
    double speedup() const { return ratio; }
    // The costs of a round in plain decode steps of the target (engine time):
    // c, one draft step, and v, one verify pass over k + 1 rows.
    double decode_step_ms() const { return decode_steps ? decode_ms / decode_steps : 0; }
    double draft_cost() const { return draft_steps ? stats.draft_ms / draft_steps / decode_step_ms() : 0; }
    double verify_cost() const { return stats.rounds ? stats.target_ms / stats.rounds / decode_step_ms() : 0; }
};

// Section "sweep": k = 1..8 (--ks), greedy, with your greedy rule; prints a row each.
std::vector<KResult> sweep(Models& m, const Options& o, const std::vector<std::vector<int>>& prompts);
// Section "where it pays": the sweep's speed-ups explained by three measured
// costs, then the same alpha priced at the costs of a memory-bound target.
void where_it_pays(const std::vector<KResult>& rows);
// The row with the best speed-up.
const KResult& best_of(const std::vector<KResult>& rows);
// Section "sampling": the best k at --temperature, with your sampling rule.
KResult sampling(Models& m, const Options& o, const std::vector<std::vector<int>>& prompts, int k);
nlohmann::json row_json(const KResult& r);
// sweep.csv in `dir`, for plot.py.
void write_csv(const std::filesystem::path& dir, const std::vector<KResult>& rows);

}  // namespace pd::lab13
