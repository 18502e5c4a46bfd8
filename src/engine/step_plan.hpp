// The host layer: one forward pass described without a device.
//
// The engine turns a request (a prefill, a decode step, a paged batch step)
// into a StepPlan here, with every check a request goes through
// (request.hpp), once. A backend (the CPU forward in model.cpp, the CUDA
// engine in gpu/) only runs the plan's rows and returns the logits of its
// kept rows; commit() then advances the lengths of the sequences it wrote.
// Both backends take the same rows in the same order, so the GPU's staging
// of a plan can be checked against the CPU's rows without a GPU
// (tests/gpu/test_host.cpp).
//
//   prefill : rows 0 .. T-1 are the prompt tokens of one slot at positions
//             start .. start+T-1; kept: the last row, or every row.
//   decode  : row r is the one new token of slots[r], at its length; every
//             row kept.
//   batch   : the rows of each item whose logits are not wanted, item by
//             item, then every kept row, item by item: the kept rows are one
//             run at the end (what gpu::forward takes), in the order
//             forward_batch returns their logits.
#pragma once

#include <span>
#include <vector>

#include "io/config.hpp"
#include "engine/attention.hpp"
#include "engine/paged_kv_cache.hpp"
#include "engine/request.hpp"

namespace pd {

// Which logits prefill returns: the last prompt position's (the one that picks
// the first output token) or every position's (for `pdlab logits`, tests).
enum class Keep { last, all };

// One sequence's share of a mixed batch.
struct BatchItem {
    BlockTable* table = nullptr;   // its blocks: room for table->len + n positions already reserved
    std::span<const int> tokens;   // (n >= 1): a prefill chunk, or one decode token, from position table->len
    int logit_rows = 1;            // its last logit_rows rows get logits (0..n; n: a speculative verify)
};

enum class StepKind { prefill, decode, batch };

// What one sequence's length becomes once the pass has run.
struct SeqLength {
    int seq = 0;  // a cache slot (prefill, decode) or an item (batch)
    int len = 0;
};

// One forward pass. Its vectors keep their capacity from step to step: once
// the first steps have sized them, building a plan allocates nothing.
struct StepPlan {
    StepKind kind = StepKind::decode;
    int rows = 0;                    // rows (tokens) the pass takes
    std::vector<int> token;          // (rows) token id of each row
    std::vector<int> slot;           // (rows) its sequence: a cache slot, or (batch) an item (its table: tables[slot])
    std::vector<int> pos;            // (rows) its position in that sequence
    int first_kept = 0;              // rows first_kept .. first_kept + n_kept - 1 get logits, in this order
    int n_kept = 0;
    std::vector<SeqLength> lengths;  // (sequences) the lengths commit() sets
    std::vector<BlockTable*> tables; // batch: (items) each item's block table
    std::vector<PagedSpan> spans;    // batch: (runs) each run of one item's consecutive rows, for attention
};

// Room in `plan` for steps of `rows` rows (over as many sequences), so that
// no step up to that size allocates.
void reserve_plan(StepPlan& plan, int rows);

// Appends `tokens` to sequence `slot` of a contiguous cache whose lengths and
// context are `room`. UserError: see check_prefill.
void plan_prefill(StepPlan& plan, const Config& c, CacheRoom room, int slot, std::span<const int> tokens, Keep keep);

// One new token for each sequence in `slots`. UserError: see check_decode.
void plan_decode(StepPlan& plan, const Config& c, CacheRoom room, std::span<const int> slots,
                 std::span<const int> tokens);

// One pass over every item of a paged batch. UserError for what it cannot
// run: no tokens, ids outside the vocabulary, a sequence past the context or
// named twice, logit rows outside 0..n. Internal error when an item's table
// lacks the blocks for its tokens (the caller reserves them).
void plan_batch(StepPlan& plan, const Config& c, const PagedKVCache& cache, std::span<const BatchItem> items);

// Advances the lengths of the sequences the plan's pass wrote: of a prefill
// or decode step into the contiguous cache's seq_len (batch), of a batch step
// into each item's table->len.
void commit(const StepPlan& plan, std::span<int> seq_len);
void commit(const StepPlan& plan);

// The contiguous cache's lengths, (batch), change here and in commit() only,
// on either device. reset_length forgets sequence b; truncate_length keeps
// its first `len` positions (UserError unless 0 <= len <= seq_len[b]; a
// sequence cannot grow by truncation). UserError for a slot outside the batch.
void reset_length(std::span<int> seq_len, int b);
void truncate_length(std::span<int> seq_len, int b, int len);

}  // namespace pd
