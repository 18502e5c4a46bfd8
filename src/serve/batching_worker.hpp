// The worker that serves many clients at once: continuous batching through
// the track-2 Scheduler (scheduler.hpp) on a ServingEngine (pdlab serve's:
// the paged KV cache, on the CPU or the GPU). One thread owns the scheduler and loops
//
//   take the jobs the HTTP threads queued     (Scheduler::add)
//   cancel those whose client has gone        (Scheduler::cancel: blocks free next step)
//   ONE step over every running request       (decode rows + prefill chunks)
//   send each new token's text to its job     (the scheduler's finish rule decided it)
//
// so a request that arrives while others generate joins the next step instead
// of waiting for them to finish, as it would with the SerialWorker. When a
// timeline is being recorded (pdlab serve --timeline), each step and each
// request goes on it (scheduler_timeline.hpp).
#pragma once

#include <omp.h>

#include <atomic>
#include <memory>
#include <thread>
#include <unordered_map>

#include "io/tokenizer.hpp"
#include "serve/request_queue.hpp"
#include "serve/scheduler.hpp"
#include "serve/scheduler_timeline.hpp"
#include "serve/server_metrics.hpp"
#include "serve/step_policy.hpp"
#include "serve/worker.hpp"

namespace pd::serve {

class BatchingWorker final : public Worker {
public:
    // `engine` is borrowed and must outlive the worker. `context`: positions a
    // request may use (prompt + output), at most the model's; one such request
    // must fit the engine's blocks on its own (UserError otherwise, here, at start).
    BatchingWorker(ServingEngine& engine, Tokenizer tokenizer, ServerMetrics& metrics, StepLimits limits,
                   int context);
    ~BatchingWorker() override;

    bool submit(std::shared_ptr<Job> job) override;
    void abort_all() override;
    void shutdown() override;

private:
    struct Live;  // a job the scheduler holds
    void loop();
    bool take_jobs();
    void add(std::shared_ptr<Job> job);
    void cancel_gone();
    void step();
    std::span<const TokenEvent> timed_step();
    void deliver(const TokenEvent& ev, Clock::time_point now);
    void end(int id, StreamEvent e);
    void fail_all(const std::string& why);
    void publish_kv_blocks();

    ServingEngine& engine_;
    ServerMetrics& metrics_;
    ContinuousBatching policy_;
    Scheduler scheduler_;
    std::unique_ptr<SchedulerTimeline> timeline_;  // null unless a timeline is recorded
    std::unordered_map<int, std::unique_ptr<Live>> live_;  // by scheduler request id
    int next_id_ = 0;
    RequestQueue inbox_;
    std::atomic<bool> aborting_{false};
    int omp_threads_ = omp_get_max_threads();  // the creating thread's --threads, for the worker thread
    std::thread thread_;  // started at the end of the constructor, once the pool is checked
};

}  // namespace pd::serve
