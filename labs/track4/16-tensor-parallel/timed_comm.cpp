#include "comm.hpp"

#include <chrono>
#include <stdexcept>

#include "exercise.hpp"

namespace pd::lab16 {

void TimedComm::timed(std::span<float> x, const std::function<void()>& sum) {
    const auto t0 = std::chrono::steady_clock::now();
    sum();
    const auto t1 = std::chrono::steady_clock::now();
    comm_ms_ += std::chrono::duration<double, std::milli>(t1 - t0).count();
    reduce_times.emplace_back(std::chrono::duration<double>(t0.time_since_epoch()).count(),
                              std::chrono::duration<double>(t1.time_since_epoch()).count());
    payload_bytes_ += double(x.size_bytes());
}

void TimedComm::ring_sum(std::span<float> x) {
    if (in_ring_)
        throw std::logic_error(kRingCallsAllreduce);
    in_ring_ = true;
    try {
        timed(x, [&] { ring_allreduce(*this, x); });
    } catch (...) {
        in_ring_ = false;
        throw;
    }
    in_ring_ = false;
}

}  // namespace pd::lab16
