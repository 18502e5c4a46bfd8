// Lab 04 tests: your first-come-first-served clock against a second,
// independent simulation of the same queue, your latency metrics against
// hand-computed cases and the definitions computed another way, and your
// goodput against a hand-worked run and a second count on random runs. Every input is
// drawn from PDLAB_TEST_SEED (check.hpp's seed_for): sizes, arrival traces,
// service times and token timestamps; the hand-computed cases are shifted by a
// seeded offset, since only differences of times matter.
//   meson test -C build --suite track1-04        (all of them)
//   build/labs/track1/04-ttft-and-tpot/lab04_tests --test-case='lab04.fcfs.*'
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "arrivals.hpp"
#include "check.hpp"
#include "exercise.hpp"
#include "lab_test.hpp"

using namespace pd::lab04;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using pd::test::seed_for;

namespace {

constexpr double kTol = 1e-9;

bool close(double a, double b, double tol = kTol) {
    return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b));
}

// A clock reading somewhere in the first 10 s, fixed by the seed.
double seeded_offset() {
    std::mt19937_64 rng(seed_for(11));
    return std::uniform_real_distribution<double>(0.0, 10'000.0)(rng);
}

// For the grader: two correct clocks or metrics agree to rounding (kTol on both sides).
constexpr pd::lab::Tolerance kObserved{2 * kTol, 2 * kTol};

// Each request's arrival, start and queue time, then its token times; with
// `last_token_only`, only the last token's time (a compact record of big workloads).
void observe_schedule(const std::string& what, const std::vector<Scheduled>& s, bool last_token_only = false) {
    std::vector<double> flat;
    for (const auto& r : s) {
        flat.insert(flat.end(), {r.arrival_ms, r.start_ms, r.queue_ms});
        if (last_token_only) flat.push_back(r.token_times_ms.empty() ? -1.0 : r.token_times_ms.back());
        else flat.insert(flat.end(), r.token_times_ms.begin(), r.token_times_ms.end());
    }
    observe(what, flat, kObserved);
}

// n, TTFT, TPOT (null when there is none), E2EL, then the ITLs.
void observe_metrics(const std::string& what, const RequestMetrics& m) {
    observe(what, std::vector<double>{double(m.output_tokens), m.ttft_ms,
                                      m.tpot_ms.value_or(std::numeric_limits<double>::quiet_NaN()), m.e2el_ms},
            kObserved);
    observe(what + ": ITLs", m.itls_ms, kObserved);
}

std::vector<double> shifted(std::vector<double> v, double by) {
    for (double& x : v) x += by;
    return v;
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

// A random workload for the queue: R requests with Poisson arrivals listed in
// a shuffled order (sometimes two at the same instant), each with a prefill
// and n - 1 decode steps.
struct Workload {
    std::vector<double> arrival;
    std::vector<ServiceTrace> service;
};

Workload random_workload(std::uint64_t seed) {
    std::mt19937_64 rng(seed_for(seed));
    const int R = std::uniform_int_distribution<int>(1, 40)(rng);
    const double mean_gap = std::uniform_real_distribution<double>(5.0, 400.0)(rng);
    std::exponential_distribution<double> gap(1.0 / mean_gap), first(1.0 / 80.0), step(1.0 / 12.0);
    std::bernoulli_distribution same_instant(0.1);
    Workload w;
    double t = std::uniform_real_distribution<double>(0.0, 1000.0)(rng);
    for (int i = 0; i < R; i++) {
        if (i > 0 && !same_instant(rng)) t += gap(rng);
        w.arrival.push_back(t);
        ServiceTrace s{first(rng), {}};
        const int n = std::uniform_int_distribution<int>(1, 24)(rng);
        for (int k = 1; k < n; k++) s.step_ms.push_back(step(rng));
        w.service.push_back(s);
    }
    std::vector<std::size_t> perm(static_cast<std::size_t>(R));
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    Workload shuffled;
    for (std::size_t i : perm) shuffled.arrival.push_back(w.arrival[i]), shuffled.service.push_back(w.service[i]);
    return shuffled;
}

// The queue simulated a second way: at every turn, scan all requests not yet
// served for the earliest arrival (lowest index on a tie), O(R^2), no sorting.
std::vector<Scheduled> reference_fcfs(const Workload& w) {
    const std::size_t R = w.arrival.size();
    std::vector<Scheduled> out(R);
    std::vector<bool> served(R, false);
    double clock = 0;
    for (std::size_t turn = 0; turn < R; turn++) {
        std::size_t next = R;
        for (std::size_t i = 0; i < R; i++)
            if (!served[i] && (next == R || w.arrival[i] < w.arrival[next])) next = i;
        served[next] = true;
        Scheduled& s = out[next];
        s.arrival_ms = w.arrival[next];
        clock = std::max(clock, s.arrival_ms);  // an idle server waits for the next arrival
        s.start_ms = clock;
        s.queue_ms = s.start_ms - s.arrival_ms;
        clock += w.service[next].first_token_ms;
        s.token_times_ms.push_back(clock);
        for (double d : w.service[next].step_ms) s.token_times_ms.push_back(clock += d);
    }
    return out;
}

}  // namespace

// --- schedule_fcfs -----------------------------------------------------------

TEST_CASE("lab04.fcfs.hand_computed") {
    // Three requests, each 10 ms to its first token and then steps of 2 and 3 ms
    // (15 ms of service). They arrive at 0, 5 and 100 ms (plus a seeded offset).
    const double base = seeded_offset();
    const std::vector<double> arrive = shifted({0, 5, 100}, base);
    const ServiceTrace svc{10, {2, 3}};
    const std::vector<ServiceTrace> services = {svc, svc, svc};
    std::vector<Scheduled> s = schedule_fcfs(arrive, services);
    observe_schedule("schedule", s);
    REQUIRE(s.size() == 3);
    CHECK_MESSAGE((close(s[0].start_ms, base) && close(s[0].queue_ms, 0)),
                  "request 0 finds the server idle: it starts when it arrives and waits 0 ms");
    REQUIRE(s[0].token_times_ms.size() == 3);
    CHECK_MESSAGE((close(s[0].token_times_ms[0] - base, 10) && close(s[0].token_times_ms[2] - base, 15)),
                  "token times are start + first_token_ms, then one step_ms after another: 10, 12, 15");
    CHECK_MESSAGE((close(s[1].start_ms - base, 15) && close(s[1].queue_ms, 10)),
                  "request 1 arrives at 5 ms while request 0 is served until 15 ms: it waits 10 ms. "
                  "This wait is inside its TTFT although the model did no work for it");
    CHECK_MESSAGE(close(s[1].token_times_ms.back() - base, 30), "request 1 ends at 15 + 15 = 30 ms");
    CHECK_MESSAGE((close(s[2].start_ms - base, 100) && close(s[2].queue_ms, 0)),
                  "request 2 arrives at 100 ms to an idle server (free since 30 ms): an idle server "
                  "does not bank time, start = max(arrival, free)");
}

TEST_CASE("lab04.fcfs.serves_by_arrival_not_by_index") {
    // Listed order 0, 1, 2, but request 2 arrived first and request 0 last.
    const double base = seeded_offset();
    const std::vector<double> arrive = shifted({20, 10, 0}, base);
    const std::vector<ServiceTrace> services = {{50, {}}, {50, {}}, {50, {}}};
    std::vector<Scheduled> s = schedule_fcfs(arrive, services);
    observe_schedule("schedule", s);
    REQUIRE(s.size() == 3);
    INFO("first come, first served means by ARRIVAL time; the result stays in the input's order "
         "(entry i is request i), so sort a list of indices rather than the requests");
    CHECK(close(s[2].start_ms - base, 0));
    CHECK(close(s[1].start_ms - base, 50));
    CHECK(close(s[0].start_ms - base, 100));
    CHECK(close(s[0].arrival_ms - base, 20));
}

TEST_CASE("lab04.fcfs.equal_arrivals_go_by_index") {
    const double base = seeded_offset();
    const std::vector<double> arrive = {base, base, base};
    const std::vector<ServiceTrace> services = {{7, {1}}, {3, {}}, {5, {2, 2}}};
    std::vector<Scheduled> s = schedule_fcfs(arrive, services);
    observe_schedule("schedule", s);
    REQUIRE(s.size() == 3);
    INFO("a burst (all at the same instant) is served in index order: 0, then 1, then 2; use a "
         "stable order for ties");
    CHECK(close(s[0].start_ms - base, 0));
    CHECK(close(s[1].start_ms - base, 8));
    CHECK(close(s[2].start_ms - base, 11));
    CHECK(close(s[2].queue_ms, 11));
}

TEST_CASE("lab04.fcfs.random_against_reference") {
    for (std::uint64_t trial = 0; trial < 200; trial++) {
        Workload w = random_workload(1000 + trial);
        std::vector<Scheduled> got = schedule_fcfs(w.arrival, w.service);
        observe_schedule(fmt::format("schedule of random workload {}", trial), got, true);
        std::vector<Scheduled> want = reference_fcfs(w);
        INFO("random workload " << trial << ": " << w.arrival.size() << " requests listed in shuffled "
                                << "order (PDLAB_TEST_SEED picks them)");
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < want.size(); i++) {
            INFO("request " << i << " arrives at " << want[i].arrival_ms << " ms; the queue says it "
                            << "starts at " << want[i].start_ms << " after waiting " << want[i].queue_ms);
            CHECK(close(got[i].arrival_ms, want[i].arrival_ms));
            CHECK(close(got[i].start_ms, want[i].start_ms));
            CHECK(close(got[i].queue_ms, want[i].queue_ms));
            REQUIRE(got[i].token_times_ms.size() == want[i].token_times_ms.size());
            for (std::size_t k = 0; k < want[i].token_times_ms.size(); k++)
                CHECK(close(got[i].token_times_ms[k], want[i].token_times_ms[k]));
        }
    }
}

