// Lab 16's split run on the timeline (base/timeline.hpp): every rank sends
// rank 0 when each of its passes ran and when each of its all-reduces waited,
// and rank 0 draws one track per rank:
//   track "rank R"   a "prefill" span, then one "decode" span per step (args:
//                    step, all-reduce ms), each holding its "all-reduce" spans;
//                    the time between them is the rank's own compute
// Times are steady_clock stamps, which ranks share only on one machine.
#pragma once

#include <string>

#include "base/timeline.hpp"
#include "tp_generate.hpp"

namespace pd::lab16 {

// Ranks 1 .. R-1: this rank's passes and all-reduces, to rank 0.
void send_rank_times(const TpRun& run, const TimedComm& comm);

// Rank 0: its own times and every other rank's (send_rank_times), as a new
// process named `process`.
void record_rank_times(Timeline& tl, const std::string& process, const TpRun& run, const TimedComm& comm);

}  // namespace pd::lab16
