#include "mpi_comm.hpp"

#include <chrono>
#include <thread>

#include <mpi.h>

#include "common.hpp"

namespace pd::lab16 {

MpiComm::MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

void MpiComm::send_recv(std::span<const float> out, int to, std::span<float> in, int from) {
    if (to < 0 || to >= size_ || from < 0 || from >= size_)
        fail("send_recv on rank {}: to {} / from {}: ranks are 0..{}", rank_, to, from, size_ - 1);
    MPI_Status status;
    MPI_Sendrecv(out.data(), int(out.size()), MPI_FLOAT, to, 0, in.data(), int(in.size()), MPI_FLOAT, from, 0,
                 MPI_COMM_WORLD, &status);
    int got = 0;
    MPI_Get_count(&status, MPI_FLOAT, &got);
    if (std::size_t(got) != in.size())
        fail("rank {} received {} floats from rank {} into a buffer of {}: sender and receiver must agree on each "
             "message's length", rank_, got, from, in.size());
}

void MpiComm::allreduce_sum(std::span<float> x) { ring_sum(x); }

int MpiComm::broadcast(int value) {
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return value;
}

void MpiComm::wait_for_all() {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

}  // namespace pd::lab16
