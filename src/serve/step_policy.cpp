#include "serve/step_policy.hpp"

#include <algorithm>

namespace pd::serve {

void ContinuousBatching::retire(const SchedulerState& s, std::vector<int>& out) {
    for (int id : s.waiting)
        if (s.seqs[std::size_t(id)].cancelled) out.push_back(id);
    for (int id : s.running)
        if (s.seqs[std::size_t(id)].cancelled) out.push_back(id);
}

void ContinuousBatching::admit(const SchedulerState& s, const StepLimits& lim,
                               std::vector<int>& out) {
    // Static batching waits for the whole batch to finish: one long answer
    // holds every slot that finished early.
    if (lim.static_batching && !s.running.empty()) return;
    const std::size_t room = std::size_t(std::max(0, lim.max_seqs - int(s.running.size())));
    for (std::size_t i = 0; i < s.waiting.size() && out.size() < room; i++)
        out.push_back(s.waiting[i]);
}

void ContinuousBatching::build_batch(const SchedulerState& s, const StepLimits& lim,
                                     std::vector<BatchItem>& out) {
    int budget = lim.max_tokens_per_step;
    auto is_decode = [&](int id) {
        const SeqState& q = s.seqs[std::size_t(id)];
        return q.remaining() == 1 && q.computed > 0;
    };
    // Decode rows first: each costs one token and keeps a stream flowing.
    for (int id : s.running)
        if (budget > 0 && is_decode(id)) out.push_back({id, 1}), budget--;
    // Then the tokens proposed after them, checked in the same items.
    for (BatchItem& b : out) {
        const int extra = std::min(s.seqs[std::size_t(b.seq)].proposed, budget);
        b.n += extra, budget -= extra;
    }
    // Then prefill chunks with what is left of the budget.
    for (int id : s.running) {
        const int rest = s.seqs[std::size_t(id)].remaining();
        if (budget == 0) break;
        if (is_decode(id) || rest < 1) continue;
        const int n = std::min(rest, budget);
        out.push_back({id, n});
        budget -= n;
    }
}

}  // namespace pd::serve
