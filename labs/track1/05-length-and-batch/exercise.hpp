// Lab 05: what you write. The step of batched decoding that serves every
// unfinished sequence of a batch with one forward pass, and the least-squares
// fit that splits prefill time into a part linear in the prompt length and a
// part that grows with its square. (The attention of a ragged batch, each row
// over its own cache length, is lab 03's loop once per row: the engine's
// attention_decode does it here, and the program times it ragged and padded.)
#pragma once

#include <span>
#include <vector>

#include "engine/engine.hpp"

namespace pd::lab05 {

// The sequences a batch is generating together.
struct Batch {
    std::vector<int> slots;      // (B) each sequence's cache slot (distinct; every one prefilled)
    std::vector<int> next;       // (B) each sequence's newest token, the one its next step consumes
    std::vector<int> remaining;  // (B) decode steps each sequence still wants; 0: finished
};

// Task 1 (README "Batch size", "A ragged batch"): one decode step for every
// unfinished sequence of the batch. Gather the rows with remaining > 0 (in batch order) and run them through ONE
// engine.decode() call: that is the point of batching, each weight is read
// from memory once for all rows. Row r of the logits it returns, (rows, vocab),
// belongs to the r-th gathered sequence. Pick each row's token greedily (the
// index of the largest logit, the first on ties), write it back to that
// sequence's `next`, and count one step off its `remaining`. Finished
// sequences stay out of the call: their caches do not grow.
// Returns the number of rows decoded (0 when all are finished: then no call).
// Throws std::invalid_argument when the three vectors differ in length, a
// `remaining` is negative, or an unfinished sequence's cache is full
// (engine.cache_len(slot) == engine.max_seq()).
int batched_decode_step(Engine& engine, Batch& batch);

// time(P) ~= c0 + a * P + b * P^2, the least-squares fit over the points
// (P[i], ms[i]).
//   c0 : fixed cost per pass (ms), whatever the length
//   a  : ms per token: the matrix products, the same work for every token
//   b  : ms per token^2: attention, each token looks at all those before it
//   r2 : the coefficient of determination, 1 - SS_res / SS_tot (1 when SS_tot is 0)
struct Fit {
    double c0 = 0, a = 0, b = 0;
    double r2 = 0;
    double at(double P) const { return c0 + a * P + b * P * P; }
};

// Task 2. Throws std::invalid_argument when the spans differ in length or hold
// fewer than three distinct P values (three unknowns need three different points).
Fit fit_linear_quadratic(std::span<const double> P, std::span<const double> ms);

}  // namespace pd::lab05
