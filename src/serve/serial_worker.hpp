// The simplest worker: one thread takes the oldest waiting request and runs it
// to the end (prefill, then decode token by token) before the next, on an
// engine with one cache slot. Requests wait in the queue meanwhile, which is
// exactly what makes client-observed TTFT grow with the arrival rate.
#pragma once

#include <omp.h>

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
    void loop();
    void run(Job& job);
    void publish_kv_blocks();

    Engine& engine_;
    Tokenizer tokenizer_;
    ServerMetrics& metrics_;
    int block_size_;
    RequestQueue queue_;
    std::atomic<bool> aborting_{false};
    int omp_threads_ = omp_get_max_threads();  // the creating thread's --threads, for the worker thread
    std::thread thread_;  // last: starts once everything above is ready
};

}  // namespace pd::serve
