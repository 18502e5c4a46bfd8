// A disaggregated run (router.hpp) on the timeline (base/timeline.hpp), drawn
// on rank 0 from the times the router collected: every rank stamps them with
// now_s() (wire.hpp), a steady clock that ranks share only on one machine, so
// the picture is true for a run whose ranks share a machine (lab 09's) and
// shifted by the clocks' offsets otherwise.
//   track "rank R: prefill worker N"  one span per prompt it prefilled
//                                     (args: request, prompt tokens, KV bytes,
//                                     where the KV went)
//   counter "sequences decoding on rank R"  per decode rank: the sequences
//                                     whose blocks it holds, over time
//   track "request N"                 "request N" from arrival to its last
//                                     token; inside it "queued" until a
//                                     prefill worker took it, "prefill + KV"
//                                     (the prompt's pass, then "KV after
//                                     prefill": the part of the transfer the
//                                     pass did not hide), "decode" with an
//                                     instant per token
#pragma once

#include <string>

#include "base/timeline.hpp"
#include "serve/disagg/router.hpp"

namespace pd::serve::disagg {

// Records `run` as a new process named `process`.
void record_disagg_run(Timeline& tl, const std::string& process, const Layout& layout, const DisaggResult& run);

}  // namespace pd::serve::disagg
