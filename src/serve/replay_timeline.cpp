#include "serve/replay_timeline.hpp"

#include <fmt/format.h>

namespace pd::serve {

ReplayTimeline::ReplayTimeline(Timeline& tl, const std::string& process, std::span<const Request> requests)
    : tl_(tl), process_(process.empty() ? 1 : tl.add_process(process)), engine_before_(tl.engine_place()) {
    tl_.name_track({process_, 1}, "scheduler", 0);
    tl_.set_engine_place({process_, 1});  // each step's forward pass nests in its step span
    requests_.resize(requests.size());
    for (std::size_t i = 0; i < requests.size(); i++) {
        requests_[i].prompt_tokens = int(requests[i].prompt.size());
        tl_.name_track(request_place(requests[i].id), fmt::format("request {}", requests[i].id), 10 + int(i));
    }
}

ReplayTimeline::~ReplayTimeline() { tl_.set_engine_place(engine_before_); }

void ReplayTimeline::start(const Trace& trace) {
    const std::int64_t start_ns = tl_.now_ns();
    for (std::size_t i = 0; i < requests_.size(); i++)
        requests_[i].arrival_ns = requests_[i].wait_since_ns = start_ns + std::int64_t(trace[i].arrival_s * 1e9);
}

void ReplayTimeline::step_begins() { step_start_ns_ = tl_.now_ns(); }

void ReplayTimeline::step_ends(const Scheduler& s, std::span<const TokenEvent> events) {
    step_end_ns_ = tl_.now_ns();
    steps_++;
    record_waits(s);
    record_batch(s);
    record_tokens(events);
    tl_.counter(process_, "KV blocks", step_end_ns_, {{"used", double(s.blocks_used()), {}}});
    tl_.counter(process_, "requests", step_end_ns_,
                {{"running", double(s.running()), {}}, {"waiting", double(s.waiting()), {}}});
}

// An admitted request's wait ends where the step began; a preempted one's
// begins there (a request admitted and preempted in one step has both).
void ReplayTimeline::record_waits(const Scheduler& s) {
    for (int id : s.admitted()) {
        RequestTrack& r = requests_[std::size_t(id)];
        tl_.span(request_place(id), r.waiting_as, "request", r.wait_since_ns, step_start_ns_);
    }
    for (int id : s.preempted()) {
        RequestTrack& r = requests_[std::size_t(id)];
        r.wait_since_ns = step_start_ns_;
        r.waiting_as = "preempted";
        r.recomputes = r.recomputes || r.ran;
        r.ran = false;
    }
}

// The step on the scheduler's track, and each item on its request's track.
void ReplayTimeline::record_batch(const Scheduler& s) {
    const StepCounts& c = s.last_step();
    std::string batch;
    for (const StepItem& it : s.last_batch()) {
        RequestTrack& r = requests_[std::size_t(it.request)];
        const char* what = it.decode ? "decode" : r.recomputes ? "recompute" : "prefill";
        r.ran = true;
        tl_.span(request_place(it.request), what, "request", step_start_ns_, step_end_ns_,
                 {{"tokens", double(it.tokens), {}}, {"from position", double(it.start), {}}});
        if (!batch.empty()) batch += ", ";
        batch += it.decode ? fmt::format("r{} decode@{}", it.request, it.start)
                           : fmt::format("r{} {} {}@{}", it.request, what, it.tokens, it.start);
    }
    tl_.span({process_, 1}, "step", "scheduler", step_start_ns_, step_end_ns_,
             {{"step", double(steps_), {}},
              {"decode rows", double(c.decode_rows), {}},
              {"prefill chunks", double(c.prefill_items), {}},
              {"prefill tokens", double(c.prefill_tokens), {}},
              {"preempted", double(c.preempted), {}},
              {"running", double(s.running()), {}},
              {"waiting", double(s.waiting()), {}},
              {"batch", 0, batch.empty() ? "(empty)" : batch}});
}

void ReplayTimeline::record_tokens(std::span<const TokenEvent> events) {
    for (const TokenEvent& e : events) {
        RequestTrack& r = requests_[std::size_t(e.request)];
        if (e.token >= 0) {
            if (r.output_tokens++ == 0) {
                r.first_token_ns = step_end_ns_;
                tl_.instant(request_place(e.request), "first token", "request", step_end_ns_);
            }
        }
        if (e.finished != FinishReason::none) finish_request(e.request, finish_reason_name(e.finished));
    }
}

void ReplayTimeline::finish_request(int request, const char* reason) {
    const RequestTrack& r = requests_[std::size_t(request)];
    const TimelinePlace at = request_place(request);
    tl_.instant(at, "finished", "request", step_end_ns_, {{"reason", 0, reason}});
    std::vector<TimelineArg> args = {{"prompt tokens", double(r.prompt_tokens), {}},
                                     {"output tokens", double(r.output_tokens), {}},
                                     {"finish reason", 0, reason}};
    if (r.first_token_ns >= 0) args.push_back({"ttft ms", double(r.first_token_ns - r.arrival_ns) / 1e6, {}});
    tl_.span(at, {"request", request}, "request", r.arrival_ns, step_end_ns_, std::move(args));
}

}  // namespace pd::serve
