// Lab 02 tests: the harness against the engine's own generate(), watched
// through a spy engine (which passes ran, inside which timers, after which
// reset), and the statistics against a plain computation written out here.
// Every prompt, length, recipe and sample derives from PDLAB_TEST_SEED
// (pd::lab::Inputs): a grader's hidden seed gives inputs nobody has seen.
// Run: meson test -C build --suite track1-02
#include <algorithm>
#include <cmath>
#include <numeric>

#include "check.hpp"
#include "exercise.hpp"
#include "forwarding_engine.hpp"  // SpyEngine watches the real engine through it
#include "engine/generate.hpp"
#include "load/model_source.hpp"

#include "lab_test.hpp"  // NotImplemented shown with its hint; pd::lab::needs()

using namespace pd;
using pd::lab::needs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using namespace pd::test;
namespace ex = pd::lab02;

namespace {

const char* kModel = "synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=2,vocab=97,ctx=64";

std::shared_ptr<const Model> small_model() {
    static LoadedModel lm = load_model(kModel, Precision::f32, false);
    return lm.model;
}

std::unique_ptr<Engine> small_engine(int batch = 1) {
    EngineOptions eo;
    eo.batch = batch;
    return make_engine(small_model(), eo);
}

constexpr int kVocab = 97;

// A prompt of n token ids drawn from stream `stream` of PDLAB_TEST_SEED.
std::vector<int> prompt_of(int n, std::uint64_t stream) { return pd::lab::Inputs(stream).tokens(n, kVocab); }

// The engine's greedy output for `prompt`: g1 (from prefill) and `steps` more.
std::vector<int> greedy_reference(Engine& engine, const std::vector<int>& prompt, int steps) {
    GenerateOptions g;
    g.max_new_tokens = steps + 1;
    g.stop_at_eos = false;
    return generate(engine, prompt, g).generated_ids;
}

// Forwards to a real engine and records what the caller did with it. Its
// time_ms() returns made-up durations (1000, 1001, ...) so the test can tell
// whether step_ms holds what the engine's timer measured.
class SpyEngine final : public pd::lab::ForwardingEngine {
public:
    using ForwardingEngine::ForwardingEngine;
    const float* prefill(int slot, std::span<const int> tokens, Keep keep) override {
        prefill_calls++;
        if (timers_open == 0) prefills_outside_timer++;
        if (cache_len(slot) != 0) prefills_onto_old_cache++;
        prefill_timer_index.push_back(int(returned.size()));  // the timer about to close wraps this prefill
        return ForwardingEngine::prefill(slot, tokens, keep);
    }
    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        decode_calls++;
        if (timers_open == 0) decodes_outside_timer++;
        if (timers_open > 0) decodes_in_this_timer++;
        rows.push_back(int(tokens.size()));
        if (!tokens.empty()) fed.push_back(tokens[0]);
        if (!slots.empty()) slots_seen.push_back(slots[0]);
        return ForwardingEngine::decode(slots, tokens);
    }
    double time_ms(const std::function<void()>& work) override {
        timers_open++;
        decodes_in_this_timer = 0;
        work();
        timers_open--;
        decodes_per_timer.push_back(decodes_in_this_timer);
        double v = 1000.0 + double(returned.size());
        returned.push_back(v);
        return v;
    }

    int decode_calls = 0, decodes_outside_timer = 0, timers_open = 0, decodes_in_this_timer = 0;
    int prefill_calls = 0, prefills_outside_timer = 0, prefills_onto_old_cache = 0;
    std::vector<int> rows, fed, slots_seen, decodes_per_timer, prefill_timer_index;
    std::vector<double> returned;
};

// Plain statistics, written out independently of the exercise and of pd::summarize.
struct Ref {
    double mean, median, stdev, p90, p99, min, max;
};
double ref_percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    double r = p / 100.0 * double(v.size() - 1);
    double lo = std::floor(r);
    double a = v[std::size_t(lo)], b = v[std::min(v.size() - 1, std::size_t(lo) + 1)];
    return a + (b - a) * (r - lo);
}
Ref ref_stats(const std::vector<double>& v) {
    Ref r{};
    double n = double(v.size());
    r.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double ss = 0;
    for (double x : v) ss += (x - r.mean) * (x - r.mean);
    r.stdev = v.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
    r.median = ref_percentile(v, 50), r.p90 = ref_percentile(v, 90), r.p99 = ref_percentile(v, 99);
    r.min = *std::min_element(v.begin(), v.end());
    r.max = *std::max_element(v.begin(), v.end());
    return r;
}

