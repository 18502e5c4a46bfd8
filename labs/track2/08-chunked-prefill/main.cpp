// Lab 08: a long prompt arrives while decode streams run; what the step's token
// budget does to the streams' inter-token latency and to the newcomer's TTFT,
// and YOUR controller that picks the budget every step to hold an ITL target.
//
//   [1] your fit_step_cost and budget_for_target, tried once (a missing
//       exercise stops here with exit 3)
//   [2] for each --budgets value (and "unchunked": the whole context, so every
//       prompt goes through in one pass), then for "slo" (your controller,
//       SloBudgetPolicy, aiming at --slo-ms): --streams requests decode on the
//       paged engine, the long prompt joins after --arrive-after steps, and
//       the kit's Scheduler runs until every request finished. Printed per
//       row: p50, p90 and p99 ITL of the streams while the prompt is being
//       prefilled, their longest stall, the newcomer's TTFT, throughput; and
//       a check that every row gave every request the same tokens
//   [3] the controller against the fixed budgets: did it hold the target (a
//       p90 ITL), the spread of its steps about its line (its margin), and at
//       what TTFT and throughput next to the best fixed budget that did
//   [4] budgets.csv in --out, drawn by plot.py
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "lab_main.hpp"
#include "slo_policy.hpp"
#include "base/hardware.hpp"
#include "plot.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/request_metrics.hpp"
#include "serve/scheduler.hpp"
#include "serve/scheduler_timeline.hpp"
#include "timeline_option.hpp"

using namespace pd;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// 28 M parameters, 105 MB of f32 weights (more than the CPU's caches: every
// step reads them all), and a context of 2048 that holds a long prompt: a
// 1536-token prefill is about 93 GFLOP (74 through the weights, 19 of
// attention).
constexpr const char* kDefaultModel =
    "synthetic:llama,dim=512,ffn=1536,layers=8,heads=8,kv_heads=2,vocab=4096,ctx=2048";

// The automatic ITL target: this many decode-only steps (the streams' median
// gap before the prompt arrives, over every fixed budget's run of the first
// repeat: one run's median moves with its warm-up, the pool's does not).
constexpr double kAutoTargetSteps = 8;

struct Options {
    cli::CommonOptions lab;
    std::vector<std::string> budgets = {"32", "64", "128", "256", "512", "1024", "unchunked"};
    double slo_ms = 0;  // 0: kAutoTargetSteps decode steps
    int streams = 4, stream_prompt = 16, stream_tokens = 0;
    int prompt_len = 1536, newcomer_tokens = 8, arrive_after = 8, repeats = 1;
    std::uint64_t seed = 1;
    std::string out = "lab08-results";
    bool no_plot = false, quiet = false;
    cli::TimelineOptions timeline;
};

// One row of the sweep; "unchunked" is 0 tokens until the model's context is
// known; "slo" is the controller, its tokens the most it may pick.
struct Budget {
    std::string label;
    int tokens = 0;
    bool slo = false;
};

// Checked before anything runs, so a bad budget is exit 2 even in starter form.
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

// The controller's options: the kit's margin, window and growth; the run's
// target, budgets and model.
lab08::SloOptions slo_options(const Options& o, const Config& c, double target_ms, int hi) {
    lab08::SloOptions so;
    so.target_ms = target_ms, so.lo = min_budget(o), so.hi = hi, so.pairs_per_row = pairs_per_row(c);
    return so;
}

// The workload: the same prompts at every budget.
struct Workload {
    std::vector<serve::Request> streams;  // short prompts, decoding all along
    serve::Request newcomer;              // the long prompt
};

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

struct Row {
    Budget budget;
    double p50_itl_ms = 0, p90_itl_ms = 0, p99_itl_ms = 0, max_stall_ms = 0, ttft_ms = 0, output_throughput = 0,
           duration_s = 0;
    std::vector<double> decode_gaps_ms;  // the streams' gaps before the prompt arrived
    // Fixed budgets: the first and the last step that ran a chunk of the long
    // prompt filling the whole budget (same tokens, so the same line says the same time), ms.
    double first_full_chunk_ms = 0, last_full_chunk_ms = 0;
    int full_chunks = 0;
    std::vector<int> slo_budgets;  // "slo": the budgets picked while the prompt went through
    double slo_spread = 0;         // "slo": the median spread of its line over those steps (a fraction; NaN: no line)
    long long steps = 0;
    std::vector<std::vector<int>> ids;  // (requests) the tokens each got
};

