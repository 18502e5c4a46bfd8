#include "engine/stop_rule.hpp"

#include <algorithm>

namespace pd {

StopReason stop_after(const StopLimits& l, int prompt_len, int generated, int token) {
    // EOS first: an EOS that is also the last token allowed is reported as EOS.
    if (is_eos(l.eos_ids, token)) return StopReason::eos;
    return stop_room(l, prompt_len, generated) <= 0 ? StopReason::length : StopReason::none;
}

int stop_room(const StopLimits& l, int prompt_len, int generated) {
    // prompt_len + generated <= max_positions + 1: the last token is never fed back.
    return std::min(l.max_tokens - generated, l.max_positions + 1 - prompt_len - generated);
}

bool is_eos(std::span<const int> eos_ids, int token) {
    return std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
}

std::vector<int> eos_ids(std::span<const int> ids, bool honour) {
    if (!honour) return {};
    return {ids.begin(), ids.end()};
}

}  // namespace pd
