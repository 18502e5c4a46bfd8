// Lab 08 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track2/08-chunked-prefill/exercise.hpp"

#include <algorithm>

#include "common.hpp"

namespace pd::lab08 {

namespace {

// The last sampled token of a started sequence: one token to run.
bool is_decode_row(const SeqState& q) { return q.remaining() == 1 && q.computed > 0; }

}  // namespace

void plan_step(const SchedulerState& s, int budget, std::vector<BatchItem>& out) {
    if (budget < 1) fail("the token budget of a step must be at least 1 token, got {}", budget);
    int left = budget;
    // Decode rows first: one token each keeps every stream flowing.
    for (int id : s.running) {
        if (left == 0) return;
        if (is_decode_row(s.seqs[std::size_t(id)])) out.push_back({id, 1}), left--;
    }
    // Then prefill chunks, oldest first, from what the decode rows left.
    for (int id : s.running) {
        if (left == 0) return;
        const SeqState& q = s.seqs[std::size_t(id)];
        if (is_decode_row(q) || q.remaining() < 1) continue;
        const int n = std::min(q.remaining(), left);
        out.push_back({id, n});
        left -= n;
    }
}

}  // namespace pd::lab08
