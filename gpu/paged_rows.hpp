// The host side of a paged step on the GPU (C++20, g++): the rows of a mixed
// batch and the block tables the kernels read them through, laid out on the
// host and then copied to the device (cuda_engine.cpp). Its own file so that
// tests/gpu/test_host.cpp checks the layout on any machine.
#pragma once

#include <span>
#include <vector>

#include "engine/model.hpp"

namespace pd::gpu {

// One forward pass over the items of a paged step: every row is one query,
// of sequence slot[r] (item slot[r], whose block table is row slot[r] of
// `tables`) at position pos[r].
struct PagedRows {
    std::vector<int> token, slot, pos;  // (rows)
    std::vector<int> tables;            // (items, max_blocks) block ids; 0 past a sequence's blocks (never read)
    int n_logits = 0;                   // the last n_logits rows are the ones whose logits are wanted
};

// Item i's tokens at positions table->len .. in order, except that the last
// logit_rows rows of each item go to the end, in item order: the rows to
// keep are then one run, as gpu::forward takes them. Rows may be in
// any order because every row's K/V is written before attention reads any.
// Fails (internal error) when an item's table lacks room for its tokens.
void lay_out_paged_rows(PagedRows& out, const PagedKVCache& pool, std::span<const BatchItem> items, int max_blocks);

}  // namespace pd::gpu
