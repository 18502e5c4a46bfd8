// The blocks of a paged KV cache: which are free, which sequences hold, and
// which hold a cached prefix nobody is using right now.
//
// A block is always in exactly one of three states:
//   free    : on the free list, holds nothing worth keeping;
//   held    : refcount > 0, the number of sequences whose block table names it
//             (more than one when a prefix is shared);
//   parked  : refcount 0 but marked cached (prefix_cache.hpp): its K/V are
//             still findable, so it waits on a least-recently-used list and is
//             taken back only when no free block is left.
// Everything is sized at construction (lists are intrusive, threaded through
// arrays indexed by block id): allocating and releasing never touch the heap.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pd {

class BlockAllocator {
public:
    explicit BlockAllocator(int total_blocks = 0);

    int total() const { return int(ref_.size()); }
    int free_count() const { return int(free_.size()); }
    int parked_count() const { return parked_; }
    // Blocks allocate() can still hand out: free ones, then parked ones.
    int available() const { return free_count() + parked_count(); }

    // A block for a new owner (refcount 1): a free one, else the least recently
    // parked one (after telling on_evict, so its prefix entry goes). -1 when
    // every block is held.
    int allocate();

    // One more sequence holds block b (held, or parked: it leaves the LRU list).
    void retain(int b);
    // One sequence less holds block b; at 0 it is parked if cached, else freed.
    // Releasing a block nobody holds is an internal error (a double free).
    void release(int b);

    // Marks a held block as a cached prefix block: at refcount 0 it parks
    // instead of going free.
    void set_cached(int b);
    bool is_cached(int b) const { return cached_[b] != 0; }
    int refcount(int b) const { return ref_[b]; }

    // Called with a parked block's id just before allocate() reuses it.
    std::function<void(int)> on_evict;

    // Every block free xor held xor parked, the counts agree with the lists.
    // For tests: returns a description of the first violation, or "".
    std::string check_invariants() const;

private:
    void unpark(int b);

    std::vector<int> ref_;      // (total) sequences holding each block
    std::vector<char> cached_;  // (total) 1 when the prefix cache knows the block
    std::vector<char> on_free_; // (total) 1 when on the free list
    std::vector<int> free_;     // stack of free block ids, capacity total
    // Parked blocks, a doubly linked list through prev_/next_ (-1 ends):
    // head_ is the least recently parked (evicted first), tail_ the latest.
    std::vector<int> prev_, next_;
    int head_ = -1, tail_ = -1, parked_ = 0;
};

}  // namespace pd
