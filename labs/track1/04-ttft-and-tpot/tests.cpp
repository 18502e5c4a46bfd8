// Lab 04 tests: your latency metrics against hand-computed cases, against the
// definitions computed a second, independent way, and against the kit's own
// percentile (src/timing.cpp, numpy's default method) on random data.
//   meson test -C build --suite track1-04        (all of them)
//   build/labs/track1/04-ttft-and-tpot/lab04_tests --test-case='lab04.metrics.*'
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "check.hpp"
#include "exercise.hpp"
#include "timing.hpp"

using namespace pd::lab04;

namespace {

constexpr double kTol = 1e-9;

bool close(double a, double b, double tol = kTol) {
    return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b));
}

// A random request: submit time, then n tokens whose gaps follow an
// exponential distribution (and sometimes are exactly 0: two tokens in one
// tick of the clock).
struct RandomRequest {
    double submit = 0;
    std::vector<double> times;
};

RandomRequest random_request(std::mt19937_64& rng, int max_tokens = 40) {
    std::uniform_real_distribution<double> submit(0.0, 10'000.0);
    std::exponential_distribution<double> wait(1.0 / 300.0), gap(1.0 / 25.0);
    std::uniform_int_distribution<int> n_tokens(1, max_tokens);
    std::bernoulli_distribution zero_gap(0.05);
    RandomRequest r;
    r.submit = submit(rng);
    int n = n_tokens(rng);
    double t = r.submit + wait(rng);
    for (int k = 0; k < n; k++) {
        if (k > 0) t += zero_gap(rng) ? 0.0 : gap(rng);
        r.times.push_back(t);
    }
    return r;
}

// numpy.percentile(v, p) with the default 'linear' method, written differently
// from the usual sort-and-index: select the two order statistics around the
// rank with nth_element.
double numpy_percentile(std::vector<double> v, double p) {
    const double rank = p / 100.0 * double(v.size() - 1);
    const std::size_t lo = std::size_t(rank);
    std::nth_element(v.begin(), v.begin() + lo, v.end());
    const double a = v[lo];
    if (lo + 1 >= v.size()) return a;
    const double b = *std::min_element(v.begin() + lo + 1, v.end());
    return a + (b - a) * (rank - double(lo));
}

}  // namespace

// --- request_metrics ---------------------------------------------------------

TEST_CASE("lab04.metrics.hand_computed") {
    // Submitted at 100 ms; four tokens reach the client at 350, 380, 420, 450 ms.
    const std::vector<double> t = {350, 380, 420, 450};
    RequestMetrics m = request_metrics(100, t);
    CHECK(m.output_tokens == 4);
    CHECK_MESSAGE(m.ttft_ms == doctest::Approx(250),
                  "TTFT is the wait from SUBMIT to the FIRST token: 350 - 100 = 250 ms (queueing, "
                  "tokenisation, prefill and the first sample all hide inside it)");
    CHECK_MESSAGE(m.e2el_ms == doctest::Approx(350),
                  "E2EL is the wait from submit to the LAST token: 450 - 100 = 350 ms");
    {
        INFO("ITLs are the gaps between consecutive tokens: 380-350, 420-380, 450-420 = 30, 40, 30; "
             "there are n - 1 = 3 of them, the first token has no gap before it");
        REQUIRE(m.itls_ms.size() == 3);
        CHECK(m.itls_ms[0] == doctest::Approx(30));
        CHECK(m.itls_ms[1] == doctest::Approx(40));
        CHECK(m.itls_ms[2] == doctest::Approx(30));
    }
    INFO("TPOT = (e2el - ttft) / (n - 1) = (350 - 250) / 3 = 33.33 ms: it averages over the "
         "tokens AFTER the first (dividing by n = 4 would give 25, which mixes TTFT in)");
    REQUIRE(m.tpot_ms.has_value());
    CHECK(*m.tpot_ms == doctest::Approx(100.0 / 3.0));
}

TEST_CASE("lab04.metrics.single_token_has_no_tpot") {
    const std::vector<double> t = {120};
    RequestMetrics m = request_metrics(0, t);
    CHECK(m.output_tokens == 1);
    CHECK(m.ttft_ms == doctest::Approx(120));
    CHECK_MESSAGE(m.e2el_ms == doctest::Approx(120),
                  "with one token, the first token is also the last: e2el == ttft");
    CHECK_MESSAGE(m.itls_ms.empty(), "one token has no gap before or after it: itls_ms stays empty");
    CHECK_MESSAGE(!m.tpot_ms.has_value(),
                  "a one-token answer has no tokens after the first, so TPOT is undefined: leave "
                  "tpot_ms empty (0 would pull every TPOT average down; (e2el - ttft) / 0 is NaN)");
}