TEST_CASE("lab04.fcfs.one_request_at_a_time") {
    // Whatever the order, the server never works on two requests at once: in
    // start order, each starts no earlier than the one before it finished.
    Workload w = random_workload(77);
    std::vector<Scheduled> s = schedule_fcfs(w.arrival, w.service);
    observe_schedule("schedule of random workload 77", s);
    std::sort(s.begin(), s.end(), [](const Scheduled& a, const Scheduled& b) { return a.start_ms < b.start_ms; });
    for (std::size_t i = 1; i < s.size(); i++) {
        INFO("request started at " << s[i].start_ms << " ms while the one before was streaming until "
                                   << s[i - 1].token_times_ms.back() << " ms");
        CHECK(s[i].start_ms >= s[i - 1].token_times_ms.back() - 1e-9);
        CHECK(s[i].start_ms >= s[i].arrival_ms);
    }
}

TEST_CASE("lab04.fcfs.bad_input_throws") {
    const std::vector<ServiceTrace> one = {{1, {}}};
    const std::vector<double> two_arrivals = {0, 1};
    CHECK_THROWS_AS_MESSAGE(schedule_fcfs(two_arrivals, one), std::invalid_argument,
                            "two arrivals but one service: the spans must pair up");
    const std::vector<double> negative = {-1};
    CHECK_THROWS_AS_MESSAGE(schedule_fcfs(negative, one), std::invalid_argument,
                            "an arrival before the clock starts (negative) is a mix-up of clocks");
    const std::vector<double> nan = {std::nan("")};
    CHECK_THROWS_AS_MESSAGE(schedule_fcfs(nan, one), std::invalid_argument,
                            "a NaN arrival compares false with everything and would scramble the order");
    const std::vector<double> zero = {0};
    const std::vector<ServiceTrace> bad_step = {{1, {2, -3}}};
    CHECK_THROWS_AS_MESSAGE(schedule_fcfs(zero, bad_step), std::invalid_argument,
                            "a negative step would send a token back in time");
    CHECK(schedule_fcfs({}, std::span<const ServiceTrace>{}).empty());
}

