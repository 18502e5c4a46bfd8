// The serving scheduler: many requests share one model, and every iteration
// (step) decides which of them run together. It carries out a StepPolicy's
// decisions (step_policy.hpp) on a ServingEngine:
//
//   step():  1. retire cancelled sequences          (close: their blocks free at once)
//            2. admit waiting ones                  (open: prefix cache consulted)
//            3. speculating, propose tokens after each decode row's
//               (ngram_proposer.hpp)
//            4. build the batch                     (decode rows and their
//                                                    proposed tokens, then prefill chunks)
//            5. reserve each item's room (a verify item that does not fit
//               drops its proposed tokens); when the blocks run out, preempt
//               the newest running sequence (close it; it waits again, in
//               front, and recomputes its prompt and output when readmitted)
//            6. ONE engine step over the batch
//            7. pick each finished item's next token (the request's own
//               sampler: greedy by default) and apply the finish rule
//               (finish_rule.hpp: EOS, max tokens, the context, stop strings,
//               the text safe to send); a finished sequence is closed at once.
//               A verify item keeps the proposed tokens up to the first one
//               the model would not have picked, then the model's own token
//               (speculative.hpp's greedy rule), each through the finish rule
//               in turn, and rolls the engine back past the rejected rows.
//
// Continuous batching: a finished sequence's place is refilled next step.
// Static batching (StepLimits::static_batching): a new batch starts only when
// the whole previous one finished. In steady state a step allocates nothing:
// every vector is sized when a request is added.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.hpp"
#include "engine/speculative.hpp"
#include "io/tokenizer.hpp"
#include "serve/finish_rule.hpp"
#include "serve/ngram_proposer.hpp"
#include "serve/serving_engine.hpp"
#include "serve/step_policy.hpp"

namespace pd::serve {

struct Request {
    int id = 0;                     // the caller's id, echoed in events
    std::vector<int> prompt;        // (P) token ids, 1 <= P <= max_model_len
    int max_tokens = 16;            // output tokens at most (>= 1)
    std::vector<std::string> stop;  // stop strings (need SchedulerConfig::tokenizer)
};

// How one request's tokens are chosen, apart from Request so that the
// scheduler's many callers that only want greedy decoding need not say so.
struct Sampling {
    SamplerConfig sampler;    // temperature, top-k, top-p, seed (default: greedy)
    bool ignore_eos = false;  // generate past EOS (also when SchedulerConfig::ignore_eos)
};

// What a step did for one request.
struct TokenEvent {
    int request = 0;                           // Request::id
    int token = -1;                            // the new token; -1 when cancelled
    FinishReason finished = FinishReason::none;
    std::string text;                          // the text now safe to send (with a tokenizer)
};

struct SchedulerConfig {
    StepLimits limits;
    int max_model_len = 0;  // positions per sequence, prompt + output (> 0)
    std::vector<int> eos_ids;  // any of them ends a request (the model's Config::eos_ids); empty: none
    bool ignore_eos = false;
    std::optional<Tokenizer> tokenizer;  // ids -> text, for events' text and stop strings
    // Speculative decoding by n-gram lookup (k = 0: off). Greedy requests
    // only: the rule keeps exactly the tokens greedy decoding gives, so a
    // request with a temperature is refused while it is on.
    NgramSpeculation speculative = {};
};

// UserError unless max_seqs >= 1 and the token budget >= 1.
void check_limits(const StepLimits& lim);

// What the last step ran (for progress lines and the labs). Rows in all:
// decode_rows + speculative_rows + prefill_tokens.
struct StepCounts {
    int decode_rows = 0, prefill_items = 0, prefill_tokens = 0, preempted = 0;
    int speculative_rows = 0;  // proposed tokens checked after decode rows
};

// One request's share of the last step (for the timeline).
struct StepItem {
    int request = 0;      // Request::id
    int tokens = 0;       // rows it brought: 1 for a decode token (+ proposed ones), else a prefill chunk
    int start = 0;        // position of its first row
    bool decode = false;  // a decode token (else a prompt chunk, or a recompute after preemption)
    int proposed = 0;     // of `tokens`, proposed ones after the decode token
    int accepted = 0;     // of those, the ones the model agreed with (it emitted them and one of its own,
                          // up to where a finish rule ended the request)
};

// Speculative decoding since the scheduler started.
struct SpeculationStats {
    long long decode_rows = 0;  // every decode row, with a proposal or not
    long long verifies = 0;     // decode rows that carried proposed tokens
    long long proposed = 0;     // proposed tokens checked
    long long accepted = 0;     // of those, the ones the model agreed with
    long long emitted = 0;      // tokens the verifying rows gave (kept + the model's own, finish rules applied)
    double acceptance_rate() const { return proposed ? double(accepted) / double(proposed) : 0.0; }
    // 1 for plain decoding; up to 1 + k.
    double tokens_per_verify() const { return verifies ? double(emitted) / double(verifies) : 0.0; }
};

class Scheduler {
public:
    // `engine` and `policy` are borrowed and must outlive the scheduler.
    Scheduler(ServingEngine& engine, StepPolicy& policy, SchedulerConfig cfg);
    ~Scheduler();

