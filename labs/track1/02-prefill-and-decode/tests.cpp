// Lab 02 tests: the decode loop against the engine's own generate(), watched
// through a spy engine (which decode calls happened, inside which timers), and
// the statistics against a plain computation and pd::summarize.
// Run: meson test -C build --suite track1-02
#include <algorithm>
#include <cmath>
#include <numeric>

#include "check.hpp"
#include "exercise.hpp"
#include "generate.hpp"
#include "model_source.hpp"

#include "lab_test.hpp"  // NotImplemented shown with its hint; pd::lab::needs()

using namespace pd;
using pd::lab::needs;
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

std::vector<int> prompt_of(int n, int seed) {
    std::vector<int> t(static_cast<std::size_t>(n));
    for (int i = 0; i < n; i++) t[std::size_t(i)] = (i * 29 + seed * 13 + 3) % 97;
    return t;
}

// Forwards to a real engine and records what the caller did with it. Its
// time_ms() returns made-up durations (1000, 1001, ...) so the test can tell
// whether step_ms holds what the engine's timer measured.
class SpyEngine final : public Engine {
public:
    explicit SpyEngine(std::unique_ptr<Engine> e) : e_(std::move(e)) {}
    const Config& config() const override { return e_->config(); }
    Device device() const override { return e_->device(); }
    std::string hardware() const override { return e_->hardware(); }
    const float* prefill(int slot, std::span<const int> tokens, Keep keep) override {
        return e_->prefill(slot, tokens, keep);
    }
    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        decode_calls++;
        if (timers_open == 0) decodes_outside_timer++;
        if (timers_open > 0) decodes_in_this_timer++;
        rows.push_back(int(tokens.size()));
        if (!tokens.empty()) fed.push_back(tokens[0]);
        if (!slots.empty()) slots_seen.push_back(slots[0]);
        return e_->decode(slots, tokens);
    }
    int cache_len(int slot) const override { return e_->cache_len(slot); }
    int batch() const override { return e_->batch(); }
    int max_seq() const override { return e_->max_seq(); }
    void reset(int slot) override { e_->reset(slot); }
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
    std::string timing_method() const override { return e_->timing_method(); }
    const Model& host_model() const override { return e_->host_model(); }

    int decode_calls = 0, decodes_outside_timer = 0, timers_open = 0, decodes_in_this_timer = 0;
    std::vector<int> rows, fed, slots_seen, decodes_per_timer;
    std::vector<double> returned;

private:
    std::unique_ptr<Engine> e_;
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

void check_all(const Stats& s, const std::vector<double>& v) {
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

}  // namespace

// ---------------------------------------------------------------- decode loop

