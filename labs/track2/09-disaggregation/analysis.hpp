// Lab 09's reading of two runs (colocated, disaggregated): which token gaps
// a long prefill could stall, and the link model of when splitting pays.
#pragma once

#include <span>
#include <vector>

#include "serve/request_metrics.hpp"

namespace pd::lab09 {

// Every inter-token gap (ms) of every request, split by whether some OTHER
// request of >= `long_from` prompt tokens was waiting for its first token
// (arrived, no token yet) during the gap: those gaps could have been stalled by its prefill.
struct ItlSplit {
    std::vector<double> with_long_ms, without_long_ms;
};
ItlSplit split_itl(std::span<const serve::RequestTiming> timings, int long_from);

// The link model: moving `kv_bytes` (one long prompt's KV, measured) over a
// link of `gbps` gigabits per second takes kv_bytes * 8 / gbps ns; no latency,
// no protocol, no other traffic. Splitting pays for such a prompt when that
// time is below the decode stall splitting removes (`stall_ms`: colocated ITL
// p99 with long prompts arriving minus without, measured).
struct LinkRow {
    double gbps = 0;
    double transfer_ms = 0;
    double share_of_ttft = 0;  // transfer_ms / (the long prompts' measured colocated TTFT p50 + transfer_ms)
    bool pays = false;
};
std::vector<LinkRow> link_model(double kv_bytes, double colocated_ttft_ms, double stall_ms);

}  // namespace pd::lab09
