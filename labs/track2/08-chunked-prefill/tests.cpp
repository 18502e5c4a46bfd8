// Lab 08 tests: your step-cost fit and spread against the least-squares
// formulas and the three rules, restated here; your budget against its rule;
// then both inside the kit's SloBudgetPolicy and real Scheduler on a fake
// engine and a fake clock whose steps cost weights + rows * per_row, attention
// counted in the rows, exactly or with seeded noise (no time is measured:
// every number is the same on every machine).
//   meson test -C build --suite track2-08        (all of them)
//   build/labs/track2/08-chunked-prefill/lab08_tests --test-case='lab08.fit.*'
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
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

// The samples' root-mean-square distance from the line c, relative to it.
double expected_spread(const std::vector<StepSample>& v, const StepCost& c) {
    double sq = 0;
    for (const auto& s : v) {
        const double line = c.weights_ms + c.per_row_ms * s.rows;
        sq += std::pow((s.ms - line) / line, 2);
    }
    return std::sqrt(sq / double(v.size()));
}

// The rules of exercise.hpp, restated: the least-squares line, then a, b, c,
// then the spread about the line returned.
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
    StepCost c = my - b * mx < 0 ? StepCost{0, xy / x2, true} : StepCost{my - b * mx, b, true};
    c.spread = expected_spread(v, c);
    return c;
}

// The largest budget the line fits within the target less the margin, by
// walking down: the rule without the algebra.
int expected_budget(const StepCost& c, double target_ms, double spreads, int lo, int hi) {
    if (!c.known) return lo;
    const double target = target_ms / (1 + spreads * c.spread);
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
    observe(what + " spread", got.spread, kFitTol);
    INFO(what << ": " << v.size() << " samples; expected weights " << want.weights_ms << " ms + "
              << want.per_row_ms << " ms a row, spread " << want.spread << " (known " << want.known
              << "), yours " << got.weights_ms << " + " << got.per_row_ms << ", spread " << got.spread
              << " (known " << got.known << ")");
    CHECK(got.known == want.known);
    CHECK_MESSAGE(close(got.weights_ms, want.weights_ms), "weights_ms");
    CHECK_MESSAGE(close(got.per_row_ms, want.per_row_ms), "per_row_ms");
    CHECK_MESSAGE(close(got.spread, want.spread), "spread: the samples' root-mean-square distance from the line "
                                                  "you return, relative to it (0 when not known)");
}

void needs_fit() {
    pd::lab::needs([] { fit_step_cost({}); });
}

void needs_budget() {
    pd::lab::needs([] { budget_for_target({1, 1, true}, 10, 0, 1, 8); });
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
    CHECK_MESSAGE(close(got.spread, 0), "every sample on the line: spread 0; yours " << got.spread);
}