    // Queues a request, chosen greedily unless `sampling` says otherwise
    // (UserError: empty prompt, longer than the context, a stop string
    // without a tokenizer, max_tokens < 1, an id already queued, a bad
    // sampler, a temperature while speculating). `arrival_s`: when it arrived
    // on the caller's clock (the replay's), for the policy to read in
    // SeqState; the scheduler itself keeps no time.
    void add(Request r, const Sampling& sampling = {}, double arrival_s = 0);
    // Marks a waiting or running request cancelled; the next step closes it
    // and reports it. False when no such request is queued.
    bool cancel(int request_id);

    // One iteration; the events are valid until the next call.
    std::span<const TokenEvent> step();
    bool idle() const { return waiting_.empty() && running_.empty(); }
    int waiting() const { return int(waiting_.size()); }
    int running() const { return int(running_.size()); }
    const StepCounts& last_step() const { return counts_; }
    // Request ids the last step admitted (again, after a preemption): from
    // then on their tokens are computed.
    std::span<const int> admitted() const { return admitted_; }
    // Request ids the last step preempted (they wait again), and what its batch ran.
    std::span<const int> preempted() const { return preempted_; }
    std::span<const StepItem> last_batch() const { return items_; }
    const SpeculationStats& speculation() const { return spec_; }
    // KV blocks live sequences hold now (the engine's total less its free ones).
    int blocks_used() const { return engine_.total_blocks() - engine_.free_blocks(); }

private:
    struct Sequence;  // the pool entry behind a SeqState
    SchedulerState view() const;
    void retire();
    void admit();
    void propose();
    void reserve_batch();
    void preempt(int id);
    void run_batch();
    void advance(int id, const float* logits);
    void verify(int id, std::size_t item, const float* logits);
    bool emit(int id, int token);
    void finish(int id, FinishReason why, int token, std::string text = {});
    int free_id();

    ServingEngine& engine_;
    StepPolicy& policy_;
    SchedulerConfig cfg_;
    std::vector<Sequence> pool_;    // by id; a finished id is reused
    std::vector<SeqState> states_;  // (pool) what the policy sees
    std::vector<int> free_ids_, waiting_, running_;
    std::vector<int> decided_;      // retire()'s and admit()'s output
    std::vector<int> admitted_;     // (admitted) request ids
    std::vector<int> preempted_;    // (preempted) request ids
    std::vector<StepItem> items_;   // (batch) what the last step ran, by request
    std::vector<BatchItem> batch_;
    std::vector<SeqWork> work_;
    std::vector<TokenEvent> events_;
    StepCounts counts_;
    SpeculationStats spec_;
    pd::Rng greedy_rng_;  // what greedy_accept's signature asks for; it draws nothing
};

}  // namespace pd::serve
