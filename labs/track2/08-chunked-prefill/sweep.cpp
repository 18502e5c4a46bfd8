// Lab 08's sweep: each budget's run on the paged engine (the kit's Scheduler
// with the engine's planner, or YOUR controller), what it measured, and the
// medians over the repeats.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "common.hpp"
#include "lab08.hpp"
#include "base/timeline.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/request_metrics.hpp"
#include "serve/scheduler_timeline.hpp"

namespace pd::lab08 {

namespace {

// The automatic ITL target: this many decode-only steps (the streams' median
// gap before the prompt arrives, over every fixed budget's run of the first
// repeat: one run's median moves with its warm-up, the pool's does not).
constexpr double kAutoTargetSteps = 8;

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
    SloBudgetPolicy slo(slo_options(o, model->config, target_ms, b.tokens), [&] { return 1e3 * now(); });
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

}  // namespace

// Every budget once per repeat, interleaved so that a change in the machine's
// load touches every budget alike; the controller's row comes last in each repeat.
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

}  // namespace pd::lab08
