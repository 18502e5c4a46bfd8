// Lab 17 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track4/17-goodput-capstone/exercise.hpp"

#include <algorithm>
#include <climits>

namespace pd::lab17 {

namespace {

const SeqState& state(const SchedulerState& s, int id) { return s.seqs[std::size_t(id)]; }

bool is_decode_row(const SeqState& q) { return q.remaining() == 1 && q.computed > 0; }

// A request that has waited past the TTFT objective counts for nothing
// whatever comes next: it goes after every request that can still count.
bool lost(const SeqState& q, const ReplayTime& time, const Slo& slo) {
    return (time.now_s - q.arrival_s) * 1e3 > slo.ttft_ms;
}

// The largest chunk n in [0, most] of a sequence at `start` that keeps a step
// of `rows` rows and `pairs` pairs so far within `limit_ms` (the cost grows with n).
int largest_chunk(const StepCostModel& cost, long long rows, long long pairs, int start, int most,
                  double limit_ms) {
    int lo = 0, hi = most;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (cost.step_ms(rows + mid, pairs + attended_pairs(start, mid)) <= limit_ms)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

}  // namespace

ServeConfig choose_config(const TraceSummary& t, const Slo& slo, const PrecisionCosts& costs,
                          const MemoryCap& cap) {
    ServeConfig c;
    // bf16: half of f32's weight bytes (a cheaper step), and on the family's
    // traces 80-91% of f32's tokens, over the quality floor; int8 (70-77%) is
    // cheaper still but under the floor on some traces, int4 (11-35%) on all.
    c.precision = "bf16";
    const StepCostModel cost = costs.at(c.precision);
    // Blocks of 16: a shared prefix is found in whole blocks, so small blocks
    // find more of it; the whole memory goes to the pool.
    c.block_size = 16;
    c.kv_blocks = int(std::min<long long>(INT_MAX, cap.kv_positions / c.block_size));
    c.prefix_caching = t.shared_prefix_share > 0;
    // As many sequences as the memory holds at a typical length, so that a
    // burst is admitted without preempting (a preemption recomputes and
    // breaks the ITL of the sequence it stops).
    const long long typical = std::max(1, t.prompt.p50 + t.output.p90);
    c.max_seqs = int(std::clamp<long long>(cap.kv_positions / typical, 1, 64));
    // The budget: the most rows one step can take within the ITL objective,
    // priced at the longest request's attention (build_batch prices each step exactly).
    c.max_tokens_per_step = std::max(
        1, largest_chunk(cost, 0, 0, int(std::min<long long>(t.longest, INT_MAX / 2)), 8192, slo.itl_ms));
    return c;
}

void GoodputPolicy::retire(const SchedulerState& s, std::vector<int>& out) {
    for (int id : s.waiting)
        if (state(s, id).cancelled) out.push_back(id);
    for (int id : s.running)
        if (state(s, id).cancelled) out.push_back(id);
}

// Shortest prompt first among those that can still meet the TTFT objective (a
// short prompt reaches its first token soonest), then the lost ones.
void GoodputPolicy::admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) {
    const int room = std::max(0, lim.max_seqs - int(s.running.size()));
    order_.assign(s.waiting.begin(), s.waiting.end());
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
        const SeqState &qa = state(s, a), &qb = state(s, b);
        return std::pair(lost(qa, time_, slo_), qa.tokens) < std::pair(lost(qb, time_, slo_), qb.tokens);
    });
    for (int id : order_) {
        if (int(out.size()) == room) break;
        out.push_back(id);
    }
}

// Every decode row first (a stream that skips a step breaks its ITL), then
// prompt chunks, least remaining first (lost ones last), each as large as the
// step's price allows within the ITL objective.
void GoodputPolicy::build_batch(const SchedulerState& s, const StepLimits& lim, std::vector<BatchItem>& out) {
    int left = lim.max_tokens_per_step;
    long long rows = 0, pairs = 0;
    for (int id : s.running) {
        const SeqState& q = state(s, id);
        if (left == 0) break;
        if (!is_decode_row(q)) continue;
        out.push_back({id, 1}), left--, rows++;
        pairs += attended_pairs(q.computed, 1);
    }
    order_.clear();
    for (int id : s.running)
        if (!is_decode_row(state(s, id)) && state(s, id).remaining() > 0) order_.push_back(id);
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
        const SeqState &qa = state(s, a), &qb = state(s, b);
        return std::pair(lost(qa, time_, slo_), qa.remaining()) < std::pair(lost(qb, time_, slo_), qb.remaining());
    });
    for (int id : order_) {
        const SeqState& q = state(s, id);
        int n = largest_chunk(cost_, rows, pairs, q.computed, std::min(q.remaining(), left), slo_.itl_ms);
        // A step with nothing in it never ends the replay: the first chunk runs even over the objective.
        if (n == 0 && out.empty()) n = std::min({q.remaining(), left, 16});
        if (n == 0) break;
        out.push_back({id, n}), left -= n, rows += n;
        pairs += attended_pairs(q.computed, n);
    }
}

}  // namespace pd::lab17
