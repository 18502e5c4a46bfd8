// Lab 08: what you write. The token-budget planner of a serving step: every
// iteration ONE forward pass runs at most `budget` tokens, and the planner
// decides how they are shared between the running decode streams (one token
// each) and the prompts still being prefilled (a chunk each).
//
// A long prompt prefilled in one pass stalls every decode stream for the whole
// pass; cut into chunks of what the budget leaves after the decode rows, the
// streams keep getting a token every step while the prompt goes through a
// chunk at a time (chunked prefill, vLLM's and SARATHI's scheduler).
//
// What you see, pd::serve::SchedulerState (all read-only):
//   seqs[id]  : SeqState of sequence id: tokens (prompt + output so far),
//               computed (tokens already in the KV cache), remaining() =
//               tokens - computed
//   running   : ids started, oldest first (the planner plans over these only;
//               the scheduler admitted them before asking you)
// What you give back: you append BatchItem{seq, n} to `out` (cleared for you,
// with room for every sequence: do not allocate). An item runs the sequence's
// NEXT n tokens, from its `computed`: the scheduler feeds them and advances
// `computed` by n, so next step's chunk continues where this one stopped.
#pragma once

#include <vector>

#include "serve/step_policy.hpp"

namespace pd::lab08 {

using pd::serve::BatchItem;
using pd::serve::SchedulerState;
using pd::serve::SeqState;
using pd::serve::StepLimits;

// The task: plan one step within `budget` tokens.
//   0. budget < 1: no step can run a single token. Throw pd::UserError (call
//      pd::fail from common.hpp) with a message naming the budget.
//   1. decode rows first: every running sequence with remaining() == 1 and
//      computed > 0, in running order, one token each, while the budget lasts;
//   2. then prefill chunks: every other running sequence with tokens left
//      (remaining() >= 1), in running order (the oldest prompt finishes
//      first), gets min(remaining(), budget left) tokens, while the budget lasts.
// No sequence appears twice, none with 0 tokens; the items' tokens never add
// up to more than `budget`.
void plan_step(const SchedulerState& s, int budget, std::vector<BatchItem>& out);

// Your planner in the kit's real Scheduler (src/serve/scheduler.hpp): retire
// and admit are the engine's own (lab 06's exercise), the batch is your
// plan_step with the step's budget, lim.max_tokens_per_step.
class StudentPlanner final : public pd::serve::StepPolicy {
public:
    void retire(const SchedulerState& s, std::vector<int>& out) override { engine_policy_.retire(s, out); }
    void admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) override {
        engine_policy_.admit(s, lim, out);
    }
    void build_batch(const SchedulerState& s, const StepLimits& lim, std::vector<BatchItem>& out) override {
        plan_step(s, lim.max_tokens_per_step, out);
    }

private:
    pd::serve::ContinuousBatching engine_policy_;
};

}  // namespace pd::lab08
