// The paged KV cache: one pool of fixed-size blocks shared by every sequence,
// and per sequence a block table saying which block holds which positions.
// A sequence takes memory one block (block_size positions) at a time as it
// grows, instead of reserving its whole context up front as the contiguous
// KVCache (kv_cache.hpp, kept for track 1) does; sequences with a common
// prefix can share its blocks (prefix_cache.hpp).
//
// Layout per layer: K and V are each (total_blocks, n_kv_heads, block_size,
// head_dim). Layer outermost, so a layer's forward touches one region; within
// a block each KV head's (block_size, head_dim) tile is contiguous, so the
// attention kernels read a block exactly as they read the contiguous cache's
// (max_seq, head_dim) rows, one tile at a time (attention_kernels.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/block_pool.hpp"

namespace pd {

// One sequence's blocks in position order: position p lives in
// blocks[p / block_size], row p % block_size. `len` positions are cached.
struct BlockTable {
    std::vector<int> blocks;
    int len = 0;
};

struct PagedKVCache {
    int n_layers = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;
    int max_seq = 0;        // positions one sequence may reach (the model's context)
    // (layer, block, kv_head, block_size, head_dim); empty when the blocks
    // are stored on a GPU (the CUDA engine holds them there, engine.hpp's PagedForward).
    std::vector<float> k;
    std::vector<float> v;
    // Which blocks are free, held, parked: the engine's BlockAllocator unless
    // make_paged_kv_cache was given another pool (lab 07). On the heap, so a
    // prefix index may keep a reference while the cache moves.
    std::unique_ptr<BlockPool> blocks;
    // Rotary angles of positions 0 .. max_seq-1 (Llama; filled by model.hpp's make_paged_kv_cache).
    std::vector<float> rope_cos, rope_sin;  // (max_seq, head_dim/2)

    int total_blocks() const { return blocks->total(); }
    // Floats from one block to the next within a layer, and from one KV head's tile to the next.
    std::size_t block_stride() const { return std::size_t(n_kv_heads) * block_size * head_dim; }
    std::size_t tile_stride() const { return std::size_t(block_size) * head_dim; }
    // Bytes of K and V in one block, all layers: 2 * L * H_kv * block_size * D * 4.
    std::size_t bytes_per_block() const { return 2 * sizeof(float) * n_layers * block_stride(); }
    std::size_t capacity_bytes() const { return bytes_per_block() * std::size_t(total_blocks()); }
};

// Refuses (UserError) a zero block size or block count, or a pool larger than
// the memory available, before allocating it. `make_pool` makes the block
// bookkeeping; empty: the engine's BlockAllocator. on_host = false: the
// bookkeeping only, K and V stay empty (a GPU stores them and checks its memory).
PagedKVCache make_paged_kv_cache(int n_layers, int n_kv_heads, int head_dim, int block_size,
                                 int total_blocks, int max_seq, const BlockPoolFactory& make_pool = {},
                                 bool on_host = true);

// Blocks that hold `len` positions.
inline int blocks_for(const PagedKVCache& c, int len) { return (len + c.block_size - 1) / c.block_size; }

// The (block_size, head_dim) tile of KV head h in `block`, for one layer.
inline float* paged_key_tile(PagedKVCache& c, int layer, int block, int h) {
    return c.k.data() + (std::size_t(layer) * c.total_blocks() + block) * c.block_stride() + h * c.tile_stride();
}
inline float* paged_value_tile(PagedKVCache& c, int layer, int block, int h) {
    return c.v.data() + (std::size_t(layer) * c.total_blocks() + block) * c.block_stride() + h * c.tile_stride();
}
inline const float* paged_key_tile(const PagedKVCache& c, int layer, int block, int h) {
    return paged_key_tile(const_cast<PagedKVCache&>(c), layer, block, h);
}
inline const float* paged_value_tile(const PagedKVCache& c, int layer, int block, int h) {
    return paged_value_tile(const_cast<PagedKVCache&>(c), layer, block, h);
}

// One cached row through the table: head_dim floats for (layer, kv head h, position pos).
inline const float* paged_key(const PagedKVCache& c, int layer, const BlockTable& t, int h, int pos) {
    return paged_key_tile(c, layer, t.blocks[pos / c.block_size], h) + std::size_t(pos % c.block_size) * c.head_dim;
}
inline const float* paged_value(const PagedKVCache& c, int layer, const BlockTable& t, int h, int pos) {
    return paged_value_tile(c, layer, t.blocks[pos / c.block_size], h) + std::size_t(pos % c.block_size) * c.head_dim;
}

// Writes one position's K and V, each (n_kv_heads * head_dim), through the
// table. The block must be the sequence's own (refcount 1): shared blocks are read-only.
void paged_write(PagedKVCache& c, int layer, const BlockTable& t, int pos, const float* k_new, const float* v_new);

// Gives `t` blocks for `len` positions in all. False, with nothing
// allocated, when the allocator cannot supply them (parked prefix blocks count).
bool paged_reserve(PagedKVCache& c, BlockTable& t, int len);

// Forgets positions len.. (speculative decoding's rejected tokens): blocks
// past them go back to the allocator. If the block now holding the end is
// shared, it is copied first (copy on write), since later positions will be
// written into it; false, with nothing changed, when no block is free for the copy.
bool paged_truncate(PagedKVCache& c, BlockTable& t, int len);

// Lets go of every block of `t` and empties it.
void paged_release(PagedKVCache& c, BlockTable& t);

}  // namespace pd
