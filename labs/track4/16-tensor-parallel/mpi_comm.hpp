// Comm over MPI_COMM_WORLD: one rank a process, started by mpirun (mpirun.sh).
#pragma once

#include "comm.hpp"

namespace pd::lab16 {

class MpiComm : public TimedComm {
public:
    MpiComm();  // MPI is initialised already (serve/disagg/mpi_session.hpp)
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    // MPI_Sendrecv; refuses (pd::fail) a rank outside 0..R-1 and a message
    // shorter than `in` (a longer one is MPI's error: it stops every rank).
    void send_recv(std::span<const float> out, int to, std::span<float> in, int from) override;
    void allreduce_sum(std::span<float> x) override;  // YOUR ring_allreduce, in place
    int broadcast(int value) override;                // MPI_Bcast from rank 0
    // Returns once every rank has called it (MPI_Ibarrier, sleeping between
    // polls: a rank that waits leaves the cores to the ones still working).
    void wait_for_all();

private:
    int rank_ = 0, size_ = 1;
};

}  // namespace pd::lab16
