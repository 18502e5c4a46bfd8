#include "serve/serial_worker.hpp"

#include <omp.h>

#include <array>

#include "engine/sampler.hpp"
#include "serve/finish_rule.hpp"

namespace pd::serve {

namespace {

constexpr int kSlot = 0;  // the engine's one cache slot

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

SerialWorker::SerialWorker(Engine& engine, Tokenizer tokenizer, ServerMetrics& metrics, int block_size)
    : engine_(engine), tokenizer_(std::move(tokenizer)), metrics_(metrics), block_size_(block_size),
      thread_([this] { loop(); }) {
    publish_kv_blocks();
}

SerialWorker::~SerialWorker() { shutdown(); }

bool SerialWorker::submit(std::shared_ptr<Job> job) { return submit_job(queue_, std::move(job), metrics_); }

void SerialWorker::abort_all() {
    aborting_ = true;  // the running job stops at its next token
    abort_waiting(queue_, metrics_);
}

void SerialWorker::shutdown() {
    queue_.close();
    if (thread_.joinable()) thread_.join();
}

void SerialWorker::loop() {
    omp_set_num_threads(omp_threads_);  // a new thread starts with OpenMP's default, not --threads
    while (std::shared_ptr<Job> job = queue_.pop()) {
        try {
            run(*job);
        } catch (const std::exception& e) {  // e.g. out of memory: this request fails, the server goes on
            job->emit({"", 0, "error", e.what()});
            metrics_.finished("error", int(job->request.prompt.size()), 0, true);
        }
        engine_.reset(kSlot);
        publish_kv_blocks();
    }
}

void SerialWorker::run(Job& job) {
    const CompletionRequest& r = job.request;
    const Clock::time_point start = Clock::now();
    metrics_.started(seconds(start - job.received));
    Sampler sampler = make_sampler(r.sampler, engine_.config().vocab_size);
    FinishRule rule(tokenizer_, int(r.prompt.size()),
                    {{eos_ids(engine_.config().eos_ids, !r.ignore_eos), r.max_tokens, engine_.max_seq()}, r.stop});
    Clock::time_point last_token = start;
    engine_.reset(kSlot);
    const float* logits = engine_.prefill(kSlot, r.prompt);  // (vocab) logits of the last prompt position
    const double prefill_s = seconds(Clock::now() - start);
    publish_kv_blocks();
    std::string finish;
    while (finish.empty()) {
        if (job.cancelled() || aborting_) {
            finish = aborting_ ? "abort" : "cancelled";
            job.emit({"", 0, finish, ""});
            break;
        }
        const int id = sample(sampler, logits, engine_.config().vocab_size);
        const Clock::time_point now = Clock::now();
        if (rule.generated() == 0) metrics_.first_token(seconds(now - job.received), prefill_s);
        else metrics_.next_token(seconds(now - last_token));
        last_token = now;
        TokenVerdict v = rule.push(id);  // the same finish rule as the Scheduler's
        if (v.finished != FinishReason::none) finish = finish_reason_name(v.finished);
        job.emit({std::move(v.text), 1, finish, ""});
        if (!finish.empty()) break;
        const std::array<int, 1> slot{kSlot}, token{id};
        logits = engine_.decode(slot, token);  // the token just chosen goes in; the next one's logits come out
        publish_kv_blocks();
    }
    metrics_.finished(finish, int(r.prompt.size()), rule.generated(), true);
}

void SerialWorker::publish_kv_blocks() {
    const int blocks_per_slot = (engine_.max_seq() + block_size_ - 1) / block_size_;
    const int used = (engine_.cache_len(kSlot) + block_size_ - 1) / block_size_;
    metrics_.kv_blocks(used, blocks_per_slot * engine_.batch());
}

}  // namespace pd::serve
