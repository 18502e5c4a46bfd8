#include "serve/request_queue.hpp"

namespace pd::serve {

bool RequestQueue::push(std::shared_ptr<Job> job) {
    {
        std::lock_guard lock(mu_);
        if (closed_) return false;
        jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
    return true;
}

std::shared_ptr<Job> RequestQueue::pop() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !jobs_.empty() || closed_; });
    if (jobs_.empty()) return nullptr;
    std::shared_ptr<Job> job = std::move(jobs_.front());
    jobs_.pop_front();
    return job;
}

std::vector<std::shared_ptr<Job>> RequestQueue::take_all() {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<Job>> all(jobs_.begin(), jobs_.end());
    jobs_.clear();
    return all;
}

void RequestQueue::close() {
    {
        std::lock_guard lock(mu_);
        closed_ = true;
    }
    ready_.notify_all();
}

int RequestQueue::size() const {
    std::lock_guard lock(mu_);
    return int(jobs_.size());
}

bool submit_job(RequestQueue& queue, std::shared_ptr<Job> job, ServerMetrics& metrics) {
    metrics.queued();
    if (queue.push(std::move(job))) return true;
    metrics.finished("abort", 0, 0, false);
    return false;
}

void abort_waiting(RequestQueue& queue, ServerMetrics& metrics) {
    for (const auto& job : queue.take_all()) {
        job->emit({"", 0, "abort", ""});
        metrics.finished("abort", int(job->request.prompt.size()), 0, false);
    }
}

}  // namespace pd::serve
