// What the two worker ranks of workers.hpp share: a paged engine over the
// model, the codec, the outbox to the router, and the life of a rank from
// kReady to kStop. Each worker says what one turn of that loop does:
//   take_messages() : receive whatever has arrived, never waiting for more
//   has_work()      : a forward pass is due
//   work()          : run it (one prompt's prefill; one batched decode step)
//   may_stop()      : nothing is in flight that kStop would lose
#pragma once

#include <memory>

#include "serve/disagg/workers.hpp"
#include "serve/paged_serving_engine.hpp"

namespace pd::serve::disagg {

class WorkerRank {
public:
    WorkerRank(const WorkerRank&) = delete;
    WorkerRank& operator=(const WorkerRank&) = delete;

    // Says kReady, then turns the loop until the router says kStop; with
    // --stall-rank it stops answering instead (a hung rank, for the watchdog).
    void run();

protected:
    // The engine's pool holds `pool_requests` requests of o.max_len positions each.
    WorkerRank(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o, int pool_requests);
    ~WorkerRank() = default;

    virtual void take_messages() = 0;
    virtual bool has_work() const = 0;
    virtual void work() = 0;
    virtual bool may_stop() const { return true; }

    const KvCodec& codec_;
    const WorkerOptions opts_;
    PagedServingEngine engine_;
    Outbox outbox_;
};

}  // namespace pd::serve::disagg
