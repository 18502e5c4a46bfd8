// The requests waiting for the worker, first come first served. Closing the
// queue refuses new jobs and wakes the worker so that it can finish.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "serve/job.hpp"
#include "serve/server_metrics.hpp"

namespace pd::serve {

class RequestQueue {
public:
    // False, with the job not queued, once the queue is closed.
    bool push(std::shared_ptr<Job> job);
    // The oldest job; blocks while the queue is empty and open; nullptr once closed and empty.
    std::shared_ptr<Job> pop();
    // Removes and returns every waiting job (for cancelling them all).
    std::vector<std::shared_ptr<Job>> take_all();
    void close();
    int size() const;

private:
    mutable std::mutex mu_;
    std::condition_variable ready_;
    std::deque<std::shared_ptr<Job>> jobs_;
    bool closed_ = false;
};

// What both workers do with their queue. submit_job queues `job`, counted in
// `metrics`; false, counted as an abort, once the queue is closed.
bool submit_job(RequestQueue& queue, std::shared_ptr<Job> job, ServerMetrics& metrics);
// Ends every waiting job with finish_reason "abort", counted in `metrics`.
void abort_waiting(RequestQueue& queue, ServerMetrics& metrics);

}  // namespace pd::serve
