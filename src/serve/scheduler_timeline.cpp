#include "serve/scheduler_timeline.hpp"

#include <fmt/format.h>

#include "common.hpp"

namespace pd::serve {

SchedulerTimeline::SchedulerTimeline(Timeline& tl, const std::string& process)
    : tl_(tl), process_(process.empty() ? 1 : tl.add_process(process)), engine_before_(tl.engine_place()) {
    tl_.name_track({process_, 1}, "scheduler", 0);
    tl_.set_engine_place({process_, 1});  // each step's forward pass nests in its step span
}

SchedulerTimeline::~SchedulerTimeline() { tl_.set_engine_place(engine_before_); }

void SchedulerTimeline::add_request(int id, int prompt_tokens, std::int64_t arrival_ns) {
    RequestTrack& r = requests_[id];
    r = RequestTrack{};
    r.arrival_ns = r.wait_since_ns = arrival_ns;
    r.prompt_tokens = prompt_tokens;
    tl_.name_track(request_place(id), fmt::format("request {}", id), 10 + id);
}

// A request the scheduler names was added first; an unknown one is a caller's bug.
SchedulerTimeline::RequestTrack& SchedulerTimeline::track(int request) {
    const auto it = requests_.find(request);
    if (it == requests_.end()) fail("internal error: request {} on the timeline before it was added", request);
    return it->second;
}

void SchedulerTimeline::step_begins() { step_start_ns_ = tl_.now_ns(); }

void SchedulerTimeline::step_ends(const Scheduler& s, std::span<const TokenEvent> events) {
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
void SchedulerTimeline::record_waits(const Scheduler& s) {
    for (int id : s.admitted()) {
        RequestTrack& r = track(id);
        tl_.span(request_place(id), r.waiting_as, "request", r.wait_since_ns, step_start_ns_);
    }
    for (int id : s.preempted()) {
        RequestTrack& r = track(id);
        r.wait_since_ns = step_start_ns_;
        r.waiting_as = "preempted";
        r.recomputes = r.recomputes || r.ran;
        r.ran = false;
    }
}

// The step on the scheduler's track, and each item on its request's track.
void SchedulerTimeline::record_batch(const Scheduler& s) {
    const StepCounts& c = s.last_step();
    std::string batch;
    for (const StepItem& it : s.last_batch()) {
        RequestTrack& r = track(it.request);
        const char* what = it.decode ? "decode" : r.recomputes ? "recompute" : "prefill";
        r.ran = true;
        std::vector<TimelineArg> args = {{"tokens", double(it.tokens), {}}, {"from position", double(it.start), {}}};
        if (it.proposed > 0)  // speculative decoding: the decode row checked proposed tokens
            args.push_back({"proposed", double(it.proposed), {}}), args.push_back({"accepted", double(it.accepted), {}});
        tl_.span(request_place(it.request), what, "request", step_start_ns_, step_end_ns_, std::move(args));
        if (!batch.empty()) batch += ", ";
        batch += !it.decode        ? fmt::format("r{} {} {}@{}", it.request, what, it.tokens, it.start)
                 : it.proposed > 0 ? fmt::format("r{} decode@{} +{} proposed ({} kept)", it.request, it.start,
                                                 it.proposed, it.accepted)
                                   : fmt::format("r{} decode@{}", it.request, it.start);
    }
    tl_.span({process_, 1}, "step", "scheduler", step_start_ns_, step_end_ns_,
             {{"step", double(steps_), {}},
              {"decode rows", double(c.decode_rows), {}},
              {"speculative rows", double(c.speculative_rows), {}},
              {"prefill chunks", double(c.prefill_items), {}},
              {"prefill tokens", double(c.prefill_tokens), {}},
              {"preempted", double(c.preempted), {}},
              {"running", double(s.running()), {}},
              {"waiting", double(s.waiting()), {}},
              {"batch", 0, batch.empty() ? "(empty)" : batch}});
}

void SchedulerTimeline::record_tokens(std::span<const TokenEvent> events) {
    for (const TokenEvent& e : events) {
        RequestTrack& r = track(e.request);
        if (e.token >= 0) {
            if (r.output_tokens++ == 0) {
                r.first_token_ns = step_end_ns_;
                tl_.instant(request_place(e.request), "first token", "request", step_end_ns_);
            }
        }
        if (e.finished != FinishReason::none) finish_request(e.request, finish_reason_name(e.finished));
    }
}

void SchedulerTimeline::finish_request(int request, const char* reason) {
    const RequestTrack& r = track(request);
    const TimelinePlace at = request_place(request);
    tl_.instant(at, "finished", "request", step_end_ns_, {{"reason", 0, reason}});
    std::vector<TimelineArg> args = {{"prompt tokens", double(r.prompt_tokens), {}},
                                     {"output tokens", double(r.output_tokens), {}},
                                     {"finish reason", 0, reason}};
    if (r.first_token_ns >= 0) args.push_back({"ttft ms", double(r.first_token_ns - r.arrival_ns) / 1e6, {}});
    tl_.span(at, {"request", request}, "request", r.arrival_ns, step_end_ns_, std::move(args));
    requests_.erase(request);
}

}  // namespace pd::serve
