// One completion request on its way through the server: the HTTP thread that
// received it and the worker that runs it share a Job. The worker sends one
// TokenEvent per generated token (the last one says why it ended); the HTTP
// thread reads them in order and can cancel the job at any time, e.g. when
// its client has gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "serve/openai_api.hpp"

namespace pd::serve {

using Clock = std::chrono::steady_clock;

struct TokenEvent {
    std::string text;           // text now safe to show the client (may be "": see StopMatcher)
    int tokens = 1;             // generated tokens this event stands for (0 for an end with no token)
    std::string finish_reason;  // "" while running; then "stop", "length", "cancelled", "abort" or "error"
    std::string error;          // the message when finish_reason is "error"
};

class Job {
public:
    Job(std::string id, CompletionRequest request)
        : id(std::move(id)), request(std::move(request)), received(Clock::now()) {}

    const std::string id;
    const CompletionRequest request;
    const Clock::time_point received;  // when the server accepted it (parsed and checked)

    // Worker side: one event per token, in order; the last one has a finish_reason.
    void emit(TokenEvent e);
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

    // HTTP side: the next event, waiting at most `wait` (nullopt on timeout).
    std::optional<TokenEvent> next(std::chrono::milliseconds wait);
    // Asks the worker to stop at its next token; harmless after the end.
    void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

private:
    std::mutex mu_;
    std::condition_variable ready_;
    std::deque<TokenEvent> events_;
    std::atomic<bool> cancelled_{false};
};

}  // namespace pd::serve
