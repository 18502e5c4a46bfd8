#include "engine/paged_kv_cache.hpp"

#include <cstring>

#include <fmt/format.h>

#include "common.hpp"
#include "engine/block_allocator.hpp"
#include "engine/host_memory.hpp"

namespace pd {

PagedKVCache make_paged_kv_cache(int n_layers, int n_kv_heads, int head_dim, int block_size,
                                 int total_blocks, int max_seq, const BlockPoolFactory& make_pool,
                                 bool on_host) {
    if (block_size < 1) fail("a block size of {} positions: give at least 1 (16 is the usual)", block_size);
    if (total_blocks < 1)
        fail("a paged KV cache of {} blocks cannot hold a single position: give at least 1 block "
             "(or more KV memory)", total_blocks);
    PagedKVCache c;
    c.n_layers = n_layers, c.n_kv_heads = n_kv_heads, c.head_dim = head_dim;
    c.block_size = block_size, c.max_seq = max_seq;
    // Before anything is allocated, the allocator's lists included.
    if (on_host)
        check_fits_in_memory(c.bytes_per_block() * std::size_t(total_blocks),
                             fmt::format("a paged KV cache of {} blocks x {} positions", total_blocks, block_size),
                             "ask for fewer blocks (or fewer KV bytes)");
    c.blocks = make_pool ? make_pool(total_blocks) : std::make_unique<BlockAllocator>(total_blocks);
    if (!c.blocks || c.blocks->total() != total_blocks)
        fail("internal error: the block pool factory did not make a pool of {} blocks", total_blocks);
    if (!on_host) return c;
    const std::size_t n = std::size_t(n_layers) * total_blocks * c.block_stride();
    c.k.assign(n, 0.0f);
    c.v.assign(n, 0.0f);
    return c;
}

void paged_write(PagedKVCache& c, int layer, const BlockTable& t, int pos, const float* k_new, const float* v_new) {
    const int block = t.blocks[pos / c.block_size];
    const std::size_t row = std::size_t(pos % c.block_size) * c.head_dim;
    for (int h = 0; h < c.n_kv_heads; h++) {
        std::memcpy(paged_key_tile(c, layer, block, h) + row, k_new + std::size_t(h) * c.head_dim,
                    sizeof(float) * c.head_dim);
        std::memcpy(paged_value_tile(c, layer, block, h) + row, v_new + std::size_t(h) * c.head_dim,
                    sizeof(float) * c.head_dim);
    }
}

bool paged_reserve(PagedKVCache& c, BlockTable& t, int len) {
    const int need = blocks_for(c, len) - int(t.blocks.size());
    if (need <= 0) return true;
    if (need > c.blocks->available()) return false;
    for (int i = 0; i < need; i++) t.blocks.push_back(c.blocks->allocate());
    return true;
}

// Every layer's K and V of block `from` into block `to`.
static void copy_block(PagedKVCache& c, int from, int to) {
    if (c.k.empty()) fail("internal error: copy on write of a block stored on a GPU (only the CPU truncates)");
    for (int l = 0; l < c.n_layers; l++) {
        std::memcpy(paged_key_tile(c, l, to, 0), paged_key_tile(c, l, from, 0), sizeof(float) * c.block_stride());
        std::memcpy(paged_value_tile(c, l, to, 0), paged_value_tile(c, l, from, 0), sizeof(float) * c.block_stride());
    }
}

bool paged_truncate(PagedKVCache& c, BlockTable& t, int len) {
    if (len < 0 || len > t.len) fail("internal error: truncate to {} positions of a sequence of {}", len, t.len);
    const int keep = blocks_for(c, len);
    const bool writes_into_tail = len % c.block_size != 0;
    if (writes_into_tail) {
        const int tail = t.blocks[keep - 1];
        if (c.blocks->refcount(tail) > 1 || c.blocks->is_cached(tail)) {  // others read it: copy on write
            const int copy = c.blocks->allocate();
            if (copy < 0) return false;
            copy_block(c, tail, copy);
            c.blocks->release(tail);
            t.blocks[keep - 1] = copy;
        }
    }
    while (int(t.blocks.size()) > keep) {
        c.blocks->release(t.blocks.back());
        t.blocks.pop_back();
    }
    t.len = len;
    return true;
}

void paged_release(PagedKVCache& c, BlockTable& t) {
    for (int b : t.blocks) c.blocks->release(b);
    t.blocks.clear();
    t.len = 0;
}

}  // namespace pd
