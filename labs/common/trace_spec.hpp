// The Poisson trace a serving lab (06, 07, 09) replays, from the options they
// share: --num-requests, the rate, --seed, and the prompt and output lengths
// in serve/trace.hpp's forms (fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:LO:HI]).
#pragma once

#include <cstdint>
#include <string>

#include "serve/trace.hpp"

namespace pd::lab {

// The spec of `num_requests` arriving at `rate` per second, prompts of
// `prompt_len` (a bad form is refused naming `prompt_option`, e.g.
// "--question-len"), answers of --output-len `output_len`, and prompt ids drawn
// from [3, vocab): past the usual special ids (pad, bos, eos). A lab adds its
// own (a shared prefix, long prompts) before serve::generate_trace.
serve::TraceSpec poisson_trace(int num_requests, double rate, std::uint64_t seed, const std::string& prompt_len,
                               const std::string& prompt_option, const std::string& output_len, int vocab);

}  // namespace pd::lab
