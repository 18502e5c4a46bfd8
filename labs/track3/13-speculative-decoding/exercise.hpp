// Lab 13: what you write. The two accept rules of speculative decoding, and
// the arithmetic that says what a given acceptance rate is worth.
//
// The loop around them is the engine's (pd::speculative_generate,
// src/engine/speculative.hpp): the draft model proposes k tokens d1..dk, the
// target scores all of them in ONE pass over its cache, your rule decides how
// many to keep and which token comes next, and the loop rolls both caches back
// past what you rejected. The lab program hands your rules to that loop.
#pragma once

#include "engine/speculative.hpp"  // pd::Proposal, pd::Verdict, pd::Rng

namespace pd::lab13 {

// Task 1 (README "The greedy rule"): keep the longest prefix d1..da of the
// draft on which the target agrees (d(i+1) == argmax of target_logits row i,
// the first index on ties), then return the target's own argmax at row a:
// the correction where it disagreed, the bonus (row k) when it agreed on all k.
//   pr.draft         : (k) the proposed tokens
//   pr.target_logits : (k+1, vocab) row i scores the token after d1..di
// Reads neither pr.target_probs nor pr.draft_probs (empty in greedy runs).
// Throws std::invalid_argument when k < 0, vocab < 1, draft does not hold k
// tokens, target_logits does not hold (k+1) * vocab values, or a draft token
// is outside [0, vocab).
Verdict accept_greedy(const Proposal& pr);

// Task 2 (README "The sampling rule"): for i = 0 .. k-1, keep d(i+1) with
// probability min(1, p_i(d) / q_i(d)) (one uniform draw from rng in [0, 1)
// per token judged); at the first rejection, return {i, a token drawn from
// norm(max(0, p_i - q_i))}. When all k are kept, return {k, a token drawn
// from p_k} (the bonus).
//   pr.target_probs : (k+1, vocab) p, each row sums to 1
//   pr.draft_probs  : (k, vocab)   q, d(i+1) was drawn from row i, so q_i(d(i+1)) > 0
// Throws std::invalid_argument on the shape errors of task 1 (with the probs
// in place of the logits), or when q_i(d(i+1)) is 0 (d could not have been drawn).
Verdict accept_sampled(const Proposal& pr, Rng& rng);

// Task 3 (README "What acceptance is worth"): the expected number of tokens
// one target pass yields when each draft token is kept with probability
// alpha, independently, and the round stops at the first rejection:
// 1 + alpha + alpha^2 + ... + alpha^k.
// alpha is the chance that the target keeps a token it judges: measured as
// kept / (kept + rejections) (SpeculativeStats::per_token_acceptance), not as
// kept / proposed, which also counts the tokens after a rejection that the
// target never judged.
// Throws std::invalid_argument when alpha is outside [0, 1] (or NaN) or k < 0.
double expected_tokens_per_pass(double alpha, int k);

}  // namespace pd::lab13
