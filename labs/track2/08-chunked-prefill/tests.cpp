// Lab 08 tests: your step-cost fit against the least-squares formulas and the
// three rules, restated here; your budget against its rule; then both inside
// the kit's SloBudgetPolicy and real Scheduler on a fake engine and a fake
// clock whose steps cost exactly weights + rows * per_row, attention counted
// in the rows (no time is measured: every number is the same on every machine).
//   meson test -C build --suite track2-08        (all of them)
//   build/labs/track2/08-chunked-prefill/lab08_tests --test-case='lab08.fit.*'
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include "common.hpp"
#include "exercise.hpp"
#include "hash_engine.hpp"
#include "lab_test.hpp"
#include "serve/scheduler.hpp"
#include "slo_policy.hpp"

using namespace pd::lab08;
using pd::lab::alone;
using pd::lab::HashEngine;
using pd::lab::Inputs;
using pd::lab::kHashVocab;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using pd::serve::Request;
using pd::serve::Scheduler;

namespace {

// Two fits agree within this (the sums may be taken in another order).
const pd::lab::Tolerance kFitTol{1e-9, 1e-9};

bool close(double got, double want) { return std::abs(got - want) <= kFitTol.atol + kFitTol.rtol * std::abs(want); }

// The rules of exercise.hpp, restated: the least-squares line, then a, b, c.
StepCost expected_fit(const std::vector<StepSample>& v) {
    if (v.empty()) return {};
    double mx = 0, my = 0;
    for (const auto& s : v) mx += s.rows, my += s.ms;
    mx /= double(v.size()), my /= double(v.size());
    double sxy = 0, sxx = 0, x2 = 0, xy = 0;
    for (const auto& s : v) {
        sxy += (s.rows - mx) * (s.ms - my), sxx += (s.rows - mx) * (s.rows - mx);
        x2 += double(s.rows) * s.rows, xy += s.rows * s.ms;
    }
    if (sxx == 0) return {};
    const double b = sxy / sxx;
    if (b <= 0) return {};
    if (my - b * mx < 0) return {0, xy / x2, true};
    return {my - b * mx, b, true};
}

// The largest budget the line fits within the target, by walking down: the
// rule without the algebra.
int expected_budget(const StepCost& c, double target, int lo, int hi) {
    if (!c.known) return lo;
    if (c.per_row_ms == 0) return c.weights_ms <= target ? hi : lo;
    int b = hi;
    const double top = std::floor((target - c.weights_ms) / c.per_row_ms);
    if (top < b) b = int(std::max(top, double(lo) - 1));
    while (b >= lo && c.weights_ms + b * c.per_row_ms > target) b--;
    return std::max(b, lo);
}

void check_fit(const std::vector<StepSample>& v, const std::string& what) {
    const StepCost got = fit_step_cost(v), want = expected_fit(v);
    observe(what + " known", got.known);
    observe(what + " weights_ms", got.weights_ms, kFitTol);
    observe(what + " per_row_ms", got.per_row_ms, kFitTol);
    INFO(what << ": " << v.size() << " samples; expected weights " << want.weights_ms << " ms + "
              << want.per_row_ms << " ms a row (known " << want.known << "), yours " << got.weights_ms
              << " + " << got.per_row_ms << " (known " << got.known << ")");
    CHECK(got.known == want.known);
    CHECK_MESSAGE(close(got.weights_ms, want.weights_ms), "weights_ms");
    CHECK_MESSAGE(close(got.per_row_ms, want.per_row_ms), "per_row_ms");
}

void needs_fit() {
    pd::lab::needs([] { fit_step_cost({}); });
}

void needs_budget() {
    pd::lab::needs([] { budget_for_target({1, 1, true}, 10, 1, 8); });
}

}  // namespace

TEST_CASE("lab08.fit.exact_line") {
    needs_fit();
    // Three decode steps of 4 rows and two chunked steps: 8 ms + 0.05 ms a row, exactly.
    const std::vector<StepSample> v = {{4, 8.2}, {4, 8.2}, {100, 13}, {4, 8.2}, {260, 21}};
    const StepCost got = fit_step_cost(v);
    observe("weights_ms", got.weights_ms, kFitTol);
    observe("per_row_ms", got.per_row_ms, kFitTol);
    CHECK_MESSAGE(got.known, "five samples at three row counts tell the slope");
    CHECK_MESSAGE(close(got.weights_ms, 8), "the line's value at 0 rows; yours " << got.weights_ms);
    CHECK_MESSAGE(close(got.per_row_ms, 0.05), "the slope; yours " << got.per_row_ms);
}

