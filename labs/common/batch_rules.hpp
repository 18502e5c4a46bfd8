// The batch rule of labs 06 and 08, restated for their tests (lab 06's README
// "One step, one batch", lab 08's "The planner"): decode rows first, one token
// each, then prefill chunks of min(remaining(), budget left), both in running
// order, while the budget lasts. Written as two passes over one loop, not the
// way the engine's ContinuousBatching (src/serve/step_policy.cpp) writes it, so
// that the tests compute the answer another way than the code they judge.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "serve/step_policy.hpp"

namespace pd::lab {

// The items a step of `budget` tokens runs over s.running (s.waiting unread).
inline std::vector<pd::serve::BatchItem> expected_batch(const pd::serve::SchedulerState& s, int budget) {
    std::vector<pd::serve::BatchItem> out;
    auto decodes = [&](int id) {
        const pd::serve::SeqState& q = s.seqs[std::size_t(id)];
        return q.remaining() == 1 && q.computed > 0;
    };
    for (int pass = 0; pass < 2; pass++)  // 0: decode rows, 1: prefill chunks
        for (int id : s.running) {
            const int rest = s.seqs[std::size_t(id)].remaining();
            const bool wanted = pass == 0 ? decodes(id) : (!decodes(id) && rest > 0);
            const int n = std::min(pass == 0 ? 1 : rest, budget);
            if (wanted && n > 0) out.push_back({id, n}), budget -= n;
        }
    return out;
}

}  // namespace pd::lab
