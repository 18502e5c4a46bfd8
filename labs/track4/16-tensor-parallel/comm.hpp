// What a tensor-parallel layer needs from the ranks, as an interface: the lab
// program implements it over MPI (mpi_comm.hpp), the tests over threads of one
// process (thread_comm.hpp), so the same exercise code runs under both.
#pragma once

#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace pd::lab16 {

class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;  // 0 .. size()-1
    virtual int size() const = 0;  // R, the ranks sharing the model
    // One point-to-point exchange (MPI_Sendrecv): sends `out` to rank `to` and,
    // at the same time, receives from rank `from` into `in`, which must be as
    // long as what `from` sends. Returns once `in` is filled and `out` may be
    // reused. The two buffers must not overlap. The one message YOUR
    // ring_allreduce sends.
    virtual void send_recv(std::span<const float> out, int to, std::span<float> in, int from) = 0;
    // Every rank passes its own x (the same length on every rank); on return
    // each holds the element-wise sum over the ranks. The kit's communicators
    // run YOUR ring_allreduce here (the tests of tp_layer alone sum at a barrier).
    virtual void allreduce_sum(std::span<float> x) = 0;
    // Rank 0's `value`, returned on every rank (the token rank 0 picked).
    virtual int broadcast(int value) = 0;
};

// The refusal of a ring_allreduce that calls comm.allreduce_sum.
inline constexpr const char* kRingCallsAllreduce =
    "ring_allreduce called comm.allreduce_sum: the ring IS the all-reduce; build it from comm.send_recv";

// A Comm that counts what its all-reduces cost on this rank (the MPI and the
// thread communicators are): tp_forward reads the time per pass.
class TimedComm : public Comm {
public:
    double comm_ms() const { return comm_ms_; }
    double payload_bytes() const { return payload_bytes_; }  // bytes passed to allreduce_sum, this rank
    // Each allreduce_sum's start and end, steady_clock seconds (the program's --timeline).
    std::vector<std::pair<double, double>> reduce_times;

protected:
    // allreduce_sum's body (timed_comm.cpp): `sum`, which leaves the sum over
    // the ranks in x, timed and counted.
    void timed(std::span<float> x, const std::function<void()>& sum);
    // timed() of YOUR ring_allreduce over this communicator's send_recv. A
    // ring that calls allreduce_sum itself is refused: it would recurse forever.
    void ring_sum(std::span<float> x);

private:
    bool in_ring_ = false;
    double comm_ms_ = 0, payload_bytes_ = 0;
};

}  // namespace pd::lab16