TEST_CASE("lab08.fit.spread_by_hand") {
    needs_fit();
    // 10 ms + 1 ms a row, the samples 10% above and below it in turn: the
    // line is the same, every sample a tenth of it away.
    const std::vector<StepSample> v = {{10, 22}, {10, 18}, {30, 44}, {30, 36}};
    const StepCost got = fit_step_cost(v);
    observe("spread", got.spread, kFitTol);
    CHECK_MESSAGE((got.known && close(got.weights_ms, 10) && close(got.per_row_ms, 1)),
                  "the line 10 + 1 x; yours " << got.weights_ms << " + " << got.per_row_ms);
    CHECK_MESSAGE(close(got.spread, 0.1), "every sample 10% off the line: spread 0.1; yours " << got.spread);
    // Rule c: the spread about the line through the origin, 0.18 ms a row
    // (1.8 ms at 10 rows, 3.6 at 20).
    const StepCost origin = fit_step_cost(std::vector<StepSample>{{10, 1}, {20, 4}});
    const double want = std::sqrt((std::pow((1 - 1.8) / 1.8, 2) + std::pow((4 - 3.6) / 3.6, 2)) / 2);
    CHECK_MESSAGE(close(origin.spread, want), "rule c: the spread about the line through the origin, "
                                                  << want << "; yours " << origin.spread);
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
    const StepCost c{10, 0.5, true};            // 10 ms + 0.5 ms a row
    const StepCost noisy{10, 0.5, true, 0.05};  // the same line, the steps 5% about it
    const std::map<std::string, std::pair<int, int>> cases = {
        // what: (yours, expected)
        {"target 60 ms, [8, 512]: 10 + 100 x 0.5 = 60 fits", {budget_for_target(c, 60, 3, 8, 512), 100}},
        {"target 60.9 ms: 101 takes 60.5 ms, 102 would take 61", {budget_for_target(c, 60.9, 3, 8, 512), 101}},
        {"spread 5%, 3 spreads: 60 / 1.15 leaves 52.2 ms, 84 rows", {budget_for_target(noisy, 60, 3, 8, 512), 84}},
        {"spread 5%, 0 spreads: no margin, 100 rows", {budget_for_target(noisy, 60, 0, 8, 512), 100}},
        {"spread 5%, 3 spreads, target 14 ms: 12.2 ms leaves lo", {budget_for_target(noisy, 14, 3, 8, 512), 8}},
        {"target 1000 ms: clamped to hi 512", {budget_for_target(c, 1000, 3, 8, 512), 512}},
        {"target 12 ms: even lo 8 takes 14 ms, so lo", {budget_for_target(c, 12, 3, 8, 512), 8}},
        {"target 5 ms, below the weights alone: lo", {budget_for_target(c, 5, 3, 8, 512), 8}},
        {"cost not known: lo", {budget_for_target({}, 60, 3, 8, 512), 8}},
        {"per_row_ms 0, weights within the target: hi", {budget_for_target({10, 0, true}, 60, 3, 8, 512), 512}},
        {"per_row_ms 0, weights over the target: lo", {budget_for_target({70, 0, true}, 60, 3, 8, 512), 8}},
        {"per_row_ms 0, weights within but the margin over: lo",
         {budget_for_target({55, 0, true, 0.05}, 60, 3, 8, 512), 8}},
        {"a target far above the line: hi, no overflow",
         {budget_for_target({0, 1e-12, true}, 1e6, 3, 1, 1 << 30), 1 << 30}},
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
        StepCost c{in.uniform(0, 100), in.integer(0, 9) ? in.uniform(0, 1) : 0.0, in.integer(0, 9) > 0};
        c.spread = c.known && in.integer(0, 3) ? in.uniform(0, 0.5) : 0;
        const double target = in.uniform(0.1, 400), spreads = in.integer(0, 3) ? in.uniform(0, 4) : 0;
        const int lo = in.integer(1, 64), hi = lo + in.integer(0, 4000);
        const int got = budget_for_target(c, target, spreads, lo, hi);
        const int want = expected_budget(c, target, spreads, lo, hi);
        observe("trial " + std::to_string(trial), got);
        CHECK_MESSAGE(got == want, "cost " << c.weights_ms << " + " << c.per_row_ms << " x n, spread " << c.spread
                                           << " (known " << c.known << "), target " << target << " ms, " << spreads
                                           << " spreads, [" << lo << ", " << hi << "]: expected " << want
                                           << ", yours " << got);
    }
}

TEST_CASE("lab08.budget.bad_arguments_are_refused") {
    needs_budget();
    const StepCost c{10, 0.5, true};
    struct Bad {
        double target, spreads;
        int lo, hi;
        const char* names;
    };
    for (const Bad& b : {Bad{0, 3, 8, 512, "0"}, Bad{-3, 3, 8, 512, "-3"}, Bad{NAN, 3, 8, 512, "nan"},
                         Bad{60, -1.5, 8, 512, "-1.5"}, Bad{60, NAN, 8, 512, "nan"}, Bad{60, 3, 0, 512, "0"},
                         Bad{60, 3, -2, 512, "-2"}, Bad{60, 3, 600, 512, "600"}}) {
        INFO("target " << b.target << ", spreads " << b.spreads << ", lo " << b.lo << ", hi " << b.hi);
        CHECK_THROWS_AS(budget_for_target(c, b.target, b.spreads, b.lo, b.hi), pd::UserError);
        CHECK_THROWS_WITH(budget_for_target(c, b.target, b.spreads, b.lo, b.hi), doctest::Contains(b.names));
    }
}

