#include "trace_spec.hpp"

#include <algorithm>

namespace pd::lab {

serve::TraceSpec poisson_trace(int num_requests, double rate, std::uint64_t seed, const std::string& prompt_len,
                               const std::string& prompt_option, const std::string& output_len, int vocab) {
    serve::TraceSpec spec;
    spec.num_requests = num_requests;
    spec.rate_per_s = rate;
    spec.seed = seed;
    spec.prompt_len = serve::parse_length_dist(prompt_len, prompt_option);
    spec.output_len = serve::parse_length_dist(output_len, "--output-len");
    spec.token_lo = std::min(3, vocab - 1);
    spec.token_hi = vocab;
    return spec;
}

}  // namespace pd::lab