void check_stat(double got, double want, const char* name, const std::vector<double>& v, const char* lesson) {
    CHECK_MESSAGE(std::fabs(got - want) <= 1e-9 + 1e-9 * std::fabs(want), fmt::format(
        "{} of [{}] is {}, got {}: {}", name, fmt::join(v, ", "), want, got, lesson));
}

// Every field of `s`, for the grader: two correct summaries agree to rounding.
void observe_stats(const std::string& what, const Stats& s) {
    observe(what, std::vector<double>{double(s.n), s.mean, s.median, s.stdev, s.min, s.max, s.p90, s.p99},
            {1e-9, 1e-9});
}

void check_all(const Stats& s, const std::vector<double>& v) {
    observe_stats(fmt::format("stats of {} samples", v.size()), s);
    Ref r = ref_stats(v);
    CHECK_MESSAGE(s.n == int(v.size()), fmt::format("n should be the number of samples, {}, got {}", v.size(), s.n));
    check_stat(s.mean, r.mean, "mean", v, "sum / n");
    check_stat(s.median, r.median, "median", v,
               "sort first; for an even count take the mean of the two middle values");
    check_stat(s.stdev, r.stdev, "sample stdev", v,
               "divide the sum of squared deviations by n - 1 (sample), not n (population); 0 for one sample");
    check_stat(s.min, r.min, "min", v, "the smallest sample");
    check_stat(s.max, r.max, "max", v, "the largest sample");
    check_stat(s.p90, r.p90, "p90", v,
               "rank r = 0.9 * (n - 1) in the sorted samples, interpolated between s[floor r] and s[ceil r]");
    check_stat(s.p99, r.p99, "p99", v, "rank r = 0.99 * (n - 1), interpolated like p90");
}

// n timing-like samples: skewed to the right, as step times are.
std::vector<double> timings(pd::lab::Inputs& in, int n) {
    std::vector<double> v;
    for (int i = 0; i < n; i++) v.push_back(std::exp(1.0 + 0.4 * double(in.normals(1)[0])));
    return v;
}

// A measurement with made-up times: `runs` kept runs of `steps` steps each.
ex::Measurement fake_measurement(pd::lab::Inputs& in, int runs, int steps) {
    ex::Measurement m;
    for (int r = 0; r < runs; r++) {
        ex::RunTimes run;
        run.prefill_ms = timings(in, 1)[0];
        run.step_ms = timings(in, steps);
        m.runs.push_back(run);
    }
    return m;
}

// A seeded recipe small enough for a test: 0-3 warm-ups, 1-4 repeats, 1-5 steps.
ex::Recipe small_recipe(pd::lab::Inputs& in) {
    ex::Recipe r;
    r.warmup = in.integer(0, 3);
    r.repeats = in.integer(1, 4);
    r.steps = in.integer(1, 5);
    return r;
}

}  // namespace

// ---------------------------------------------------------------- decode loop

TEST_CASE("lab02.decode_loop.same_tokens_as_generate") {
    auto engine = small_engine();
    pd::lab::Inputs in(201);
    for (int P : {1, in.integer(2, 6), in.integer(7, 20)}) {
        auto prompt = prompt_of(P, 202 + std::uint64_t(P));
        const int steps = in.integer(4, 12);
        auto want = greedy_reference(*engine, prompt, steps);  // g1 .. g(steps+1), greedy
        engine->reset(0);
        const float* logits = engine->prefill(0, prompt);
        int g1 = argmax(logits, engine->config().vocab_size);
        REQUIRE(g1 == want[0]);
        std::vector<double> ms;
        auto got = ex::decode_loop(*engine, 0, g1, steps, ms);
        observe(fmt::format("decode_loop tokens, P={}", P), got);
        observe(fmt::format("cache length and step times kept, P={}", P),
                std::vector<int>{engine->cache_len(0), int(ms.size())});
        std::vector<int> expect(want.begin() + 1, want.end());
        CHECK_MESSAGE(got == expect, fmt::format(
            "P={}: the decode loop chose [{}], but greedy generation gives [{}] after g1={}. Return the {} tokens "
            "the decode steps chose (not g1 itself), each the argmax of the logits of the step before",
            P, fmt::join(got, ", "), fmt::join(expect, ", "), g1, steps));
        CHECK_MESSAGE(engine->cache_len(0) == P + steps, fmt::format(
            "after prefill of P={} and {} decode steps the cache should hold P + steps = {} positions, it holds {}: "
            "each decode step appends exactly one token's K/V", P, steps, P + steps, engine->cache_len(0)));
        CHECK_MESSAGE(ms.size() == std::size_t(steps), fmt::format(
            "step_ms should hold one time per decode step ({}), it holds {}", steps, ms.size()));
    }
}

