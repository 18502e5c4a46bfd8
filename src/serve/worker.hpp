// What the HTTP server needs from whatever runs the requests: the serial
// worker (serial_worker.hpp) runs one at a time; the batching worker
// (batching_worker.hpp) runs many at once through the continuous-batching
// scheduler. Both behind the same three calls.
#pragma once

#include <memory>

#include "serve/job.hpp"

namespace pd::serve {

class Worker {
public:
    virtual ~Worker() = default;
    // Takes `job`: its events will arrive through job->emit(). False when the
    // worker is shutting down and takes no more jobs.
    virtual bool submit(std::shared_ptr<Job> job) = 0;
    // Ends every job, waiting or running, with finish_reason "abort" (the
    // server's shutdown grace period is over).
    virtual void abort_all() = 0;
    // Takes no more jobs, finishes those it has, and returns when it is idle.
    virtual void shutdown() = 0;
};

}  // namespace pd::serve
