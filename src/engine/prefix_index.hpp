// What the paged serving engine needs from a prefix cache: find the cached
// blocks that start a prompt, and learn the blocks a sequence has filled.
//
// A full block of K/V depends only on the tokens before and in it, so a block
// is keyed by a hash chain, key(i) = hash(key(i-1), the block's token ids),
// starting from kRoot: equal keys mean equal prefixes (a collision is caught
// by also comparing the parent key and the ids). The engine's own index is
// PrefixCache (prefix_cache.hpp); lab 07's student writes another
// (PagedOptions::make_prefix_index).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/block_pool.hpp"

namespace pd {

class PrefixIndex {
public:
    static constexpr std::uint64_t kRoot = 0x6a09e667f3bcc908ull;  // the parent key of block 0

    virtual ~PrefixIndex() = default;

    // The longest run of cached blocks, at most max_blocks, that prefixes
    // `tokens` (whole blocks only): appends their ids to `blocks_out` and
    // their keys to `keys_out`, each block retained for the caller. Returns how many.
    virtual int match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
                      std::vector<std::uint64_t>& keys_out) = 0;

    // Offers a held, full `block` of `tokens` (block_size ids) after the block
    // keyed `parent`; returns its key. A prefix already cached in another
    // block keeps that one, and `block` stays uncached.
    virtual std::uint64_t insert(std::uint64_t parent, std::span<const int> tokens, int block) = 0;

    virtual int cached_blocks() const = 0;
};

// Makes an index over `blocks` (it registers itself as blocks.on_evict, so
// `blocks` must outlive it and stay where it is).
using PrefixIndexFactory = std::function<std::unique_ptr<PrefixIndex>(BlockPool& blocks, int block_size)>;

}  // namespace pd
