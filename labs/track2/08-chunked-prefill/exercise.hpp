// Lab 08: what you write. The token budget of each serving step, picked every
// step to hold a latency target (a p90 inter-token latency, an SLO) at the
// highest throughput that target allows.
//
// Every step runs ONE forward pass of at most `budget` tokens: one for each
// running decode stream, the rest for chunks of prompts being prefilled (the
// engine's planner, pd::serve::ContinuousBatching, fills it: lab 06's rules).
// Each stream gets one token per step, so a step's time IS the streams'
// inter-token latency. A small budget keeps steps short but makes a long
// prompt pay the weights' read once per chunk (lower throughput, longer time
// to its first token); a large one stalls every stream for a long step. The
// right budget depends on the machine, the model and the load: you measure it
// while serving. A step's time is close to a line in its rows of work,
//     t(r) = weights_ms + r * per_row_ms
// (reading every weight once, then the arithmetic of r rows). r counts each
// token of the step as a row, and its attention too: a chunk's rows attend to
// the prompt cached before them, and every pairs_per_row (row, cached
// position) pairs cost about one row's products (SloBudgetPolicy counts them).
// You fit that line to the steps just run, and measure how far the steps
// fall from it: the line gives a step's mean time, the target is on a tail,
// so the budget keeps a few spreads of margin below the target.
//
// The kit's SloBudgetPolicy (slo_policy.hpp) calls your two functions before
// every step, with the last steps it timed, turns your rows into the largest
// token budget whose step does no more work, and hands it to the engine's
// planner.
#pragma once

#include <span>

namespace pd::lab08 {

// One finished step: its rows of work (its tokens, plus its attention counted
// in rows, rounded to a whole row) and its wall time.
struct StepSample {
    int rows = 0;
    double ms = 0;
};

// The step-cost line t(r) = weights_ms + r * per_row_ms, and the samples'
// spread about it. known is false when the samples cannot tell the slope
// (fewer than two distinct row counts).
struct StepCost {
    double weights_ms = 0;
    double per_row_ms = 0;
    bool known = false;
    double spread = 0;  // the samples' root-mean-square distance from the line, as a fraction of it
};

// Task 1: the least-squares line through the samples, (rows, ms) as (x, y):
//     per_row_ms = sum((x - mean x)(y - mean y)) / sum((x - mean x)^2)
//     weights_ms = mean y - per_row_ms * mean x
// and known = true, and the samples' spread about the line they get, each
// distance relative to the line's value there (a step's noise grows with the
// step: a CPU's clock, a neighbour on the memory bus slow every row alike):
//     spread = sqrt(mean of ((y - line(x)) / line(x))^2),  line(x) = weights_ms + per_row_ms x
// (0.05: the steps run about 5% off the line; every sample has a row or
// more, so the line is above 0 there).
// The rules for samples a line cannot describe:
//   a. fewer than two distinct row counts (none, one, or all the same x):
//      known = false, both numbers 0;
//   b. a slope of 0 or less (noise: a slow small step among fast big ones):
//      known = false, both numbers 0. A bigger step never costs less; a line
//      that says so would send the next step to the largest budget;
//   c. a negative intercept: weights_ms = 0 and the line through the origin,
//      per_row_ms = sum(x y) / sum(x^2) (the spread about that line).
StepCost fit_step_cost(std::span<const StepSample> samples);

// Task 2: the most rows in [lo, hi] whose predicted step time, with
// `spreads` spreads of margin, is at most target_ms:
//     (weights_ms + rows * per_row_ms) * (1 + spreads * spread) <= target_ms
// (the line gives a step's mean time; a step above the line by more than
// the margin misses the target):
//   - cost not known: lo (the safe step; it also gives the fit a new x);
//   - per_row_ms == 0 (every size costs weights_ms): hi when weights_ms and
//     the margin are within the target, else lo;
//   - even lo is predicted over the target: lo (the target cannot be held;
//     the smallest step comes closest).
// Bad arguments are the caller's mistake: target_ms <= 0 (or not a number),
// spreads < 0 (or not a number), lo < 1 or lo > hi throw pd::UserError
// (pd::fail, src/common.hpp) naming the value.
int budget_for_target(const StepCost& cost, double target_ms, double spreads, int lo, int hi);

}  // namespace pd::lab08
