#include "serve/batching_worker.hpp"

#include <omp.h>

#include <climits>

#include "common.hpp"

namespace pd::serve {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

SchedulerConfig scheduler_config(const ServingEngine& engine, Tokenizer tokenizer, StepLimits limits, int context) {
    if (context < 1 || context > engine.config().max_seq_len)
        fail("a context of {} positions: give 1 to the model's {}", context, engine.config().max_seq_len);
    SchedulerConfig c;
    c.limits = limits;
    c.max_model_len = context;
    c.eos_ids = engine.config().eos_ids;
    c.tokenizer = std::move(tokenizer);  // the scheduler's finish rule turns ids into text
    return c;
}

}  // namespace

// One request in the scheduler: its job, how many tokens it has had, its times.
struct BatchingWorker::Live {
    std::shared_ptr<Job> job;
    int generated = 0;
    bool admitted = false;       // the scheduler has started computing it
    Clock::time_point admitted_at, last_token;
};

BatchingWorker::BatchingWorker(ServingEngine& engine, Tokenizer tokenizer, ServerMetrics& metrics, StepLimits limits,
                               int context)
    : engine_(engine), metrics_(metrics),
      scheduler_(engine, policy_, scheduler_config(engine, std::move(tokenizer), limits, context)) {
    const int need = (context + engine.block_size() - 1) / engine.block_size();
    if (engine.total_blocks() < need)
        fail("{} KV blocks of {} positions cannot hold one request of the whole context ({} positions, "
             "{} blocks): give --kv-blocks {} or more",
             engine.total_blocks(), engine.block_size(), context, need, need);
    if (Timeline* tl = active_timeline()) timeline_ = std::make_unique<SchedulerTimeline>(*tl, "");
    publish_kv_blocks();
    thread_ = std::thread([this] { loop(); });
}

BatchingWorker::~BatchingWorker() { shutdown(); }

bool BatchingWorker::submit(std::shared_ptr<Job> job) { return submit_job(inbox_, std::move(job), metrics_); }

void BatchingWorker::abort_all() {
    aborting_ = true;  // the scheduler's requests are cancelled at the worker's next step
    abort_waiting(inbox_, metrics_);
}

void BatchingWorker::shutdown() {
    inbox_.close();
    if (thread_.joinable()) thread_.join();
}

void BatchingWorker::loop() {
    omp_set_num_threads(omp_threads_);  // a new thread starts with OpenMP's default, not --threads
    while (take_jobs()) {
        cancel_gone();
        try {
            step();
        } catch (const std::exception& e) {  // e.g. out of memory: these requests fail, the server goes on
            fail_all(e.what());
        }
        publish_kv_blocks();
    }
}

// Moves queued jobs into the scheduler; waits for one when there is nothing
// to run. False once the inbox is closed and everything has finished.
bool BatchingWorker::take_jobs() {
    if (live_.empty() && scheduler_.idle()) {  // (not idle: a stopped request still to retire)
        std::shared_ptr<Job> job = inbox_.pop();
        if (!job) return false;
        add(std::move(job));
    }
    for (auto& job : inbox_.take_all()) add(std::move(job));
    return true;
}

void BatchingWorker::add(std::shared_ptr<Job> job) {
    const CompletionRequest& r = job->request;
    const int id = next_id_;
    next_id_ = next_id_ == INT_MAX ? 0 : next_id_ + 1;
    try {
        scheduler_.add(Request{id, r.prompt, r.max_tokens, r.stop}, Sampling{r.sampler, r.ignore_eos});
    } catch (const std::exception& e) {
        job->emit({"", 0, "error", e.what()});
        metrics_.finished("error", int(r.prompt.size()), 0, false);
        return;
    }
    if (timeline_) {  // it arrived when the HTTP thread received it, before it reached this thread
        const auto waited_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - job->received);
        timeline_->add_request(id, int(r.prompt.size()), active_timeline()->now_ns() - waited_ns.count());
    }
    live_.emplace(id, std::make_unique<Live>(Live{std::move(job), 0, false, {}, {}}));
}

// A client that has gone (or the shutdown's grace period being over) cancels
// its request; the scheduler frees its blocks at the start of the next step.
void BatchingWorker::cancel_gone() {
    for (const auto& [id, l] : live_)
        if (aborting_ || l->job->cancelled()) scheduler_.cancel(id);
}

// One scheduler step, on the timeline when one is recorded.
std::span<const TokenEvent> BatchingWorker::timed_step() {
    if (!timeline_) return scheduler_.step();
    timeline_->step_begins();
    const std::span<const TokenEvent> events = scheduler_.step();
    timeline_->step_ends(scheduler_, events);
    return events;
}

void BatchingWorker::step() {
    const Clock::time_point start = Clock::now();
    const std::span<const TokenEvent> events = timed_step();
    const Clock::time_point now = Clock::now();
    for (int id : scheduler_.admitted()) {
        const auto it = live_.find(id);
        if (it == live_.end() || it->second->admitted) continue;  // readmitted after a preemption
        Live& l = *it->second;
        l.admitted = true;
        l.admitted_at = start;  // its prefill began in this step: from here on, the time is model-side
        metrics_.started(seconds(start - l.job->received));
    }
    for (const TokenEvent& ev : events) deliver(ev, now);
}

// Sends event `ev` to its job; the scheduler's finish rule has decided its
// text and whether the job ends here.
void BatchingWorker::deliver(const TokenEvent& ev, Clock::time_point now) {
    const auto it = live_.find(ev.request);
    if (it == live_.end()) return;  // failed already (fail_all), retired now
    Live& l = *it->second;
    if (ev.token < 0) {             // cancelled: the client went, or the server is stopping
        end(ev.request, {"", 0, aborting_ ? "abort" : "cancelled", ""});
        return;
    }
    const Clock::duration since_start = now - l.job->received;
    if (l.generated == 0) metrics_.first_token(seconds(since_start), seconds(now - l.admitted_at));
    else metrics_.next_token(seconds(now - l.last_token));
    l.last_token = now;
    l.generated += 1;
    StreamEvent e{ev.text, 1, "", ""};
    if (ev.finished == FinishReason::none) return l.job->emit(std::move(e));
    e.finish_reason = finish_reason_name(ev.finished);
    end(ev.request, std::move(e));
}

void BatchingWorker::end(int id, StreamEvent e) {
    const auto it = live_.find(id);
    const Live& l = *it->second;
    metrics_.finished(e.finish_reason, int(l.job->request.prompt.size()), l.generated, l.admitted);
    l.job->emit(std::move(e));
    live_.erase(it);
}

// Every request fails with `why`; the scheduler retires them all (and frees
// their blocks) at the start of its next step, before any computation.
void BatchingWorker::fail_all(const std::string& why) {
    std::vector<int> ids;
    for (const auto& [id, l] : live_) ids.push_back(id);
    for (int id : ids) {
        scheduler_.cancel(id);
        end(id, {"", 0, "error", why});
    }
    timed_step();
}

void BatchingWorker::publish_kv_blocks() {
    metrics_.kv_blocks(engine_.total_blocks() - engine_.free_blocks(), engine_.total_blocks());
}

}  // namespace pd::serve
