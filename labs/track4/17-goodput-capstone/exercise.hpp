// Lab 17: what you write. The capstone: the serving stack of track 2 is yours
// to configure and to schedule, and the score is GOODPUT, the requests per
// second that meet BOTH latency objectives (goodput_kit.hpp's Slo): the first
// token within ttft_ms of the arrival, and no gap between two tokens longer
// than itl_ms. A request that misses either counts for nothing, however fast
// the rest of it was.
//
// Two pieces, both judged on a hidden trace of the same family as the public one:
//   1. choose_config: from a summary of the trace (rates, lengths, shared
//      prefixes), the configuration: sequences at once, token budget per
//      step, KV block size and pool within the memory cap, prefix caching,
//      and the precision of the weights (cheaper steps, other tokens: under
//      the kit's quality floor, kAgreementFloor, the goodput counts 0).
//   2. GoodputPolicy: a pd::serve::StepPolicy (lab 06's three methods) that
//      decides every step who leaves, who joins and what runs.
// Time is the kit's virtual clock (goodput_kit.hpp's StepCostModel): every
// step costs weights_ms + rows * per_token_ms + attended pairs * per_pair_ms,
// the same for your policy and the baseline on any machine under any load.
// Your policy gets that model (at your configuration's precision), the SLOs
// and the replay's "now" (ReplayTime; each SeqState's arrival_s is on the same
// clock), so it can price a batch before it runs it and tell a request whose
// first token can no longer come in time.
#pragma once

#include <vector>

#include "goodput_kit.hpp"
#include "serve/step_policy.hpp"

namespace pd::lab17 {

using pd::serve::BatchItem;
using pd::serve::SchedulerState;
using pd::serve::SeqState;
using pd::serve::StepLimits;

// Task 1: the configuration for a trace like `t`. The kit checks it
// (check_config: kv_blocks * block_size within `cap`, the longest request
// fits alone, every field in its range, a precision the engine has) and
// stops with a message otherwise. `costs.at(p)`: the clock at precision p.
ServeConfig choose_config(const TraceSummary& t, const Slo& slo, const PrecisionCosts& costs,
                          const MemoryCap& cap);

// Task 2: the step policy. The Scheduler (src/serve/scheduler.hpp) calls the
// three methods every step, in this order, with lim = your configuration's
// max_seqs and max_tokens_per_step, and holds you to lab 06's rules:
//   retire      : every cancelled sequence (waiting or running), each once;
//   admit       : waiting ids, each once, with running + admitted <= max_seqs
//                 (any order you like: the waiting queue is yours to reorder);
//   build_batch : running ids, each at most once, 1..remaining() tokens each
//                 (a decode row 1..1 + proposed when your configuration's
//                 speculative_k > 0: the model checks the first j proposed
//                 tokens in the same pass), at most max_tokens_per_step
//                 tokens in all; every running
//                 sequence must get tokens in some later step, or the replay
//                 never ends.
// When the KV blocks run out the Scheduler preempts the newest running
// sequence (it recomputes later): a batch it cannot hold costs time.
class GoodputPolicy final : public pd::serve::StepPolicy {
public:
    // `cost`: the clock at your configuration's precision; `time`: the
    // replay's (it must outlive the policy; replay_on keeps it current).
    GoodputPolicy(const Slo& slo, const StepCostModel& cost, const ReplayTime& time)
        : slo_(slo), cost_(cost), time_(time) {}

    void retire(const SchedulerState& s, std::vector<int>& out) override;
    void admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) override;
    void build_batch(const SchedulerState& s, const StepLimits& lim, std::vector<BatchItem>& out) override;

private:
    Slo slo_;
    StepCostModel cost_;
    const ReplayTime& time_;
    std::vector<int> order_;  // scratch for sorting ids: it grows to the most ids once, then a step allocates nothing
};

}  // namespace pd::lab17
