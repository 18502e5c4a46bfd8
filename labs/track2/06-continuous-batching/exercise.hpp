// Lab 06: what you write. The scheduler step of a serving engine: every
// iteration it decides which sequences leave, which waiting ones join, and
// what each running one brings to the one batched forward pass.
//
// You implement a pd::serve::StepPolicy (src/serve/step_policy.hpp). The
// kit's Scheduler (src/serve/scheduler.hpp) calls your three methods every
// step, in this order, and carries out what they decide: it closes the
// sequences you retire, opens the ones you admit, reserves KV memory for your
// batch (preempting the newest sequence when memory runs out), runs the
// engine, picks the next tokens and closes the sequences that hit a stop
// condition.
//
// What you see, SchedulerState (all read-only):
//   seqs[id]  : SeqState of sequence id: tokens (prompt + output so far),
//               computed (tokens already in the KV cache), cancelled, and
//               remaining() = tokens - computed
//   waiting   : ids not started, first come first served (a preempted
//               sequence is put back at the front)
//   running   : ids started, oldest first
// What you give back: you append to `out` (cleared for you, with room for
// every sequence: do not allocate).
#pragma once

#include <vector>

#include "serve/step_policy.hpp"

namespace pd::lab06 {

using pd::serve::BatchItem;
using pd::serve::SchedulerState;
using pd::serve::SeqState;
using pd::serve::StepLimits;

class StudentBatching final : public pd::serve::StepPolicy {
public:
    // Task 1: every cancelled sequence, waiting ones first (in queue order),
    // then running ones (in running order).
    void retire(const SchedulerState& s, std::vector<int>& out) override;

    // Task 2: the waiting sequences to start this step, from the front of the
    // queue, in queue order, so that no more than lim.max_seqs run.
    // Continuous batching admits whenever there is room. Static batching
    // (lim.static_batching) admits only when NO sequence runs, then up to
    // lim.max_seqs at once. Nothing cancelled is left in `waiting` (retire ran).
    void admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) override;

    // Task 3: the batch, at most lim.max_tokens_per_step tokens in all:
    //   1. decode rows first: every running sequence with remaining() == 1
    //      and computed > 0, in running order, one token each, while the
    //      budget lasts;
    //   2. then prefill chunks: every other running sequence with tokens left
    //      (remaining() >= 1), in running order, gets
    //      min(remaining(), budget left) tokens, while the budget lasts.
    // Each item is {sequence id, tokens}; no sequence appears twice, none
    // with 0 tokens.
    void build_batch(const SchedulerState& s, const StepLimits& lim,
                     std::vector<BatchItem>& out) override;
};

}  // namespace pd::lab06
