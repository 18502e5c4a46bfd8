// Lab 05: what you write. A batched decode step, and the least-squares fit
// that splits prefill time into a part linear in the prompt length and a part
// that grows with its square.
#pragma once

#include <span>

#include "engine.hpp"

namespace pd::lab05 {

// One decode step for B sequences at once.
//   slots  : (B) the cache slot of each sequence (distinct; any order, any subset
//            of the engine's batch; every one already prefilled)
//   tokens : (B) in: the newest token of each sequence, the one this step
//            consumes; out: the token each sequence picks next (greedy: the
//            index of the largest logit, the first one on ties)
// All B sequences go through ONE engine.decode() call: that is the point of
// batching, each weight is read from memory once for all B rows. Row r of the
// logits it returns, (B, vocab), belongs to slots[r]. Every sequence's cache
// grows by one position.
// Returns those logits (they stay valid until the engine's next call).
const float* batched_decode_step(Engine& engine, std::span<const int> slots, std::span<int> tokens);

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

// Throws std::invalid_argument when the spans differ in length or hold fewer
// than three distinct P values (three unknowns need three different points).
Fit fit_linear_quadratic(std::span<const double> P, std::span<const double> ms);

}  // namespace pd::lab05
