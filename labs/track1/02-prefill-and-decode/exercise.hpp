// Lab 02: the measurement harness. You build what turns "run the model" into
// a number you can report: one timed run (prefill, then a timed decode loop),
// the recipe around it (warm-up runs thrown away, measured repeats), the
// statistics of the samples and the per-step series. The engine only runs
// passes and times them (engine.time_ms: on a GPU it records events and
// synchronises); everything else here is yours.
#pragma once

#include <span>
#include <vector>

#include "engine/engine.hpp"
#include "base/timing.hpp"

namespace pd::lab02 {

// ---- Task 2 (README): the greedy decode loop, after prefill.
//
// Before the call: sequence `slot` of `engine` holds the prompt in its cache
// (engine.prefill(slot, prompt) ran), and `first_token` is the token chosen
// from prefill's logits (output token 1: prefill produced it, no decode step did).
//
// Each of the `steps` iterations feeds the newest token to the model (ONE token
// of ONE slot through every layer; the cache grows by one position; one row of
// (vocab) logits comes back), times only that model call with the engine's
// timer, appends the milliseconds to step_ms, and picks the next token greedily
// (the largest logit, first on ties), which is what the next iteration feeds.
//
// Returns the `steps` tokens the decode steps chose (output tokens 2 .. steps+1).
// step_ms is cleared first and ends with `steps` values, one per decode call.
// After the call, engine.cache_len(slot) has grown by exactly `steps`.
// steps == 0: returns {} and touches nothing. steps < 0: UserError.
std::vector<int> decode_loop(Engine& engine, int slot, int first_token, int steps, std::vector<double>& step_ms);

// ---- Task 3 (README): one run, from an empty cache.
struct RunTimes {
    double prefill_ms = 0;        // the prefill pass of all P prompt tokens, by the engine's timer
    std::vector<double> step_ms;  // (steps) one per decode step, in order
    std::vector<int> tokens;      // (steps + 1) g1 (from prefill's logits), then one per decode step
};
// Forgets whatever sequence `slot` held, prefills `prompt` inside the engine's
// timer (only the pass is timed, not choosing g1), picks g1 greedily and runs
// decode_loop for `steps` steps. Afterwards cache_len(slot) == P + steps.
// Empty prompt or steps < 0: UserError.
RunTimes time_one_run(Engine& engine, int slot, std::span<const int> prompt, int steps);

// ---- Task 4 (README): the recipe.
struct Recipe {
    int warmup = 2;   // runs made first and thrown away (one-time costs: page faults, kernel setup, cold caches)
    int repeats = 5;  // runs kept
    int steps = 16;   // decode steps per run
};
struct Measurement {
    std::vector<RunTimes> runs;  // (repeats) the KEPT runs, in the order they ran; no warm-up run
    bool same_tokens = true;     // every run, warm-ups included, produced the same tokens
};
// Runs warmup + repeats runs of time_one_run, keeps the last `repeats`.
// warmup < 0, repeats < 1 or steps < 0: UserError.
Measurement measure(Engine& engine, int slot, std::span<const int> prompt, const Recipe& recipe);

// ---- Task 5 (README): summary statistics of timing samples (milliseconds):
//   n       the number of samples
//   mean    the average
//   median  the middle value (the mean of the two middle ones for an even n)
//   stdev   the SAMPLE standard deviation: sqrt(sum (x - mean)^2 / (n - 1)); 0 when n == 1
//   min, max
//   p90, p99  percentiles with linear interpolation between the sorted samples
//           (numpy's default): rank r = p/100 * (n - 1), value = s[floor r] + (s[ceil r] - s[floor r]) * (r - floor r)
// The samples may come in any order. Empty: UserError (there is nothing to summarise).
Stats stats_of(std::span<const double> samples);

// ---- Task 6 (README): the per-step series: element i summarises decode step i+1 over
// the kept runs (its n is the number of runs). It shows whether a step grows
// as the cache grows, which one statistic over every step would hide.
// (steps) Stats; no runs, or runs whose step counts differ: UserError.
std::vector<Stats> per_step_series(const Measurement& m);

}  // namespace pd::lab02
