// engine.sampler and engine.timing.
#include <algorithm>

#include "check.hpp"
#include "common.hpp"
#include "engine/sampler.hpp"
#include "base/timing.hpp"

using namespace pd;
using namespace pd::test;

TEST_CASE("engine.sampler.greedy_is_argmax") {
    auto logits = randn(500, 31);
    Sampler s = make_sampler({}, 500);
    int best = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    CHECK(sample(s, logits.data(), 500) == best);
    Sampler k1 = make_sampler({1.0f, 1, 1.0f, 3}, 500);  // top-k 1 leaves only the best
    CHECK(sample(k1, logits.data(), 500) == best);
    Sampler p0 = make_sampler({1.0f, 0, 1e-6f, 3}, 500);  // a tiny nucleus too
    CHECK(sample(p0, logits.data(), 500) == best);
}

TEST_CASE("engine.sampler.seed_reproduces") {
    auto logits = randn(300, 32);
    auto draw = [&](std::uint64_t seed) {
        Sampler s = make_sampler({0.9f, 50, 0.9f, seed}, 300);
        std::vector<int> out;
        for (int i = 0; i < 50; i++) out.push_back(sample(s, logits.data(), 300));
        return out;
    };
    CHECK(draw(5) == draw(5));
    CHECK(draw(5) != draw(6));
}

TEST_CASE("engine.sampler.respects_top_k") {
    std::vector<float> logits = {0.0f, 5.0f, 4.9f, 4.8f, -3.0f};
    Sampler s = make_sampler({5.0f, 2, 1.0f, 1}, 5);  // hot temperature, only ids 1 and 2 allowed
    for (int i = 0; i < 200; i++) {
        int t = sample(s, logits.data(), 5);
        CHECK((t == 1 || t == 2));
    }
}

TEST_CASE("engine.sampler.frequencies_follow_softmax") {
    std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
    Sampler s = make_sampler({1.0f, 0, 1.0f, 9}, 2);
    int ones = 0, n = 20000;
    for (int i = 0; i < n; i++) ones += sample(s, logits.data(), 2);
    CHECK(double(ones) / n == doctest::Approx(0.75).epsilon(0.03));
}

TEST_CASE("engine.sampler.bad_settings") {
    CHECK_THROWS_AS(make_sampler({-1.0f, 0, 1.0f, 1}, 10), UserError);
    CHECK_THROWS_AS(make_sampler({1.0f, -2, 1.0f, 1}, 10), UserError);
    CHECK_THROWS_AS(make_sampler({1.0f, 0, 1.5f, 1}, 10), UserError);
    CHECK_THROWS_AS(make_sampler({1.0f, 0, 0.0f, 1}, 10), UserError);
}

TEST_CASE("engine.timing.stats") {
    Stats s = summarize({1, 2, 3, 4, 100});
    CHECK(s.median == 3);
    CHECK(s.mean == doctest::Approx(22));
    CHECK(s.stdev == doctest::Approx(43.6177).epsilon(1e-4));  // sqrt(7610 / 4), the sample stdev
    CHECK(s.p90 == doctest::Approx(61.6));  // numpy.percentile([1,2,3,4,100], 90)
    CHECK(s.min == 1);
    CHECK(s.max == 100);
}
