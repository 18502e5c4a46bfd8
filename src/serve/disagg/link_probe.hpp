// The transfer rate between a prefill and a decode worker, measured before a
// run with nothing else on the wire: prefill worker 0 sends a `bytes` message
// to decode worker 0 `reps` times (each acknowledged), and reports bytes per
// second to the router. The trace's own transfers are small and interleaved
// with compute, so their rate says more about scheduling than about the link.
#pragma once

#include <cstddef>

#include "serve/disagg/wire.hpp"

namespace pd::serve::disagg {

// Every rank calls it once, at the same point: the two ranks measure, the
// router receives the result (GB/s, 1e9 bytes a second), the others return 0.
double link_probe(const Layout& layout, int rank, std::size_t bytes, int reps);

}  // namespace pd::serve::disagg
