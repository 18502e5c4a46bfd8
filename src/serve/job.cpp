#include "serve/job.hpp"

namespace pd::serve {

void Job::emit(TokenEvent e) {
    {
        std::lock_guard lock(mu_);
        events_.push_back(std::move(e));
    }
    ready_.notify_one();
}

std::optional<TokenEvent> Job::next(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    if (!ready_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
    TokenEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
}

}  // namespace pd::serve
