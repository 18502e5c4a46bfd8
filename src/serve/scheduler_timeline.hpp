// The scheduler's steps and its requests on the timeline (base/timeline.hpp),
// when one is being recorded: serve-sim's replay (replay.hpp) and pdlab
// serve's batching worker (batching_worker.hpp) both record through this.
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
#include <unordered_map>

#include "base/timeline.hpp"
#include "serve/scheduler.hpp"

namespace pd::serve {

class SchedulerTimeline {
public:
    // Names the scheduler's track. `process`: empty records on the program's
    // own process (1), else on a new one of that name (a program that
    // replays several traces).
    SchedulerTimeline(Timeline& tl, const std::string& process);
    ~SchedulerTimeline();  // the engine records on its former track again
    SchedulerTimeline(const SchedulerTimeline&) = delete;
    SchedulerTimeline& operator=(const SchedulerTimeline&) = delete;

    // A request the scheduler was given (or will be: a replay adds its whole
    // trace first), arriving at `arrival_ns` on the timeline's clock. Ids are
    // the scheduler's Request::id; a request's track is dropped from memory
    // once it finishes, so a long-running server holds only its live ones.
    void add_request(int id, int prompt_tokens, std::int64_t arrival_ns);
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
    RequestTrack& track(int request);
    void record_waits(const Scheduler& s);
    void record_batch(const Scheduler& s);
    void record_tokens(std::span<const TokenEvent> events);
    void finish_request(int request, const char* reason);

    Timeline& tl_;
    int process_ = 1;
    TimelinePlace engine_before_;
    std::unordered_map<int, RequestTrack> requests_;  // live ones, by Request::id
    std::int64_t step_start_ns_ = 0, step_end_ns_ = 0;
    long long steps_ = 0;
};

}  // namespace pd::serve
