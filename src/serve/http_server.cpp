#include "serve/http_server.hpp"

#include <chrono>
#include <ctime>

#include <netinet/in.h>
#include <sys/socket.h>

#include <httplib.h>

#include "common.hpp"

namespace pd::serve {

namespace {

using namespace std::chrono_literals;

// How often a waiting stream wakes to notice a shutdown; tokens wake it at once.
constexpr auto kPoll = 200ms;

std::string sse(std::string_view json) { return "data: " + std::string(json) + "\n\n"; }

ApiError shutting_down() {
    return ApiError(503, "server_shutting_down", "", "the server is shutting down; retry on another instance");
}

// The status's own error JSON for answers httplib makes itself (413, 404, 400).
std::string status_error(const httplib::Request& req, int status) {
    if (status == 413)
        return error_json(ApiError(413, "invalid_request_error", "",
                                   "the request body is larger than the server's limit (--max-body-mb)"));
    if (status == 404)
        return error_json(ApiError(404, "not_found_error", "",
                                   "no route " + req.method + " " + req.path +
                                       "; the routes are POST /v1/completions, /v1/chat/completions, GET /v1/models, /health, /metrics"));
    return error_json(ApiError(status, "invalid_request_error", "", "the HTTP request could not be read"));
}

}  // namespace

HttpServer::HttpServer(ServerOptions opts, ApiLimits limits, Worker& worker, ServerMetrics& metrics)
    : opts_(std::move(opts)), limits_(limits), worker_(worker), metrics_(metrics),
      http_(std::make_unique<httplib::Server>()) {
    const int threads = opts_.connection_threads;
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(std::size_t(threads)); };
    http_->set_read_timeout(opts_.read_timeout_s, 0);
    http_->set_write_timeout(opts_.write_timeout_s, 0);
    http_->set_keep_alive_timeout(opts_.read_timeout_s);
    http_->set_payload_max_length(opts_.max_body_bytes);
    http_->set_tcp_nodelay(true);  // each SSE chunk leaves at once: no Nagle delay on token times
    // Remember the listening socket: begin_shutdown() closes it to stop accepting.
    http_->set_socket_options([this](int fd) {
        int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        listen_fd_ = fd;
    });
    add_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::add_routes() {
    http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        completions(req, res, parse_completion_request);
    });
    http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        completions(req, res, parse_chat_request);
    });
    http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (shutting_down_) return refuse(res, shutting_down());
        res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_.render(), "text/plain; version=0.0.4");
    });
    http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(fmt::format("{{\"object\":\"list\",\"data\":[{{\"id\":\"{}\",\"object\":\"model\","
                                    "\"owned_by\":\"pdlab\",\"max_model_len\":{}}}]}}",
                                    opts_.model_name, limits_.context),
                        "application/json");
    });
    http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (res.status >= 400 && res.status < 500 && res.body.empty()) metrics_.rejected();
        if (res.body.empty()) res.set_content(status_error(req, res.status), "application/json");
    });
    http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        }
        res.status = 500;
        res.set_content(error_json(ApiError(500, "internal_error", "", what)), "application/json");
    });
}

