// Lab 04's workload: the requests' prompts and lengths, the arrival rate and
// the latency objective, from the options.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lab04.hpp"

namespace pd::lab04 {

namespace {

const char* kWords[] = {
    "the", "little", "cat", "dog", "girl", "boy", "was", "very", "happy", "sad", "went", "to",
    "park", "and", "saw", "a", "big", "red", "ball", "tree", "she", "he", "said", "hello",
    "friend", "they", "played", "all", "day", "sun", "was", "bright", "mom", "home", "ate",
    "cake", "bird", "sang", "song", "with", "fun", "found", "box", "in", "garden", "then",
    "smiled", "ran", "fast", "jumped", "over", "river", "one", "time", "upon", "there",
};

// Prompt lengths and output lengths, uniform in [L(1 - r), L(1 + r)].
int jitter(std::mt19937_64& rng, int L, double r) {
    if (r <= 0) return L;
    int lo = std::max(1, int(std::lround(L * (1 - r)))), hi = std::max(lo, int(std::lround(L * (1 + r))));
    return std::uniform_int_distribution<int>(lo, hi)(rng);
}

}  // namespace

std::string random_words(std::mt19937_64& rng, int n) {
    std::uniform_int_distribution<int> pick(0, int(std::size(kWords)) - 1);
    std::string s;
    for (int i = 0; i < n; i++) {
        if (i) s += ' ';
        s += kWords[pick(rng)];
    }
    return s;
}

std::vector<RequestSpec> make_requests(const Options& o, const Tokenizer& tok, int vocab, bool& spelled) {
    std::vector<RequestSpec> out;
    std::mt19937_64 rng(o.seed * 7919 + 17);
    spelled = true;
    for (int i = 0; i < o.requests; i++) {
        RequestSpec r;
        r.id = i;
        r.prompt_len = jitter(rng, o.prompt_len, o.range_ratio);
        r.output_len = jitter(rng, o.output_len, o.range_ratio);
        std::string words = random_words(rng, r.prompt_len + 4);  // every word is >= 1 token
        if (spelled) {
            try {
                std::vector<int> ids = tok.encode(words);
                if (int(ids.size()) > r.prompt_len) ids.resize(r.prompt_len);
                r.text = tok.decode(ids);  // the text of exactly the first prompt_len tokens
            } catch (const UserError&) {
                spelled = false;  // e.g. a synthetic model whose vocabulary is < 128 bytes
            }
        }
        if (!spelled) {
            std::uniform_int_distribution<int> id(0, vocab - 1);
            r.ids.resize(r.prompt_len);
            for (int& t : r.ids) t = id(rng);
        }
        out.push_back(std::move(r));
    }
    return out;
}

double parse_rate(const std::string& s) {
    if (s == "auto") return 0.0;
    if (s == "inf" || s == "burst") return std::numeric_limits<double>::infinity();
    try {
        std::size_t used = 0;
        double r = std::stod(s, &used);
        if (used == s.size() && r > 0 && std::isfinite(r)) return r;
    } catch (const std::exception&) {
    }
    fail("--rate must be a positive number of requests per second, auto or inf, got \"{}\"", s);
}

namespace {

// One limit of the objective: a number of ms, none (not part of it), or, for
// TTFT only, auto (`auto_ms`: twice the mean service time, measured).
std::optional<double> parse_limit(const char* option, const std::string& s, double auto_ms) {
    if (s == "none") return std::nullopt;
    if (s == "auto" && auto_ms > 0) return auto_ms;
    try {
        std::size_t used = 0;
        double ms = std::stod(s, &used);
        if (used == s.size() && ms >= 0 && std::isfinite(ms)) return ms;
    } catch (const std::exception&) {
    }
    fail("{} must be a number of ms (0 or more){}, got \"{}\"", option,
         auto_ms > 0 ? ", auto or none" : " or none", s);
}

}  // namespace

Slo parse_slo(const Options& o, double mean_service_ms) {
    return {parse_limit("--slo-ttft", o.slo_ttft, 2 * mean_service_ms), parse_limit("--slo-tpot", o.slo_tpot, 0),
            parse_limit("--slo-e2el", o.slo_e2el, 0)};
}

}  // namespace pd::lab04
