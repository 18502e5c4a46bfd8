#include "serve/disagg/worker_rank.hpp"

#include <chrono>
#include <thread>

namespace pd::serve::disagg {

namespace {

// --stall-rank: this rank stops answering (as a hung process would) until the router aborts.
[[noreturn]] void stall() {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

WorkerRank::WorkerRank(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o,
                       int pool_requests)
    : codec_(codec), opts_(o),
      // No prefix caching: every prompt is computed, and sent, whole.
      engine_(std::move(model), {.block_size = o.block_size,
                                 .total_blocks = pool_requests * ((o.max_len + o.block_size - 1) / o.block_size),
                                 .threads = o.threads,
                                 .prefix_caching = false}) {}

void WorkerRank::run() {
    outbox_.send(std::vector<int>{}, 0, kReady);  // engine built: the router may start the clock
    const double started = now_s();
    for (;;) {
        if (opts_.stall_after_s >= 0 && now_s() - started > opts_.stall_after_s) stall();
        take_messages();
        outbox_.poll();
        if (has_work()) {
            work();
        } else if (may_stop() && probe(0, kStop) >= 0) {
            receive_ints(0, kStop);
            outbox_.drain(now_s() + 30);
            return;
        } else {
            idle_pause();
        }
    }
}

}  // namespace pd::serve::disagg
