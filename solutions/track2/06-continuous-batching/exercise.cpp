// Lab 06 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track2/06-continuous-batching/exercise.hpp"

#include <algorithm>

namespace pd::lab06 {

namespace {

const SeqState& state(const SchedulerState& s, int id) { return s.seqs[std::size_t(id)]; }

// The last sampled token of a started sequence: one token to run.
bool is_decode_row(const SeqState& q) { return q.remaining() == 1 && q.computed > 0; }

}  // namespace

void StudentBatching::retire(const SchedulerState& s, std::vector<int>& out) {
    for (int id : s.waiting)
        if (state(s, id).cancelled) out.push_back(id);
    for (int id : s.running)
        if (state(s, id).cancelled) out.push_back(id);
}

void StudentBatching::admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) {
    const int running = int(s.running.size());
    if (lim.static_batching && running > 0) return;  // the batch must drain first
    const int room = std::max(0, lim.max_seqs - running);
    const int n = std::min(room, int(s.waiting.size()));
    out.insert(out.end(), s.waiting.begin(), s.waiting.begin() + n);
}

void StudentBatching::build_batch(const SchedulerState& s, const StepLimits& lim,
                                  std::vector<BatchItem>& out) {
    int left = lim.max_tokens_per_step;
    for (int id : s.running) {
        if (left == 0) break;
        if (is_decode_row(state(s, id))) out.push_back({id, 1}), left--;
    }
    for (int id : s.running) {
        if (left == 0) break;
        const SeqState& q = state(s, id);
        if (is_decode_row(q) || q.remaining() < 1) continue;
        const int n = std::min(q.remaining(), left);
        out.push_back({id, n});
        left -= n;
    }
}

}  // namespace pd::lab06
