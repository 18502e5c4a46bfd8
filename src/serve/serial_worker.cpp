#include "serve/serial_worker.hpp"

#include <array>

#include "engine/sampler.hpp"
#include "serve/stop_matcher.hpp"

namespace pd::serve {

namespace {

constexpr int kSlot = 0;  // the engine's one cache slot

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// One request's state while it runs.
struct SerialWorker::Generation {
    Sampler sampler;
    StreamDecoder decoder;       // ids -> text, never splitting a UTF-8 character
    StopMatcher stops;           // holds back text that may start a stop string
    int generated = 0;
    Clock::time_point last_token;
};

SerialWorker::SerialWorker(Engine& engine, Tokenizer tokenizer, ServerMetrics& metrics, int block_size)
    : engine_(engine), tokenizer_(std::move(tokenizer)), metrics_(metrics), block_size_(block_size),
      thread_([this] { loop(); }) {
    publish_kv_blocks();
}

SerialWorker::~SerialWorker() { shutdown(); }

bool SerialWorker::submit(std::shared_ptr<Job> job) {
    metrics_.queued();
    if (queue_.push(std::move(job))) return true;
    metrics_.finished("abort", 0, 0, false);
    return false;
}

void SerialWorker::abort_all() {
    aborting_ = true;  // the running job stops at its next token
    for (const auto& job : queue_.take_all()) {
        job->emit({"", 0, "abort", ""});
        metrics_.finished("abort", int(job->request.prompt.size()), 0, false);
    }
}

void SerialWorker::shutdown() {
    queue_.close();
    if (thread_.joinable()) thread_.join();
}

void SerialWorker::loop() {
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
    Generation g{make_sampler(r.sampler, engine_.config().vocab_size), StreamDecoder(tokenizer_),
                 StopMatcher(r.stop), 0, start};
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
        const int id = sample(g.sampler, logits, engine_.config().vocab_size);
        const Clock::time_point now = Clock::now();
        if (g.generated == 0) metrics_.first_token(seconds(now - job.received), prefill_s);
        else metrics_.next_token(seconds(now - g.last_token));
        g.last_token = now;
        TokenEvent e = token_event(g, job, id);
        finish = e.finish_reason;
        job.emit(std::move(e));
        if (!finish.empty()) break;
        const std::array<int, 1> slot{kSlot}, token{id};
        logits = engine_.decode(slot, token);  // the token just chosen goes in; the next one's logits come out
        publish_kv_blocks();
    }
    metrics_.finished(finish, int(r.prompt.size()), g.generated, true);
}

TokenEvent SerialWorker::token_event(Generation& g, const Job& job, int id) const {
    const CompletionRequest& r = job.request;
    g.generated += 1;
    TokenEvent e;
    if (id == engine_.config().eos_id && !r.ignore_eos) {
        e.text = g.stops.push(g.decoder.flush()) + g.stops.flush();
        e.finish_reason = "stop";
        return e;
    }
    e.text = g.stops.push(g.decoder.push(id));
    if (g.stops.stopped()) {
        e.finish_reason = "stop";
    } else if (g.generated == r.max_tokens) {
        e.text += g.stops.push(g.decoder.flush());
        e.text += g.stops.stopped() ? "" : g.stops.flush();
        e.finish_reason = g.stops.stopped() ? "stop" : "length";
    }
    return e;
}

void SerialWorker::publish_kv_blocks() {
    const int blocks_per_slot = (engine_.max_seq() + block_size_ - 1) / block_size_;
    const int used = (engine_.cache_len(kSlot) + block_size_ - 1) / block_size_;
    metrics_.kv_blocks(used, blocks_per_slot * engine_.batch());
}

}  // namespace pd::serve
