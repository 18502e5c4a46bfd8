// Lab 02: the decode loop, timed step by step, and the statistics that
// summarise repeated timings.
#pragma once

#include <span>
#include <vector>

#include "engine.hpp"
#include "timing.hpp"

namespace pd::lab02 {

// The greedy decode loop, after prefill.
//
// Before the call: sequence `slot` of `engine` holds the prompt in its cache
// (engine.prefill(slot, prompt) ran), and `first_token` is the token chosen
// from prefill's logits (output token 1: prefill produced it, no decode step did).
//
// Each of the `steps` iterations:
//   1. feeds the newest token to the model: engine.decode({slot}, {token}) runs
//      ONE token through every layer, appends its K/V to the cache (which grows
//      by one position) and returns that token's logits, (1, vocab) floats;
//   2. times only that decode call, with engine.time_ms(...), and appends the
//      milliseconds to step_ms;
//   3. picks the next token greedily (the largest logit, first on ties: pd::argmax),
//      which is what the next iteration feeds.
//
// Returns the `steps` tokens the decode steps chose (output tokens 2 .. steps+1).
// step_ms is cleared first and ends with `steps` values, one per decode call.
// After the call, engine.cache_len(slot) has grown by exactly `steps`.
// steps == 0: returns {} and touches nothing. steps < 0: UserError.
std::vector<int> decode_loop(Engine& engine, int slot, int first_token, int steps, std::vector<double>& step_ms);

// Summary statistics of timing samples (milliseconds), as in pd::Stats:
//   n       the number of samples
//   mean    the average
//   median  the middle value (the mean of the two middle ones for an even n)
//   stdev   the SAMPLE standard deviation: sqrt(sum (x - mean)^2 / (n - 1)); 0 when n == 1
//   min, max
//   p90, p99  percentiles with linear interpolation between the sorted samples
//           (numpy's default): rank r = p/100 * (n - 1), value = s[floor r] + (s[ceil r] - s[floor r]) * (r - floor r)
// The samples may come in any order. Empty: UserError (there is nothing to summarise).
Stats stats_of(std::span<const double> samples);

}  // namespace pd::lab02
