// Prefix caching: a full block of K/V depends only on the tokens before and in
// it, so requests that start alike (a shared system prompt, a long document
// asked several questions) can share those blocks instead of recomputing them.
//
// The engine's PrefixIndex (prefix_index.hpp: the hash chain of keys).
// Cached blocks are shared read-only (a sequence appends into blocks of its
// own); a cached block no sequence holds is parked by the allocator and
// evicted least recently used, only when a free block is needed
// (block_allocator.hpp). Everything is sized at construction: lookups and
// insertions never touch the heap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/prefix_index.hpp"

namespace pd {

class PrefixCache final : public PrefixIndex {
public:
    // Registers itself as `blocks`' eviction hook: both must stay where they are.
    PrefixCache(BlockPool& blocks, int block_size);
    PrefixCache(const PrefixCache&) = delete;
    PrefixCache& operator=(const PrefixCache&) = delete;

    // The key of a block of `tokens` (block_size ids) after the block keyed `parent`.
    static std::uint64_t chain(std::uint64_t parent, std::span<const int> tokens);

    int match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
              std::vector<std::uint64_t>& keys_out) override;
    std::uint64_t insert(std::uint64_t parent, std::span<const int> tokens, int block) override;
    int cached_blocks() const override { return cached_; }

private:
    int find(std::uint64_t key, std::uint64_t parent, std::span<const int> tokens) const;
    void forget(int block);  // the allocator is reusing a parked block
    std::size_t bucket_of(std::uint64_t key) const { return key & (bucket_head_.size() - 1); }

    BlockPool& blocks_;
    int block_size_;
    int cached_ = 0;
    // Per block id (total): its key, its parent's key, its token ids (total,
    // block_size), and the next block in its bucket's chain (-1 ends).
    std::vector<std::uint64_t> key_, parent_;
    std::vector<int> tokens_, next_in_bucket_;
    std::vector<int> bucket_head_;  // (power of two >= total) first block of each bucket
};

}  // namespace pd
