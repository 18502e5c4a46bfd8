// The decisions of one scheduler step, apart from carrying them out: which
// sequences leave (cancelled), which waiting ones join, and what each running
// one brings to the batch. The Scheduler (scheduler.hpp) asks a StepPolicy
// for these three every step, then opens, reserves, runs, samples and closes.
// Lab 06's student writes a StepPolicy; ContinuousBatching below is the
// engine's own.
//
// A policy only reads the state and appends to the output vector it is given
// (cleared, with capacity for every sequence): it allocates nothing.
#pragma once

#include <span>
#include <vector>

namespace pd::serve {

// One sequence as a policy sees it (ids index Scheduler's sequence pool).
struct SeqState {
    int tokens = 0;          // prompt + output so far
    int computed = 0;        // leading tokens whose K/V are cached
    bool cancelled = false;  // the client cancelled it; retire it this step
    double arrival_s = 0;    // when it arrived, on the caller's clock (Scheduler::add's; 0 if not given)
    // Speculative decoding (SchedulerConfig::speculative): tokens proposed
    // after a decode row's token, 0 otherwise. A policy may give the decode
    // row's item 1 + j rows (j <= proposed) to have the model check the
    // first j in the same pass; each kept one saves a step.
    int proposed = 0;
    // Tokens still to run: tokens - computed. 1 with computed > 0 is a decode
    // row (the last sampled token) or the last token of a chunked prompt: a
    // policy treats both as one row (they cost the same); the scheduler's
    // step counts tell them apart. More is (the rest of) a prefill.
    int remaining() const { return tokens - computed; }
};

struct StepLimits {
    int max_seqs = 8;               // running sequences at most
    int max_tokens_per_step = 512;  // rows in one batch (decode rows, proposed tokens, prefill chunks)
    bool static_batching = false;   // admit only when nothing runs (a batch at a time)
};

struct SchedulerState {
    std::span<const SeqState> seqs;  // by id
    std::span<const int> waiting;    // ids, first come first served (preempted ones in front)
    std::span<const int> running;    // ids, in admission order (oldest first)
};

// One item of the batch: `n` tokens of sequence `seq`, from its `computed`
// (a decode row's item may reach past its tokens into its proposed ones).
struct BatchItem {
    int seq = 0;
    int n = 0;
};

class StepPolicy {
public:
    virtual ~StepPolicy() = default;
    // Every cancelled sequence, waiting or running.
    virtual void retire(const SchedulerState& s, std::vector<int>& out) = 0;
    // Waiting sequences to start, in the order given (after retire()'s are gone).
    virtual void admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) = 0;
    // The batch over the running sequences (after admit()'s joined).
    virtual void build_batch(const SchedulerState& s, const StepLimits& lim,
                             std::vector<BatchItem>& out) = 0;
};

// The engine's policy: continuous (iteration-level) batching, or static with
// StepLimits::static_batching.
//   admit       : waiting ones in order while fewer than max_seqs run
//                 (static: only when none runs, then up to max_seqs at once)
//   build_batch : decode rows first, oldest first, one token each; then
//                 their proposed tokens, as many as the budget allows (a
//                 decode step reads every weight once however many rows it
//                 has, so verifying them costs little); then prefill chunks,
//                 oldest first, each as much of its remaining prompt as the
//                 token budget has left (chunked prefill)
class ContinuousBatching final : public StepPolicy {
public:
    void retire(const SchedulerState& s, std::vector<int>& out) override;
    void admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) override;
    void build_batch(const SchedulerState& s, const StepLimits& lim,
                     std::vector<BatchItem>& out) override;
};

}  // namespace pd::serve