TEST_CASE("lab08.fit.noisy_samples") {
    needs_fit();
    Inputs in(1);
    for (int trial = 0; trial < 200; trial++) {
        const double weights = in.uniform(0.5, 200), per_row = in.uniform(0.001, 2), noise = in.uniform(0, 0.3);
        std::vector<StepSample> v(std::size_t(in.integer(2, 64)));
        for (auto& s : v) {
            s.rows = in.integer(0, 3) ? in.integer(1, 16) : in.integer(1, 2048);
            s.ms = (weights + s.rows * per_row) * (1 + in.uniform(-noise, noise));
        }
        check_fit(v, "trial " + std::to_string(trial));
    }
}

TEST_CASE("lab08.fit.what_a_line_cannot_describe") {
    needs_fit();
    check_fit({}, "no samples (rule a)");
    check_fit({{7, 12}}, "one sample (rule a)");
    check_fit({{7, 12}, {7, 14}, {7, 9}}, "one row count (rule a)");
    const StepCost falling = fit_step_cost(std::vector<StepSample>{{4, 30}, {300, 10}, {4, 20}});
    CHECK_MESSAGE(!falling.known, "a negative slope (rule b): not known; yours known, "
                                      << falling.weights_ms << " + " << falling.per_row_ms);
    const StepCost flat = fit_step_cost(std::vector<StepSample>{{4, 20}, {300, 20}});
    CHECK_MESSAGE(!flat.known, "a slope of exactly 0 (rule b): not known; yours known, "
                                   << flat.weights_ms << " + " << flat.per_row_ms);
    check_fit({{4, 30}, {300, 10}, {4, 20}}, "negative slope (rule b)");
    const StepCost origin = fit_step_cost(std::vector<StepSample>{{10, 1}, {20, 4}});
    CHECK_MESSAGE((origin.known && origin.weights_ms == 0 && close(origin.per_row_ms, 90.0 / 500)),
                  "a negative intercept (rule c): weights_ms 0 and per_row_ms sum(xy)/sum(x^2) = 0.18; yours "
                      << origin.weights_ms << " + " << origin.per_row_ms);
    check_fit({{10, 1}, {20, 4}}, "negative intercept (rule c)");
    Inputs in(2);
    for (int trial = 0; trial < 100; trial++) {  // few samples, wild noise: every rule gets its turn
        std::vector<StepSample> v(std::size_t(in.integer(0, 5)));
        for (auto& s : v) s.rows = in.integer(1, 4), s.ms = in.uniform(0, 50);
        check_fit(v, "wild trial " + std::to_string(trial));
    }
}

TEST_CASE("lab08.budget.hand_worked") {
    needs_budget();
    const StepCost c{10, 0.5, true};  // 10 ms + 0.5 ms a row
    const std::map<std::string, std::pair<int, int>> cases = {
        // what: (yours, expected)
        {"target 60 ms, [8, 512]: 10 + 100 x 0.5 = 60 fits", {budget_for_target(c, 60, 8, 512), 100}},
        {"target 60.9 ms: 101 takes 60.5 ms, 102 would take 61", {budget_for_target(c, 60.9, 8, 512), 101}},
        {"target 1000 ms: clamped to hi 512", {budget_for_target(c, 1000, 8, 512), 512}},
        {"target 12 ms: even lo 8 takes 14 ms, so lo", {budget_for_target(c, 12, 8, 512), 8}},
        {"target 5 ms, below the weights alone: lo", {budget_for_target(c, 5, 8, 512), 8}},
        {"cost not known: lo", {budget_for_target({}, 60, 8, 512), 8}},
        {"per_row_ms 0, weights within the target: hi", {budget_for_target({10, 0, true}, 60, 8, 512), 512}},
        {"per_row_ms 0, weights over the target: lo", {budget_for_target({70, 0, true}, 60, 8, 512), 8}},
        {"a target far above the line: hi, no overflow", {budget_for_target({0, 1e-12, true}, 1e6, 1, 1 << 30), 1 << 30}},
    };
    for (const auto& [what, v] : cases) {
        observe(what, v.first);
        CHECK_MESSAGE(v.first == v.second, what << ": expected " << v.second << ", yours " << v.first);
    }
}

