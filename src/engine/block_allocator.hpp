// The engine's BlockPool (block_pool.hpp: the three states free, held,
// parked, and what each call does). Everything is sized at construction
// (lists are intrusive, threaded through arrays indexed by block id):
// allocating and releasing never touch the heap.
#pragma once

#include <string>
#include <vector>

#include "engine/block_pool.hpp"

namespace pd {

class BlockAllocator final : public BlockPool {
public:
    explicit BlockAllocator(int total_blocks = 0);

    int total() const override { return int(ref_.size()); }
    int free_count() const override { return int(free_.size()); }
    int parked_count() const override { return parked_; }
    int allocate() override;
    void retain(int b) override;  // a parked block leaves the LRU list
    void release(int b) override;
    void set_cached(int b) override;
    bool is_cached(int b) const override { return cached_[b] != 0; }
    int refcount(int b) const override { return ref_[b]; }

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
