// Lab 08 tests: your step-cost fit against the least-squares formulas and the
// three rules, restated here; your budget against its rule; then both inside
// the kit's SloBudgetPolicy and real Scheduler on a fake engine and a fake
// clock whose steps cost exactly weights + n * per_token (no time is measured:
// every number is the same on every machine).
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
    for (const auto& s : v) mx += s.tokens, my += s.ms;
    mx /= double(v.size()), my /= double(v.size());
    double sxy = 0, sxx = 0, x2 = 0, xy = 0;
    for (const auto& s : v) {
        sxy += (s.tokens - mx) * (s.ms - my), sxx += (s.tokens - mx) * (s.tokens - mx);
        x2 += double(s.tokens) * s.tokens, xy += s.tokens * s.ms;
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
    if (c.per_token_ms == 0) return c.weights_ms <= target ? hi : lo;
    int b = hi;
    const double top = std::floor((target - c.weights_ms) / c.per_token_ms);
    if (top < b) b = int(std::max(top, double(lo) - 1));
    while (b >= lo && c.weights_ms + b * c.per_token_ms > target) b--;
    return std::max(b, lo);
}

void check_fit(const std::vector<StepSample>& v, const std::string& what) {
    const StepCost got = fit_step_cost(v), want = expected_fit(v);
    observe(what + " known", got.known);
    observe(what + " weights_ms", got.weights_ms, kFitTol);
    observe(what + " per_token_ms", got.per_token_ms, kFitTol);
    INFO(what << ": " << v.size() << " samples; expected weights " << want.weights_ms << " ms + "
              << want.per_token_ms << " ms a token (known " << want.known << "), yours " << got.weights_ms
              << " + " << got.per_token_ms << " (known " << got.known << ")");
    CHECK(got.known == want.known);
    CHECK_MESSAGE(close(got.weights_ms, want.weights_ms), "weights_ms");
    CHECK_MESSAGE(close(got.per_token_ms, want.per_token_ms), "per_token_ms");
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
    // Three decode steps of 4 rows and two chunked steps: 8 ms + 0.05 ms a token, exactly.
    const std::vector<StepSample> v = {{4, 8.2}, {4, 8.2}, {100, 13}, {4, 8.2}, {260, 21}};
    const StepCost got = fit_step_cost(v);
    observe("weights_ms", got.weights_ms, kFitTol);
    observe("per_token_ms", got.per_token_ms, kFitTol);
    CHECK_MESSAGE(got.known, "five samples at three token counts tell the slope");
    CHECK_MESSAGE(close(got.weights_ms, 8), "the line's value at 0 tokens; yours " << got.weights_ms);
    CHECK_MESSAGE(close(got.per_token_ms, 0.05), "the slope; yours " << got.per_token_ms);
}

TEST_CASE("lab08.fit.noisy_samples") {
    needs_fit();
    Inputs in(1);
    for (int trial = 0; trial < 200; trial++) {
        const double weights = in.uniform(0.5, 200), per_token = in.uniform(0.001, 2), noise = in.uniform(0, 0.3);
        std::vector<StepSample> v(std::size_t(in.integer(2, 64)));
        for (auto& s : v) {
            s.tokens = in.integer(0, 3) ? in.integer(1, 16) : in.integer(1, 2048);
            s.ms = (weights + s.tokens * per_token) * (1 + in.uniform(-noise, noise));
        }
        check_fit(v, "trial " + std::to_string(trial));
    }
}

TEST_CASE("lab08.fit.what_a_line_cannot_describe") {
    needs_fit();
    check_fit({}, "no samples (rule a)");
    check_fit({{7, 12}}, "one sample (rule a)");
    check_fit({{7, 12}, {7, 14}, {7, 9}}, "one token count (rule a)");
    const StepCost falling = fit_step_cost(std::vector<StepSample>{{4, 30}, {300, 10}, {4, 20}});
    CHECK_MESSAGE(!falling.known, "a negative slope (rule b): not known; yours known, "
                                      << falling.weights_ms << " + " << falling.per_token_ms);
    const StepCost flat = fit_step_cost(std::vector<StepSample>{{4, 20}, {300, 20}});
    CHECK_MESSAGE(!flat.known, "a slope of exactly 0 (rule b): not known; yours known, "
                                   << flat.weights_ms << " + " << flat.per_token_ms);
    check_fit({{4, 30}, {300, 10}, {4, 20}}, "negative slope (rule b)");
    const StepCost origin = fit_step_cost(std::vector<StepSample>{{10, 1}, {20, 4}});
    CHECK_MESSAGE((origin.known && origin.weights_ms == 0 && close(origin.per_token_ms, 90.0 / 500)),
                  "a negative intercept (rule c): weights_ms 0 and per_token_ms sum(xy)/sum(x^2) = 0.18; yours "
                      << origin.weights_ms << " + " << origin.per_token_ms);
    check_fit({{10, 1}, {20, 4}}, "negative intercept (rule c)");
    Inputs in(2);
    for (int trial = 0; trial < 100; trial++) {  // few samples, wild noise: every rule gets its turn
        std::vector<StepSample> v(std::size_t(in.integer(0, 5)));
        for (auto& s : v) s.tokens = in.integer(1, 4), s.ms = in.uniform(0, 50);
        check_fit(v, "wild trial " + std::to_string(trial));
    }
}

