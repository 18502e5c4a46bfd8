// The simplest worker: one thread takes the oldest waiting request and runs it
// to the end (prefill, then decode token by token) before the next, on an
// engine with one cache slot. Requests wait in the queue meanwhile, which is
// exactly what makes client-observed TTFT grow with the arrival rate.
#pragma once

#include <memory>
#include <thread>

#include "engine/engine.hpp"
#include "io/tokenizer.hpp"
#include "serve/request_queue.hpp"
#include "serve/server_metrics.hpp"
#include "serve/worker.hpp"

namespace pd::serve {

class SerialWorker final : public Worker {
public:
    // KV memory is reported in blocks of `block_size` positions (bookkeeping
    // only: the engine's cache is one contiguous slot).
    SerialWorker(Engine& engine, Tokenizer tokenizer, ServerMetrics& metrics, int block_size = 16);
    ~SerialWorker() override;

    bool submit(std::shared_ptr<Job> job) override;
    void abort_all() override;
    void shutdown() override;

private:
    struct Generation;
    void loop();
    void run(Job& job);
    // Turns token `id` into the event the client gets; sets its finish_reason when it ends the request.
    TokenEvent token_event(Generation& g, const Job& job, int id) const;
    void publish_kv_blocks();

    Engine& engine_;
    Tokenizer tokenizer_;
    ServerMetrics& metrics_;
    int block_size_;
    RequestQueue queue_;
    std::atomic<bool> aborting_{false};
    std::thread thread_;  // last: starts once everything above is ready
};

}  // namespace pd::serve
