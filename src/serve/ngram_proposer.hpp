// Speculative decoding without a draft model: prompt lookup, or n-gram
// proposal. Text often repeats itself (a name, a code identifier, a phrase
// the prompt quoted, a loop a small model falls into), so the tokens that
// followed the last time the sequence's newest n tokens appeared are a cheap
// guess at what comes next. The scheduler (scheduler.hpp) lets the model
// score that guess in the same pass as the sequence's decode row and keeps
// the part the model agrees with: the output is exactly greedy decoding's.
//
//   tokens   ... a b c x y ... a b c       the last n = 3 tokens: "a b c"
//                       ^^^                 its most recent earlier occurrence
//   proposal x y ...                        up to k of the tokens after it
//
// The longest n is tried first (a longer match predicts better), down to the
// shortest; no occurrence of any: no proposal.
#pragma once

#include <span>

namespace pd::serve {

struct NgramSpeculation {
    int k = 0;      // tokens proposed at most per decode row (0: no speculation)
    int max_n = 3;  // the longest suffix looked up ...
    int min_n = 2;  // ... down to this one (1 proposes more often and is right far less often)
};

// UserError unless k >= 0 and 1 <= min_n <= max_n.
void check_ngram(const NgramSpeculation& c);

// Writes into `out` up to min(c.k, out.size()) tokens that followed the most
// recent earlier occurrence of the last n tokens of `tokens`, for the largest
// n in [c.min_n, c.max_n] that occurs; returns how many (0: none occurs).
// The occurrence may overlap the suffix itself (a loop: "a b a b a" proposes
// "b a ...").
int propose_ngram(std::span<const int> tokens, const NgramSpeculation& c, std::span<int> out);

}  // namespace pd::serve
