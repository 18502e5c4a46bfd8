// Lab 08: a long prompt arrives while decode streams run; what the step's token
// budget does to the streams' inter-token latency and to the newcomer's TTFT.
//
//   [1] your planner, tried once (a missing exercise stops here with exit 3)
//   [2] for each --budgets value (and "unchunked": the whole context, so every
//       prompt goes through in one pass): --streams requests decode on the
//       paged engine, the long prompt joins after --arrive-after steps, and
//       the kit's Scheduler runs YOUR planner until every request finished.
//       Printed per budget: p99 ITL of the streams while the prompt is being
//       prefilled, their longest stall, the newcomer's TTFT, throughput; and a
//       check that every budget gave every request the same tokens
//   [3] budgets.csv in --out, drawn by plot.py
#include <algorithm>
#include <chrono>
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
#include "base/hardware.hpp"
#include "plot.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/request_metrics.hpp"
#include "serve/scheduler.hpp"

using namespace pd;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// 28 M parameters, 105 MB of f32 weights (more than the CPU's caches: every
// step reads them all), and a context of 2048 that holds a long prompt: a
// 1536-token prefill is about 90 GFLOP, a second or more on 2 cores.
constexpr const char* kDefaultModel =
    "synthetic:llama,dim=512,ffn=1536,layers=8,heads=8,kv_heads=2,vocab=4096,ctx=2048";

struct Options {
    cli::CommonOptions lab;
    std::vector<std::string> budgets = {"32", "64", "128", "256", "512", "1024", "unchunked"};
    int streams = 4, stream_prompt = 16, stream_tokens = 0;
    int prompt_len = 1536, newcomer_tokens = 8, arrive_after = 8, repeats = 1;
    std::uint64_t seed = 1;
    std::string out = "lab08-results";
    bool no_plot = false, quiet = false;
};