TEST_CASE("lab04.metrics.equal_timestamps_are_allowed") {
    // Two tokens can land in the same clock tick (e.g. both decoded before the
    // client read the stream): a gap of 0 is data, not an error.
    const std::vector<double> t = {10, 10, 15};
    RequestMetrics m = request_metrics(10, t);
    CHECK(m.ttft_ms == doctest::Approx(0));
    REQUIRE(m.itls_ms.size() == 2);
    CHECK(m.itls_ms[0] == doctest::Approx(0));
    CHECK(m.itls_ms[1] == doctest::Approx(5));
    REQUIRE(m.tpot_ms.has_value());
    CHECK(*m.tpot_ms == doctest::Approx(2.5));
}

TEST_CASE("lab04.metrics.bad_input_throws") {
    CHECK_THROWS_AS_MESSAGE(request_metrics(0, std::vector<double>{}), std::invalid_argument,
                            "an empty token list means the request produced nothing: there is no "
                            "first token, so throw std::invalid_argument rather than read t[0]");
    CHECK_THROWS_AS_MESSAGE(request_metrics(100, std::vector<double>{90, 120}), std::invalid_argument,
                            "a token cannot reach the client before the request was sent: that is a "
                            "clock mix-up (two different clocks, or submit and token times swapped)");
    CHECK_THROWS_AS_MESSAGE(request_metrics(0, std::vector<double>{10, 30, 20}), std::invalid_argument,
                            "timestamps going backwards mean the times were not taken in order (or "
                            "not on a monotonic clock): throw instead of reporting a negative ITL");
}

TEST_CASE("lab04.metrics.random_requests") {
    std::mt19937_64 rng(404);
    for (int i = 0; i < 300; i++) {
        RandomRequest r = random_request(rng);
        const int n = int(r.times.size());
        INFO("random request " << i << ": submit " << r.submit << " ms, " << n << " tokens, first at "
                               << r.times.front() << ", last at " << r.times.back());
        RequestMetrics m = request_metrics(r.submit, r.times);
        CHECK(m.output_tokens == n);
        CHECK(close(m.ttft_ms, r.times.front() - r.submit));
        CHECK(close(m.e2el_ms, r.times.back() - r.submit));
        REQUIRE(m.itls_ms.size() == std::size_t(n - 1));
        // The gaps add up to the time between first and last token.
        double gap_sum = std::accumulate(m.itls_ms.begin(), m.itls_ms.end(), 0.0);
        CHECK(close(gap_sum, r.times.back() - r.times.front(), 1e-7));
        for (int k = 1; k < n; k++) CHECK(close(m.itls_ms[k - 1], r.times[k] - r.times[k - 1]));
        if (n == 1) {
            CHECK_FALSE(m.tpot_ms.has_value());
        } else {
            INFO("TPOT is also the mean of the request's own ITLs: (e2el - ttft) / (n - 1) = "
                 "sum of the n - 1 gaps / (n - 1)");
            REQUIRE(m.tpot_ms.has_value());
            CHECK(close(*m.tpot_ms, gap_sum / (n - 1), 1e-7));
        }
    }
}

// --- pooled_itl --------------------------------------------------------------

TEST_CASE("lab04.itl.pooled_in_request_order") {
    std::vector<RequestMetrics> reqs = {
        request_metrics(0, std::vector<double>{5, 7, 12}),      // gaps 2, 5
        request_metrics(3, std::vector<double>{40}),            // no gaps
        request_metrics(10, std::vector<double>{20, 21, 23, 26}),  // gaps 1, 2, 3
    };
    std::vector<double> all = pooled_itl(reqs);
    INFO("pooled ITL = every gap of request 0, then request 1 (none: one token), then request 2");
    REQUIRE(all.size() == 5);
    const double want[] = {2, 5, 1, 2, 3};
    for (int i = 0; i < 5; i++) CHECK(all[i] == doctest::Approx(want[i]));
    CHECK(pooled_itl(std::span<const RequestMetrics>{}).empty());
}

