// Lab 09's reading of two runs (colocated, disaggregated): which token gaps
// a long prefill could stall.
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

}  // namespace pd::lab09
