// The HTTP server's pure pieces, without a socket: stop strings across token
// boundaries, the completions request checks, the Prometheus text.
// (The server itself is tested over real HTTP by test_server.py.)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/openai_api.hpp"
#include "serve/server_metrics.hpp"
#include "serve/stop_matcher.hpp"

using namespace pd::serve;

// Feeds `pieces` and returns what the client would see, and whether it stopped.
static std::pair<std::string, bool> run_stops(std::vector<std::string> stops, std::vector<std::string> pieces) {
    StopMatcher m(std::move(stops));
    std::string seen;
    for (const auto& p : pieces) seen += m.push(p);
    if (!m.stopped()) seen += m.flush();
    return {seen, m.stopped()};
}

TEST_CASE("serve.http.stop_matcher") {
    SUBCASE("a stop string split over three tokens is found and never shown") {
        auto [seen, stopped] = run_stops({"\n\nEND"}, {"one\n", "\nE", "ND and more"});
        CHECK_MESSAGE(stopped, "the pieces join to contain the stop string");
        CHECK_MESSAGE(seen == "one", "the client gets exactly the text before the stop string, got " << seen);
    }
    SUBCASE("a false start is released once it cannot match") {
        StopMatcher m({"abc"});
        CHECK(m.push("xa") == "x");  // "a" may start "abc": held back
        CHECK(m.push("bd") == "abd");
        CHECK_FALSE(m.stopped());
    }
    SUBCASE("the earliest of several stop strings wins") {
        auto [seen, stopped] = run_stops({"late", "ear"}, {"an early and late"});
        CHECK(stopped);
        CHECK(seen == "an ");
    }
    SUBCASE("without a stop string every byte comes out, once") {
        auto [seen, stopped] = run_stops({"zz"}, {"a", "z", "b", "z"});
        CHECK_FALSE(stopped);
        CHECK(seen == "azbz");
    }
}

namespace {

pd::Tokenizer bytes = pd::Tokenizer::bytes(300);
const ApiLimits kLimits{&bytes, 300, 64, nullptr, ""};

// The error a body gets: its status and the field it names.
std::pair<int, std::string> refusal(const std::string& body) {
    try {
        parse_completion_request(body, kLimits);
    } catch (const ApiError& e) {
        return {e.status, e.param};
    }
    return {200, ""};
}

}  // namespace

TEST_CASE("serve.http.request") {
    SUBCASE("a full request is read field by field") {
        CompletionRequest r = parse_completion_request(
            R"({"prompt": "hi", "max_tokens": 5, "temperature": 0, "top_p": 0.5, "seed": 7,
                "stop": ["x", "y"], "stream": true, "stream_options": {"include_usage": true}})", kLimits);
        CHECK(r.prompt == std::vector<int>{'h', 'i'});
        CHECK(r.max_tokens == 5);
        CHECK(r.sampler.temperature == 0.0f);
        CHECK(r.sampler.top_p == 0.5f);
        CHECK((r.seeded && r.sampler.seed == 7));
        CHECK(r.stop == std::vector<std::string>{"x", "y"});
        CHECK((r.stream && r.include_usage));
    }
    SUBCASE("OpenAI's defaults when fields are left out") {
        CompletionRequest r = parse_completion_request(R"({"prompt": [1, 2]})", kLimits);
        CHECK(r.max_tokens == 16);
        CHECK(r.sampler.temperature == 1.0f);
        CHECK_FALSE(r.seeded);
        CHECK_FALSE(r.stream);
    }
    SUBCASE("each mistake is a 400 naming its field") {
        CHECK(refusal("{") == std::pair<int, std::string>{400, ""});
        CHECK(refusal(R"({"prompt": [1, 300]})") == std::pair<int, std::string>{400, "prompt"});
        CHECK(refusal(R"({"prompt": "hi", "max_tokens": 0})") == std::pair<int, std::string>{400, "max_tokens"});
        CHECK(refusal(R"({"prompt": "hi", "stop": [1]})") == std::pair<int, std::string>{400, "stop"});
        // OpenAI's limits: at most 4 stop strings, each bounded (256 bytes here)
        CHECK(refusal(R"({"prompt": "hi", "stop": ["a", "b", "c", "d"]})").first == 200);
        CHECK(refusal(R"({"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]})") == std::pair<int, std::string>{400, "stop"});
        const std::string s256(256, 'x'), s257(257, 'x');
        CHECK(refusal(R"({"prompt": "hi", "stop": ")" + s256 + R"("})").first == 200);
        CHECK(refusal(R"({"prompt": "hi", "stop": ")" + s257 + R"("})") == std::pair<int, std::string>{400, "stop"});
        CHECK(refusal(R"({"prompt": "hi", "stop": ["a", ")" + s257 + R"("]})") == std::pair<int, std::string>{400, "stop"});
        CHECK(refusal(R"({"prompt": "hi", "mystery": 1})") == std::pair<int, std::string>{400, "mystery"});
    }
    SUBCASE("prompt plus max_tokens must fit the context: P + n - 1 <= 64") {
        const std::string ids60 = nlohmann::json(std::vector<int>(60, 1)).dump();
        CHECK(refusal(R"({"prompt": )" + ids60 + R"(, "max_tokens": 5})").first == 200);
        CHECK(refusal(R"({"prompt": )" + ids60 + R"(, "max_tokens": 6})") == std::pair<int, std::string>{400, "max_tokens"});
    }
}

TEST_CASE("serve.http.chunks") {
    const ResponseMeta meta{"cmpl-3", 1700000000, "tiny"};
    const auto chunk = nlohmann::json::parse(chunk_json(meta, "hi", ""));
    CHECK(chunk["choices"][0]["text"] == "hi");
    CHECK_MESSAGE(chunk["choices"][0]["finish_reason"].is_null(), "a running stream's chunks have finish_reason null");
    const auto whole = nlohmann::json::parse(completion_json(meta, "ab", "length", {3, 2}));
    CHECK(whole["usage"]["total_tokens"] == 5);
    CHECK(whole["choices"][0]["finish_reason"] == "length");
}

TEST_CASE("serve.http.metrics") {
    Histogram h({0.1, 1.0});
    h.observe(0.05);
    h.observe(0.5);
    h.observe(5.0);
    const std::string text = h.render("x_seconds", "help");
    CHECK_MESSAGE(text.find("x_seconds_bucket{le=\"0.1\"} 1\n") != std::string::npos, text);
    CHECK_MESSAGE(text.find("x_seconds_bucket{le=\"1\"} 2\n") != std::string::npos, "buckets are cumulative: " << text);
    CHECK(text.find("x_seconds_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
    CHECK(text.find("x_seconds_count 3\n") != std::string::npos);
    ServerMetrics m;
    m.queued();
    m.started(0.01);
    m.finished("cancelled", 4, 2, true);
    const std::string all = m.render();
    CHECK(all.find("pdlab_num_requests_running 0\n") != std::string::npos);
    CHECK(all.find("pdlab_request_success_total{finished_reason=\"cancelled\"} 1\n") != std::string::npos);
}
