// What the paged KV cache needs from its block bookkeeping, apart from the
// K/V the blocks hold: hand out a block, count who holds it, take it back.
//
// A block is always in exactly one of three states:
//   free    : holds nothing worth keeping; allocate() may hand it out;
//   held    : refcount > 0, the number of sequences whose block table names it
//             (more than one when a prefix is shared);
//   parked  : refcount 0 but cached (a prefix index knows it): its K/V are
//             still findable, so it waits, least recently used first, and is
//             taken back only when no free block is left.
// The engine's own pool is BlockAllocator (block_allocator.hpp). Lab 07's
// student writes another; the paged cache and the serving engine take either
// (PagedOptions::make_block_pool).
#pragma once

#include <functional>
#include <memory>

namespace pd {

class BlockPool {
public:
    virtual ~BlockPool() = default;

    virtual int total() const = 0;
    virtual int free_count() const = 0;
    virtual int parked_count() const = 0;
    // Blocks allocate() can still hand out: free ones, then parked ones.
    int available() const { return free_count() + parked_count(); }

    // A block for a new owner (refcount 1): a free one, else the least recently
    // parked one (after calling on_evict with it, so the prefix index forgets
    // it). -1 when every block is held.
    virtual int allocate() = 0;
    // One more sequence holds block b (held, or parked: it stops being parked).
    virtual void retain(int b) = 0;
    // One sequence less holds block b; at 0 it is parked if cached, else free.
    // Releasing a block nobody holds is an internal error (a double free): throws.
    virtual void release(int b) = 0;
    // Marks a held block cached: at refcount 0 it parks instead of going free.
    virtual void set_cached(int b) = 0;
    virtual bool is_cached(int b) const = 0;
    virtual int refcount(int b) const = 0;

    // Called with a parked block's id just before allocate() reuses it.
    std::function<void(int)> on_evict;
};

// Makes a pool of `total_blocks` blocks, all free.
using BlockPoolFactory = std::function<std::unique_ptr<BlockPool>(int total_blocks)>;

}  // namespace pd
