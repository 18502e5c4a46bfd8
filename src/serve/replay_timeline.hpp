// A replay (replay.hpp) on the timeline (base/timeline.hpp), when one is
// being recorded:
//   track "scheduler"   one span per step, its batch as args (decode rows,
//                       prefill chunks, preemptions, running and waiting
//                       requests, "r3 decode@40, r7 prefill 64@0"); the
//                       engine's pass (and its layers) inside it
//   track "request N"   one per request: a span from its arrival to its
//                       finish (args: prompt and output tokens, finish
//                       reason, TTFT), inside it "queued" until admitted,
//                       each "prefill" chunk and "decode" step it took part
//                       in, "preempted" while it waited to be recomputed
//                       ("recompute" chunks then), instants "first token"
//                       and "finished"
//   counters            "KV blocks" used by live sequences, "requests"
//                       running and waiting, after every step
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/timeline.hpp"
#include "serve/scheduler.hpp"
#include "serve/trace.hpp"

namespace pd::serve {

class ReplayTimeline {
public:
    // Names the tracks. `process`: empty records on the program's own
    // process (1), else on a new one of that name (a program that replays
    // several traces).
    ReplayTimeline(Timeline& tl, const std::string& process, std::span<const Request> requests);
    ~ReplayTimeline();  // the engine records on its former track again
    ReplayTimeline(const ReplayTimeline&) = delete;
    ReplayTimeline& operator=(const ReplayTimeline&) = delete;

    // Call right before the replay's clock starts: arrival times count from then.
    void start(const Trace& trace);
    void step_begins();
    // After scheduler.step() returned `events`.
    void step_ends(const Scheduler& scheduler, std::span<const TokenEvent> events);

private:
    struct RequestTrack {
        std::int64_t arrival_ns = 0;
        std::int64_t wait_since_ns = 0;  // when its current wait began
        const char* waiting_as = "queued";
        bool ran = false;                // has been in a batch since its last (re)admission
        bool recomputes = false;         // preempted after it ran: its chunks compute again
        int prompt_tokens = 0, output_tokens = 0;
        std::int64_t first_token_ns = -1;
    };
    TimelinePlace request_place(int request) const { return {process_, 10 + request}; }
    void record_waits(const Scheduler& s);
    void record_batch(const Scheduler& s);
    void record_tokens(std::span<const TokenEvent> events);
    void finish_request(int request, const char* reason);

    Timeline& tl_;
    int process_ = 1;
    TimelinePlace engine_before_;
    std::vector<RequestTrack> requests_;  // by Request::id (the trace index)
    std::int64_t step_start_ns_ = 0, step_end_ns_ = 0;
    long long steps_ = 0;
};

}  // namespace pd::serve
