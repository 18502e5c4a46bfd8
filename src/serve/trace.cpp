#include "serve/trace.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <istream>
#include <limits>
#include <numbers>
#include <ostream>
#include <random>
#include <set>

#include "common.hpp"
#include "io/json_checked.hpp"

namespace pd::serve {

namespace {

// Portable draws from one engine (the standard fixes mt19937_64's output,
// not that of uniform_real_distribution and friends).
struct Draw {
    std::mt19937_64 rng;
    double unit() { return double(rng() >> 11) * 0x1.0p-53; }  // [0, 1)
    int uniform(int lo, int hi) { return lo + int(rng() % std::uint64_t(hi - lo + 1)); }
    double normal() {  // Box-Muller
        double u1 = 1.0 - unit(), u2 = unit();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }
    double exponential(double rate) { return -std::log(1.0 - unit()) / rate; }
};

int draw_length(const LengthDist& d, Draw& g) {
    switch (d.kind) {
        case LengthDist::Kind::fixed: return d.lo;
        case LengthDist::Kind::uniform: return g.uniform(d.lo, d.hi);
        case LengthDist::Kind::lognormal: {
            double v = std::round(d.median * std::exp(d.sigma * g.normal()));
            return int(std::clamp(v, double(d.lo), double(d.hi)));
        }
    }
    return d.lo;
}

std::vector<int> draw_ids(int n, const TraceSpec& s, Draw& g) {
    std::vector<int> ids(static_cast<std::size_t>(n));
    for (int& t : ids) t = g.uniform(s.token_lo, s.token_hi - 1);
    return ids;
}

void check_spec(const TraceSpec& s) {
    if (s.num_requests < 1) fail("the trace needs at least 1 request, got {}", s.num_requests);
    if (std::isnan(s.rate_per_s)) fail("the request rate is not a number");
    if (s.token_lo < 0 || s.token_hi <= s.token_lo)
        fail("prompt ids are drawn from [{}, {}), which is empty", s.token_lo, s.token_hi);
    if (!(s.shared_prefix_fraction >= 0 && s.shared_prefix_fraction <= 1))
        fail("the shared-prefix fraction must be in [0, 1], got {}", s.shared_prefix_fraction);
    if (s.prefix_len < 0 || s.prefix_groups < 1)
        fail("the prefix length must be >= 0 and the prefix groups >= 1");
}

int parse_int(const std::string& text, const std::string& flag, int lo) {
    std::size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || v < lo || v > 1'000'000'000)
        fail("{}: \"{}\" is not a whole number in [{}, 1e9]", flag, text, lo);
    return int(v);
}

double parse_positive(const std::string& text, const std::string& flag) {
    std::size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || !std::isfinite(v) || v < 0)
        fail("{}: \"{}\" is not a finite number >= 0", flag, text);
    return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts(1);
    for (char c : s) {
        if (c == sep)
            parts.emplace_back();
        else
            parts.back().push_back(c);
    }
    return parts;
}

}  // namespace

LengthDist parse_length_dist(const std::string& spec, const std::string& flag) {
    const auto p = split(spec, ':');
    const std::string usage = "use fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA[:LO:HI]";
    LengthDist d;
    if (p[0] == "fixed" && p.size() == 2) {
        d.lo = d.hi = parse_int(p[1], flag, 1);
    } else if (p[0] == "uniform" && p.size() == 3) {
        d.kind = LengthDist::Kind::uniform;
        d.lo = parse_int(p[1], flag, 1);
        d.hi = parse_int(p[2], flag, d.lo);
    } else if (p[0] == "lognormal" && (p.size() == 3 || p.size() == 5)) {
        d.kind = LengthDist::Kind::lognormal;
        d.median = parse_positive(p[1], flag);
        d.sigma = parse_positive(p[2], flag);
        if (d.median < 1) fail("{}: the median must be at least 1, got {}", flag, p[1]);
        d.lo = p.size() == 5 ? parse_int(p[3], flag, 1) : 1;
        d.hi = p.size() == 5 ? parse_int(p[4], flag, d.lo)
                             : int(std::min(8.0 * d.median, 1e9));
    } else {
        fail("{}: \"{}\" is not a length distribution; {}", flag, spec, usage);
    }
    return d;
}

std::string describe(const LengthDist& d) {
    switch (d.kind) {
        case LengthDist::Kind::fixed: return fmt::format("fixed {}", d.lo);
        case LengthDist::Kind::uniform: return fmt::format("uniform [{}, {}]", d.lo, d.hi);
        case LengthDist::Kind::lognormal:
            return fmt::format("lognormal median {} sigma {} in [{}, {}]", d.median, d.sigma, d.lo,
                               d.hi);
    }
    return "?";
}

