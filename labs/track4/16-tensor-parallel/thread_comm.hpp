// Comm over threads of one process: R ranks without MPI, for the tests (and
// the program's one-rank run). Each rank is a thread; send_recv goes through
// mailboxes in memory, and allreduce_sum runs YOUR ring_allreduce over them,
// or, for the tests of tp_layer alone, meets the others at a barrier where one
// rank adds the buffers in rank order (every rank gets the same bits).
#pragma once

#include <atomic>
#include <barrier>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "comm.hpp"

namespace pd::lab16 {

// What allreduce_sum does on threads.
enum class ThreadSum { ring, reference };

// What the ranks' threads share.
struct ThreadHub {
    ThreadHub(int ranks, ThreadSum how)
        : how(how), barrier(ranks), parts(std::size_t(ranks)), mail(std::size_t(ranks) * std::size_t(ranks)) {}
    ThreadSum how;
    std::barrier<> barrier;
    std::vector<std::span<float>> parts;  // each rank's buffer during a reference sum
    std::vector<float> sum;
    int value = 0;
    bool sizes_differ = false;
    // mail[from * R + to]: the messages sent and not yet received, in order.
    std::mutex mail_lock;
    std::condition_variable mail_came;
    std::vector<std::deque<std::vector<float>>> mail;
    std::atomic<bool> failed{false};  // a rank threw: the others stop at their next call
};

class ThreadComm : public TimedComm {
public:
    ThreadComm(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return int(hub_.parts.size()); }
    // Refuses (std::logic_error) a rank outside 0..R-1, a message whose length
    // is not in.size(), and a wait of more than 10 s (a receive nobody sends).
    void send_recv(std::span<const float> out, int to, std::span<float> in, int from) override;
    void allreduce_sum(std::span<float> x) override;
    int broadcast(int value) override;

private:
    void meet();  // the barrier, then stop when another rank failed
    void reference_sum(std::span<float> x);
    ThreadHub& hub_;
    int rank_;
};

// Runs body(comm) on `ranks` threads, one ThreadComm each, and waits for all;
// rethrows the first exception a rank threw.
void run_ranks(int ranks, const std::function<void(ThreadComm&)>& body, ThreadSum how = ThreadSum::ring);

}  // namespace pd::lab16