// The controller's target: --slo-ms, or kAutoTargetSteps times the median of
// the streams' gaps before the prompt arrived, pooled over the fixed budgets'
// runs so far (the first repeat's: the controller runs after them; auto_target).
struct Target {
    double ms = 0;
    std::string how;  // where it came from, for [3]
};

using Clock = std::chrono::steady_clock;

// A run's process on the timeline: "budget 64, repeat 1", "your controller, repeat 1".
std::string run_name(const Budget& b, int repeat) {
    return b.slo ? fmt::format("your controller, repeat {}", repeat + 1)
                 : fmt::format("budget {}, repeat {}", b.label, repeat + 1);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One run at one budget: every request's token times, then the metrics.
Row run_budget(const std::shared_ptr<const Model>& model, const Options& o, const Workload& w, const Budget& b,
               double target_ms, int repeat) {
    const int context = model->config.max_seq_len;
    serve::PagedOptions po;
    po.block_size = 16;
    po.total_blocks = (o.streams + 1) * (context / po.block_size + 1);
    po.threads = o.lab.threads;
    po.prefix_caching = false;  // every budget computes every prompt
    auto engine = serve::make_paged_serving_engine(model, po);
    const auto start = Clock::now();
    auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    serve::ContinuousBatching fixed;
    lab08::SloBudgetPolicy slo(slo_options(o, model->config, target_ms, b.tokens), [&] { return 1e3 * now(); });
    serve::StepPolicy& policy = b.slo ? static_cast<serve::StepPolicy&>(slo) : fixed;
    serve::Scheduler s(*engine, policy, {{o.streams + 1, b.tokens, false}, context, {}, true, std::nullopt});
    const int n = o.streams + 1;
    std::vector<serve::RequestTiming> t(static_cast<std::size_t>(n));
    Row row;
    row.budget = b;
    row.ids.resize(std::size_t(n));
    // On a timeline, each run is a process of its own, named by its budget and repeat.
    std::unique_ptr<serve::SchedulerTimeline> timeline;
    Timeline* tl = active_timeline();
    if (tl) timeline = std::make_unique<serve::SchedulerTimeline>(*tl, run_name(b, repeat));
    auto add = [&](const serve::Request& r) {
        s.add(r);
        if (timeline) timeline->add_request(r.id, int(r.prompt.size()), tl->now_ns());
    };
    for (const auto& r : w.streams) add(r);
    std::vector<double> step_end;  // when each step returned
    for (long long k = 0; !s.idle() || k <= o.arrive_after; k++) {
        if (k == o.arrive_after) add(w.newcomer), t[std::size_t(o.streams)].arrival_s = now();
        const double began = now();
        if (timeline) timeline->step_begins();
        const auto events = s.step();
        const double at = now();
        if (timeline) timeline->step_ends(s, events);
        step_end.push_back(at);
        const serve::StepCounts& c = s.last_step();
        // (Only the long prompt's chunks: the streams' own prompts may fill the first step.)
        if (!b.slo && k >= o.arrive_after && c.prefill_items > 0 && c.decode_rows + c.prefill_tokens == b.tokens) {
            if (row.full_chunks++ == 0) row.first_full_chunk_ms = (at - began) * 1e3;
            row.last_full_chunk_ms = (at - began) * 1e3;
        }
        for (const auto& e : events) {
            t[std::size_t(e.request)].token_s.push_back(at);
            row.ids[std::size_t(e.request)].push_back(e.token);
        }
        row.steps++;
    }
    row.duration_s = now();
    const auto& newcomer = t[std::size_t(o.streams)];
    const double arrival = newcomer.arrival_s, first = newcomer.token_s.front();
    // ITL of the streams while the prompt goes through: the gaps that end
    // after it arrived, up to the step that gave its first token.
    std::vector<double> window, all;
    for (int i = 0; i < o.streams; i++)
        for (std::size_t k = 1; k < t[std::size_t(i)].token_s.size(); k++) {
            const double end = t[std::size_t(i)].token_s[k], gap = (end - t[std::size_t(i)].token_s[k - 1]) * 1e3;
            all.push_back(gap);
            if (end > arrival && end <= first) window.push_back(gap);
            if (end <= arrival) row.decode_gaps_ms.push_back(gap);
        }
    const serve::MetricSummary itl = serve::summarize_metric(window);
    // The controller's budgets while the prompt went through: the steps that
    // ended after it arrived, up to its first token.
    std::vector<double> spreads;
    for (std::size_t k = 0; k < slo.budgets.size() && b.slo; k++)
        if (step_end[k] > arrival && step_end[k] <= first) {
            row.slo_budgets.push_back(slo.budgets[k]);
            if (!std::isnan(slo.line_spreads[k])) spreads.push_back(slo.line_spreads[k]);
        }
    row.slo_spread = spreads.empty() ? NAN : median(spreads);
    row.p50_itl_ms = itl.median;
    row.p90_itl_ms = itl.p90;
    row.p99_itl_ms = itl.p99;
    row.max_stall_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
    row.ttft_ms = (first - arrival) * 1e3;
    long long outputs = 0;
    for (const auto& ids : row.ids) outputs += (long long)ids.size();
    row.output_throughput = double(outputs) / row.duration_s;
    return row;
}

// The median of each timing over the repeats (ids and steps are the same in every repeat).
Row median_row(const std::vector<Row>& runs) {
    Row r = runs.front();
    auto med = [&](double Row::*f) {
        std::vector<double> v;
        for (const Row& x : runs) v.push_back(x.*f);
        return median(v);
    };
    r.p50_itl_ms = med(&Row::p50_itl_ms);
    r.p90_itl_ms = med(&Row::p90_itl_ms);
    r.p99_itl_ms = med(&Row::p99_itl_ms);
    r.max_stall_ms = med(&Row::max_stall_ms);
    r.ttft_ms = med(&Row::ttft_ms);
    r.output_throughput = med(&Row::output_throughput);
    r.duration_s = med(&Row::duration_s);
    r.first_full_chunk_ms = med(&Row::first_full_chunk_ms);
    r.last_full_chunk_ms = med(&Row::last_full_chunk_ms);
    std::vector<double> spreads;  // (NaN: that repeat's controller had no line)
    for (const Row& x : runs)
        if (!std::isnan(x.slo_spread)) spreads.push_back(x.slo_spread);
    r.slo_spread = spreads.empty() ? NAN : median(spreads);
    return r;
}

// [1] Your two functions once, so a missing one stops the lab at once.
void try_exercise() {
    const lab08::StepSample samples[] = {{4, 10}, {20, 12}};
    lab08::budget_for_target(lab08::fit_step_cost(samples), 20, 3, 1, 64);
}

json row_json(const Row& r) {
    json j = {{"budget", r.budget.label}, {"budget_tokens", r.budget.tokens}, {"p50_itl_ms", r.p50_itl_ms},
              {"p90_itl_ms", r.p90_itl_ms}, {"p99_itl_ms", r.p99_itl_ms}, {"max_stall_ms", r.max_stall_ms},
              {"ttft_ms", r.ttft_ms}, {"output_throughput", r.output_throughput}, {"duration_s", r.duration_s}, {"steps", r.steps}};
    if (r.budget.slo)
        j["budgets_picked"] = r.slo_budgets, j["spread"] = std::isnan(r.slo_spread) ? json(nullptr) : json(r.slo_spread);
    return j;
}

// [3] The controller against the fixed budgets: did it hold the target (the
// p90 ITL: a window of 60 to 80 steps measures it; its p99 is its slowest
// step), and what did holding it cost next to the largest fixed budget that
// held it too.
void print_slo(const std::vector<Row>& rows, const Target& target, const lab08::SloOptions& so, json& j) {
    const double target_ms = target.ms;
    const Row& slo = rows.back();
    const Row* best = nullptr;
    for (const Row& r : rows)
        if (!r.budget.slo && r.p90_itl_ms <= target_ms && (!best || r.budget.tokens > best->budget.tokens)) best = &r;
    const bool held = slo.p90_itl_ms <= target_ms;
    std::vector<int> picked = slo.slo_budgets;
    std::sort(picked.begin(), picked.end());
    std::printf("\n[3] your controller: a target of %.1f ms on the streams' p90 ITL, each step's line kept %g "
                "spreads below it\n", target_ms, so.spreads);
    std::printf("  target: %s\n", target.how.c_str());
    std::printf("  a step's rows: its tokens + its attention's (row, cached position) pairs / %.0f (the products "
                "of one row through the weights are as many as those of %.0f pairs)\n", so.pairs_per_row,
                so.pairs_per_row);
    if (std::isnan(slo.slo_spread))
        std::printf("  no line while the prompt went through (one row count in the window: lo every step)\n");
    else
        std::printf("  its steps' spread about the line while the prompt went through: median %.1f%%, a margin of "
                    "%.0f%%\n", 100 * slo.slo_spread, 100 * so.spreads * slo.slo_spread);
    std::printf("  p90 ITL %.1f ms (p99 %.1f): target %s; budgets it picked while the prompt went through: ",
                slo.p90_itl_ms, slo.p99_itl_ms, held ? "held (ok)" : "MISSED");
    if (picked.empty()) std::printf("none\n");
    else std::printf("%d to %d, median %d\n", picked.front(), picked.back(), picked[picked.size() / 2]);
    if (best)
        std::printf("  largest fixed budget that held it: %s (p90 %.1f ms); the controller's TTFT x%.2f and "
                    "throughput x%.2f of it\n", best->budget.label.c_str(), best->p90_itl_ms,
                    slo.ttft_ms / best->ttft_ms, slo.output_throughput / best->output_throughput);
    else std::printf("  no fixed budget of the sweep held it\n");
    if (!held)
        std::printf("  (more than one step in ten ran over the target: steps slower than the spread measured "
                    "before them (another process), or even the smallest budget over the target; question 3)\n");
    j["slo"] = {{"target_ms", target_ms}, {"held", held}, {"spreads", so.spreads},
                {"best_fixed", best ? json(best->budget.label) : json(nullptr)}};
}

// The same step late in the prompt against early: a chunk also attends to
// every position of the prompt before it, which a line in tokens cannot see.
void print_chunk_growth(const std::vector<Row>& rows) {
    bool header = false;
    for (const Row& r : rows) {
        if (r.full_chunks < 3) continue;  // too few chunks to compare a start with an end
        if (!header) std::printf("  the same full step, early in the prompt and late (each chunk attends to the "
                                 "prompt before it):\n");
        header = true;
        std::printf("    budget %-5s %3d full steps: first %.1f ms, last %.1f ms (x%.2f)\n", r.budget.label.c_str(),
                    r.full_chunks, r.first_full_chunk_ms, r.last_full_chunk_ms,
                    r.last_full_chunk_ms / r.first_full_chunk_ms);
    }
}

void print_row(const Row& r, const Row& unchunked) {
    std::printf("  %-10s %8.1f %8.1f %8.1f %10.1f %10.1f %8.1f %6lld   x%.2f        x%.2f\n",
                r.budget.label.c_str(), r.p50_itl_ms, r.p90_itl_ms, r.p99_itl_ms, r.max_stall_ms, r.ttft_ms,
                r.output_throughput, r.steps, r.p99_itl_ms / unchunked.p99_itl_ms,
                r.output_throughput / unchunked.output_throughput);
}

Target auto_target(const std::vector<std::vector<Row>>& runs) {
    std::vector<double> gaps;
    for (const auto& budget : runs)
        for (const Row& r : budget) gaps.insert(gaps.end(), r.decode_gaps_ms.begin(), r.decode_gaps_ms.end());
    if (gaps.empty()) fail("no decode gap before the prompt arrived to set the target from: give --slo-ms");
    const double step = median(gaps);
    return {kAutoTargetSteps * step,
            fmt::format("{:g} decode steps of {:.2f} ms, the median of {} gaps before the prompt, over the fixed "
                        "budgets", kAutoTargetSteps, step, gaps.size())};
}

// [2] The sweep: every budget once per repeat, interleaved so that a change in
// the machine's load touches every budget alike; the controller's row comes
// last in each repeat.
std::vector<Row> sweep(const std::shared_ptr<const Model>& model, const Options& o, const std::vector<Budget>& budgets,
                       const Workload& w, Target& target) {
    std::vector<std::vector<Row>> runs(budgets.size());
    for (int rep = 0; rep < o.repeats; rep++)
        for (std::size_t i = 0; i < budgets.size(); i++) {
            if (budgets[i].slo && target.ms == 0) target = auto_target(runs);
            runs[i].push_back(run_budget(model, o, w, budgets[i], target.ms, rep));
            if (!o.quiet)
                std::fprintf(stderr, "  repeat %d/%d, budget %s: %lld steps, %.1f s\n", rep + 1, o.repeats,
                             budgets[i].label.c_str(), runs[i].back().steps, runs[i].back().duration_s);
        }
    std::vector<Row> rows;
    for (const auto& r : runs) rows.push_back(median_row(r));
    return rows;
}

// [4] budgets.csv, then plot.py draws it.
void write_csv(const fs::path& dir, const std::vector<Row>& rows) {
    fs::create_directories(dir);
    std::ofstream f(dir / "budgets.csv");
    f << "budget,budget_tokens,p50_itl_ms,p90_itl_ms,p99_itl_ms,max_stall_ms,ttft_ms,output_throughput\n";
    for (const Row& r : rows)
        f << fmt::format("{},{},{},{},{},{},{},{}\n", r.budget.label, r.budget.tokens, r.p50_itl_ms, r.p90_itl_ms,
                         r.p99_itl_ms,
                         r.max_stall_ms, r.ttft_ms, r.output_throughput);
    if (!f) fail("cannot write {}", (dir / "budgets.csv").string());
}

void check_options(const Options& o, int context) {
    if (o.prompt_len + o.newcomer_tokens > context)
        fail("--prompt-len {} + --newcomer-tokens {} do not fit the model's context of {} positions", o.prompt_len,
             o.newcomer_tokens, context);
    if (!std::isfinite(o.slo_ms)) fail("--slo-ms {}: give the target in ms (0: 8 decode steps, measured)", o.slo_ms);
    if (o.slo_ms == 0 && o.arrive_after < 2)
        fail("--slo-ms 0 takes the target from the streams' decode steps before the prompt arrives: give "
             "--arrive-after 2 or more, or a target in ms with --slo-ms");
    if (o.stream_prompt + o.stream_tokens > context)
        fail("--stream-prompt {} + --stream-tokens {} do not fit the model's context of {} positions",
             o.stream_prompt, o.stream_tokens, context);
}

int run(Options& o) {
    std::vector<Budget> budgets = parse_budgets(o.budgets);
    if (o.lab.device != "cpu")
        fail("--device {}: this lab runs the paged engine, which runs on the CPU only", o.lab.device);
    try_exercise();
    const auto timeline = cli::open_timeline(o.timeline, o.lab.device, "lab 08");
    cli::Session s = cli::load_session(o.lab);
    const auto& model = s.loaded.model;
    const int context = model->config.max_seq_len;
    check_options(o, context);
    resolve_budgets(budgets, context);
    const int stream_tokens = o.stream_tokens > 0 ? o.stream_tokens : auto_stream_tokens(o, budgets, context);
    const Workload w = make_workload(o, model->config.vocab_size, stream_tokens);
    std::printf("Lab 08: chunked prefill\nmodel    %s\nhardware %s\n", o.lab.model.c_str(), cpu_summary().c_str());
    std::printf("workload %d streams (prompts of %d, %d tokens each); after %d steps a prompt of %d tokens "
                "arrives (%d output tokens); paged engine, EOS ignored, %d repeat(s)\n",
                o.streams, o.stream_prompt, stream_tokens, o.arrive_after, o.prompt_len, o.newcomer_tokens,
                o.repeats);
    std::printf("\n[1] your fit_step_cost and budget_for_target answer (ok)\n");
    std::printf("\n[2] the budget sweep (medians over repeats; ITL: the streams' gaps while the prompt is "
                "prefilled)\n");
    Target target{o.slo_ms, "--slo-ms"};
    const std::vector<Row> rows = sweep(model, o, budgets, w, target);
    const Row& unchunked = *std::max_element(rows.begin(), rows.end() - 1, [](const Row& a, const Row& b) {
        return a.budget.tokens < b.budget.tokens;
    });
    std::printf("  budget     p50 ITL  p90 ITL  p99 ITL  max stall   new TTFT   output  steps   p99 ITL      "
                "throughput\n");
    std::printf("  tokens          ms       ms       ms         ms         ms    tok/s          / widest     "
                "/ widest\n");
    bool same = true;
    for (const Row& r : rows) {
        print_row(r, unchunked);
        same = same && r.ids == rows.front().ids;
    }
    std::printf("  %s\n", same ? "every row gave every request the same tokens (ok)"
                               : "TOKENS DIFFER between rows (check failed): a chunk skipped or fed twice?");
    print_chunk_growth(rows);
    json j;
    print_slo(rows, target, slo_options(o, model->config, target.ms, context), j);
    j["model"] = o.lab.model;
    j["hardware"] = cpu_summary();
    j["budgets"] = json::array();
    for (const Row& r : rows) j["budgets"].push_back(row_json(r));
    j["budgets_swept"] = o.budgets;
    j["same_tokens"] = same;
    cli::finish_timeline(timeline.get(), o.timeline.path);
    write_csv(o.out, rows);
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track2/08-chunked-prefill", o.out, o.no_plot,
                   "budgets.png and .svg (ITL and stall against TTFT, throughput, per budget)");
    return lab::finish(same);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    o.lab.model = kDefaultModel;
    CLI::App app(
        "Lab 08: chunked prefill. A step of a serving engine runs ONE forward pass of at most a\n"
        "token budget: one token for each running decode stream, the rest for chunks of prompts\n"
        "being prefilled. A long prompt in one pass stalls every stream for the whole pass; in\n"
        "chunks, the streams keep a token a step while the prompt takes longer to its first token.\n"
        "This program runs --streams decode streams on the paged engine, lets a --prompt-len\n"
        "prompt arrive, and sweeps the budget with the engine's planner: the streams' p90/p99\n"
        "inter-token latency while the prompt is prefilled and their longest stall, against the\n"
        "newcomer's time to first token, and the output throughput; then YOUR controller\n"
        "(exercise.cpp) picks the budget every step from the steps it timed, to hold a p90 ITL\n"
        "target (--slo-ms), and is compared with the fixed budgets. budgets.csv goes into --out;\n"
        "plot.py draws it. The default model is a synthetic Llama of 28 M parameters with a 2048\n"
        "context (the bundled tiny model's 512 positions hold no long prompt).",
        "08-chunked-prefill");
    cli::add_common(&app, o.lab);
    app.add_option("--budgets", o.budgets, "token budgets of a step to sweep; \"unchunked\": the whole context")
        ->delimiter(',')->capture_default_str();
    app.add_option("--streams", o.streams, "decode streams running when the prompt arrives")
        ->check(CLI::Range(1, 64))->capture_default_str();
    app.add_option("--stream-prompt", o.stream_prompt, "prompt tokens of each stream")
        ->check(CLI::Range(1, 1 << 20))->capture_default_str();
    app.add_option("--stream-tokens", o.stream_tokens,
                   "output tokens of each stream (0: enough to outlast the prompt at the smallest budget)")
        ->check(CLI::Range(0, 1 << 20))->capture_default_str();
    app.add_option("--prompt-len", o.prompt_len, "tokens of the long prompt that arrives")
        ->check(CLI::Range(1, 1 << 20))->capture_default_str();
    app.add_option("--newcomer-tokens", o.newcomer_tokens, "output tokens of the long prompt's request")
        ->check(CLI::Range(1, 1 << 20))->capture_default_str();
    app.add_option("--arrive-after", o.arrive_after, "steps the streams run before the prompt arrives")
        ->check(CLI::Range(0, 1 << 20))->capture_default_str();
    app.add_option("--slo-ms", o.slo_ms, "the p90 ITL target of your controller (the row \"slo\"); 0: 8 decode steps, "
                   "the median gap before the prompt arrives in the fixed budgets' first runs")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--repeats", o.repeats, "runs of every budget; the table shows medians")
        ->check(CLI::Range(1, 100))->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the prompts' token ids")->capture_default_str();
    app.add_option("--out,-o", o.out, "folder for budgets.csv and the plot")->capture_default_str();
    app.add_flag("--no-plot", o.no_plot, "write the CSV only; print the command that draws it");
    app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
    cli::add_timeline(&app, o.timeline,
                      "One process per run (each budget, then your controller, each repeat): its scheduler's "
                      "steps with the batch as args, one track per request (queued, prefill chunks, decode), "
                      "counters of KV blocks and requests. --timeline-detail phases keeps it small.");
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