namespace {

// The fake machine: a step's rows are its tokens n plus its attention's
// pairs / pairs_per_row (n tokens from cached position p: n p + n (n + 1) / 2
// pairs), rounded to a whole row, and it costs weights + rows * per_row: the
// line in rows that SloBudgetPolicy counts, exactly; a noisy machine runs
// each step that times a seeded factor, 1 + noise * (a standard normal).
struct FakeMachine {
    FakeMachine(double w, double t, double k) : weights(w), per_row(t), pairs_per_row(k) {}
    double weights, per_row, pairs_per_row, now_ms = 0;
    double noise = 0;
    std::mt19937_64 rng{0};
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
    // Runs the step; returns the time it took.
    double ran(const std::vector<pd::serve::BatchItem>& step) {
        const double took = ms(step) * (1 + noise * std::normal_distribution<double>()(rng));
        now_ms += took;
        for (const auto& b : step) computed[b.seq] += b.n;
        return took;
    }
};

int tokens_of(const std::vector<pd::serve::BatchItem>& step) {
    int n = 0;
    for (const auto& b : step) n += b.n;
    return n;
}

constexpr int kArrive = 3;  // decode-only steps before the long prompt arrives

// One round: the streams (every request but the last) decode from the start,
// the last request's long prompt arrives after kArrive steps, and the real
// Scheduler runs under the policy until every request finished.
struct Round {
    std::vector<double> step_ms;      // what each step took
    std::vector<double> one_more_ms;  // the same step with one more prompt token (0: none left), noise-free
    std::map<int, std::vector<int>> got;
    int first_token = -1;  // the step that gave the newcomer its first token
};

Round run_round(FakeMachine& m, HashEngine& engine, SloBudgetPolicy& policy, const std::vector<Request>& rs,
                int max_batch) {
    Scheduler s(engine, policy, {{max_batch, 4096, false}, 1 << 20, {}, true, std::nullopt});
    const Request& newcomer = rs.back();
    for (std::size_t i = 0; i + 1 < rs.size(); i++) s.add(rs[i]);
    Round r;
    int newcomer_seq = -1;
    for (int k = 0; k < 5000 && (k <= kArrive || !s.idle()); k++) {
        if (k == kArrive) s.add(newcomer);
        for (const auto& e : s.step()) {
            r.got[e.request].push_back(e.token);
            if (e.request == newcomer.id && r.first_token < 0) r.first_token = k;
        }
        const auto& step = engine.steps.back();
        // The newcomer's sequence: the arrival step's longest item (its first chunk; the streams decode).
        if (k == kArrive)
            newcomer_seq = std::max_element(step.begin(), step.end(), [](auto& a, auto& b) { return a.n < b.n; })->seq;
        // The same step with one more token of the prompt, while some is left.
        auto more = step;
        const auto chunk = std::find_if(more.begin(), more.end(), [&](auto& b) { return b.seq == newcomer_seq; });
        const int prompt = int(newcomer.prompt.size());
        const bool left = chunk != more.end() && m.computed[newcomer_seq] + chunk->n < prompt;
        if (left) chunk->n++;
        r.one_more_ms.push_back(left ? m.ms(more) : 0);
        r.step_ms.push_back(m.ran(step));
    }
    REQUIRE_MESSAGE(s.idle(), "some request never finished");
    return r;
}

// `streams` requests of a 1-token prompt and 300 outputs, then the newcomer.
std::vector<Request> workload(Inputs& in, int streams, int prompt) {
    std::vector<Request> rs;
    for (int i = 0; i < streams; i++) rs.push_back({i, in.tokens(1, kHashVocab), 300, {}});
    rs.push_back({streams, in.tokens(prompt, kHashVocab), 4, {}});
    return rs;
}

}  // namespace

