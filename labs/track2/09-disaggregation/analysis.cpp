#include "analysis.hpp"

#include <algorithm>

namespace pd::lab09 {

namespace {

// When each long request waited for its first token: [arrival, first token].
struct Window {
    int request;
    double from_s, to_s;
};

std::vector<Window> long_prefills(std::span<const serve::RequestTiming> timings, int long_from) {
    std::vector<Window> w;
    for (std::size_t i = 0; i < timings.size(); i++)
        if (timings[i].prompt_tokens >= long_from && !timings[i].token_s.empty())
            w.push_back({int(i), timings[i].arrival_s, timings[i].token_s.front()});
    return w;
}

}  // namespace

ItlSplit split_itl(std::span<const serve::RequestTiming> timings, int long_from) {
    const std::vector<Window> windows = long_prefills(timings, long_from);
    ItlSplit s;
    for (std::size_t i = 0; i < timings.size(); i++) {
        const auto& t = timings[i].token_s;
        for (std::size_t k = 1; k < t.size(); k++) {
            const bool stalled = std::any_of(windows.begin(), windows.end(), [&](const Window& w) {
                return w.request != int(i) && w.from_s < t[k] && w.to_s > t[k - 1];
            });
            (stalled ? s.with_long_ms : s.without_long_ms).push_back(1e3 * (t[k] - t[k - 1]));
        }
    }
    return s;
}

}  // namespace pd::lab09
