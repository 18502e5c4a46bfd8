#include "serve/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace pd::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view piece) {
    if (stopped_) return "";
    held_ += piece;
    // The earliest stop string wins: the client gets exactly the text before it.
    std::size_t first = std::string::npos;
    for (const std::string& s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    const std::size_t keep = partial_suffix();
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    if (stopped_) return "";
    return std::exchange(held_, std::string());
}

std::size_t StopMatcher::partial_suffix() const {
    std::size_t best = 0;
    for (const std::string& s : stops_) {
        const std::size_t most = std::min(held_.size(), s.size() - 1);
        for (std::size_t n = most; n > best; --n)
            if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
                best = n;
                break;
            }
    }
    return best;
}

}  // namespace pd::serve
