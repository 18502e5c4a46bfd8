// Comm over threads of one process: R ranks without MPI, for the tests (and
// the program's one-rank run). Each rank is a thread; allreduce_sum meets the
// others at a barrier and every rank takes the sum, added in rank order so
// that all ranks get the same bits.
#pragma once

#include <atomic>
#include <barrier>
#include <functional>
#include <span>
#include <vector>

#include "comm.hpp"

namespace pd::lab16 {

// What the ranks' threads share.
struct ThreadHub {
    explicit ThreadHub(int ranks) : barrier(ranks), parts(std::size_t(ranks)) {}
    std::barrier<> barrier;
    std::vector<std::span<float>> parts;  // each rank's buffer during an all-reduce
    std::vector<float> sum;
    int value = 0;
    bool sizes_differ = false;
    std::atomic<bool> failed{false};      // a rank threw: the others stop at their next call
};

class ThreadComm : public TimedComm {
public:
    ThreadComm(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return int(hub_.parts.size()); }
    void allreduce_sum(std::span<float> x) override;
    int broadcast(int value) override;

private:
    void meet();  // the barrier, then stop when another rank failed
    ThreadHub& hub_;
    int rank_;
};

// Runs body(comm) on `ranks` threads, one ThreadComm each, and waits for all;
// rethrows the first exception a rank threw.
void run_ranks(int ranks, const std::function<void(ThreadComm&)>& body);

}  // namespace pd::lab16
