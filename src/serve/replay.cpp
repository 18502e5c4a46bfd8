#include "serve/replay.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <thread>

#include "common.hpp"
#include "base/timing.hpp"
#include "serve/scheduler_timeline.hpp"

namespace pd::serve {

std::vector<Request> trace_requests(const Trace& trace, const Tokenizer& tok, int vocab,
                                    int max_model_len) {
    std::vector<Request> out;
    out.reserve(trace.size());
    for (std::size_t i = 0; i < trace.size(); i++) {
        const TraceRequest& t = trace[i];
        Request r;
        r.id = int(i);
        r.prompt = t.prompt_ids.empty() ? tok.encode(t.prompt) : t.prompt_ids;
        r.max_tokens = t.max_tokens;
        if (r.prompt.empty()) fail("trace request {}: the prompt encodes to no tokens", t.id);
        for (int id : r.prompt)
            if (id >= vocab)
                fail("trace request {}: token id {} is outside the model's vocabulary of {}", t.id,
                     id, vocab);
        if (int(r.prompt.size()) > max_model_len)
            fail("trace request {}: its prompt of {} tokens is longer than the context of {} "
                 "positions (raise --max-seq, up to the model's context, or shorten the prompt)",
                 t.id, r.prompt.size(), max_model_len);
        out.push_back(std::move(r));
    }
    return out;
}

long long longest_request(std::span<const Request> requests) {
    long long most = 0;
    for (const Request& r : requests) most = std::max(most, (long long)r.prompt.size() + r.max_tokens);
    return most;
}

int CountingServingEngine::open(int seq, std::span<const int> prompt) {
    const int skipped = inner_.open(seq, prompt);
    counts_.opens++;
    counts_.opens_with_hit += skipped > 0;
    counts_.prompt_tokens += (long long)prompt.size();
    counts_.skipped_tokens += skipped;
    counts_.blocks_peak = std::max(counts_.blocks_peak, blocks_used());  // attached prefix blocks
    return skipped;
}

bool CountingServingEngine::reserve(int seq, int len) {
    const bool ok = inner_.reserve(seq, len);
    counts_.blocks_peak = std::max(counts_.blocks_peak, blocks_used());
    if (ok) {
        int& held = positions_[seq];
        positions_total_ += std::max(len, held) - held;
        held = std::max(len, held);
    }
    return ok;
}

void CountingServingEngine::close(int seq) {
    inner_.close(seq);
    positions_total_ -= positions_[seq];
    positions_.erase(seq);
}

void CountingServingEngine::truncate(int seq, int len) {
    inner_.truncate(seq, len);
    int& held = positions_[seq];  // the rejected rows' positions are no longer asked for
    positions_total_ -= held - std::min(held, len);
    held = std::min(held, len);
}

const float* CountingServingEngine::step(std::span<const SeqWork> work) {
    counts_.steps++;
    counts_.block_steps += blocks_used();
    counts_.position_steps += positions_total_;
    return inner_.step(work);
}

namespace {

// Request indices by arrival time (a file need not be sorted).
std::vector<std::size_t> arrival_order(const Trace& trace) {
    std::vector<std::size_t> order(trace.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return trace[a].arrival_s < trace[b].arrival_s;
    });
    return order;
}

void record(ReplayResult& out, std::span<const TokenEvent> events, double t, int& done) {
    for (const TokenEvent& e : events) {
        if (e.token >= 0) {
            out.timings[std::size_t(e.request)].token_s.push_back(t);
            out.output_ids[std::size_t(e.request)].push_back(e.token);
        }
        if (e.finished == FinishReason::none) continue;
        out.finished[std::size_t(e.request)] = e.finished;
        out.timings[std::size_t(e.request)].completed = e.finished != FinishReason::cancelled;
        done++;
    }
}

}  // namespace

ReplayResult replay(Scheduler& scheduler, const Trace& trace, std::span<const Request> requests,
                    bool progress, const std::string& timeline_process, const StepClock& clock,
                    double* now_s) {
    ReplayResult out;
    out.finished.assign(requests.size(), FinishReason::none);
    out.output_ids.resize(requests.size());
    for (std::size_t i = 0; i < requests.size(); i++)
        out.timings.push_back({int(i), trace[i].arrival_s, {}, int(requests[i].prompt.size()), true});
    const auto order = arrival_order(trace);
    std::size_t next = 0;
    int done = 0;
    std::unique_ptr<SchedulerTimeline> timeline;  // null unless a timeline is recorded
    if (Timeline* tl = active_timeline()) {
        timeline = std::make_unique<SchedulerTimeline>(*tl, timeline_process);
        const std::int64_t start_ns = tl->now_ns();  // the replay's clock starts now: arrivals count from here
        for (std::size_t i = 0; i < requests.size(); i++)
            timeline->add_request(requests[i].id, int(requests[i].prompt.size()),
                                  start_ns + std::int64_t(trace[i].arrival_s * 1e9));
    }
    const double t0 = now_ms();
    double virtual_s = 0;  // the StepClock's time: the sum of the steps' costs and idle gaps
    auto time_now = [&] { return clock ? virtual_s : (now_ms() - t0) / 1e3; };
    double last_note = 0;
    while (next < order.size() || !scheduler.idle()) {
        double t = time_now();
        for (; next < order.size() && trace[order[next]].arrival_s <= t; next++)
            scheduler.add(requests[order[next]], {}, trace[order[next]].arrival_s);
        if (scheduler.idle()) {  // nothing to do until the next arrival
            const double arrival_s = trace[order[next]].arrival_s;
            if (clock)
                virtual_s = arrival_s;  // exactly, so that the arrival is due at once
            else
                std::this_thread::sleep_for(std::chrono::duration<double>(arrival_s - t));
            continue;
        }
        if (now_s) *now_s = t;
        if (timeline) timeline->step_begins();
        const auto events = scheduler.step();
        if (clock) virtual_s += clock(scheduler);
        t = time_now();
        if (timeline) timeline->step_ends(scheduler, events);
        record(out, events, t, done);
        out.steps++;
        const StepCounts& c = scheduler.last_step();
        out.preemptions += c.preempted;
        out.max_batch = std::max<long long>(out.max_batch, c.decode_rows + c.prefill_items);
        out.duration_s = t;
        if (progress && t - last_note >= 1.0) {
            std::fprintf(stderr, "[%6.1f s] %d of %zu requests done, %d running, %d waiting\n", t,
                         done, requests.size(), scheduler.running(), scheduler.waiting());
            last_note = t;
        }
    }
    out.wall_s = (now_ms() - t0) / 1e3;
    return out;
}

}  // namespace pd::serve
