// Lab 08's report: the sweep's table and token check, the chunks' growth,
// YOUR controller against the fixed budgets, and what goes to --json and
// budgets.csv.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "lab08.hpp"

namespace pd::lab08 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void print_row(const Row& r, const Row& unchunked) {
    std::printf("  %-10s %8.1f %8.1f %8.1f %10.1f %10.1f %8.1f %6lld   x%.2f        x%.2f\n",
                r.budget.label.c_str(), r.p50_itl_ms, r.p90_itl_ms, r.p99_itl_ms, r.max_stall_ms, r.ttft_ms,
                r.output_throughput, r.steps, r.p99_itl_ms / unchunked.p99_itl_ms,
                r.output_throughput / unchunked.output_throughput);
}

}  // namespace

bool print_table(const std::vector<Row>& rows) {
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
    return same;
}

json row_json(const Row& r) {
    json j = {{"budget", r.budget.label}, {"budget_tokens", r.budget.tokens}, {"p50_itl_ms", r.p50_itl_ms},
              {"p90_itl_ms", r.p90_itl_ms}, {"p99_itl_ms", r.p99_itl_ms}, {"max_stall_ms", r.max_stall_ms},
              {"ttft_ms", r.ttft_ms}, {"output_throughput", r.output_throughput}, {"duration_s", r.duration_s}, {"steps", r.steps}};
    if (r.budget.slo)
        j["budgets_picked"] = r.slo_budgets, j["spread"] = std::isnan(r.slo_spread) ? json(nullptr) : json(r.slo_spread);
    return j;
}

// The controller against the fixed budgets: did it hold the target (the
// p90 ITL: a window of 60 to 80 steps measures it; its p99 is its slowest
// step), and what did holding it cost next to the largest fixed budget that
// held it too.
void print_slo(const std::vector<Row>& rows, const Target& target, const SloOptions& so, json& j) {
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

// plot.py draws it.
void write_csv(const fs::path& dir, const std::vector<Row>& rows) {
    fs::create_directories(dir);
    std::ofstream f(dir / "budgets.csv");
    f << "budget,budget_tokens,p50_itl_ms,p90_itl_ms,p99_itl_ms,max_stall_ms,ttft_ms,output_throughput\n";
    for (const Row& r : rows)
        f << fmt::format("{},{},{},{},{},{},{},{}\n", r.budget.label, r.budget.tokens, r.p50_itl_ms, r.p90_itl_ms,
                         r.p99_itl_ms, r.max_stall_ms, r.ttft_ms, r.output_throughput);
    if (!f) fail("cannot write {}", (dir / "budgets.csv").string());
}

}  // namespace pd::lab08
