#include "paged_rows.hpp"

#include <algorithm>

#include "common.hpp"

namespace pd::gpu {

void lay_out_paged_rows(PagedRows& out, const PagedKVCache& pool, std::span<const BatchItem> items, int max_blocks) {
    out.token.clear(), out.slot.clear(), out.pos.clear();
    out.tables.assign(items.size() * std::size_t(max_blocks), 0);
    out.n_logits = 0;
    auto add_row = [&](int i, int j) {
        out.token.push_back(items[i].tokens[j]);
        out.slot.push_back(i);
        out.pos.push_back(items[i].table->len + j);
    };
    for (int i = 0; i < int(items.size()); i++) {
        const BlockTable& t = *items[i].table;
        const int n = int(items[i].tokens.size());
        if (blocks_for(pool, t.len + n) > int(t.blocks.size()) || int(t.blocks.size()) > max_blocks)
            fail("internal error: {} positions written to a sequence with {} blocks reserved (at most {})", t.len + n,
                 t.blocks.size(), max_blocks);
        std::copy(t.blocks.begin(), t.blocks.end(), out.tables.begin() + std::size_t(i) * max_blocks);
        for (int j = 0; j < n - items[i].logit_rows; j++) add_row(i, j);
    }
    for (int i = 0; i < int(items.size()); i++) {
        const int n = int(items[i].tokens.size());
        for (int j = n - items[i].logit_rows; j < n; j++) add_row(i, j);
        out.n_logits += items[i].logit_rows;
    }
}

}  // namespace pd::gpu
