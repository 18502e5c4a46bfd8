// YOUR ring_allreduce under MPI, probed on every rank at once before the
// split run: its sums against MPI_Allreduce's on lengths of every kind (empty,
// shorter than R, not a multiple of R), its messages counted, and rank 0's
// time for one call at a few sizes, to which YOUR ring_cost is fitted: a
// latency per step and a bandwidth (task 5's model of this machine).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "mpi_comm.hpp"

namespace pd::lab16 {

struct RingProbe {
    bool sums_ok = true;      // every rank, every length: within 1e-6 sum |terms| of MPI_Allreduce's
    bool messages_ok = true;  // every rank: 2 (R - 1) messages to its neighbours, none past one chunk's length
    struct Timing {
        double bytes = 0, ms = 0;  // each rank's buffer; rank 0's median time of one call
    };
    std::vector<Timing> timings;
    bool fitted = false;              // the fit gave a positive bandwidth and a latency of 0 or more
    double latency_us = 0, gbps = 0;  // ms = 2 (R - 1) latency + 2 (R - 1)/R bytes 8 / gbps ns
    bool ok() const { return sums_ok && messages_ok; }
};

// Every rank calls it, in the same place; rank 0's result holds the timings.
RingProbe probe_ring(MpiComm& comm);

// Rank 0: the timings beside YOUR ring_cost with the fitted latency and
// bandwidth (part of [4]); returns the same for the program's JSON.
nlohmann::json print_ring_probe(const RingProbe& p, int ranks);

}  // namespace pd::lab16
