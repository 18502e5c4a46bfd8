// Greedy generation two ways, to compare: over the ranks' shards (tp_forward,
// YOUR exercise inside), and on the engine's own forward pass (the reference).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "tp_forward.hpp"

namespace pd::lab16 {

struct TpRun {
    std::vector<int> tokens;          // the generated ids
    std::vector<float> first_logits;  // (vocab) the prefill's last row
    std::vector<PassTimes> passes;    // [0] the prefill, then one per decode step
};

// Prefill `prompt`, then n_new - 1 decode steps, greedy, EOS ignored; rank 0
// picks each token and broadcasts it. Every rank calls it with the same prompt.
TpRun tp_generate(TpRank& r, TimedComm& comm, std::span<const int> prompt, int n_new);

// An untimed prefill of `prompt` and one decode step, then the cache emptied:
// the first pass of a row count builds oneDNN's kernel for it, which a timed
// pass should not pay.
void tp_warm_up(TpRank& r, TimedComm& comm, std::span<const int> prompt);

// The engine's greedy tokens for the same prompt (EOS ignored), and the
// prefill's last-row logits in `first_logits` when given.
std::vector<int> engine_greedy(std::shared_ptr<const Model> model, std::span<const int> prompt, int n_new,
                               std::vector<float>* first_logits = nullptr);

}  // namespace pd::lab16
