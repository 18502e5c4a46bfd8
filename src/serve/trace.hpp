// A request trace: who asks for what, and when. The scheduler's benchmark
// (pdlab serve-sim), lab 06 and the HTTP load generator replay the same
// traces, so their numbers can be compared request by request.
//
// A trace comes from a seeded generator (Poisson arrivals, length
// distributions, shared prefixes) or from a JSONL file, one request a line:
//   {"id": 0, "arrival_s": 0.0, "prompt_ids": [1, 2, 3], "max_tokens": 16}
//   {"id": 1, "arrival_s": 0.25, "prompt": "Once upon a time", "max_tokens": 8,
//    "prefix_group": 0}
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace pd::serve {

struct TraceRequest {
    int id = 0;                   // unique within the trace
    double arrival_s = 0;         // seconds after the trace starts
    std::string prompt;           // text, tokenised by whoever replays it ...
    std::vector<int> prompt_ids;  // ... or token ids (exactly one of the two is set)
    int max_tokens = 1;           // output tokens to generate at most (>= 1)
    int prefix_group = -1;        // requests of one group share a prompt prefix; -1: none
};

using Trace = std::vector<TraceRequest>;

// How a length is drawn: fixed, uniform in [lo, hi], or lognormal with median
// `median` and shape `sigma` (long tail: most answers short, a few long),
// clipped to [lo, hi].
struct LengthDist {
    enum class Kind { fixed, uniform, lognormal };
    Kind kind = Kind::fixed;
    int lo = 1, hi = 1;  // fixed: lo == hi is the length
    double median = 1, sigma = 0;
};

// "fixed:N", "uniform:LO:HI" or "lognormal:MEDIAN:SIGMA[:LO:HI]" (clip
// defaults: 1 and 8 x MEDIAN). UserError naming `flag` on anything else.
LengthDist parse_length_dist(const std::string& spec, const std::string& flag);
std::string describe(const LengthDist& d);

struct TraceSpec {
    int num_requests = 16;
    double rate_per_s = 1;           // Poisson arrivals; <= 0 or inf: all at time 0
    std::uint64_t seed = 0;
    LengthDist prompt_len{LengthDist::Kind::fixed, 32, 32};  // tokens of each request's own part
    LengthDist output_len{LengthDist::Kind::fixed, 32, 32};  // max_tokens
    double shared_prefix_fraction = 0;  // share of requests that start with a group's prefix
    int prefix_len = 0;                 // tokens of that prefix
    int prefix_groups = 1;              // distinct prefixes (each drawn once per trace)
    int token_lo = 0, token_hi = 0;     // prompt ids are drawn from [token_lo, token_hi)
};

// The same spec and seed give the same trace on every machine (the draws use
// std::mt19937_64 and our own transforms, not the library's distributions,
// whose output the standard leaves to each implementation).
Trace generate_trace(const TraceSpec& spec);

// JSONL: one request per line, blank lines skipped. A malformed line, an
// unknown key, a duplicate id or a missing prompt is a UserError naming
// `origin` and the line number.
Trace read_trace_jsonl(std::istream& in, const std::string& origin);
Trace load_trace_file(const std::string& path);
void write_trace_jsonl(std::ostream& out, const Trace& trace);
void save_trace_file(const std::string& path, const Trace& trace);

}  // namespace pd::serve
