#include "thread_comm.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <thread>

namespace pd::lab16 {

namespace {

// Thrown on the ranks that stop because another one failed: run_ranks reports that one's error instead.
struct OtherRankFailed : std::runtime_error {
    OtherRankFailed() : std::runtime_error("another rank failed") {}
};

}  // namespace

void ThreadComm::meet() {
    hub_.barrier.arrive_and_wait();
    if (hub_.failed) throw OtherRankFailed();
}

void ThreadComm::allreduce_sum(std::span<float> x) {
    const auto t0 = std::chrono::steady_clock::now();
    hub_.parts[std::size_t(rank_)] = x;
    meet();
    if (rank_ == 0) {  // one rank adds, in rank order: every rank gets the same sum
        hub_.sizes_differ = false;
        for (const auto& p : hub_.parts) hub_.sizes_differ = hub_.sizes_differ || p.size() != x.size();
        if (!hub_.sizes_differ) {
            hub_.sum.assign(x.size(), 0.0f);
            for (const auto& p : hub_.parts)
                for (std::size_t i = 0; i < x.size(); i++) hub_.sum[i] += p[i];
        }
    }
    meet();
    if (hub_.sizes_differ) throw std::logic_error("allreduce_sum: the ranks passed buffers of different sizes");
    std::copy(hub_.sum.begin(), hub_.sum.end(), x.begin());
    meet();  // nobody starts the next sum before all have copied this one
    comm_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    payload_bytes_ += double(x.size_bytes());
}

int ThreadComm::broadcast(int value) {
    if (rank_ == 0) hub_.value = value;
    meet();
    const int v = hub_.value;
    meet();
    return v;
}

void run_ranks(int ranks, const std::function<void(ThreadComm&)>& body) {
    ThreadHub hub(ranks);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; r++)
        threads.emplace_back([&, r] {
            ThreadComm comm(hub, r);
            try {
                body(comm);
            } catch (...) {
                errors[std::size_t(r)] = std::current_exception();
                hub.failed = true;
                hub.barrier.arrive_and_drop();  // the others do not wait for this rank again
            }
        });
    for (auto& t : threads) t.join();
    // A rank's own error before the OtherRankFailed of those it stopped.
    for (auto& e : errors)
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const OtherRankFailed&) {
            }
        }
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace pd::lab16