TEST_CASE("lab04.itl.weights_gaps_not_requests") {
    // Request A: 2 tokens, one gap of 100 ms (TPOT 100). Request B: 11 tokens,
    // ten gaps of 10 ms (TPOT 10). Mean TPOT = 55 ms; mean ITL = 200 / 11.
    std::vector<double> a = {0, 100}, b(11);
    for (int k = 0; k < 11; k++) b[k] = 1000 + 10.0 * k;
    std::vector<RequestMetrics> reqs = {request_metrics(0, a), request_metrics(1000, b)};
    std::vector<double> all = pooled_itl(reqs);
    REQUIRE(all.size() == 11);
    double mean_itl = std::accumulate(all.begin(), all.end(), 0.0) / double(all.size());
    double mean_tpot = (*reqs[0].tpot_ms + *reqs[1].tpot_ms) / 2;
    INFO("the mean TPOT counts each REQUEST once (55 ms); the mean of pooled ITL counts each GAP "
         "once (18.2 ms), so long answers dominate it. Both are right; they answer different "
         "questions");
    CHECK(mean_tpot == doctest::Approx(55));
    CHECK(mean_itl == doctest::Approx(200.0 / 11.0));
}

TEST_CASE("lab04.itl.random_identity") {
    // mean(pooled ITL) == sum_i (n_i - 1) * tpot_i / sum_i (n_i - 1).
    std::mt19937_64 rng(7);
    std::vector<RequestMetrics> reqs;
    for (int i = 0; i < 50; i++) {
        RandomRequest r = random_request(rng);
        reqs.push_back(request_metrics(r.submit, r.times));
    }
    std::vector<double> all = pooled_itl(reqs);
    double weighted = 0, gaps = 0;
    for (const auto& m : reqs)
        if (m.tpot_ms) weighted += (m.output_tokens - 1) * *m.tpot_ms, gaps += m.output_tokens - 1;
    REQUIRE(all.size() == std::size_t(gaps));
    double mean_itl = std::accumulate(all.begin(), all.end(), 0.0) / double(all.size());
    CHECK(close(mean_itl, weighted / gaps, 1e-9));
}

// --- summarize_metric --------------------------------------------------------

TEST_CASE("lab04.percentiles.hand_computed") {
    {
        // Sorted: 1 2 3 4. p90 sits at rank 0.9 * 3 = 2.7: 3 + 0.7 * (4 - 3) = 3.7.
        std::vector<double> v = {4, 1, 3, 2};
        Summary s = summarize_metric(v);
        CHECK(s.n == 4);
        CHECK(s.mean == doctest::Approx(2.5));
        INFO("input 4, 1, 3, 2: sort it first (1, 2, 3, 4); getting 4 or 1 where you should not "
             "means the values were used in input order");
        CHECK_MESSAGE(s.median == doctest::Approx(2.5),
                      "median of an even count: halfway between the two middle values (rank 1.5 "
                      "-> 2.5); 2 or 3 means you picked one order statistic instead of interpolating");
        CHECK_MESSAGE(s.p90 == doctest::Approx(3.7),
                      "p90 at rank 0.9 * (n - 1) = 2.7 -> 3 + 0.7 * (4 - 3) = 3.7 (numpy's default); "
                      "rank 0.9 * n = 3.6 belongs to a different method");
        CHECK_MESSAGE(s.p99 == doctest::Approx(3.97), "p99 at rank 0.99 * 3 = 2.97 -> 3 + 0.97 * 1");
    }
    {
        // numpy.percentile(range(1, 11), [50, 90, 99]) = 5.5, 9.1, 9.91.
        std::vector<double> v = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
        Summary s = summarize_metric(v);
        CHECK(s.median == doctest::Approx(5.5));
        CHECK(s.p90 == doctest::Approx(9.1));
        CHECK(s.p99 == doctest::Approx(9.91));
        CHECK(s.mean == doctest::Approx(5.5));
    }
    {
        std::vector<double> v = {42};
        Summary s = summarize_metric(v);
        INFO("one value is its own mean, median and every percentile");
        CHECK(s.n == 1);
        CHECK(s.mean == doctest::Approx(42));
        CHECK(s.median == doctest::Approx(42));
        CHECK(s.p90 == doctest::Approx(42));
        CHECK(s.p99 == doctest::Approx(42));
    }
}

