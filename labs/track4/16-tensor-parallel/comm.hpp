// The one collective a tensor-parallel layer needs, as an interface: the lab
// program implements it over MPI (mpi_comm.hpp), the tests over threads of one
// process (thread_comm.hpp), so the same exercise code runs under both.
#pragma once

#include <span>
#include <utility>
#include <vector>

namespace pd::lab16 {

class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;  // 0 .. size()-1
    virtual int size() const = 0;  // R, the ranks sharing the model
    // Every rank passes its own x (the same length on every rank); on return
    // each holds the element-wise sum over the ranks (MPI_Allreduce, MPI_SUM).
    virtual void allreduce_sum(std::span<float> x) = 0;
    // Rank 0's `value`, returned on every rank (the token rank 0 picked).
    virtual int broadcast(int value) = 0;
};

// A Comm that counts what its calls cost on this rank (the MPI and the
// thread communicators are): tp_forward reads the time per pass.
class TimedComm : public Comm {
public:
    double comm_ms() const { return comm_ms_; }
    double payload_bytes() const { return payload_bytes_; }  // bytes passed to allreduce_sum, this rank
    // Each allreduce_sum's start and end, steady_clock seconds, when the
    // communicator records them (the MPI one does: the program's --timeline).
    std::vector<std::pair<double, double>> reduce_times;

protected:
    double comm_ms_ = 0, payload_bytes_ = 0;
};

}  // namespace pd::lab16