int HttpServer::bind() {
    int port = opts_.port;
    if (port == 0) {
        port = http_->bind_to_any_port(opts_.host);
        if (port < 0) fail("cannot listen on {}: is it an address of this machine?", opts_.host);
    } else if (!http_->bind_to_port(opts_.host, port)) {
        fail("cannot listen on {}:{}: the port is in use or the address is not this machine's; "
             "pick another with --port (0: any free port)", opts_.host, port);
    }
    // Debian's compiled httplib listens with a backlog of 5: a burst of clients
    // connecting at once (64 in the load test) would overflow it and see
    // resets. Listening again on the same socket only widens the queue.
    if (const int fd = listen_fd_; fd >= 0) ::listen(fd, SOMAXCONN);
    return port;
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::begin_shutdown() {
    shutting_down_ = true;
    // Shutting the listening socket down wakes httplib's accept() with an
    // error, which ends its accept loop; unlike httplib's stop(), this lets
    // the streams in flight run to their end before listen returns.
    const int fd = listen_fd_.exchange(-1);
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void HttpServer::refuse(httplib::Response& res, const ApiError& e) {
    if (e.status < 500) metrics_.rejected();
    res.status = e.status;
    res.set_content(error_json(e), "application/json");
}

void HttpServer::completions(const httplib::Request& req, httplib::Response& res, Parse parse) {
    if (shutting_down_) {
        res.set_header("Connection", "close");
        return refuse(res, shutting_down());
    }
    CompletionRequest r;
    try {
        r = parse(req.body, limits_);
    } catch (const ApiError& e) {
        return refuse(res, e);
    }
    const long long n = next_id_++;
    if (!r.seeded) r.sampler.seed = std::uint64_t(n);  // reproducible runs without asking for seeds
    const ResponseMeta meta{fmt::format("{}-{}", r.chat ? "chatcmpl" : "cmpl", n), std::int64_t(std::time(nullptr)),
                            opts_.model_name};
    auto job = std::make_shared<Job>(meta.id, std::move(r));
    if (!worker_.submit(job)) return refuse(res, shutting_down());
    if (job->request.stream) return stream(std::move(job), meta, res);
    respond_whole(*job, meta, res);
}

// Every token becomes one SSE chunk as soon as the worker sends it; the last
// chunk carries finish_reason, then (if asked) the usage chunk, then [DONE].
// A chat stream starts with a chunk whose delta holds the role alone.
void HttpServer::stream(std::shared_ptr<Job> job, const ResponseMeta& meta, httplib::Response& res) {
    const int prompt_tokens = int(job->request.prompt.size());
    auto generated = std::make_shared<int>(0);
    auto role_sent = std::make_shared<bool>(!job->request.chat);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [job, meta, generated, role_sent, prompt_tokens](std::size_t, httplib::DataSink& sink) {
            const bool chat = job->request.chat;
            std::string out;
            if (!*role_sent) out = sse(chat_chunk_json(meta, "assistant", "", "")), *role_sent = true;
            std::optional<StreamEvent> e = job->next(kPoll);
            if (!e) return out.empty() || sink.write(out.data(), out.size()) || (job->cancel(), false);
            *generated += e->tokens;
            const std::string_view fin = e->finish_reason;
            if (fin == "error") out += sse(error_json(ApiError(500, "internal_error", "", e->error)));
            else if (e->tokens > 0 || fin == "abort")
                out += sse(chat ? chat_chunk_json(meta, nullptr, e->text, fin) : chunk_json(meta, e->text, fin));
            else if (chat && !fin.empty()) out += sse(chat_chunk_json(meta, nullptr, "", fin));
            if (!fin.empty()) {
                const Usage u{prompt_tokens, *generated};
                if (job->request.include_usage) out += sse(chat ? chat_usage_chunk_json(meta, u) : usage_chunk_json(meta, u));
                out += "data: [DONE]\n\n";
            }
            // A failed write means the client has gone: stop generating for it.
            if (!out.empty() && !sink.write(out.data(), out.size())) {
                job->cancel();
                return false;
            }
            if (!e->finish_reason.empty()) sink.done();
            return true;
        },
        [job](bool success) {
            if (!success) job->cancel();
        });
}

void HttpServer::respond_whole(Job& job, const ResponseMeta& meta, httplib::Response& res) {
    std::string text;
    int generated = 0;
    for (;;) {
        std::optional<StreamEvent> e = job.next(kPoll);
        if (!e) continue;
        text += e->text;
        generated += e->tokens;
        if (e->finish_reason == "error") {
            res.status = 500;
            return res.set_content(error_json(ApiError(500, "internal_error", "", e->error)), "application/json");
        }
        if (e->finish_reason.empty()) continue;
        const Usage u{int(job.request.prompt.size()), generated};
        return res.set_content(job.request.chat ? chat_completion_json(meta, text, e->finish_reason, u)
                                                : completion_json(meta, text, e->finish_reason, u),
                               "application/json");
    }
}

}  // namespace pd::serve
