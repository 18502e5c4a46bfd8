// The HTTP side of `pdlab serve` (cpp-httplib): its routes, and its life from
// bind to a graceful stop.
//
//   POST /v1/completions  OpenAI completions, whole JSON or server-sent events
//   POST /v1/chat/completions  the same for chat messages, through the model's chat_template
//   GET  /v1/models       the one model served
//   GET  /health          200 while serving, 503 once shutting down
//   GET  /metrics         Prometheus text (server_metrics.hpp)
//
// Each connection is served by one thread of a pool; a streaming response
// holds its thread while the worker generates. A client that goes away
// mid-stream is noticed when a write fails, and its job is cancelled.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "serve/openai_api.hpp"
#include "serve/server_metrics.hpp"
#include "serve/worker.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace pd::serve {

struct ServerOptions {
    std::string host = "127.0.0.1";         // loopback only unless asked
    int port = 8000;                        // 0: any free port (bind() says which)
    std::string model_name = "tiny";        // what responses call the model
    int connection_threads = 128;           // connections served at once; more wait their turn
    int read_timeout_s = 5;                 // a client silent this long mid-request is dropped (slow loris)
    int write_timeout_s = 5;                // a client not reading for this long is dropped
    std::size_t max_body_bytes = 1 << 20;   // larger request bodies are answered 413
};

class HttpServer {
public:
    HttpServer(ServerOptions opts, ApiLimits limits, Worker& worker, ServerMetrics& metrics);
    ~HttpServer();

    // Binds host:port; returns the port. UserError when the address is taken or invalid.
    int bind();
    // Answers requests until begin_shutdown(), then until every connection is done.
    void serve();
    // From any thread: refuses new connections at once and new requests on
    // open ones (503); requests in flight go on (Worker::abort_all ends them).
    void begin_shutdown();

private:
    void add_routes();
    using Parse = CompletionRequest (*)(std::string_view body, const ApiLimits& limits);
    void completions(const httplib::Request& req, httplib::Response& res, Parse parse);
    void stream(std::shared_ptr<Job> job, const ResponseMeta& meta, httplib::Response& res);
    void respond_whole(Job& job, const ResponseMeta& meta, httplib::Response& res);
    void refuse(httplib::Response& res, const ApiError& e);

    ServerOptions opts_;
    ApiLimits limits_;
    Worker& worker_;
    ServerMetrics& metrics_;
    std::unique_ptr<httplib::Server> http_;
    std::atomic<int> listen_fd_{-1};
    std::atomic<bool> shutting_down_{false};
    std::atomic<long long> next_id_{0};
};

}  // namespace pd::serve
