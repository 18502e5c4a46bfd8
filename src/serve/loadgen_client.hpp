// The client side of `pdlab loadgen`: one trace request sent to an
// OpenAI-compatible completions endpoint as a streaming request, with the
// time each chunk of tokens arrived, exactly as a user's program would see it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "serve/request_metrics.hpp"
#include "serve/trace.hpp"

namespace pd::serve {

// Where to send: "http://127.0.0.1:8000" (path /v1/completions) or a full
// "http://host:port/some/v1/completions". UserError for anything else.
struct Endpoint {
    std::string origin;  // "http://127.0.0.1:8000"
    std::string path = "/v1/completions";
};
Endpoint parse_endpoint(const std::string& url);

struct ClientOptions {
    std::string model;        // "model" in each request ("" leaves it out)
    bool ignore_eos = false;  // ask for exactly max_tokens (vLLM's extension; OpenAI refuses it)
    int timeout_s = 600;      // give up on a request silent this long
};

// A request as the client saw it: `timing` on the run's clock (seconds since
// `run_start`), arrival = when it was sent, one token time per chunk that
// carried text; `error` says why it did not complete.
struct StreamResult {
    RequestTiming timing;
    int output_tokens = 0;  // the server's usage.completion_tokens, else the chunks counted
    std::string error;
};

// Splits a server-sent-event byte stream into the payloads of its "data:" lines.
class SseReader {
public:
    explicit SseReader(std::function<void(std::string_view)> on_data) : on_data_(std::move(on_data)) {}
    void feed(std::string_view bytes);

private:
    std::function<void(std::string_view)> on_data_;
    std::string line_;  // an incomplete line waiting for its end
};

// Sends `r` and reads its stream to the end; never throws for a network or
// HTTP failure (it is recorded in `error`).
StreamResult send_streaming(const Endpoint& to, const TraceRequest& r, const ClientOptions& opts,
                            std::chrono::steady_clock::time_point run_start);

}  // namespace pd::serve