TEST_CASE("lab08.budget.hand_worked") {
    needs_budget();
    const StepCost c{10, 0.5, true};  // 10 ms + 0.5 ms a token
    const std::map<std::string, std::pair<int, int>> cases = {
        // what: (yours, expected)
        {"target 60 ms, [8, 512]: 10 + 100 x 0.5 = 60 fits", {budget_for_target(c, 60, 8, 512), 100}},
        {"target 60.9 ms: 101 takes 60.5 ms, 102 would take 61", {budget_for_target(c, 60.9, 8, 512), 101}},
        {"target 1000 ms: clamped to hi 512", {budget_for_target(c, 1000, 8, 512), 512}},
        {"target 12 ms: even lo 8 takes 14 ms, so lo", {budget_for_target(c, 12, 8, 512), 8}},
        {"target 5 ms, below the weights alone: lo", {budget_for_target(c, 5, 8, 512), 8}},
        {"cost not known: lo", {budget_for_target({}, 60, 8, 512), 8}},
        {"per_token_ms 0, weights within the target: hi", {budget_for_target({10, 0, true}, 60, 8, 512), 512}},
        {"per_token_ms 0, weights over the target: lo", {budget_for_target({70, 0, true}, 60, 8, 512), 8}},
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
        CHECK_MESSAGE(got == want, "cost " << c.weights_ms << " + " << c.per_token_ms << " x n (known " << c.known
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

// The fake machine: a step of n tokens takes weights + n * per_token ms.
struct FakeMachine {
    double weights, per_token, now_ms = 0;
    void ran(const std::vector<pd::serve::BatchItem>& step) {
        int n = 0;
        for (const auto& b : step) n += b.n;
        now_ms += weights + n * per_token;
    }
};

}  // namespace

TEST_CASE("lab08.controller.holds_the_target_with_the_largest_budget") {
    needs_fit();
    needs_budget();
    Inputs in(4);
    constexpr int kArrive = 3;  // decode-only steps before the long prompt arrives
    for (int round = 0; round < 6; round++) {
        FakeMachine m{in.uniform(5, 80), in.uniform(0.01, 1.5)};
        const int streams = in.integer(1, 6), lo = streams + 8;
        const double target = m.weights + in.uniform(2 * lo, 1000) * m.per_token;
        const SloOptions o{target, 0.8, lo, 4096, 32};
        HashEngine engine;
        SloBudgetPolicy policy(o, [&] { return m.now_ms; });
        Scheduler s(engine, policy, {{streams + 1, 4096, false}, 1 << 20, -1, true, std::nullopt});
        std::vector<Request> rs;
        for (int i = 0; i < streams; i++) rs.push_back({i, in.tokens(1, kHashVocab), 300, {}});
        const Request newcomer{streams, in.tokens(in.integer(800, 3000), kHashVocab), 4, {}};
        rs.push_back(newcomer);
        std::map<int, std::vector<int>> got;
        for (int i = 0; i < streams; i++) s.add(rs[std::size_t(i)]);
        std::size_t first_token_step = 0;  // the step that gave the newcomer its first token
        for (int k = 0; k < 5000 && (k <= kArrive || !s.idle()); k++) {
            if (k == kArrive) s.add(newcomer);
            for (const auto& e : s.step()) {
                if (e.request == streams && got[e.request].empty()) first_token_step = std::size_t(k);
                got[e.request].push_back(e.token);
            }
            m.ran(engine.steps.back());
        }
        REQUIRE_MESSAGE(s.idle(), "some request never finished");
        // Steps 0..kArrive-1 ran `streams` tokens each: one token count, no
        // slope, so lo. The first step with the prompt ran lo tokens: a second
        // count. From then on, on a machine without noise, the fitted line is
        // exact and a step gets the largest budget the aim allows, except when
        // the window of the last 32 steps holds one token count again (then lo).
        const int want = std::clamp(int(std::floor((0.8 * target - m.weights) / m.per_token)), o.lo, o.hi);
        INFO("round " << round << ": " << m.weights << " ms + " << m.per_token << " ms a token, " << streams
                      << " streams, target " << target << " ms (aim " << 0.8 * target << "), expected budget "
                      << want);
        observe("round " + std::to_string(round) + " budgets", policy.budgets);
        REQUIRE(first_token_step > std::size_t(kArrive));
        for (int k = 0; k <= kArrive; k++)
            CHECK_MESSAGE(policy.budgets[std::size_t(k)] == lo,
                          "step " << k << ": the samples have one token count (or none): lo");
        CHECK_MESSAGE(policy.budgets[kArrive + 1] == want, "the step after the first chunk: the line's largest budget");
        // Every step against the rules restated, on the window the policy saw.
        std::vector<StepSample> seen;
        int off = 0;
        for (std::size_t k = 0; k < policy.budgets.size(); k++) {
            const std::vector<StepSample> window(seen.end() - std::min<std::ptrdiff_t>(32, std::ssize(seen)), seen.end());
            off += policy.budgets[k] != expected_budget(expected_fit(window), 0.8 * target, o.lo, o.hi);
            int n = 0;
            for (const auto& b : engine.steps[k]) n += b.n;
            seen.push_back({n, m.weights + n * m.per_token});
        }
        CHECK_MESSAGE(off == 0, off << " steps did not get the budget of the line fitted to the last 32 steps");
        double worst = 0;
        for (const auto& step : engine.steps) {
            int n = 0;
            for (const auto& b : step) n += b.n;
            worst = std::max(worst, m.weights + n * m.per_token);
        }
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
