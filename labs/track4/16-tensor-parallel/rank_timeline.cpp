#include "rank_timeline.hpp"

#include <cstdint>

#include <mpi.h>

#include "common.hpp"

namespace pd::lab16 {

namespace {

constexpr int kTimesTag = 16;

// [passes, (start, end) per pass, reduces, (start, end) per all-reduce], seconds.
std::vector<double> flatten(const TpRun& run, const TimedComm& comm) {
    std::vector<double> v = {double(run.passes.size())};
    for (const PassTimes& p : run.passes) v.insert(v.end(), {p.start_s, p.start_s + p.total_ms / 1e3});
    v.push_back(double(comm.reduce_times.size()));
    for (const auto& [a, b] : comm.reduce_times) v.insert(v.end(), {a, b});
    return v;
}

std::vector<double> receive_from(int rank) {
    MPI_Status st;
    MPI_Probe(rank, kTimesTag, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &n);
    std::vector<double> v(std::size_t(std::max(n, 0)));
    MPI_Recv(v.data(), n, MPI_DOUBLE, rank, kTimesTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return v;
}

void draw_rank(Timeline& tl, int process, int rank, const std::vector<double>& v) {
    const TimelinePlace place{process, 1 + rank};
    std::size_t i = 0;
    auto next = [&] {
        if (i >= v.size()) fail("internal error: rank {}'s times end early ({} numbers)", rank, v.size());
        return v[i++];
    };
    const int passes = int(next());
    std::vector<std::pair<double, double>> pass(static_cast<std::size_t>(std::max(passes, 0)));
    for (auto& [a, b] : pass) a = next(), b = next();
    const int reduces = int(next());
    std::vector<std::pair<double, double>> red(static_cast<std::size_t>(std::max(reduces, 0)));
    for (auto& [a, b] : red) a = next(), b = next();
    for (std::size_t k = 0; k < pass.size(); k++) {
        double waited = 0;
        for (const auto& [a, b] : red)
            if (a >= pass[k].first && b <= pass[k].second) {
                tl.span(place, "all-reduce", "communication", tl.steady_s_to_ns(a), tl.steady_s_to_ns(b));
                waited += b - a;
            }
        tl.span(place, k == 0 ? "prefill" : "decode", "phase", tl.steady_s_to_ns(pass[k].first),
                tl.steady_s_to_ns(pass[k].second),
                {{"step", double(k), {}}, {"all-reduce ms", waited * 1e3, {}}});
    }
}

}  // namespace

void send_rank_times(const TpRun& run, const TimedComm& comm) {
    const std::vector<double> v = flatten(run, comm);
    MPI_Send(v.data(), int(v.size()), MPI_DOUBLE, 0, kTimesTag, MPI_COMM_WORLD);
}

void record_rank_times(Timeline& tl, const std::string& process, const TpRun& run, const TimedComm& comm) {
    const int p = tl.add_process(process);
    const int ranks = comm.size();
    for (int r = 0; r < ranks; r++) tl.name_track({p, 1 + r}, fmt::format("rank {}", r), r);
    draw_rank(tl, p, 0, flatten(run, comm));
    for (int r = 1; r < ranks; r++) draw_rank(tl, p, r, receive_from(r));
}

}  // namespace pd::lab16