// --- the seed ------------------------------------------------------------------

TEST_CASE("lab04.seed.another_seed_gives_other_inputs") {
    // A grader runs these tests under a PDLAB_TEST_SEED nobody has seen: the
    // workloads must change with it, or hard-coded answers would pass.
    const char* was = std::getenv("PDLAB_TEST_SEED");
    const std::string saved = was ? was : "";
    const std::uint64_t now = was ? std::strtoull(was, nullptr, 10) : 0;
    Workload a = random_workload(1000);
    setenv("PDLAB_TEST_SEED", std::to_string(now + 1).c_str(), 1);
    Workload b = random_workload(1000);
    const double offset_b = seeded_offset();
    if (was) setenv("PDLAB_TEST_SEED", saved.c_str(), 1);
    else unsetenv("PDLAB_TEST_SEED");
    CHECK_MESSAGE(a.arrival != b.arrival, "PDLAB_TEST_SEED " << now << " and " << now + 1
                                          << " gave the same arrival trace");
    CHECK(offset_b != seeded_offset());
}

// --- request_metrics ---------------------------------------------------------

TEST_CASE("lab04.metrics.hand_computed") {
    // Submitted at 100 ms; four tokens reach the client at 350, 380, 420, 450 ms
    // (all shifted by the same seeded offset: only differences matter).
    const double base = seeded_offset();
    const std::vector<double> t = shifted({350, 380, 420, 450}, base);
    RequestMetrics m = request_metrics(base + 100, t);
    observe_metrics("metrics", m);
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
    const double base = seeded_offset();
    const std::vector<double> t = shifted({120}, base);
    RequestMetrics m = request_metrics(base, t);
    observe_metrics("metrics", m);
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
    const double base = seeded_offset();
    const std::vector<double> t = shifted({10, 10, 15}, base);
    RequestMetrics m = request_metrics(base + 10, t);
    observe_metrics("metrics", m);
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
    std::mt19937_64 rng(seed_for(404));
    for (int i = 0; i < 300; i++) {
        RandomRequest r = random_request(rng);
        const int n = int(r.times.size());
        INFO("random request " << i << ": submit " << r.submit << " ms, " << n << " tokens, first at "
                               << r.times.front() << ", last at " << r.times.back());
        RequestMetrics m = request_metrics(r.submit, r.times);
        observe_metrics(fmt::format("metrics of random request {}", i), m);
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

// --- goodput -------------------------------------------------------------------

namespace {

// Requests for the goodput tests, with metrics computed here (not by your
// request_metrics: these tests judge goodput alone).
struct Served {
    std::vector<Scheduled> sch;
    std::vector<RequestMetrics> m;
};

// A request arriving at `arrival` whose tokens come at `times`; its metrics
// from these exact numbers, its clock readings shifted by `base`.
void add_request(Served& s, double base, double arrival, const std::vector<double>& times) {
    Scheduled x;
    x.arrival_ms = x.start_ms = base + arrival;
    x.token_times_ms = shifted(times, base);
    RequestMetrics m;
    m.output_tokens = int(times.size());
    m.ttft_ms = times.front() - arrival;
    m.e2el_ms = times.back() - arrival;
    for (std::size_t k = 1; k < times.size(); k++) m.itls_ms.push_back(times[k] - times[k - 1]);
    if (times.size() > 1) m.tpot_ms = (m.e2el_ms - m.ttft_ms) / double(times.size() - 1);
    s.sch.push_back(x);
    s.m.push_back(m);
}

// Four requests over exactly 2 s (first arrival at 0, last token at 2000 ms):
//   request  arrival  tokens at             TTFT  TPOT   E2EL
//   0             0   100 150 200            100    50    200
//   1           300   700 720 740 760        400    20    460
//   2           800   900                    100     -    100
//   3          1000   1250 1500 2000         250   375   1000
Served four_requests() {
    const double base = seeded_offset();
    Served s;
    add_request(s, base, 0, {100, 150, 200});
    add_request(s, base, 300, {700, 720, 740, 760});
    add_request(s, base, 800, {900});
    add_request(s, base, 1000, {1250, 1500, 2000});
    return s;
}

void observe_goodput(const std::string& what, const Goodput& g) {
    observe(what, std::vector<double>{double(g.good), g.requests_per_s}, kObserved);
}

// Random requests: the test's own FCFS clock on a random workload, metrics from
// the definitions, and a random objective (each limit set half the time, drawn
// around the metric's own range so that some requests meet it and some do not).
struct RandomRun {
    Served served;
    Slo slo;
};

RandomRun random_run(std::uint64_t seed) {
    Workload w = random_workload(seed);
    RandomRun r;
    for (const Scheduled& x : reference_fcfs(w)) add_request(r.served, 0.0, x.arrival_ms, x.token_times_ms);
    std::mt19937_64 rng(seed_for(seed + 7));
    std::bernoulli_distribution set(0.5);
    if (set(rng)) r.slo.ttft_ms = std::uniform_real_distribution<double>(0, 600)(rng);
    if (set(rng)) r.slo.tpot_ms = std::uniform_real_distribution<double>(0, 30)(rng);
    if (set(rng)) r.slo.e2el_ms = std::uniform_real_distribution<double>(0, 900)(rng);
    return r;
}

// Goodput counted a second way: the requests failing any limit taken away from all.
Goodput reference_goodput(const Served& s, const Slo& slo) {
    int failing = 0;
    for (const RequestMetrics& m : s.m)
        failing += (slo.ttft_ms && m.ttft_ms > *slo.ttft_ms) || (slo.e2el_ms && m.e2el_ms > *slo.e2el_ms) ||
                   (slo.tpot_ms && m.tpot_ms && *m.tpot_ms > *slo.tpot_ms);
    std::vector<double> arrivals, ends;
    for (const Scheduled& x : s.sch) arrivals.push_back(x.arrival_ms), ends.push_back(x.token_times_ms.back());
    const double span_s = (*std::max_element(ends.begin(), ends.end()) -
                           *std::min_element(arrivals.begin(), arrivals.end())) / 1000.0;
    const int good = int(s.m.size()) - failing;
    return {good, good / span_s};
}

}  // namespace

TEST_CASE("lab04.goodput.hand_computed") {
    const Served s = four_requests();
    struct Case {
        const char* why;
        Slo slo;
        int good;
    };
    const Case cases[] = {
        {"no limit: every request is good, and goodput is the throughput, 4 requests / 2 s", {}, 4},
        {"TTFT <= 250 ms: requests 0, 2 and 3 (250 is within: a limit is met when the metric is <= it)",
         {250.0, std::nullopt, std::nullopt}, 3},
        {"TPOT <= 50 ms: requests 0 (exactly 50), 1 and 2 (one token: no TPOT to break the limit)",
         {std::nullopt, 50.0, std::nullopt}, 3},
        {"TTFT <= 250 and TPOT <= 50: a request must meet EVERY limit set: requests 0 and 2",
         {250.0, 50.0, std::nullopt}, 2},
        {"E2EL <= 460 ms: requests 0, 1 (exactly 460) and 2", {std::nullopt, std::nullopt, 460.0}, 3},
        {"TTFT <= 99 ms: no request; goodput 0, the run still took 2 s", {99.0, std::nullopt, std::nullopt}, 0},
        {"TPOT <= 0 ms: only request 2, whose single token has no TPOT", {std::nullopt, 0.0, std::nullopt}, 1},
    };
    for (const Case& c : cases) {
        INFO(c.why << " (the run's span: first arrival 0 ms to last token 2000 ms, 2 s, whichever requests "
                      "are good)");
        Goodput g = goodput(s.sch, s.m, c.slo);
        observe_goodput(c.why, g);
        CHECK(g.good == c.good);
        CHECK(g.requests_per_s == doctest::Approx(c.good / 2.0));
    }
}

TEST_CASE("lab04.goodput.random_against_reference") {
    for (std::uint64_t k = 0; k < 200; k++) {
        const RandomRun r = random_run(5000 + k);
        const Goodput want = reference_goodput(r.served, r.slo);
        INFO("random run " << k << ": " << r.served.m.size() << " requests, limits: TTFT "
                           << (r.slo.ttft_ms ? fmt::format("{:.1f}", *r.slo.ttft_ms) : "unset") << ", TPOT "
                           << (r.slo.tpot_ms ? fmt::format("{:.1f}", *r.slo.tpot_ms) : "unset") << ", E2EL "
                           << (r.slo.e2el_ms ? fmt::format("{:.1f}", *r.slo.e2el_ms) : "unset")
                           << "; expected " << want.good << " good, " << want.requests_per_s << " requests/s");
        Goodput g = goodput(r.served.sch, r.served.m, r.slo);
        observe_goodput(fmt::format("goodput of random run {}", k), g);
        CHECK(g.good == want.good);
        CHECK(close(g.requests_per_s, want.requests_per_s, 1e-9));
        INFO("with no limit, goodput is the throughput: every request over the same span");
        Goodput all = goodput(r.served.sch, r.served.m, Slo{});
        CHECK(all.good == int(r.served.m.size()));
        CHECK(all.requests_per_s >= g.requests_per_s);
    }
}

TEST_CASE("lab04.goodput.bad_input_throws") {
    const Served s = four_requests();
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    std::span<const Scheduled> three(s.sch.data(), 3);
    CHECK_THROWS_AS_MESSAGE(goodput(three, s.m, Slo{}), std::invalid_argument,
                            "4 metrics for 3 scheduled requests: entry i must be request i in both");
    CHECK_THROWS_AS_MESSAGE(goodput(std::span<const Scheduled>{}, std::span<const RequestMetrics>{}, Slo{}),
                            std::invalid_argument, "no requests: there is no span to divide by");
    for (double bad : {-1.0, nan, inf}) {
        INFO("a limit of " << bad << " ms is not an objective: throw rather than count against it");
        CHECK_THROWS_AS(goodput(s.sch, s.m, Slo{bad, std::nullopt, std::nullopt}), std::invalid_argument);
        CHECK_THROWS_AS(goodput(s.sch, s.m, Slo{std::nullopt, bad, std::nullopt}), std::invalid_argument);
        CHECK_THROWS_AS(goodput(s.sch, s.m, Slo{std::nullopt, std::nullopt, bad}), std::invalid_argument);
    }
    Served empty = s;
    empty.sch[1].token_times_ms.clear();
    CHECK_THROWS_AS_MESSAGE(goodput(empty.sch, empty.m, Slo{}), std::invalid_argument,
                            "a request with no token never finished: it has no last token to end the span");
    Served instant;
    add_request(instant, seeded_offset(), 0, {0});
    CHECK_THROWS_AS_MESSAGE(goodput(instant.sch, instant.m, Slo{}), std::invalid_argument,
                            "a run whose first arrival is its last token took 0 s: no rate");
}

// --- the program's arrival trace (arrivals.hpp, the kit's side) ----------------

TEST_CASE("lab04.arrivals.realise_the_labelled_rate") {
    // The program prints "Poisson, R requests/s": n requests must arrive over
    // exactly (n - 1) / R seconds, whatever the seed, or the load it names is
    // not the load it ran (seed 1's 32 raw draws average 0.65: load x1.5).
    for (std::uint64_t seed : {1, 2, 3, 4, 5, 17, 1000}) {
        for (int n : {2, 8, 32, 100}) {
            const std::vector<double> gaps = unit_gaps(seed, n);
            for (double rate : {26.07, 83.42, 1.0}) {
                const std::vector<double> a = arrivals(gaps, rate);
                REQUIRE(a.size() == std::size_t(n));
                const double realised = (n - 1) / (a.back() / 1000.0);
                observe("seed " + std::to_string(seed) + ", " + std::to_string(n) + " requests, rate " +
                            std::to_string(rate), realised, {1e-9, 1e-9});
                CHECK_MESSAGE(close(realised, rate), "seed " << seed << ", " << n << " requests at " << rate
                                                             << "/s arrived at " << realised << "/s");
            }
            // Still Poisson-shaped: the gaps differ (bursts and quiet spells), the first request at 0.
            CHECK(gaps.front() == 0);
            if (n > 2)
                CHECK(*std::min_element(gaps.begin() + 1, gaps.end()) < *std::max_element(gaps.begin(), gaps.end()));
        }
        CHECK_MESSAGE(unit_gaps(seed, 8) != unit_gaps(seed + 1, 8), "another seed, other gaps");
    }
    CHECK(arrivals(unit_gaps(1, 8), std::numeric_limits<double>::infinity()) == std::vector<double>(8, 0.0));
    CHECK(unit_gaps(1, 1) == std::vector<double>{0.0});
}
