#include "engine/step_plan.hpp"

#include "common.hpp"

namespace pd {

void reserve_plan(StepPlan& plan, int rows) {
    const std::size_t R = std::size_t(rows);
    plan.token.reserve(R);
    plan.slot.reserve(R);
    plan.pos.reserve(R);
    plan.lengths.reserve(R);
    plan.tables.reserve(R);
    plan.spans.reserve(2 * R);  // at most two runs per item
}

namespace {

void start_plan(StepPlan& plan, StepKind kind) {
    plan.kind = kind;
    plan.rows = 0;
    plan.token.clear(), plan.slot.clear(), plan.pos.clear();
    plan.lengths.clear(), plan.tables.clear(), plan.spans.clear();
}

void add_row(StepPlan& plan, int token, int slot, int pos) {
    plan.token.push_back(token);
    plan.slot.push_back(slot);
    plan.pos.push_back(pos);
    plan.rows++;
}

// A sequence named twice would have its rows write the same positions.
void check_batch(const Config& c, const PagedKVCache& cache, std::span<const BatchItem> items) {
    for (auto it = items.begin(); it != items.end(); ++it) {
        if (it->tokens.empty()) fail("a batch item with no tokens: each brings a chunk or one decode token");
        if (it->logit_rows < 0 || it->logit_rows > int(it->tokens.size()))
            fail("internal error: {} logit rows asked of a batch item of {} tokens", it->logit_rows,
                 it->tokens.size());
        check_tokens(c, it->tokens);
        if (it->table->len + int(it->tokens.size()) > cache.max_seq)
            fail("{} tokens after {} cached ones exceed the context length of {}", it->tokens.size(), it->table->len,
                 cache.max_seq);
        for (auto prev = items.begin(); prev != it; ++prev)
            if (prev->table == it->table) fail("one sequence appears twice in a batch: give it one item per step");
    }
}

// Rows j0 .. j1-1 of item i, appended as one run of attention. A one-token
// item's run is a decode query; the runs of a longer chunk stay prefill
// queries even when one row long (PagedSpan::chunk).
void add_run(StepPlan& plan, const BatchItem& item, int i, int j0, int j1) {
    if (j0 == j1) return;
    const BlockTable& t = *item.table;
    plan.spans.push_back({&t, plan.rows, t.len + j0, j1 - j0, item.tokens.size() > 1});
    for (int j = j0; j < j1; j++) add_row(plan, item.tokens[j], i, t.len + j);
}

}  // namespace

void plan_prefill(StepPlan& plan, const Config& c, CacheRoom room, int slot, std::span<const int> tokens, Keep keep) {
    check_prefill(c, room, slot, tokens);
    start_plan(plan, StepKind::prefill);
    const int T = int(tokens.size()), start = room.seq_len[slot];
    for (int i = 0; i < T; i++) add_row(plan, tokens[i], slot, start + i);
    plan.first_kept = keep == Keep::all ? 0 : T - 1;
    plan.n_kept = keep == Keep::all ? T : 1;
    plan.lengths.push_back({slot, start + T});
}

void plan_decode(StepPlan& plan, const Config& c, CacheRoom room, std::span<const int> slots,
                 std::span<const int> tokens) {
    check_decode(c, room, slots, tokens);
    start_plan(plan, StepKind::decode);
    for (std::size_t r = 0; r < tokens.size(); r++) {
        add_row(plan, tokens[r], slots[r], room.seq_len[slots[r]]);
        plan.lengths.push_back({slots[r], room.seq_len[slots[r]] + 1});
    }
    plan.first_kept = 0;
    plan.n_kept = plan.rows;
}

void plan_batch(StepPlan& plan, const Config& c, const PagedKVCache& cache, std::span<const BatchItem> items) {
    check_batch(c, cache, items);
    start_plan(plan, StepKind::batch);
    for (int i = 0; i < int(items.size()); i++) {
        BlockTable& t = *items[i].table;
        const int n = int(items[i].tokens.size());
        if (blocks_for(cache, t.len + n) > int(t.blocks.size()))
            fail("internal error: {} positions written to a sequence with room reserved for {}", t.len + n,
                 int(t.blocks.size()) * cache.block_size);
        plan.tables.push_back(&t);
        plan.lengths.push_back({i, t.len + n});
        add_run(plan, items[i], i, 0, n - items[i].logit_rows);
    }
    plan.first_kept = plan.rows;
    for (int i = 0; i < int(items.size()); i++) {
        const int n = int(items[i].tokens.size());
        add_run(plan, items[i], i, n - items[i].logit_rows, n);
    }
    plan.n_kept = plan.rows - plan.first_kept;
}

void commit(const StepPlan& plan, std::span<int> seq_len) {
    if (plan.kind == StepKind::batch) fail("internal error: a batch step's lengths are its tables'");
    for (const SeqLength& s : plan.lengths) seq_len[s.seq] = s.len;
}

void commit(const StepPlan& plan) {
    if (plan.kind != StepKind::batch) fail("internal error: a prefill or decode step's lengths are its cache's");
    for (const SeqLength& s : plan.lengths) plan.tables[s.seq]->len = s.len;
}

void reset_length(std::span<int> seq_len, int b) {
    check_slot(b, int(seq_len.size()));
    seq_len[b] = 0;
}

void truncate_length(std::span<int> seq_len, int b, int len) {
    check_slot(b, int(seq_len.size()));
    if (len < 0 || len > seq_len[b])
        fail("cannot truncate sequence {} to {} positions: it holds {}, and truncation only "
             "shortens (give a length from 0 to {})", b, len, seq_len[b], seq_len[b]);
    seq_len[b] = len;
}

}  // namespace pd
