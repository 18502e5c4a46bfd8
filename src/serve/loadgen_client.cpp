#include "serve/loadgen_client.hpp"

#include <regex>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "io/json_checked.hpp"

namespace pd::serve {

namespace {

using Json = nlohmann::json;

double since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string request_body(const TraceRequest& r, const ClientOptions& opts) {
    Json j = {{"max_tokens", r.max_tokens},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}},
              {"temperature", 0}};
    if (!r.prompt_ids.empty()) j["prompt"] = r.prompt_ids;
    else j["prompt"] = r.prompt;
    if (!opts.model.empty()) j["model"] = opts.model;
    if (opts.ignore_eos) j["ignore_eos"] = true;
    return j.dump();
}

// One "data:" payload: a chunk with text is a token arrival; the usage chunk
// gives the counts; an error object ends the request.
void on_chunk(std::string_view data, StreamResult& out, std::chrono::steady_clock::time_point start) {
    if (data == "[DONE]") return;
    const Json j = Json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        out.error = "a chunk that is not JSON: " + std::string(data.substr(0, 80));
        return;
    }
    if (j.contains("error")) out.error = "server error: " + j["error"].value("message", std::string("?"));
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty())
        out.timing.token_s.push_back(since(start));
    if (j.contains("usage") && j["usage"].is_object()) {
        out.output_tokens = j["usage"].value("completion_tokens", 0);
        out.timing.prompt_tokens = j["usage"].value("prompt_tokens", out.timing.prompt_tokens);
    }
}

}  // namespace

Endpoint parse_endpoint(const std::string& url) {
    static const std::regex form(R"((http://[A-Za-z0-9.\-]+(:[0-9]{1,5})?)(/[^\s]*)?)");
    std::smatch m;
    if (!std::regex_match(url, m, form))
        fail("--url {}: expected http://HOST:PORT or http://HOST:PORT/v1/completions (https is not supported)",
             clipped_quote(url));
    Endpoint e;
    e.origin = m[1].str();
    if (m[3].matched && m[3].str() != "/") e.path = m[3].str();
    return e;
}

void SseReader::feed(std::string_view bytes) {
    for (char c : bytes) {
        if (c != '\n') {
            line_ += c;
            continue;
        }
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        if (line_.rfind("data:", 0) == 0) {
            std::string_view data = std::string_view(line_).substr(5);
            if (!data.empty() && data.front() == ' ') data.remove_prefix(1);
            on_data_(data);
        }
        line_.clear();  // blank lines, comments (":") and other fields carry no tokens
    }
}

StreamResult send_streaming(const Endpoint& to, const TraceRequest& r, const ClientOptions& opts,
                            std::chrono::steady_clock::time_point run_start) {
    StreamResult out;
    out.timing.id = r.id;
    out.timing.prompt_tokens = int(r.prompt_ids.size());
    httplib::Client client(to.origin);
    client.set_read_timeout(opts.timeout_s, 0);
    client.set_tcp_nodelay(true);
    std::string raw;  // the body as received, for an error's message
    SseReader sse([&](std::string_view data) { on_chunk(data, out, run_start); });
    httplib::Request req;
    req.method = "POST";
    req.path = to.path;
    req.body = request_body(r, opts);
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (raw.size() < 4096) raw.append(data, std::min<std::size_t>(n, 4096));
        sse.feed(std::string_view(data, n));
        return true;
    };
    out.timing.arrival_s = since(run_start);
    const httplib::Result res = client.send(req);
    if (!res) out.error = "no answer: " + httplib::to_string(res.error());
    else if (res->status != 200) out.error = fmt::format("HTTP {}: {}", res->status, raw.substr(0, 300));
    else if (out.timing.token_s.empty() && out.error.empty()) out.error = "the stream carried no token";
    if (out.output_tokens == 0) out.output_tokens = int(out.timing.token_s.size());
    out.timing.completed = out.error.empty();
    return out;
}

}  // namespace pd::serve