TEST_CASE("lab08.budget.random_costs") {
    needs_budget();
    Inputs in(3);
    for (int trial = 0; trial < 500; trial++) {
        const StepCost c{in.uniform(0, 100), in.integer(0, 9) ? in.uniform(0, 1) : 0.0, in.integer(0, 9) > 0};
        const double target = in.uniform(0.1, 400);
        const int lo = in.integer(1, 64), hi = lo + in.integer(0, 4000);
        const int got = budget_for_target(c, target, lo, hi), want = expected_budget(c, target, lo, hi);
        observe("trial " + std::to_string(trial), got);
        CHECK_MESSAGE(got == want, "cost " << c.weights_ms << " + " << c.per_row_ms << " x n (known " << c.known
                                           << "), target " << target << " ms, [" << lo << ", " << hi
                                           << "]: expected " << want << ", yours " << got);
    }
}

TEST_CASE("lab08.budget.bad_arguments_are_refused") {
    needs_budget();
    const StepCost c{10, 0.5, true};
    struct Bad {
        double target;
        int lo, hi;
        const char* names;
    };
    for (const Bad& b : {Bad{0, 8, 512, "0"}, Bad{-3, 8, 512, "-3"}, Bad{NAN, 8, 512, "nan"}, Bad{60, 0, 512, "0"},
                         Bad{60, -2, 512, "-2"}, Bad{60, 600, 512, "600"}}) {
        INFO("target " << b.target << ", lo " << b.lo << ", hi " << b.hi);
        CHECK_THROWS_AS(budget_for_target(c, b.target, b.lo, b.hi), pd::UserError);
        CHECK_THROWS_WITH(budget_for_target(c, b.target, b.lo, b.hi), doctest::Contains(b.names));
    }
}

namespace {

// The fake machine: a step's rows are its tokens n plus its attention's
// pairs / pairs_per_row (n tokens from cached position p: n p + n (n + 1) / 2
// pairs), rounded to a whole row, and it costs weights + rows * per_row: the
// line in rows that SloBudgetPolicy counts, exactly.
struct FakeMachine {
    double weights, per_row, pairs_per_row, now_ms = 0;
    std::map<int, int> computed;  // per sequence: its tokens run so far

    double rows(const std::vector<pd::serve::BatchItem>& step) {
        double r = 0;
        for (const auto& b : step) {
            const double n = b.n, p = computed[b.seq];
            r += n + (n * p + n * (n + 1) / 2) / pairs_per_row;
        }
        return std::round(r);
    }
    double ms(const std::vector<pd::serve::BatchItem>& step) { return weights + per_row * rows(step); }
    void ran(const std::vector<pd::serve::BatchItem>& step) {
        now_ms += ms(step);
        for (const auto& b : step) computed[b.seq] += b.n;
    }
};

int tokens_of(const std::vector<pd::serve::BatchItem>& step) {
    int n = 0;
    for (const auto& b : step) n += b.n;
    return n;
}

}  // namespace

