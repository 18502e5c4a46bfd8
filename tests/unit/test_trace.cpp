// Request traces (src/serve/trace.hpp) and serving metrics
// (src/serve/request_metrics.hpp): the generator's statistics, the JSONL
// round trip and its error messages, and the metrics on a hand-worked run.
#include <cmath>
#include <sstream>

#include <doctest/doctest.h>

#include "check.hpp"
#include "common.hpp"
#include "serve/request_metrics.hpp"
#include "serve/trace.hpp"

using namespace pd::serve;

namespace {

TraceSpec base_spec() {
    TraceSpec s;
    s.num_requests = 2000;
    s.rate_per_s = 4.0;
    s.seed = pd::test::seed_for(13);
    s.token_lo = 3;
    s.token_hi = 500;
    return s;
}

std::string error_of(const std::string& jsonl) {
    std::istringstream in(jsonl);
    try {
        read_trace_jsonl(in, "t.jsonl");
    } catch (const pd::UserError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("serve.trace.poisson_arrivals") {
    const Trace t = generate_trace(base_spec());
    REQUIRE(t.size() == 2000);
    double prev = 0;
    for (const auto& r : t) {
        INFO("request " << r.id << " arrives at " << r.arrival_s << " after " << prev);
        REQUIRE(r.arrival_s >= prev);
        prev = r.arrival_s;
    }
    // 1999 exponential gaps of mean 1/4 s: their mean is 0.25 +- 3.5% (3 sigma = 3/sqrt(1999)).
    const double mean_gap = t.back().arrival_s / 1999.0;
    INFO("mean gap between arrivals " << mean_gap << " s; a Poisson process at 4 req/s has 0.25 s");
    CHECK(std::fabs(mean_gap - 0.25) < 0.25 * 0.07);
}

TEST_CASE("serve.trace.lengths_and_prefixes") {
    TraceSpec s = base_spec();
    s.prompt_len = parse_length_dist("uniform:10:20", "--prompt-len");
    s.output_len = parse_length_dist("lognormal:32:0.8:4:200", "--output-len");
    s.shared_prefix_fraction = 0.5;
    s.prefix_len = 16;
    s.prefix_groups = 2;
    int shared = 0, out_below_median = 0;
    for (const auto& r : generate_trace(s)) {
        const int own = int(r.prompt_ids.size()) - (r.prefix_group >= 0 ? 16 : 0);
        INFO("request " << r.id << ": own prompt part " << own << ", max_tokens " << r.max_tokens);
        REQUIRE((own >= 10 && own <= 20));
        REQUIRE((r.max_tokens >= 4 && r.max_tokens <= 200));
        for (int id : r.prompt_ids) REQUIRE((id >= 3 && id < 500));
        shared += r.prefix_group >= 0;
        out_below_median += r.max_tokens < 32;
    }
    INFO(shared << " of 2000 requests share a prefix; the fraction asked for is 0.5");
    CHECK(std::abs(shared - 1000) < 100);
    INFO(out_below_median << " of 2000 output lengths are below the median 32");
    CHECK(std::abs(out_below_median - 1000) < 110);
}

TEST_CASE("serve.trace.same_seed_same_trace") {
    TraceSpec s = base_spec();
    s.num_requests = 50;
    s.output_len = parse_length_dist("uniform:1:64", "--output-len");
    const Trace a = generate_trace(s), b = generate_trace(s);
    s.seed += 1;
    const Trace c = generate_trace(s);
    bool all_equal = true, c_differs = false;
    for (std::size_t i = 0; i < a.size(); i++) {
        all_equal = all_equal && a[i].arrival_s == b[i].arrival_s && a[i].prompt_ids == b[i].prompt_ids &&
                    a[i].max_tokens == b[i].max_tokens;
        c_differs = c_differs || a[i].max_tokens != c[i].max_tokens;
    }
    CHECK_MESSAGE(all_equal, "one spec and seed must give one trace (draws only from mt19937_64)");
    CHECK_MESSAGE(c_differs, "another seed gave the same output lengths: the seed is not used");
}

TEST_CASE("serve.trace.jsonl_round_trip") {
    TraceSpec s = base_spec();
    s.num_requests = 20;
    s.shared_prefix_fraction = 0.5;
    s.prefix_len = 4;
    Trace t = generate_trace(s);
    t[3].prompt_ids.clear();
    t[3].prompt = "Once upon a time \"quoted\"\n";
    std::stringstream io;
    write_trace_jsonl(io, t);
    const Trace back = read_trace_jsonl(io, "mem");
    REQUIRE(back.size() == t.size());
    for (std::size_t i = 0; i < t.size(); i++) {
        INFO("request " << i);
        CHECK(back[i].id == t[i].id);
        CHECK(back[i].arrival_s == t[i].arrival_s);
        CHECK(back[i].prompt == t[i].prompt);
        CHECK(back[i].prompt_ids == t[i].prompt_ids);
        CHECK(back[i].max_tokens == t[i].max_tokens);
        CHECK(back[i].prefix_group == t[i].prefix_group);
    }
}

TEST_CASE("serve.trace.bad_lines_name_the_line") {
    const std::string ok = R"({"id": 0, "prompt_ids": [1, 2], "max_tokens": 4})" "\n\n";
    CHECK(error_of(ok + "{\"id\": 1, \"prompt\": \"x\"\n").find("t.jsonl line 3") != std::string::npos);
    CHECK(error_of(ok + R"({"id": 1, "prompt": "x", "max_tokens": 0})").find("line 3") != std::string::npos);
    CHECK(error_of(ok + R"({"id": 0, "prompt": "x", "max_tokens": 2})").find("appears twice") != std::string::npos);
    CHECK(error_of(ok + R"({"id": 1, "max_token": 2, "prompt": "x"})").find("unknown key") != std::string::npos);
    CHECK(error_of(ok + R"({"id": 1, "max_tokens": 2})").find("exactly one of") != std::string::npos);
    CHECK(error_of(ok + R"({"id": 1, "max_tokens": 2, "prompt_ids": [1.5]})").find("line 3") != std::string::npos);
    CHECK(error_of(ok + R"({"id": 1, "max_tokens": 2, "prompt": "x", "arrival_s": -1})").find("line 3") != std::string::npos);
    CHECK(error_of("\n").find("no requests") != std::string::npos);
    CHECK(error_of(ok) == "(no error)");
}

TEST_CASE("serve.trace.length_specs") {
    CHECK(parse_length_dist("fixed:7", "f").lo == 7);
    CHECK(parse_length_dist("uniform:2:9", "f").hi == 9);
    CHECK(parse_length_dist("lognormal:64:0.5", "f").hi == 512);
    for (const char* bad : {"fixed", "fixed:0", "uniform:9:2", "lognormal:0.5:1", "gauss:3", "fixed:3x"})
        CHECK_THROWS_AS(parse_length_dist(bad, "--output-len"), pd::UserError);
}

// The hand-worked run. Two requests, times in seconds:
//   A arrives 0.0, tokens at 0.1, 0.3, 0.6   -> TTFT 100, E2EL 600, TPOT (600-100)/2 = 250,
//                                               ITLs 200, 300
//   B arrives 0.2, tokens at 0.5             -> TTFT 300, E2EL 300, no TPOT, no ITL
//   C arrives 0.3, cancelled                 -> in no metric
// duration 1.0 s: 2 req/s, 4 output tok/s, (10 + 6 + 4) / 1 = 20 total tok/s.
TEST_CASE("serve.metrics.worked_example") {
    const std::vector<RequestTiming> run = {
        {0, 0.0, {0.1, 0.3, 0.6}, 10, true},
        {1, 0.2, {0.5}, 6, true},
        {2, 0.3, {}, 4, false},
    };
    GoodputLimits limits;
    limits.ttft_ms = 200;
    const ServingMetrics m = compute_serving_metrics(run, 1.0, limits);
    CHECK(m.completed == 2);
    CHECK(m.failed == 1);
    CHECK(m.total_output == 4);
    CHECK(m.request_throughput == doctest::Approx(2.0));
    CHECK(m.output_throughput == doctest::Approx(4.0));
    CHECK(m.total_token_throughput == doctest::Approx(20.0));
    CHECK_MESSAGE(m.request_goodput.value_or(-1) == doctest::Approx(1.0),
                  "only A meets TTFT <= 200 ms: goodput 1 req/s");
    CHECK(m.ttft_ms.mean == doctest::Approx(200));
    CHECK(m.ttft_ms.median == doctest::Approx(200));
    CHECK_MESSAGE(m.ttft_ms.std == doctest::Approx(100), "population std (np.std) of 100 and 300");
    CHECK(m.ttft_ms.p99 == doctest::Approx(100 + 0.99 * 200));
    CHECK_MESSAGE(m.tpot_ms.n == 1, "a one-token answer has no TPOT");
    CHECK(m.tpot_ms.mean == doctest::Approx(250));
    CHECK_MESSAGE(m.itl_ms.n == 2, "ITL pools every gap: A's two");
    CHECK(m.itl_ms.mean == doctest::Approx(250));
    CHECK(m.itl_ms.p90 == doctest::Approx(200 + 0.9 * 100));
    CHECK(m.e2el_ms.median == doctest::Approx(450));
    const auto j = metrics_json(m);
    CHECK(j.at("median_ttft_ms").get<double>() == doctest::Approx(200));
    CHECK(j.at("p99_itl_ms").get<double>() == doctest::Approx(200 + 0.99 * 100));
    CHECK(format_metrics_table(m, "run").find("Median TTFT (ms):") != std::string::npos);
}

TEST_CASE("serve.metrics.tpot_of_one_token_is_zero_for_goodput") {
    const std::vector<RequestTiming> run = {{0, 0.0, {0.1}, 1, true}, {1, 0.0, {0.1, 0.5}, 1, true}};
    GoodputLimits limits;
    limits.tpot_ms = 100;  // B's TPOT is 400 ms
    CHECK(compute_serving_metrics(run, 2.0, limits).request_goodput.value_or(-1) ==
          doctest::Approx(0.5));
    CHECK_FALSE(compute_serving_metrics(run, 2.0).request_goodput.has_value());
}

TEST_CASE("serve.metrics.bad_timings") {
    std::vector<RequestTiming> run = {{0, 1.0, {0.5}, 1, true}};
    CHECK_THROWS_AS(compute_serving_metrics(run, 1.0), pd::UserError);
    run = {{0, 0.0, {0.5, 0.4}, 1, true}};
    CHECK_THROWS_AS(compute_serving_metrics(run, 1.0), pd::UserError);
    run = {{0, 0.0, {}, 1, true}};
    CHECK_THROWS_AS(compute_serving_metrics(run, 1.0), pd::UserError);
    CHECK_THROWS_AS(compute_serving_metrics({}, 0.0), pd::UserError);
}
