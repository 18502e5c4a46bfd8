// Lab 17: the kit's side of the capstone. Everything here is given: the trace
// family, its summary, the memory cap and the check of a configuration, the
// step-cost model (the virtual clock the grade is measured on), its
// calibration on this machine, the SLO check and the replay. The student
// writes exercise.cpp (a configuration and a StepPolicy) against these types.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/precision.hpp"
#include "engine/weights.hpp"
#include "serve/replay.hpp"
#include "serve/scheduler.hpp"
#include "serve/trace.hpp"

namespace pd::lab17 {

// ---- The objective. A request is good when its first token comes within
// ttft_ms of its arrival AND no gap between two of its tokens is longer than
// itl_ms. Goodput: good requests per second of the replay (arrival of the
// first request to the last token).
struct Slo {
    double ttft_ms = 1000;
    double itl_ms = 30;
};

// ---- The virtual clock. One step's time, from what it ran:
//     t = weights_ms + n * per_token_ms + m * per_pair_ms
// n: the rows of the step (every decode token and prompt token);
// m: the attended (row, cached position) pairs: a row at position p attends
//    to p + 1 positions, so an item of n rows from `start` brings
//    n * start + n (n + 1) / 2.
// Reading the weights once a step is weights_ms; the products of every row
// are per_token_ms; attention over the cache is per_pair_ms.
struct StepCostModel {
    double weights_ms = 6.0;
    double per_token_ms = 0.06;
    double per_pair_ms = 0.00004;
    double step_ms(long long rows, long long pairs) const {
        return weights_ms + double(rows) * per_token_ms + double(pairs) * per_pair_ms;
    }
};

// Attended pairs of one item: `n` rows from position `start`.
inline long long attended_pairs(long long start, long long n) { return n * start + n * (n + 1) / 2; }

// Rows and attended pairs of the step the scheduler just ran (its last_batch()).
struct StepShape {
    long long rows = 0, pairs = 0;
};
StepShape last_step_shape(const pd::serve::Scheduler& s);

// The replay's clock that advances by `cost` of every step.
pd::serve::StepClock virtual_clock(const StepCostModel& cost);

// The clock at each precision the engine has. A step reads every matrix
// weight once, so weights_ms scales with the model's matrix bytes at that
// precision over f32's (int8 and int4 with their scales, in groups of 64);
// the arithmetic of a row and of attention is taken to be the same whatever
// the format (the kernels widen the weights before they multiply), so
// per_token_ms and per_pair_ms stay f32's. Derived, not timed per precision.
struct PrecisionCosts {
    StepCostModel f32;                                // --cost, or calibrated at f32
    std::array<double, 4> weight_share{1, 1, 1, 1};  // by pd::Format: matrix bytes over f32's
    // The model at `precision` (f32, bf16, int8 or int4); UserError naming an unknown one.
    StepCostModel at(const std::string& precision) const;
};
// `f32` priced at every precision from `w`'s matrix shapes (matmul_weight_bytes).
PrecisionCosts precision_costs(const StepCostModel& f32, const pd::Weights& w);

// One timed step, for the calibration.
struct StepTiming {
    StepShape shape;
    double ms = 0;
};
// The least-squares model through timed steps; a term whose fitted
// coefficient comes out negative (noise) is left out and the rest refitted.
// UserError when fewer than 3 steps or no positive weights_ms.
StepCostModel fit_cost(std::span<const StepTiming> steps);

// "W,TOK,PAIR" in ms (each finite, >= 0, W > 0): UserError naming --cost otherwise.
StepCostModel parse_cost(const std::string& text);

// ---- The KV memory every configuration shares: kv_blocks * block_size
// positions at most (one position holds K and V of every layer).
struct MemoryCap {
    long long kv_positions = 4096;
};

// What the student configures (exercise.hpp's choose_config). Every field is
// honoured by the engine or the scheduler; nothing else can be set.
struct ServeConfig {
    int max_seqs = 8;               // sequences running at once (Scheduler)
    int max_tokens_per_step = 512;  // tokens in one step's batch (Scheduler)
    int block_size = 16;            // KV positions per block (PagedServingEngine)
    int kv_blocks = 384;            // blocks in the pool (PagedServingEngine)
    bool prefix_caching = true;     // reuse cached prompt blocks (PagedServingEngine)
    std::string precision = "f32";  // the weights: f32, bf16, int8 or int4 (groups of 64): the
                                    // model the engine loads, and the clock (PrecisionCosts)
    int speculative_k = 0;          // n-gram proposals per decode row, 0: off (0..16; the
                                    // Scheduler's NgramSpeculation, n from 3 down to 2)
};

// The baseline: the engine's ContinuousBatching with this configuration
// (lab 06's defaults, the whole memory in blocks of 16, prefix caching on).
ServeConfig baseline_config(const MemoryCap& cap);

// UserError, naming the field and how to fix it, unless: 1 <= max_seqs <= 256,
// 1 <= max_tokens_per_step <= 8192, 1 <= block_size <= 256, kv_blocks >= 1,
// kv_blocks * block_size <= cap, the pool holds the longest request
// (`longest` positions) alone, the precision is one the engine has, and
// 0 <= speculative_k <= 16.
void check_config(const ServeConfig& c, const MemoryCap& cap, long long longest);

// ---- The trace family: Poisson arrivals at calm_rate, with a burst of
// burst_rate for burst_s seconds every period_s seconds; lognormal prompt and
// output lengths; a share of the prompts starts with one of a few shared prefixes.
struct FamilySpec {
    int num_requests = 200;
    std::uint64_t seed = 1;  // the public trace; the grader uses another
    double calm_rate = 8, burst_rate = 40;
    double period_s = 10, burst_s = 2;
    std::string prompt_len = "lognormal:80:0.9:8:448";  // each request's own part
    std::string output_len = "lognormal:40:0.8:4:160";
    double shared_prefix_fraction = 0.4;
    int prefix_len = 128, prefix_groups = 3;
};

// The same spec gives the same trace on every machine. Prompt ids are drawn
// from [3, vocab) (past the usual special ids).
pd::serve::Trace generate_family(const FamilySpec& f, int vocab);

// What choose_config may know about a trace (its own tokens and times stay hidden).
struct LengthStats {
    double mean = 0;
    int p50 = 0, p90 = 0, max = 0;
};
struct TraceSummary {
    int num_requests = 0;
    double span_s = 0;            // first to last arrival
    double mean_rate = 0;         // requests / span_s
    double peak_rate = 0;         // most arrivals in any one second
    LengthStats prompt, output;   // prompt tokens (prefix included), max_tokens
    double shared_prefix_share = 0;  // requests in a prefix group
    int prefix_len = 0;              // tokens of a shared prefix (0: none)
    long long longest = 0;           // most positions one request needs (prompt + output)
};
TraceSummary summarize(const pd::serve::Trace& trace, std::span<const pd::serve::Request> reqs,
                       const FamilySpec& f);

// ---- The score of one replay.
struct Score {
    int good = 0;             // requests meeting both SLOs
    double goodput = 0;       // good / duration (req/s)
    double duration_s = 0;
    double ttft_p50_ms = 0, ttft_p99_ms = 0, itl_p50_ms = 0, itl_p99_ms = 0;  // ITL: every gap, pooled
};
Score score(const pd::serve::ReplayResult& r, const Slo& slo);

// ---- The quality floor. A cheaper precision makes every step cheaper and
// changes the tokens: the share of the f32 replay's output tokens that the
// replay at the configuration's precision gives at the same place of the same
// request (greedy, so a request that once differs usually differs from there on).
// A configuration whose agreement is under the floor scores 0 goodput.
inline constexpr double kAgreementFloor = 0.75;
// That share, over every request (1 when f32's replay gave no token).
double token_agreement(const pd::serve::ReplayResult& r, const pd::serve::ReplayResult& f32);

// "Now" for a policy: the replay's time (seconds since the trace began, on its
// clock: the virtual one when graded) when the step being decided began.
// replay_on sets it before every step; SeqState::arrival_s is on the same clock.
struct ReplayTime {
    double now_s = 0;
};

// Runs `reqs` through a Scheduler with `policy` over `engine` (whose memory
// and precision `cfg` already set) on `clock` (virtual_clock(cost) when
// grading), keeping `time` (the policy's "now", when given) up to date. EOS is
// ignored: every request produces its max_tokens, so every policy does the same work.
pd::serve::ReplayResult replay_on(pd::serve::ServingEngine& engine, pd::serve::StepPolicy& policy,
                                  const ServeConfig& cfg, const pd::serve::Trace& trace,
                                  std::span<const pd::serve::Request> reqs, const pd::serve::StepClock& clock,
                                  bool progress, ReplayTime* time = nullptr);

}  // namespace pd::lab17