TEST_CASE("lab08.controller.holds_the_target_with_the_largest_budget") {
    needs_fit();
    needs_budget();
    Inputs in(4);
    constexpr int kArrive = 3;  // decode-only steps before the long prompt arrives
    constexpr double kAim = 0.8;
    for (int round = 0; round < 6; round++) {
        FakeMachine m{in.uniform(5, 80), in.uniform(0.01, 1.5), in.uniform(1000, 4000), 0, {}};
        const int streams = in.integer(1, 6), lo = streams + 8, prompt = in.integer(800, 3000);
        // lo fits the aim even at the end of the prompt (its rows: lo tokens
        // attending to at most 3000 + lo positions, under 4 lo rows).
        const double target = (m.weights + 4 * lo * m.per_row) / kAim + in.uniform(0, 1000) * m.per_row;
        const SloOptions o{target, kAim, lo, 4096, 32, m.pairs_per_row, 2};
        HashEngine engine;
        SloBudgetPolicy policy(o, [&] { return m.now_ms; });
        Scheduler s(engine, policy, {{streams + 1, 4096, false}, 1 << 20, {}, true, std::nullopt});
        std::vector<Request> rs;
        for (int i = 0; i < streams; i++) rs.push_back({i, in.tokens(1, kHashVocab), 300, {}});
        const Request newcomer{streams, in.tokens(prompt, kHashVocab), 4, {}};
        rs.push_back(newcomer);
        std::map<int, std::vector<int>> got;
        for (int i = 0; i < streams; i++) s.add(rs[std::size_t(i)]);
        std::vector<double> step_ms, one_more_ms;  // each step's time; with one more prompt token (0: none left)
        int newcomer_seq = -1;
        for (int k = 0; k < 5000 && (k <= kArrive || !s.idle()); k++) {
            if (k == kArrive) s.add(newcomer);
            for (const auto& e : s.step()) got[e.request].push_back(e.token);
            const auto& step = engine.steps.back();
            // The newcomer's sequence: the arrival step's longest item (its first chunk; the streams decode).
            if (k == kArrive)
                newcomer_seq =
                    std::max_element(step.begin(), step.end(), [](auto& a, auto& b) { return a.n < b.n; })->seq;
            // The same step with one more token of the prompt, while some is left.
            auto more = step;
            const auto chunk = std::find_if(more.begin(), more.end(), [&](auto& b) { return b.seq == newcomer_seq; });
            const bool left = chunk != more.end() && m.computed[newcomer_seq] + chunk->n < prompt;
            if (left) chunk->n++;
            one_more_ms.push_back(left ? m.ms(more) : 0);
            step_ms.push_back(m.ms(step));
            m.ran(step);
        }
        REQUIRE_MESSAGE(s.idle(), "some request never finished");
        INFO("round " << round << ": " << m.weights << " ms + " << m.per_row << " ms a row, a row per "
                      << m.pairs_per_row << " pairs; " << streams << " streams, a prompt of " << prompt
                      << ", target " << target << " ms (aim " << kAim * target << ")");
        observe("round " + std::to_string(round) + " budgets", policy.budgets);
        // Up to the prompt's first step the samples have one row count (or
        // none): lo. From then on, on a machine without noise, the line is
        // exact, and each step gets the largest budget whose rows the line
        // fits in the aim, or `grow` (2) times the most tokens of a step in
        // the window, whichever is smaller.
        for (int k = 0; k <= kArrive; k++)
            CHECK_MESSAGE(policy.budgets[std::size_t(k)] == lo,
                          "step " << k << ": the samples have one row count (or none): lo");
        int over = 0, short_of = 0, past_cap = 0;
        for (std::size_t k = 0; k < policy.budgets.size(); k++) {
            int most = 0;
            for (std::size_t j = k - std::min<std::size_t>(k, 32); j < k; j++)
                most = std::max(most, tokens_of(engine.steps[j]));
            const int cap = std::max(lo, std::min(o.hi, 2 * most)), budget = policy.budgets[k];
            past_cap += budget > cap;
            const double aim = kAim * target, slack = 1e-9 * aim;  // the fit's sums, in another order
            over += step_ms[k] > aim + slack;
            const bool filled = tokens_of(engine.steps[k]) == budget;
            short_of += filled && budget < cap && one_more_ms[k] > 0 && one_more_ms[k] <= aim - slack;
        }
        CHECK_MESSAGE(past_cap == 0, past_cap << " steps got a budget above twice the most tokens of a step "
                                                 "in the window");
        CHECK_MESSAGE(over == 0,
                      over << " steps ran over the aim: more rows than the line allows, or attention not counted");
        CHECK_MESSAGE(short_of == 0, short_of << " steps of the prompt could have taken one more token within "
                                                 "the aim");
        const double worst = *std::max_element(step_ms.begin(), step_ms.end());
        observe("round " + std::to_string(round) + " slowest step", worst, {1e-9, 1e-9});
        CHECK_MESSAGE(worst <= target, "the slowest step took " << worst << " ms, over the target");
        for (const auto& r : rs)
            CHECK_MESSAGE(got[r.id] == alone(r.prompt, r.max_tokens), "request " << r.id << " got other tokens");
    }
}

TEST_CASE("lab08.seed.other_seed_other_inputs") {
    Inputs a(1, 0), b(1, 1);
    CHECK_MESSAGE(a.uniform(0.5, 200) != b.uniform(0.5, 200), "PDLAB_TEST_SEED must change the samples");
}
