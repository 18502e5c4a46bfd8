#include "serve/disagg/link_probe.hpp"

#include <vector>

namespace pd::serve::disagg {

namespace {

constexpr int kProbe = 100, kProbeAck = 101, kProbeResult = 102;  // tags only this exchange uses

}  // namespace

double link_probe(const Layout& layout, int rank, std::size_t bytes, int reps) {
    const int from = layout.prefill_rank(0), to = layout.decode_rank(0);
    const int n = checked_count(bytes / sizeof(float), "the link probe");
    std::vector<float> buf(rank == from || rank == to ? std::size_t(n) : 0, 1.0f);
    int ack = 0;
    if (rank == from) {
        MPI_Send(buf.data(), n, MPI_FLOAT, to, kProbe, MPI_COMM_WORLD);  // a first, untimed pass
        MPI_Recv(&ack, 1, MPI_INT, to, kProbeAck, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const double start = now_s();
        for (int r = 0; r < reps; r++) {
            MPI_Send(buf.data(), n, MPI_FLOAT, to, kProbe, MPI_COMM_WORLD);
            MPI_Recv(&ack, 1, MPI_INT, to, kProbeAck, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        double gbps = double(n) * sizeof(float) * reps / (now_s() - start) / 1e9;
        MPI_Send(&gbps, 1, MPI_DOUBLE, 0, kProbeResult, MPI_COMM_WORLD);
    } else if (rank == to) {
        for (int r = 0; r <= reps; r++) {
            MPI_Recv(buf.data(), n, MPI_FLOAT, from, kProbe, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&ack, 1, MPI_INT, from, kProbeAck, MPI_COMM_WORLD);
        }
    } else if (rank == 0) {
        double gbps = 0;
        while (probe(from, kProbeResult) < 0) idle_pause();  // not a spinning MPI_Recv: the cores are the probe's
        MPI_Recv(&gbps, 1, MPI_DOUBLE, from, kProbeResult, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return gbps;
    }
    return 0;
}

}  // namespace pd::serve::disagg
