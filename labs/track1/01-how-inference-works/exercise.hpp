// Lab 01: choosing the next token from a row of logits.
//
// The model's last layer produces one score (a logit) per vocabulary entry for
// every position it processed. Only the LAST position's row matters for
// generation: it is the model's opinion about the token that comes next.
// These three functions turn that row into one token id.
//
// Conventions for all three:
//   logits       one row, (vocab) floats; any real values, may be negative
//   errors       bad arguments throw pd::UserError (use pd::fail("...", ...))
#pragma once

#include <random>
#include <span>
#include <vector>

#include "common.hpp"

namespace pd::lab01 {

// Greedy decoding: the index of the largest logit.
// Ties go to the FIRST (lowest) index, like pd::argmax and torch.argmax.
// Empty logits: UserError.
int greedy(std::span<const float> logits);

// probs (vocab) = softmax(logits / T):  p_i = exp((x_i - max) / T) / sum_j exp((x_j - max) / T).
// T is the temperature: T < 1 sharpens the distribution, T > 1 flattens it.
// Subtract the maximum before exp() so that large logits cannot overflow.
// T must be finite and > 0 (T = 0 is greedy, which is greedy()); else UserError.
// Empty logits: UserError.
std::vector<float> softmax_with_temperature(std::span<const float> logits, float T);

// Top-k sampling: keep the k ids with the largest logits (ties: lower id first),
// renormalise softmax(logits / T) over those k only, and draw one of them with
// `rng`. Returns a vocabulary id (an index into logits), never one outside the top k.
// k = 1 is greedy; k = vocab samples from the whole distribution.
// Valid: T finite and > 0, 1 <= k <= vocab; else UserError.
int sample_top_k(std::span<const float> logits, float T, int k, std::mt19937_64& rng);

}  // namespace pd::lab01