// One budget of the sweep; "unchunked" is 0 tokens until the model's context is known.
struct Budget {
    std::string label;
    int tokens = 0;
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

// "unchunked" takes the whole context: every prompt fits one step.
void resolve_budgets(std::vector<Budget>& budgets, int context) {
    for (Budget& b : budgets) b.tokens = b.tokens == 0 ? context : std::min(b.tokens, context);
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

// Stream tokens enough to outlast the newcomer at the smallest budget that
// leaves room for a chunk (a smaller one starves it until the streams end).
int auto_stream_tokens(const Options& o, const std::vector<Budget>& budgets, int context) {
    int chunk = context;
    for (const Budget& b : budgets)
        if (b.tokens > o.streams) chunk = std::min(chunk, b.tokens - o.streams);
    const int steps = o.arrive_after + (o.prompt_len + chunk - 1) / chunk + o.newcomer_tokens + 8;
    return std::min(steps, context - o.stream_prompt);
}

struct Row {
    Budget budget;
    double p50_itl_ms = 0, p99_itl_ms = 0, max_stall_ms = 0, ttft_ms = 0, output_throughput = 0, duration_s = 0;
    long long steps = 0;
    std::vector<std::vector<int>> ids;  // (requests) the tokens each got
};

using Clock = std::chrono::steady_clock;

// One run at one budget: every request's token times, then the metrics.
Row run_budget(const std::shared_ptr<const Model>& model, const Options& o, const Workload& w, const Budget& b) {
    const int context = model->config.max_seq_len;
    serve::PagedOptions po;
    po.block_size = 16;
    po.total_blocks = (o.streams + 1) * (context / po.block_size + 1);
    po.threads = o.lab.threads;
    po.prefix_caching = false;  // every budget computes every prompt
    auto engine = serve::make_paged_serving_engine(model, po);
    lab08::StudentPlanner planner;
    serve::Scheduler s(*engine, planner, {{o.streams + 1, b.tokens, false}, context, -1, true, std::nullopt});
    const int n = o.streams + 1;
    std::vector<serve::RequestTiming> t(static_cast<std::size_t>(n));
    Row row;
    row.budget = b;
    row.ids.resize(std::size_t(n));
    for (const auto& r : w.streams) s.add(r);
    const auto start = Clock::now();
    auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    for (long long k = 0; !s.idle() || k <= o.arrive_after; k++) {
        if (k == o.arrive_after) s.add(w.newcomer), t[std::size_t(o.streams)].arrival_s = now();
        const auto events = s.step();
        const double at = now();
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
        }
    const serve::MetricSummary itl = serve::summarize_metric(window);
    row.p50_itl_ms = itl.median;
    row.p99_itl_ms = itl.p99;
    row.max_stall_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
    row.ttft_ms = (first - arrival) * 1e3;
    long long outputs = 0;
    for (const auto& ids : row.ids) outputs += (long long)ids.size();
    row.output_throughput = double(outputs) / row.duration_s;
    return row;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
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
    r.p99_itl_ms = med(&Row::p99_itl_ms);
    r.max_stall_ms = med(&Row::max_stall_ms);
    r.ttft_ms = med(&Row::ttft_ms);
    r.output_throughput = med(&Row::output_throughput);
    r.duration_s = med(&Row::duration_s);
    return r;
}

// [1] Your planner once, so a missing one stops the lab at once.
void try_exercise() {
    std::vector<serve::SeqState> seqs = {{3, 0, false}};
    std::vector<int> running = {0};
    std::vector<serve::BatchItem> out;
    out.reserve(1);
    lab08::plan_step({seqs, {}, running}, 4, out);
}

json row_json(const Row& r) {
    return {{"budget", r.budget.label}, {"budget_tokens", r.budget.tokens}, {"p50_itl_ms", r.p50_itl_ms},
            {"p99_itl_ms", r.p99_itl_ms}, {"max_stall_ms", r.max_stall_ms}, {"ttft_ms", r.ttft_ms},
            {"output_throughput", r.output_throughput}, {"duration_s", r.duration_s}, {"steps", r.steps}};
}

void print_row(const Row& r, const Row& unchunked) {
    std::printf("  %-10s %8.1f %8.1f %10.1f %10.1f %8.1f %6lld   x%.2f        x%.2f\n",
                r.budget.label.c_str(), r.p50_itl_ms, r.p99_itl_ms, r.max_stall_ms, r.ttft_ms, r.output_throughput,
                r.steps, r.p99_itl_ms / unchunked.p99_itl_ms, r.output_throughput / unchunked.output_throughput);
}

// [2] The sweep: every budget once per repeat, interleaved so that a change in
// the machine's load touches every budget alike.
std::vector<Row> sweep(const std::shared_ptr<const Model>& model, const Options& o, const std::vector<Budget>& budgets,
                       const Workload& w) {
    std::vector<std::vector<Row>> runs(budgets.size());
    for (int rep = 0; rep < o.repeats; rep++)
        for (std::size_t i = 0; i < budgets.size(); i++) {
            runs[i].push_back(run_budget(model, o, w, budgets[i]));
            if (!o.quiet)
                std::fprintf(stderr, "  repeat %d/%d, budget %s: %lld steps, %.1f s\n", rep + 1, o.repeats,
                             budgets[i].label.c_str(), runs[i].back().steps, runs[i].back().duration_s);
        }
    std::vector<Row> rows;
    for (const auto& r : runs) rows.push_back(median_row(r));
    return rows;
}

// [3] budgets.csv, then plot.py draws it.
void write_csv(const fs::path& dir, const std::vector<Row>& rows) {
    fs::create_directories(dir);
    std::ofstream f(dir / "budgets.csv");
    f << "budget,budget_tokens,p50_itl_ms,p99_itl_ms,max_stall_ms,ttft_ms,output_throughput\n";
    for (const Row& r : rows)
        f << fmt::format("{},{},{},{},{},{},{}\n", r.budget.label, r.budget.tokens, r.p50_itl_ms, r.p99_itl_ms,
                         r.max_stall_ms, r.ttft_ms, r.output_throughput);
    if (!f) fail("cannot write {}", (dir / "budgets.csv").string());
}

void check_options(const Options& o, int context) {
    if (o.prompt_len + o.newcomer_tokens > context)
        fail("--prompt-len {} + --newcomer-tokens {} do not fit the model's context of {} positions", o.prompt_len,
             o.newcomer_tokens, context);
    if (o.stream_prompt + o.stream_tokens > context)
        fail("--stream-prompt {} + --stream-tokens {} do not fit the model's context of {} positions",
             o.stream_prompt, o.stream_tokens, context);
}

int run(Options& o) {
    std::vector<Budget> budgets = parse_budgets(o.budgets);
    if (o.lab.device != "cpu")
        fail("--device {}: this lab runs the paged engine, which runs on the CPU only", o.lab.device);
    try_exercise();
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
    std::printf("\n[1] your plan_step answers (ok)\n");
    std::printf("\n[2] the budget sweep (medians over repeats; ITL: the streams' gaps while the prompt is "
                "prefilled)\n");
    const std::vector<Row> rows = sweep(model, o, budgets, w);
    const Row& unchunked = *std::max_element(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        return a.budget.tokens < b.budget.tokens;
    });
    std::printf("  budget     p50 ITL  p99 ITL  max stall   new TTFT   output  steps   p99 ITL      throughput\n");
    std::printf("  tokens          ms       ms         ms         ms    tok/s          / widest     / widest\n");
    bool same = true;
    for (const Row& r : rows) {
        print_row(r, unchunked);
        same = same && r.ids == rows.front().ids;
    }
    std::printf("  %s\n", same ? "every budget gave every request the same tokens (ok)"
                               : "TOKENS DIFFER between budgets (check failed): a chunk skipped or fed twice?");
    json j;
    j["model"] = o.lab.model;
    j["hardware"] = cpu_summary();
    j["budgets"] = json::array();
    for (const Row& r : rows) j["budgets"].push_back(row_json(r));
    j["budgets_swept"] = o.budgets;
    j["same_tokens"] = same;
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
        "prompt arrive, and sweeps the budget with YOUR planner (exercise.cpp): the streams' p99\n"
        "inter-token latency while the prompt is prefilled and their longest stall, against the\n"
        "newcomer's time to first token, and the output throughput. budgets.csv goes into --out;\n"
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
    app.add_option("--repeats", o.repeats, "runs of every budget; the table shows medians")
        ->check(CLI::Range(1, 100))->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the prompts' token ids")->capture_default_str();
    app.add_option("--out,-o", o.out, "folder for budgets.csv and the plot")->capture_default_str();
    app.add_flag("--no-plot", o.no_plot, "write the CSV only; print the command that draws it");
    app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
