// Prefix caching: a full block of K/V depends only on the tokens before and in
// it, so requests that start alike (a shared system prompt, a long document
// asked several questions) can share those blocks instead of recomputing them.
//
// A block is keyed by a hash chain: key(i) = hash(key(i-1), the block's
// token ids), so equal keys mean equal prefixes up to a collision, and a
// collision is caught by also comparing the stored parent key and token ids.
// Cached blocks are shared read-only (a sequence appends into blocks of its
// own); a cached block no sequence holds is parked by the allocator and
// evicted least recently used, only when a free block is needed
// (block_allocator.hpp). Everything is sized at construction: lookups and
// insertions never touch the heap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_allocator.hpp"

namespace pd {

class PrefixCache {
public:
    // Registers itself as `blocks`' eviction hook: both must stay where they are.
    PrefixCache(BlockAllocator& blocks, int block_size);
    PrefixCache(const PrefixCache&) = delete;
    PrefixCache& operator=(const PrefixCache&) = delete;

    static constexpr std::uint64_t kRoot = 0x6a09e667f3bcc908ull;  // the parent key of block 0
    // The key of a block of `tokens` (block_size ids) after the block keyed `parent`.
    static std::uint64_t chain(std::uint64_t parent, std::span<const int> tokens);

    // The longest run of cached blocks, at most max_blocks, that prefixes
    // `tokens`: appends their ids to `blocks_out` and their keys to
    // `keys_out`, each retained for the caller. Returns how many.
    int match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
              std::vector<std::uint64_t>& keys_out);

    // Offers a sequence's full block of `tokens` after the block keyed `parent`;
    // returns its key. A prefix already cached in another block keeps that one.
    std::uint64_t insert(std::uint64_t parent, std::span<const int> tokens, int block);

    int cached_blocks() const { return cached_; }

private:
    int find(std::uint64_t key, std::uint64_t parent, std::span<const int> tokens) const;
    void forget(int block);  // the allocator is reusing a parked block
    std::size_t bucket_of(std::uint64_t key) const { return key & (bucket_head_.size() - 1); }

    BlockAllocator& blocks_;
    int block_size_;
    int cached_ = 0;
    // Per block id (total): its key, its parent's key, its token ids (total,
    // block_size), and the next block in its bucket's chain (-1 ends).
    std::vector<std::uint64_t> key_, parent_;
    std::vector<int> tokens_, next_in_bucket_;
    std::vector<int> bucket_head_;  // (power of two >= total) first block of each bucket
};

}  // namespace pd
