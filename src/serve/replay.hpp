// Replaying a trace in real time: each request is handed to the scheduler
// when its arrival time comes, the scheduler steps as long as there is work,
// and every output token is stamped when its step returns (what a streaming
// client would see, minus the network). pdlab serve-sim and lab 06 use it.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/tokenizer.hpp"
#include "serve/request_metrics.hpp"
#include "serve/scheduler.hpp"
#include "serve/trace.hpp"

namespace pd::serve {

// The trace's requests for the scheduler, Request::id = index in the trace:
// text prompts tokenised, ids checked against the vocabulary, and every
// request checked to fit `max_model_len` positions (prompt alone; the output
// stops at the context). UserError naming the request otherwise.
std::vector<Request> trace_requests(const Trace& trace, const Tokenizer& tok, int vocab,
                                    int max_model_len);

// Positions one sequence needs for the longest request (prompt + max_tokens).
long long longest_request(std::span<const Request> requests);

// What the KV cache did during a replay: prefix-cache savings and blocks held.
struct KvCounters {
    long long opens = 0, opens_with_hit = 0;  // sequences started (a preempted one again)
    long long prompt_tokens = 0;   // tokens handed to open(): prompts, and outputs on recompute
    long long skipped_tokens = 0;  // of those, found in the prefix cache (not computed)
    int blocks_peak = 0;           // most blocks live sequences held at once
    // Summed over steps: blocks held, and positions those sequences asked for
    // (their mean is reserved against used memory; shared blocks count once).
    long long steps = 0, block_steps = 0, position_steps = 0;
    double hit_rate() const { return prompt_tokens ? double(skipped_tokens) / double(prompt_tokens) : 0; }
};

// A ServingEngine that forwards every call to `inner` and fills KvCounters,
// so serve-sim reports the same numbers over either engine.
class CountingServingEngine final : public ServingEngine {
public:
    explicit CountingServingEngine(ServingEngine& inner) : inner_(inner) {}
    const KvCounters& counters() const { return counts_; }
    int blocks_used() const { return inner_.total_blocks() - inner_.free_blocks(); }

    const Config& config() const override { return inner_.config(); }
    int block_size() const override { return inner_.block_size(); }
    int total_blocks() const override { return inner_.total_blocks(); }
    int free_blocks() const override { return inner_.free_blocks(); }
    int open(int seq, std::span<const int> prompt) override;
    bool reserve(int seq, int len) override;
    void close(int seq) override;
    int cached_len(int seq) const override { return inner_.cached_len(seq); }
    void truncate(int seq, int len) override;
    const float* step(std::span<const SeqWork> work) override;

private:
    ServingEngine& inner_;
    KvCounters counts_;
    std::unordered_map<int, int> positions_;  // live sequence -> positions reserved
    long long positions_total_ = 0;           // their sum
};

struct ReplayResult {
    std::vector<RequestTiming> timings;   // (requests) in trace order, times from the start
    std::vector<FinishReason> finished;   // (requests)
    std::vector<std::vector<int>> output_ids;  // (requests) the tokens each got
    double duration_s = 0;                // start to the last token (on the replay's clock)
    double wall_s = 0;                    // the same on the wall clock (equal without a StepClock)
    long long steps = 0, preemptions = 0;
    long long max_batch = 0;              // most sequences in one step's batch
};

// A virtual clock: the seconds the step just run takes, from what it ran
// (Scheduler::last_batch()). With one, a replay's times are the sum of its
// steps' costs, the same on every machine and under any load, and an idle
// scheduler jumps to the next arrival instead of sleeping (lab 17 grades on it).
using StepClock = std::function<double(const Scheduler&)>;

// Runs `requests` (from trace_requests) arriving at the trace's times through
// `scheduler` until all finish, on the wall clock, or on `clock` when given.
// `progress`: a line on stderr about once a second (of the replay's clock).
// When a timeline is recorded, the replay goes on it (scheduler_timeline.hpp,
// wall times): on the program's own process, or on a new one named `timeline_process`.
// Each request reaches the scheduler with its arrival time (SeqState::arrival_s);
// `now_s`, when given, is set to the replay's time before every step, on the
// same clock, so that a policy can tell how long a request has waited.
ReplayResult replay(Scheduler& scheduler, const Trace& trace, std::span<const Request> requests,
                    bool progress, const std::string& timeline_process = "",
                    const StepClock& clock = {}, double* now_s = nullptr);

}  // namespace pd::serve