TEST_CASE("lab02.decode_loop.one_timed_decode_per_step") {
    SpyEngine spy(small_engine());
    pd::lab::Inputs in(203);
    auto prompt = prompt_of(in.integer(1, 12), 204);
    const float* logits = spy.prefill(0, prompt, Keep::last);
    int g1 = argmax(logits, spy.config().vocab_size);
    std::vector<double> ms = {-1, -1, -1};  // leftovers that must be cleared
    const int steps = in.integer(3, 10);
    auto got = ex::decode_loop(spy, 0, g1, steps, ms);
    observe("decode_loop tokens", got);
    observe("step_ms (the spy's timer values)", ms);
    observe("tokens fed to decode", spy.fed);
    REQUIRE(got.size() == std::size_t(steps));
    CHECK_MESSAGE(spy.decode_calls == steps, fmt::format(
        "{} decode steps should call engine.decode exactly {} times, it was called {} times", steps, steps,
        spy.decode_calls));
    for (std::size_t i = 0; i < spy.rows.size(); i++)
        CHECK_MESSAGE(spy.rows[i] == 1, fmt::format(
            "decode call {} fed {} tokens: decode takes exactly ONE new token per sequence", i, spy.rows[i]));
    CHECK_MESSAGE(spy.decodes_outside_timer == 0, fmt::format(
        "{} decode calls ran outside engine.time_ms(...): time each decode call with the engine's timer "
        "(on a GPU it records events and synchronises; a host clock around an asynchronous launch "
        "would measure almost nothing)", spy.decodes_outside_timer));
    for (std::size_t i = 0; i < spy.decodes_per_timer.size(); i++)
        CHECK_MESSAGE(spy.decodes_per_timer[i] == 1, fmt::format(
            "timer {} wrapped {} decode calls: wrap exactly one decode per engine.time_ms so that each "
            "step_ms entry is the time of one step", i, spy.decodes_per_timer[i]));
    CHECK_MESSAGE(ms == spy.returned, fmt::format(
        "step_ms is [{}] but engine.time_ms returned [{}]: store what engine.time_ms returns, one value "
        "per step, after clearing step_ms", fmt::join(ms, ", "), fmt::join(spy.returned, ", ")));
    REQUIRE(spy.fed.size() == std::size_t(steps));
    CHECK_MESSAGE(spy.fed[0] == g1, fmt::format(
        "the first decode step must feed first_token ({}), the token prefill chose; it fed {}", g1, spy.fed[0]));
    for (int i = 1; i < steps; i++)
        CHECK_MESSAGE(spy.fed[std::size_t(i)] == got[std::size_t(i - 1)], fmt::format(
            "decode step {} fed token {}, but the step before chose {}: each step feeds the token the "
            "previous step chose (decode is sequential: step i+1 needs step i's output)",
            i + 1, spy.fed[std::size_t(i)], got[std::size_t(i - 1)]));
}

TEST_CASE("lab02.decode_loop.uses_its_slot_only") {
    auto engine = small_engine(2);
    auto p0 = prompt_of(3, 205), p1 = prompt_of(6, 206);
    engine->prefill(0, p0);
    const float* logits = engine->prefill(1, p1);
    int g1 = argmax(logits, engine->config().vocab_size);
    std::vector<double> ms;
    auto got = ex::decode_loop(*engine, 1, g1, 4, ms);
    observe("decode_loop tokens in slot 1", got);
    observe("cache lengths of slots 0 and 1", std::vector<int>{engine->cache_len(0), engine->cache_len(1)});
    CHECK_MESSAGE(engine->cache_len(0) == 3, fmt::format(
        "decode_loop on slot 1 changed slot 0's cache from 3 to {} positions: pass `slot` to engine.decode",
        engine->cache_len(0)));
    CHECK_MESSAGE(engine->cache_len(1) == 10, fmt::format(
        "slot 1 should hold 6 prompt + 4 decoded = 10 positions, it holds {}", engine->cache_len(1)));
    auto solo = small_engine(1);
    GenerateOptions g;
    g.max_new_tokens = 5;
    g.stop_at_eos = false;
    auto want = generate(*solo, p1, g).generated_ids;
    CHECK_MESSAGE(got == std::vector<int>(want.begin() + 1, want.end()),
                  "the tokens decoded in slot 1 differ from generating the same prompt alone");
}

