#include "ring_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <mpi.h>

#include "counting_comm.hpp"
#include "exercise.hpp"

namespace pd::lab16 {

namespace {

// Rank r's seeded values for a check of n: different on every rank.
std::vector<float> values(std::size_t n, int r) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; i++) v[i] = float(std::sin(0.7 * double(i) + 1.3 * r) + 0.1 * r);
    return v;
}

bool all_ranks(bool mine) {
    int v = mine ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return v != 0;
}

// One length: YOUR ring against MPI_Allreduce on the same values, and its messages.
void check_length(MpiComm& comm, std::size_t n, RingProbe& p) {
    const int R = comm.size();
    std::vector<float> ring = values(n, comm.rank()), mpi = ring, size(n);
    for (std::size_t i = 0; i < n; i++) size[i] = std::abs(ring[i]);
    CountingComm counted(comm);
    ring_allreduce(counted, ring);
    MPI_Allreduce(MPI_IN_PLACE, mpi.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, size.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    // The two add each value's R terms in their own orders: float reassociation
    // moves a sum by up to about (R - 1) 6e-8 sum |terms| (tests.cpp, lab16.ring.sums).
    bool near = true;
    for (std::size_t i = 0; i < n; i++) near = near && std::abs(ring[i] - mpi[i]) <= 1e-6 * size[i];
    const double longest = double((n + std::size_t(R) - 1) / std::size_t(R) * sizeof(float));
    const bool messages = counted.messages == 2 * (R - 1) && counted.off_ring == 0 &&
                          counted.sent_bytes <= 2.0 * (R - 1) * longest;
    p.sums_ok = all_ranks(near) && p.sums_ok;
    p.messages_ok = all_ranks(messages) && p.messages_ok;
}

// Rank 0's median time of one ring_allreduce of n floats, all ranks starting together.
double time_ring(MpiComm& comm, std::size_t n) {
    std::vector<float> x = values(n, comm.rank());
    std::vector<double> ms;
    for (int rep = 0; rep < 10; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        ring_allreduce(comm, x);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    ms.erase(ms.begin());  // the first call pays for touching the buffers
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Least squares of ms = a + b W (W: the wire bytes of a rank), each point
// weighted by 1 / ms^2 so that the small sizes (latency) count as much as the
// large ones (bandwidth); then a = 2 (R - 1) latency, b = 8 / gbps ns a byte.
void fit(RingProbe& p, int R) {
    double s = 0, sw = 0, sww = 0, st = 0, swt = 0;
    for (const auto& t : p.timings) {
        const double w = 2.0 * (R - 1) / R * t.bytes, k = 1 / (t.ms * t.ms);
        s += k, sw += k * w, sww += k * w * w, st += k * t.ms, swt += k * w * t.ms;
    }
    const double det = s * sww - sw * sw;
    if (!(det > 0)) return;
    const double a = (sww * st - sw * swt) / det, b = (s * swt - sw * st) / det;
    p.fitted = a >= 0 && b > 0;
    if (p.fitted) p.latency_us = a * 1e3 / (2.0 * (R - 1)), p.gbps = 8 / (b * 1e6);
}

}  // namespace

RingProbe probe_ring(MpiComm& comm) {
    const std::size_t R = std::size_t(comm.size());
    RingProbe p;
    for (std::size_t n : {std::size_t(0), std::size_t(1), R - 1, R + 1, 1000 + R, 4096 * R + 1})
        check_length(comm, n, p);
    if (!p.ok()) return p;  // a wrong ring's time means nothing
    // From a decode step's all-reduce (one row of a few KiB) to a long prefill's.
    for (std::size_t n : {std::size_t(256), std::size_t(4096), std::size_t(65536), std::size_t(1) << 20})
        p.timings.push_back({double(n * sizeof(float)), time_ring(comm, n)});
    fit(p, int(R));
    return p;
}

nlohmann::json print_ring_probe(const RingProbe& p, int ranks) {
    if (p.timings.empty()) return nullptr;
    nlohmann::json rows = nlohmann::json::array();
    std::printf("    YOUR ring_allreduce on this machine, %d ranks (rank 0, median of 9 calls), and YOUR ring_cost "
                "fitted to it: ", ranks);
    if (p.fitted) std::printf("%.1f us a step, %.2f Gb/s\n", p.latency_us, p.gbps);
    else std::printf("no fit (the timings do not grow with the size: a noisy machine?)\n");
    std::printf("      bytes a rank   measured ms   ring_cost ms\n");
    for (const auto& t : p.timings) {
        const double model = p.fitted ? ring_cost(t.bytes, ranks, p.gbps, p.latency_us).ms : 0.0;
        std::printf("    %14.0f %13.4f %14s\n", t.bytes, t.ms, p.fitted ? fmt::format("{:.4f}", model).c_str() : "-");
        rows.push_back({{"bytes", t.bytes}, {"ms", t.ms}, {"model_ms", model}});
    }
    return {{"latency_us", p.latency_us}, {"gbps", p.gbps}, {"fitted", p.fitted}, {"timings", rows}};
}

}  // namespace pd::lab16
