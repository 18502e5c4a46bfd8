// Replaying a trace in real time: each request is handed to the scheduler
// when its arrival time comes, the scheduler steps as long as there is work,
// and every output token is stamped when its step returns (what a streaming
// client would see, minus the network). pdlab serve-sim and lab 06 use it.
#pragma once

#include <span>
#include <vector>

#include "io/tokenizer.hpp"
#include "serve/request_metrics.hpp"
#include "serve/scheduler.hpp"
#include "serve/trace.hpp"

namespace pd::serve {

// The trace's requests for the scheduler, Request::id = index in the trace:
// text prompts tokenised, ids checked against the vocabulary, and every
// request checked to fit `max_model_len` positions (prompt alone; the output
// stops at the context). UserError naming the request otherwise.
std::vector<Request> trace_requests(const Trace& trace, const Tokenizer& tok, int vocab,
                                    int max_model_len);

// Positions one sequence needs for the longest request (prompt + max_tokens).
long long longest_request(std::span<const Request> requests);

struct ReplayResult {
    std::vector<RequestTiming> timings;   // (requests) in trace order, times from the start
    std::vector<FinishReason> finished;   // (requests)
    std::vector<std::vector<int>> output_ids;  // (requests) the tokens each got
    double duration_s = 0;                // start to the last token
    long long steps = 0, preemptions = 0;
    long long max_batch = 0;              // most sequences in one step's batch
};

// Runs `requests` (from trace_requests) arriving at the trace's times through
// `scheduler` until all finish. `progress`: a line on stderr about once a second.
ReplayResult replay(Scheduler& scheduler, const Trace& trace, std::span<const Request> requests,
                    bool progress);

}  // namespace pd::serve