TEST_CASE("lab02.decode_loop.zero_and_negative_steps") {
    SpyEngine spy(small_engine());
    auto prompt = prompt_of(4, 207);
    spy.prefill(0, prompt, Keep::last);
    std::vector<double> ms = {5.0};
    auto got = ex::decode_loop(spy, 0, 1, 0, ms);
    observe("zero steps: tokens, step times, decode calls, cache length",
            std::vector<int>{int(got.size()), int(ms.size()), spy.decode_calls, spy.cache_len(0)});
    CHECK_MESSAGE(got.empty(), "zero steps return no tokens");
    CHECK_MESSAGE(ms.empty(), "zero steps leave step_ms empty (clear it first)");
    CHECK_MESSAGE(spy.decode_calls == 0, "zero steps call engine.decode zero times");
    CHECK_MESSAGE(spy.cache_len(0) == 4, "zero steps leave the cache as it was");
    CHECK_THROWS_AS_MESSAGE(ex::decode_loop(spy, 0, 1, -2, ms), UserError,
                            "a negative number of steps must be rejected with pd::fail(...)");
}

// ---------------------------------------------------------------- one run and the recipe

TEST_CASE("lab02.harness.one_run_times_prefill_and_each_step") {
    SpyEngine spy(small_engine());
    pd::lab::Inputs in(209);
    auto prompt = prompt_of(in.integer(1, 16), 210);
    const int steps = in.integer(1, 8);
    ex::RunTimes run = ex::time_one_run(spy, 0, prompt, steps);
    observe("prefill_ms (the spy's timer value)", run.prefill_ms);
    observe("step_ms (the spy's timer values)", run.step_ms);
    observe("tokens of the run", run.tokens);
    CHECK_MESSAGE(spy.prefill_calls == 1, fmt::format(
        "one run makes exactly one prefill pass (all P = {} prompt tokens at once), it made {}", prompt.size(),
        spy.prefill_calls));
    CHECK_MESSAGE(spy.prefills_outside_timer == 0,
                  "the prefill ran outside engine.time_ms(...): time it with the engine's timer, which on a GPU "
                  "waits for the work to finish");
    REQUIRE(spy.returned.size() == std::size_t(1 + steps));
    CHECK_MESSAGE(run.prefill_ms == spy.returned[0], fmt::format(
        "prefill_ms is {} but the engine's timer around prefill returned {}: store what engine.time_ms returns",
        run.prefill_ms, spy.returned[0]));
    CHECK_MESSAGE(run.step_ms == std::vector<double>(spy.returned.begin() + 1, spy.returned.end()), fmt::format(
        "step_ms is [{}]; the engine's timers after prefill returned [{}]: the decode steps' own times, in order",
        fmt::join(run.step_ms, ", "), fmt::join(spy.returned.begin() + 1, spy.returned.end(), ", ")));
    auto engine = small_engine();
    auto want = greedy_reference(*engine, prompt, steps);
    CHECK_MESSAGE(run.tokens == want, fmt::format(
        "tokens are [{}], greedy generation gives [{}]: g1 (from prefill's logits) first, then one per step",
        fmt::join(run.tokens, ", "), fmt::join(want, ", ")));
}

TEST_CASE("lab02.harness.a_run_starts_from_an_empty_cache") {
    SpyEngine spy(small_engine());
    pd::lab::Inputs in(211);
    auto prompt = prompt_of(in.integer(1, 10), 212);
    const int steps = in.integer(1, 6);
    spy.prefill(0, prompt_of(in.integer(1, 10), 213), Keep::last);  // an earlier run's sequence is still there
    ex::time_one_run(spy, 0, prompt, steps);
    observe("prefills onto an old cache, cache length", std::vector<int>{spy.prefills_onto_old_cache, spy.cache_len(0)});
    CHECK_MESSAGE(spy.prefills_onto_old_cache == 0, fmt::format(
        "your run's prefill went onto a cache that already held positions: engine.reset(slot) first, or the "
        "second run extends the first one's sequence (a longer cache, other tokens, other times)"));
    CHECK_MESSAGE(spy.cache_len(0) == int(prompt.size()) + steps, fmt::format(
        "after a run of P = {} and {} steps the cache holds P + steps = {} positions, it holds {}", prompt.size(),
        steps, int(prompt.size()) + steps, spy.cache_len(0)));
}

