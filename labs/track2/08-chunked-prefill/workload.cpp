// Lab 08's inputs to the sweep: the budgets (--budgets, then the model's
// context and the controller's row), the controller's options, and the
// prompts every row serves.
#include <algorithm>
#include <exception>
#include <random>

#include "common.hpp"
#include "lab08.hpp"

namespace pd::lab08 {

namespace {

// The controller's rows of a step count attention: the multiply-adds of one
// row through every layer's weights (the head runs for a prompt's last row
// only) over those of one (row, cached position) pair, q.k and p.v in every
// head of every layer. 2944 for the default model.
double pairs_per_row(const Config& c) {
    const double row = double(c.n_matmul_params()) - double(c.vocab_size) * c.dim;
    return row / (2.0 * c.n_layers * c.q_dim());
}

// The controller's smallest budget: a token for every stream and a chunk of 8
// (below that the prompt would wait for the streams to end).
int min_budget(const Options& o) { return o.streams + 8; }

}  // namespace

std::vector<Budget> parse_budgets(const std::vector<std::string>& list) {
    std::vector<Budget> out;
    for (const std::string& b : list) {
        if (b == "unchunked") {
            out.push_back({b, 0});
            continue;
        }
        std::size_t used = 0;
        long v = 0;
        try {
            v = std::stol(b, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != b.size() || b.empty())
            fail("--budgets: \"{}\" is neither a number of tokens nor \"unchunked\"", b);
        if (v < 1) fail("--budgets: a step's token budget must be at least 1 token, got {}", v);
        out.push_back({b, int(std::min<long>(v, 1 << 30))});
    }
    if (out.empty()) fail("--budgets: give at least one budget");
    return out;
}

// "unchunked" takes the whole context: every prompt fits one step. The
// controller's row comes last; it may pick any budget up to the context.
void resolve_budgets(std::vector<Budget>& budgets, int context) {
    for (Budget& b : budgets) b.tokens = b.tokens == 0 ? context : std::min(b.tokens, context);
    budgets.push_back({"slo", context, true});
}

// The kit's margin, window and growth; the run's target, budgets and model.
SloOptions slo_options(const Options& o, const Config& c, double target_ms, int hi) {
    SloOptions so;
    so.target_ms = target_ms, so.lo = min_budget(o), so.hi = hi, so.pairs_per_row = pairs_per_row(c);
    return so;
}

Workload make_workload(const Options& o, int vocab, int stream_tokens) {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int> id(std::min(3, vocab - 1), vocab - 1);
    auto tokens = [&](int n) {
        std::vector<int> t(static_cast<std::size_t>(n));
        for (int& x : t) x = id(rng);
        return t;
    };
    Workload w;
    for (int i = 0; i < o.streams; i++) w.streams.push_back({i, tokens(o.stream_prompt), stream_tokens, {}});
    w.newcomer = {o.streams, tokens(o.prompt_len), o.newcomer_tokens, {}};
    return w;
}

// Stream tokens enough to outlast the newcomer at the smallest fixed budget
// that leaves room for a chunk (a smaller one starves it until the streams
// end). Not the controller's lo: it leaves lo as soon as it has a line.
int auto_stream_tokens(const Options& o, const std::vector<Budget>& budgets, int context) {
    int chunk = context;
    for (const Budget& b : budgets)
        if (b.tokens > o.streams && !b.slo) chunk = std::min(chunk, b.tokens - o.streams);
    const int steps = o.arrive_after + (o.prompt_len + chunk - 1) / chunk + o.newcomer_tokens + 8;
    return std::min(steps, context - o.stream_prompt);
}

}  // namespace pd::lab08