TEST_CASE("lab08.controller.holds_the_target_with_the_largest_budget") {
    needs_fit();
    needs_budget();
    Inputs in(4);
    for (int round = 0; round < 6; round++) {
        FakeMachine m{in.uniform(5, 80), in.uniform(0.01, 1.5), in.uniform(1000, 4000)};
        const int streams = in.integer(1, 6), lo = streams + 8, prompt = in.integer(800, 3000);
        // lo fits the target even at the end of the prompt (its rows: lo
        // tokens attending to at most 3000 + lo positions, under 4 lo rows).
        const double target = m.weights + 4 * lo * m.per_row + in.uniform(0, 1000) * m.per_row;
        const SloOptions o{target, 3, lo, 4096, 32, m.pairs_per_row, 2};
        HashEngine engine;
        SloBudgetPolicy policy(o, [&] { return m.now_ms; });
        const std::vector<Request> rs = workload(in, streams, prompt);
        const Round r = run_round(m, engine, policy, rs, streams + 1);
        INFO("round " << round << ": " << m.weights << " ms + " << m.per_row << " ms a row, a row per "
                      << m.pairs_per_row << " pairs; " << streams << " streams, a prompt of " << prompt
                      << ", target " << target << " ms");
        observe("round " + std::to_string(round) + " budgets", policy.budgets);
        // Up to the prompt's first step the samples have one row count (or
        // none): lo. From then on, on a machine without noise, the line is
        // exact and its spread 0 (no margin), and each step gets the largest
        // budget whose rows the line fits in the target, or `grow` (2) times
        // the most tokens of a step in the window, whichever is smaller.
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
            const double slack = 1e-9 * target;  // the fit's sums, in another order
            over += r.step_ms[k] > target + slack;
            const bool filled = tokens_of(engine.steps[k]) == budget;
            short_of += filled && budget < cap && r.one_more_ms[k] > 0 && r.one_more_ms[k] <= target - slack;
        }
        CHECK_MESSAGE(past_cap == 0, past_cap << " steps got a budget above twice the most tokens of a step "
                                                 "in the window");
        CHECK_MESSAGE(over == 0,
                      over << " steps ran over the target: more rows than the line allows, or attention not counted");
        CHECK_MESSAGE(short_of == 0, short_of << " steps of the prompt could have taken one more token within "
                                                 "the target");
        const double worst = *std::max_element(r.step_ms.begin(), r.step_ms.end());
        observe("round " + std::to_string(round) + " slowest step", worst, {1e-9, 1e-9});
        for (const auto& q : rs)
            CHECK_MESSAGE(r.got.at(q.id) == alone(q.prompt, q.max_tokens), "request " << q.id << " got other tokens");
    }
}

TEST_CASE("lab08.controller.keeps_a_margin_on_a_noisy_machine") {
    needs_fit();
    needs_budget();
    // Every step 10% slower or faster than its line at random (a standard
    // deviation): a controller that aims the line at the target puts about
    // half of the prompt's steps over it; with 3 spreads of margin, few.
    Inputs in(5);
    int steps = 0, over = 0, at_lo = 0;
    for (int round = 0; round < 6; round++) {
        FakeMachine m{in.uniform(5, 20), in.uniform(0.05, 0.5), in.uniform(1000, 4000)};
        m.noise = 0.1, m.rng.seed(in.seed());
        const int streams = in.integer(1, 6), lo = streams + 8, prompt = in.integer(1500, 3000);
        // lo's last steps (under 4 lo rows) well within the target: 60 to 150 rows more.
        const double target = 1.5 * (m.weights + 4 * lo * m.per_row) + in.uniform(60, 150) * m.per_row;
        const SloOptions o{target, 3, lo, 4096, 32, m.pairs_per_row, 2};
        HashEngine engine;
        SloBudgetPolicy policy(o, [&] { return m.now_ms; });
        const Round r = run_round(m, engine, policy, workload(in, streams, prompt), streams + 1);
        // The prompt's steps: from its arrival to its first token.
        for (int k = kArrive; k <= r.first_token; k++) {
            steps++;
            over += r.step_ms[std::size_t(k)] > target;
            at_lo += policy.budgets[std::size_t(k)] == lo;
        }
        observe("round " + std::to_string(round) + " budgets", policy.budgets);
    }
    observe("steps over the target", over);
    INFO(steps << " steps of the prompt in 6 rounds, " << over << " over the target, " << at_lo << " at lo");
    CHECK_MESSAGE(over * 10 <= steps, "more than one step in ten over the target: is the margin, "
                                      "(1 + spreads * spread), kept below it?");
    CHECK_MESSAGE(at_lo * 2 <= steps, "most steps at lo: the margin is far larger than 3 spreads");
}

TEST_CASE("lab08.seed.other_seed_other_inputs") {
    Inputs a(1, 0), b(1, 1);
    CHECK_MESSAGE(a.uniform(0.5, 200) != b.uniform(0.5, 200), "PDLAB_TEST_SEED must change the samples");
}
