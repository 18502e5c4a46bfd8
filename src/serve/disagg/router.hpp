// The router (rank 0 of a disaggregated run): replays a trace in real time,
// hands each arriving request to a prefill worker and names the decode
// worker that continues it (round robin over each kind), stamps every token
// the decode workers stream back, and collects what each transfer cost.
//
// Watchdog: a worker that owes work (a prompt to prefill, tokens to decode)
// and has sent nothing for `timeout_s` is named on stderr, and the run ends
// with MPI_Abort (exit 1): a hung or dead rank never hangs the run.
#pragma once

#include <span>
#include <vector>

#include "serve/request_metrics.hpp"
#include "serve/scheduler.hpp"
#include "serve/trace.hpp"
#include "serve/disagg/wire.hpp"

namespace pd::serve::disagg {

// What one request's KV transfer cost; times in seconds from the run's start.
struct TransferRecord {
    double prefill_start_s = 0, prefill_end_s = 0;  // at the prefill worker
    double first_send_s = 0;  // the first KV message posted (before prefill_end_s when per layer)
    double kv_ready_s = 0;    // the decode worker holds every block, unpacked
    double bytes = 0;         // KV bytes sent
    int prefill_rank = 0, decode_rank = 0;  // the workers the router gave the request to
    double exposed_s() const { return kv_ready_s - prefill_end_s; }  // what the transfer adds after the prefill
    double wire_s() const { return kv_ready_s - first_send_s; }      // first post to last block in place
};

struct DisaggResult {
    std::vector<RequestTiming> timings;        // (requests) as ReplayResult's
    std::vector<std::vector<int>> output_ids;  // (requests)
    std::vector<TransferRecord> transfers;     // (requests)
    double duration_s = 0;                     // start to the last token
    double start_steady_s = 0;                 // the start, on now_s()'s clock (wire.hpp)
};

struct RouterOptions {
    Layout layout;
    double timeout_s = 60;  // watchdog: silence allowed from a worker that owes work
    bool progress = true;   // a line on stderr about once a second
};

// Runs `requests` (trace_requests: id = index) arriving at the trace's times; stops the workers at the end.
DisaggResult run_router(const Trace& trace, std::span<const Request> requests, const RouterOptions& o);

}  // namespace pd::serve::disagg
