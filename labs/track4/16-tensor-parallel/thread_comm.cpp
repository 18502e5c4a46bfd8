#include "thread_comm.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

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

void ThreadComm::send_recv(std::span<const float> out, int to, std::span<float> in, int from) {
    const int R = size();
    if (to < 0 || to >= R || from < 0 || from >= R)
        throw std::logic_error(fmt::format("send_recv on rank {}: to {} / from {}: ranks are 0..{}", rank_, to, from,
                                           R - 1));
    std::unique_lock lock(hub_.mail_lock);
    hub_.mail[std::size_t(rank_ * R + to)].emplace_back(out.begin(), out.end());
    hub_.mail_came.notify_all();
    auto& box = hub_.mail[std::size_t(from * R + rank_)];
    if (!hub_.mail_came.wait_for(lock, std::chrono::seconds(10), [&] { return !box.empty() || hub_.failed; }))
        throw std::logic_error(fmt::format("rank {} waited 10 s for a message from rank {} that never came: every "
                                           "send_recv needs its partner's, in the same order", rank_, from));
    if (hub_.failed) throw OtherRankFailed();
    const std::vector<float> got = std::move(box.front());
    box.pop_front();
    if (got.size() != in.size())
        throw std::logic_error(fmt::format("rank {} received {} floats from rank {} into a buffer of {}: sender and "
                                           "receiver must agree on each message's length", rank_, got.size(), from,
                                           in.size()));
    std::copy(got.begin(), got.end(), in.begin());
}

void ThreadComm::allreduce_sum(std::span<float> x) {
    if (hub_.how == ThreadSum::ring) ring_sum(x);
    else timed(x, [&] { reference_sum(x); });
}

void ThreadComm::reference_sum(std::span<float> x) {
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
}

int ThreadComm::broadcast(int value) {
    if (rank_ == 0) hub_.value = value;
    meet();
    const int v = hub_.value;
    meet();
    return v;
}

void run_ranks(int ranks, const std::function<void(ThreadComm&)>& body, ThreadSum how) {
    ThreadHub hub(ranks, how);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; r++)
        threads.emplace_back([&, r] {
            ThreadComm comm(hub, r);
            try {
                body(comm);
            } catch (...) {
                errors[std::size_t(r)] = std::current_exception();
                {
                    std::lock_guard lock(hub.mail_lock);  // a rank waiting for mail wakes and stops
                    hub.failed = true;
                }
                hub.mail_came.notify_all();
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