TEST_CASE("lab02.harness.warmups_are_run_and_thrown_away") {
    SpyEngine spy(small_engine());
    pd::lab::Inputs in(214);
    auto prompt = prompt_of(in.integer(1, 8), 215);
    const ex::Recipe r = small_recipe(in);
    ex::Measurement m = ex::measure(spy, 0, prompt, r);
    // Which prefill pass each kept run's prefill_ms came from (-1: none), not the
    // spy's timer values themselves: the test allows timers around more than prefill and steps.
    std::vector<int> kept_pass;
    for (const auto& run : m.runs) {
        int pass = -1;
        for (std::size_t j = 0; j < spy.prefill_timer_index.size(); j++) {
            const auto timer = std::size_t(spy.prefill_timer_index[j]);
            if (timer < spy.returned.size() && spy.returned[timer] == run.prefill_ms) pass = int(j);
        }
        kept_pass.push_back(pass);
    }
    observe("the prefill pass each kept run timed", kept_pass);
    observe("prefill passes", spy.prefill_calls);
    CHECK_MESSAGE(spy.prefill_calls == r.warmup + r.repeats, fmt::format(
        "{} warm-up + {} measured runs make {} prefill passes, you made {}: warm-ups really run (they pay the "
        "one-time costs), they are just not kept", r.warmup, r.repeats, r.warmup + r.repeats, spy.prefill_calls));
    REQUIRE_MESSAGE(m.runs.size() == std::size_t(r.repeats), fmt::format(
        "Measurement.runs holds {} runs; it should hold the {} measured runs only", m.runs.size(), r.repeats));
    for (int i = 0; i < r.repeats && spy.prefill_timer_index.size() == std::size_t(r.warmup + r.repeats); i++) {
        const double want = spy.returned[std::size_t(spy.prefill_timer_index[std::size_t(r.warmup + i)])];
        CHECK_MESSAGE(m.runs[std::size_t(i)].prefill_ms == want, fmt::format(
            "kept run {} has prefill_ms {}, but run {} of {} (after {} warm-ups) measured {}: keep the LAST "
            "{} runs, in order", i, m.runs[std::size_t(i)].prefill_ms, r.warmup + i + 1, r.warmup + r.repeats,
            r.warmup, want, r.repeats));
    }
    CHECK_MESSAGE(m.same_tokens, "every run of the same prompt is greedy, so the tokens are the same each time");
}

TEST_CASE("lab02.harness.bad_recipes_are_rejected") {
    auto engine = small_engine();
    pd::lab::Inputs in(216);
    auto prompt = prompt_of(in.integer(1, 8), 217);
    ex::Recipe r = small_recipe(in);
    r.repeats = 0;
    CHECK_THROWS_AS_MESSAGE(ex::measure(*engine, 0, prompt, r), UserError, "zero measured runs: nothing to report");
    r = small_recipe(in);
    r.warmup = -in.integer(1, 3);
    CHECK_THROWS_AS_MESSAGE(ex::measure(*engine, 0, prompt, r), UserError, "a negative number of warm-ups");
    CHECK_THROWS_AS_MESSAGE(ex::time_one_run(*engine, 0, std::vector<int>{}, 2), UserError,
                            "an empty prompt has nothing to prefill");
}

// ---------------------------------------------------------------- the per-step series

TEST_CASE("lab02.series.one_stats_per_step_over_the_runs") {
    pd::lab::Inputs in(218);
    const int runs = in.integer(1, 7), steps = in.integer(1, 12);
    ex::Measurement m = fake_measurement(in, runs, steps);
    auto series = ex::per_step_series(m);
    REQUIRE_MESSAGE(series.size() == std::size_t(steps), fmt::format(
        "{} runs of {} steps give a series of {} Stats (one per step index), got {}", runs, steps, steps,
        series.size()));
    for (int i = 0; i < steps; i++) {
        std::vector<double> column;  // step i's time in every run
        for (const auto& run : m.runs) column.push_back(run.step_ms[std::size_t(i)]);
        INFO(fmt::format("step {} (index {}): summarise step_ms[{}] of every run, not the steps of one run", i + 1,
                         i, i));
        check_all(series[std::size_t(i)], column);
    }
}