Trace generate_trace(const TraceSpec& s) {
    check_spec(s);
    Draw g{std::mt19937_64(s.seed)};
    std::vector<std::vector<int>> prefixes;
    for (int i = 0; i < s.prefix_groups && s.prefix_len > 0; i++)
        prefixes.push_back(draw_ids(s.prefix_len, s, g));
    const bool burst = !(s.rate_per_s > 0) || std::isinf(s.rate_per_s);
    Trace trace;
    double t = 0;
    for (int i = 0; i < s.num_requests; i++) {
        if (!burst && i > 0) t += g.exponential(s.rate_per_s);  // Poisson: exponential gaps
        TraceRequest r;
        r.id = i;
        r.arrival_s = t;
        const bool shared = !prefixes.empty() && g.unit() < s.shared_prefix_fraction;
        if (shared) {
            r.prefix_group = g.uniform(0, s.prefix_groups - 1);
            r.prompt_ids = prefixes[std::size_t(r.prefix_group)];
        }
        auto own = draw_ids(draw_length(s.prompt_len, g), s, g);
        r.prompt_ids.insert(r.prompt_ids.end(), own.begin(), own.end());
        r.max_tokens = draw_length(s.output_len, g);
        trace.push_back(std::move(r));
    }
    return trace;
}

namespace {

TraceRequest parse_request(const Json& j, const std::string& where) {
    JsonObject o(j, where);
    for (const auto& [key, value] : j.items())
        if (key != "id" && key != "arrival_s" && key != "prompt" && key != "prompt_ids" &&
            key != "max_tokens" && key != "prefix_group")
            fail("{}: unknown key {} (the keys are id, arrival_s, prompt or prompt_ids, "
                 "max_tokens, prefix_group)", where, clipped_quote(key, 40));
    TraceRequest r;
    r.id = int(o.integer("id", 0, std::numeric_limits<int>::max()));
    r.arrival_s = o.number_or("arrival_s", 0.0, 0.0, 1e9);
    r.max_tokens = int(o.integer("max_tokens", 1, std::numeric_limits<int>::max()));
    r.prefix_group = int(o.integer_or("prefix_group", -1, -1, std::numeric_limits<int>::max()));
    const bool has_text = o.find("prompt") != nullptr, has_ids = o.find("prompt_ids") != nullptr;
    if (has_text == has_ids)
        fail("{}: give exactly one of \"prompt\" (text) and \"prompt_ids\" (token ids)", where);
    if (has_text) r.prompt = o.string("prompt");
    if (has_ids) {
        for (const Json& id : o.array("prompt_ids"))
            r.prompt_ids.push_back(int(json_integer(id, o.where("prompt_ids"), 0,
                                                    std::numeric_limits<int>::max())));
    }
    if (r.prompt.empty() && r.prompt_ids.empty()) fail("{}: the prompt is empty", where);
    return r;
}

}  // namespace

Trace read_trace_jsonl(std::istream& in, const std::string& origin) {
    Trace trace;
    std::set<int> ids;
    std::string line;
    for (int number = 1; std::getline(in, line); number++) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = fmt::format("{} line {}", origin, number);
        TraceRequest r = parse_request(parse_json(line, where), where);
        if (!ids.insert(r.id).second) fail("{}: request id {} appears twice", where, r.id);
        trace.push_back(std::move(r));
    }
    if (trace.empty()) fail("{}: the trace has no requests (one JSON object per line)", origin);
    return trace;
}

Trace load_trace_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) fail("cannot open the trace file {}", path);
    return read_trace_jsonl(f, path);
}

void write_trace_jsonl(std::ostream& out, const Trace& trace) {
    for (const TraceRequest& r : trace) {
        Json j = {{"id", r.id}, {"arrival_s", r.arrival_s}, {"max_tokens", r.max_tokens}};
        if (r.prompt_ids.empty())
            j["prompt"] = r.prompt;
        else
            j["prompt_ids"] = r.prompt_ids;
        if (r.prefix_group >= 0) j["prefix_group"] = r.prefix_group;
        out << j.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    }
}

void save_trace_file(const std::string& path, const Trace& trace) {
    std::ofstream f(path);
    if (!f) fail("cannot write the trace file {}", path);
    write_trace_jsonl(f, trace);
    if (!f) fail("writing the trace file {} failed (disk full?)", path);
}

}  // namespace pd::serve