TEST_CASE("lab04.percentiles.tail_is_not_the_mean") {
    // 99 fast tokens and one stall: the mean and median hide it, p99 shows it.
    std::vector<double> v(100, 20.0);
    v[37] = 500.0;
    Summary s = summarize_metric(v);
    CHECK(s.median == doctest::Approx(20));
    CHECK(s.mean == doctest::Approx(24.8));
    INFO("p99 of 100 values sits at rank 98.01: between the 99th (20) and 100th (500) sorted "
         "values -> 20 + 0.01 * 480 = 24.8");
    CHECK(s.p99 == doctest::Approx(24.8));
}

TEST_CASE("lab04.percentiles.empty_is_nan") {
    Summary s = summarize_metric(std::span<const double>{});
    CHECK(s.n == 0);
    INFO("no samples (e.g. TPOT when every answer was one token) must not print as 0 ms: use NaN");
    CHECK(std::isnan(s.mean));
    CHECK(std::isnan(s.median));
    CHECK(std::isnan(s.p90));
    CHECK(std::isnan(s.p99));
}

TEST_CASE("lab04.percentiles.random_against_reference") {
    std::mt19937_64 rng(99);
    std::lognormal_distribution<double> ms(3.0, 0.8);  // latency-like: long right tail
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + int(rng() % 300);
        std::vector<double> v(n);
        for (auto& x : v) x = ms(rng);
        if (trial % 5 == 0)  // ties
            for (auto& x : v) x = std::round(x);
        Summary s = summarize_metric(v);
        pd::Stats ref = pd::summarize(v);  // the kit's own implementation
        INFO("trial " << trial << ", n = " << n);
        CHECK(s.n == n);
        CHECK(close(s.mean, ref.mean, 1e-12));
        CHECK(close(s.median, ref.median, 1e-12));
        CHECK(close(s.p90, ref.p90, 1e-12));
        CHECK(close(s.p99, ref.p99, 1e-12));
        CHECK(close(s.p90, numpy_percentile(v, 90), 1e-12));
        CHECK(close(s.p99, numpy_percentile(v, 99), 1e-12));
        // Order of the input does not matter.
        std::shuffle(v.begin(), v.end(), rng);
        Summary again = summarize_metric(v);
        CHECK(close(again.p99, s.p99, 1e-12));
        CHECK(s.median <= s.p90);
        CHECK(s.p90 <= s.p99);
    }
}

// --- e2e_latency and the worked example ---------------------------------------

TEST_CASE("lab04.worked_example.article_numbers") {
    // 2,000 input tokens, 200 output tokens, TTFT 600 ms, average TPOT 35 ms.
    double e2e = e2e_latency(600, 35, 200);
    CHECK_MESSAGE(e2e == doctest::Approx(7565),
                  "the first token at 600 ms, then 199 more (not 200: the first is already counted "
                  "in TTFT) at 35 ms each: 600 + 199 * 35 = 7565 ms, about 7.57 s; the 2,000 input "
                  "tokens are inside the TTFT and do not appear again. Got " << e2e);
    CHECK_MESSAGE(e2e_latency(600, 35, 2) == doctest::Approx(635),
                  "two tokens: the first at 600 ms, the second one TPOT later");
}

TEST_CASE("lab04.worked_example.one_token") {
    INFO("an answer of one token is over at its first token: e2e == ttft whatever tpot says");
    CHECK(e2e_latency(600, 35, 1) == doctest::Approx(600));
    CHECK(e2e_latency(600, 1e9, 1) == doctest::Approx(600));
}

TEST_CASE("lab04.worked_example.bad_input_throws") {
    CHECK_THROWS_AS(e2e_latency(600, 35, 0), std::invalid_argument);
    CHECK_THROWS_AS(e2e_latency(600, 35, -5), std::invalid_argument);
}

TEST_CASE("lab04.worked_example.matches_measured_requests") {
    // For every request, ttft + (n - 1) * tpot rebuilds its e2el exactly: the
    // formula is the definition of TPOT read backwards.
    std::mt19937_64 rng(2024);
    for (int i = 0; i < 200; i++) {
        RandomRequest r = random_request(rng);
        RequestMetrics m = request_metrics(r.submit, r.times);
        double rebuilt = e2e_latency(m.ttft_ms, m.tpot_ms.value_or(0.0), m.output_tokens);
        INFO("request " << i << " with " << m.output_tokens << " tokens");
        CHECK(close(rebuilt, m.e2el_ms, 1e-9));
    }
}
