#include "serve/disagg/router.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include <fmt/format.h>

namespace pd::serve::disagg {

namespace {

class Router {
public:
    Router(const Trace& trace, std::span<const Request> requests, const RouterOptions& o)
        : trace_(trace), reqs_(requests), o_(o), owed_(std::size_t(o.layout.ranks()), 0),
          heard_(std::size_t(o.layout.ranks()), 0), decode_of_(requests.size(), 0),
          prefill_of_(requests.size(), 0), stage_(requests.size(), Stage::prefill) {
        r_.timings.resize(requests.size());
        r_.output_ids.resize(requests.size());
        r_.transfers.resize(requests.size());
        order_.resize(requests.size());
        std::iota(order_.begin(), order_.end(), std::size_t(0));
        std::stable_sort(order_.begin(), order_.end(),
                         [&](std::size_t a, std::size_t b) { return trace[a].arrival_s < trace[b].arrival_s; });
        for (std::size_t i = 0; i < requests.size(); i++) {
            r_.timings[i].id = int(i);
            r_.timings[i].arrival_s = trace[i].arrival_s;
            r_.timings[i].prompt_tokens = int(requests[i].prompt.size());
        }
    }

    DisaggResult run() {
        wait_until_ready();
        start_ = r_.start_steady_s = now_s();
        double last_progress = start_;
        while (completed_ < reqs_.size()) {
            dispatch_arrivals();
            if (!take_messages()) idle_pause();
            outbox_.poll();
            watchdog();
            if (o_.progress && now_s() - last_progress > 1) {
                last_progress = now_s();
                std::fprintf(stderr, "  disaggregated: %zu of %zu requests sent, %zu done\n", next_, reqs_.size(),
                             completed_);
            }
        }
        r_.duration_s = now_s() - start_;
        for (int rank = 1; rank < o_.layout.ranks(); rank++) outbox_.send(std::vector<int>{}, rank, kStop);
        outbox_.drain(now_s() + o_.timeout_s);
        return std::move(r_);
    }

private:
    double t() const { return now_s() - start_; }

    // Every worker has loaded the model and built its engine: the trace's clock may start.
    void wait_until_ready() {
        const double since = now_s();
        for (int rank = 1; rank < o_.layout.ranks(); rank++) {
            while (probe(rank, kReady) < 0) {
                if (now_s() - since > o_.timeout_s) {
                    std::fprintf(stderr, "error: %s (rank %d) did not start within %.0f s (--rank-timeout): "
                                 "stopping every rank\n", o_.layout.role(rank).c_str(), rank, o_.timeout_s);
                    std::fflush(stderr);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                idle_pause();
            }
            receive_ints(rank, kReady);
        }
    }

    // Work given to a rank that owed none starts its silence clock now.
    void owe(int rank) {
        if (owed_[std::size_t(rank)]++ == 0) heard_[std::size_t(rank)] = now_s();
    }

    void dispatch_arrivals() {
        const Layout& L = o_.layout;
        for (; next_ < reqs_.size() && trace_[order_[next_]].arrival_s <= t(); next_++) {
            const std::size_t id = order_[next_];
            const Request& q = reqs_[id];
            const int p = L.prefill_rank(int(next_) % L.prefill), d = L.decode_rank(int(next_) % L.decode);
            decode_of_[id] = d, prefill_of_[id] = p;
            r_.transfers[id].prefill_rank = p, r_.transfers[id].decode_rank = d;
            std::vector<int> m = {int(id), d, q.max_tokens};
            m.insert(m.end(), q.prompt.begin(), q.prompt.end());
            outbox_.send(std::move(m), p, kRequest);
            owe(p);
        }
    }

    // Everything waiting; false when there was nothing.
    bool take_messages() {
        bool any = false;
        for (int src; (src = probe(MPI_ANY_SOURCE, kPrefillDone)) >= 0; any = true) prefill_done(src);
        for (int src; (src = probe(MPI_ANY_SOURCE, kKvArrived)) >= 0; any = true) kv_arrived(src);
        for (int src; (src = probe(MPI_ANY_SOURCE, kToken)) >= 0; any = true) token(src);
        return any;
    }

    // A request's owner changes from its prefill worker to its decode worker at the
    // first message about it past the prefill: messages from two ranks arrive in any order.
    void reached_decode(std::size_t id) {
        if (stage_[id] != Stage::prefill) return;
        stage_[id] = Stage::decode;
        owed_[std::size_t(prefill_of_[id])]--;
        owe(decode_of_[id]);
    }

    void prefill_done(int src) {
        const std::vector<double> m = receive_doubles(src, kPrefillDone);
        const std::size_t id = std::size_t(m.at(0));
        TransferRecord& x = r_.transfers.at(id);
        x.prefill_start_s = m.at(1) - start_, x.prefill_end_s = m.at(2) - start_;
        x.first_send_s = m.at(3) - start_, x.bytes = m.at(4);
        heard_[std::size_t(src)] = now_s();
        reached_decode(id);
    }

    void kv_arrived(int src) {
        const std::vector<double> m = receive_doubles(src, kKvArrived);
        const std::size_t id = std::size_t(m.at(0));
        r_.transfers.at(id).kv_ready_s = m.at(1) - start_;
        heard_[std::size_t(src)] = now_s();
        reached_decode(id);
    }

    void token(int src) {
        const double when = t();
        const std::vector<int> m = receive_ints(src, kToken);
        const std::size_t id = std::size_t(m.at(0));
        r_.timings.at(id).token_s.push_back(when);
        r_.output_ids.at(id).push_back(m.at(1));
        heard_[std::size_t(src)] = now_s();
        reached_decode(id);
        if (m.at(2)) {
            stage_[id] = Stage::done;
            owed_[std::size_t(src)]--;
            completed_++;
        }
    }

    void watchdog() {
        const double now = now_s();
        for (int rank = 1; rank < o_.layout.ranks(); rank++) {
            const std::size_t k = std::size_t(rank);
            if (owed_[k] == 0 || now - heard_[k] <= o_.timeout_s) continue;
            std::fprintf(stderr, "error: %s (rank %d) has answered nothing for %.0f s with %d request(s) "
                         "outstanding (--rank-timeout): stopping every rank\n",
                         o_.layout.role(rank).c_str(), rank, now - heard_[k], owed_[k]);
            std::fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    const Trace& trace_;
    std::span<const Request> reqs_;
    RouterOptions o_;
    DisaggResult r_;
    std::vector<int> owed_;        // (ranks) requests each worker still owes
    std::vector<double> heard_;    // (ranks) when each last sent something
    enum class Stage { prefill, decode, done };
    std::vector<int> decode_of_, prefill_of_;  // (requests) the ranks of each
    std::vector<Stage> stage_;                 // (requests) who owes it
    std::vector<std::size_t> order_;  // (requests) ids by arrival time
    std::size_t next_ = 0, completed_ = 0;
    double start_ = 0;
    Outbox outbox_;
};

}  // namespace

DisaggResult run_router(const Trace& trace, std::span<const Request> requests, const RouterOptions& o) {
    return Router(trace, requests, o).run();
}

}  // namespace pd::serve::disagg