TEST_CASE("lab02.decode_loop.same_tokens_as_generate") {
    auto engine = small_engine();
    for (int P : {1, 4, 9}) {
        auto prompt = prompt_of(P, P);
        const int steps = 8;
        GenerateOptions g;
        g.max_new_tokens = steps + 1;
        g.stop_at_eos = false;
        auto want = generate(*engine, prompt, g).generated_ids;  // g1 .. g9, greedy
        engine->reset(0);
        const float* logits = engine->prefill(0, prompt);
        int g1 = argmax(logits, engine->config().vocab_size);
        REQUIRE(g1 == want[0]);
        std::vector<double> ms;
        auto got = ex::decode_loop(*engine, 0, g1, steps, ms);
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
    auto prompt = prompt_of(5, 1);
    const float* logits = spy.prefill(0, prompt, Keep::last);
    int g1 = argmax(logits, spy.config().vocab_size);
    std::vector<double> ms = {-1, -1, -1};  // leftovers that must be cleared
    const int steps = 6;
    auto got = ex::decode_loop(spy, 0, g1, steps, ms);
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
    auto p0 = prompt_of(3, 7), p1 = prompt_of(6, 8);
    engine->prefill(0, p0);
    const float* logits = engine->prefill(1, p1);
    int g1 = argmax(logits, engine->config().vocab_size);
    std::vector<double> ms;
    auto got = ex::decode_loop(*engine, 1, g1, 4, ms);
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
    auto prompt = prompt_of(4, 2);
    spy.prefill(0, prompt, Keep::last);
    std::vector<double> ms = {5.0};
    auto got = ex::decode_loop(spy, 0, 1, 0, ms);
    CHECK_MESSAGE(got.empty(), "zero steps return no tokens");
    CHECK_MESSAGE(ms.empty(), "zero steps leave step_ms empty (clear it first)");
    CHECK_MESSAGE(spy.decode_calls == 0, "zero steps call engine.decode zero times");
    CHECK_MESSAGE(spy.cache_len(0) == 4, "zero steps leave the cache as it was");
    CHECK_THROWS_AS_MESSAGE(ex::decode_loop(spy, 0, 1, -2, ms), UserError,
                            "a negative number of steps must be rejected with pd::fail(...)");
}

// ---------------------------------------------------------------- statistics

TEST_CASE("lab02.stats.odd_count") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    std::vector<double> v = {5, 1, 4, 2, 3};  // unsorted on purpose
    Stats s = ex::stats_of(v);
    check_all(s, v);
    CHECK_MESSAGE(s.median == doctest::Approx(3), "the median of 1..5 is 3: sort the samples first");
    CHECK_MESSAGE(s.p90 == doctest::Approx(4.6), "p90 of 1..5: rank 0.9*4 = 3.6, so 4 + 0.6*(5-4) = 4.6");
}

TEST_CASE("lab02.stats.even_count") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    std::vector<double> v = {4, 1, 3, 2};
    Stats s = ex::stats_of(v);
    check_all(s, v);
    CHECK_MESSAGE(s.median == doctest::Approx(2.5), fmt::format(
        "the median of 1, 2, 3, 4 is 2.5 (the mean of the two middle values), got {}", s.median));
    CHECK_MESSAGE(s.stdev == doctest::Approx(1.2909944487), fmt::format(
        "the sample stdev of 1, 2, 3, 4 is 1.291 (divide by n-1 = 3); got {}{}", s.stdev,
        std::fabs(s.stdev - 1.1180339887) < 1e-6 ? ", which is the population stdev (divided by n)" : ""));
}

TEST_CASE("lab02.stats.single_sample") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    std::vector<double> v = {7.25};
    Stats s = ex::stats_of(v);
    CHECK_MESSAGE(s.n == 1, "n of one sample is 1");
    CHECK_MESSAGE(s.stdev == 0.0, fmt::format(
        "the stdev of a single sample is defined as 0 here (n - 1 = 0 would divide by zero), got {}", s.stdev));
    for (double x : {s.mean, s.median, s.min, s.max, s.p90, s.p99})
        CHECK_MESSAGE(x == 7.25, "with one sample, mean, median, min, max and every percentile are that sample");
}

TEST_CASE("lab02.stats.random_samples") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    std::mt19937_64 rng(99);
    std::lognormal_distribution<double> d(1.0, 0.4);  // timings are skewed to the right
    for (int n : {2, 3, 10, 11, 64, 101}) {
        std::vector<double> v(static_cast<std::size_t>(n));
        for (double& x : v) x = d(rng);
        Stats s = ex::stats_of(v);
        check_all(s, v);
        Stats e = summarize(v);  // the engine's own implementation
        CHECK_MESSAGE(s.median == doctest::Approx(e.median), "the median differs from pd::summarize");
        CHECK_MESSAGE(s.p90 == doctest::Approx(e.p90), "p90 differs from pd::summarize");
    }
}

TEST_CASE("lab02.stats.empty_is_rejected") {
    needs([] { ex::stats_of(std::vector<double>{1.0}); });
    std::vector<double> none;
    CHECK_THROWS_AS_MESSAGE(ex::stats_of(none), UserError,
                            "no samples: fail with pd::fail(...) rather than return zeros or divide by zero");
}