TEST_CASE("lab02.series.runs_that_disagree_are_rejected") {
    pd::lab::Inputs in(219);
    ex::Measurement m = fake_measurement(in, in.integer(2, 5), in.integer(2, 6));
    m.runs.back().step_ms.pop_back();
    CHECK_THROWS_AS_MESSAGE(ex::per_step_series(m), UserError,
                            "runs with different step counts have no common step index: pd::fail(...)");
    CHECK_THROWS_AS_MESSAGE(ex::per_step_series(ex::Measurement{}), UserError, "no runs: nothing to summarise");
}

// ---------------------------------------------------------------- statistics

TEST_CASE("lab02.stats.odd_count") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    pd::lab::Inputs in(220);
    const double a = in.uniform(0.5, 4.0), b = in.uniform(0.0, 10.0);  // samples a*x + b for x = 5, 1, 4, 2, 3
    std::vector<double> v;
    for (double x : {5, 1, 4, 2, 3}) v.push_back(a * x + b);  // unsorted on purpose
    Stats s = ex::stats_of(v);
    check_all(s, v);
    CHECK_MESSAGE(s.median == doctest::Approx(3 * a + b), "the median of five samples is the third smallest: sort first");
    CHECK_MESSAGE(s.p90 == doctest::Approx(4.6 * a + b),
                  "p90 of five sorted samples s0..s4: rank 0.9*4 = 3.6, so s3 + 0.6*(s4 - s3)");
}

TEST_CASE("lab02.stats.even_count") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    pd::lab::Inputs in(221);
    const double a = in.uniform(0.5, 4.0), b = in.uniform(0.0, 10.0);  // samples a*x + b for x = 4, 1, 3, 2
    std::vector<double> v;
    for (double x : {4, 1, 3, 2}) v.push_back(a * x + b);
    Stats s = ex::stats_of(v);
    check_all(s, v);
    CHECK_MESSAGE(s.median == doctest::Approx(2.5 * a + b), fmt::format(
        "the median of [{}] is {} (the mean of the two middle values), got {}", fmt::join(v, ", "), 2.5 * a + b,
        s.median));
    CHECK_MESSAGE(s.stdev == doctest::Approx(1.2909944487 * a), fmt::format(
        "the sample stdev of [{}] is {} (divide by n-1 = 3); got {}{}", fmt::join(v, ", "), 1.2909944487 * a,
        s.stdev, std::fabs(s.stdev - 1.1180339887 * a) < 1e-6 ? ", which is the population stdev (divided by n)" : ""));
}

TEST_CASE("lab02.stats.single_sample") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    const std::vector<double> v = {pd::lab::Inputs(222).uniform(0.1, 100.0)};
    Stats s = ex::stats_of(v);
    observe_stats("stats of one sample", s);
    CHECK_MESSAGE(s.n == 1, "n of one sample is 1");
    CHECK_MESSAGE(s.stdev == 0.0, fmt::format(
        "the stdev of a single sample is defined as 0 here (n - 1 = 0 would divide by zero), got {}", s.stdev));
    for (double x : {s.mean, s.median, s.min, s.max, s.p90, s.p99})
        CHECK_MESSAGE(x == v[0], "with one sample, mean, median, min, max and every percentile are that sample");
}

TEST_CASE("lab02.stats.random_samples") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    pd::lab::Inputs in(208);
    for (int n : {2, 3, in.integer(4, 20), in.integer(21, 200)}) {
        auto v = timings(in, n);
        check_all(ex::stats_of(v), v);
    }
}

TEST_CASE("lab02.stats.another_seed_gives_other_inputs") {
    // What a grader relies on: PDLAB_TEST_SEED reaches the inputs, so answers
    // copied from one seed's run do not pass under another.
    pd::lab::Inputs a(208, 1), b(208, 2), a_again(208, 1);
    const auto va = timings(a, 8);
    CHECK_MESSAGE(va != timings(b, 8), "PDLAB_TEST_SEED 1 and 2 drew the same samples");
    CHECK_MESSAGE(va == timings(a_again, 8), "the same PDLAB_TEST_SEED must draw the same samples");
}

TEST_CASE("lab02.stats.empty_is_rejected") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    std::vector<double> none;
    CHECK_THROWS_AS_MESSAGE(ex::stats_of(none), UserError,
                            "no samples: fail with pd::fail(...) rather than return zeros or divide by zero");
}
