#include "mpi_comm.hpp"

#include <chrono>
#include <thread>

#include <mpi.h>

namespace pd::lab16 {

MpiComm::MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

void MpiComm::allreduce_sum(std::span<float> x) {
    const auto t0 = std::chrono::steady_clock::now();
    MPI_Allreduce(MPI_IN_PLACE, x.data(), int(x.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const auto t1 = std::chrono::steady_clock::now();
    comm_ms_ += std::chrono::duration<double, std::milli>(t1 - t0).count();
    reduce_times.emplace_back(std::chrono::duration<double>(t0.time_since_epoch()).count(),
                              std::chrono::duration<double>(t1.time_since_epoch()).count());
    payload_bytes_ += double(x.size_bytes());
}

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
