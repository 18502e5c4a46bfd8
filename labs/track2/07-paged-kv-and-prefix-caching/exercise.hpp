// Lab 07: what you write. The bookkeeping of a paged KV cache: a block
// allocator with reference counts and a free list, and a prefix cache that
// finds the blocks a new prompt can reuse through a hash chain.
//
// Both plug into the REAL paged serving engine (src/serve/paged_serving_engine.hpp)
// through PagedOptions::make_block_pool and make_prefix_index: the engine's
// K/V tensors, block tables, attention and forward pass stay the kit's, and
// every block they touch is one YOUR allocator handed out and YOUR prefix
// cache found. The interfaces, with the rules every call follows:
//   pd::BlockPool   (src/engine/block_pool.hpp)   free / held / parked blocks
//   pd::PrefixIndex (src/engine/prefix_index.hpp) the hash chain of block keys
// The members are given (so that the tests and the program compile against
// them); you write the bodies in exercise.cpp.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.hpp"
#include "engine/prefix_index.hpp"
#include "serve/paged_serving_engine.hpp"

namespace pd::lab07 {

// A block's state follows from two fields (block_pool.hpp):
//   held   : refcount_[b] > 0
//   parked : refcount_[b] == 0 and cached_[b]   (on parked_, oldest first)
//   free   : refcount_[b] == 0 and !cached_[b]  (on free_)
class StudentBlockAllocator final : public pd::BlockPool {
public:
    // Given: every block free, the lowest ids on top of the stack (a fresh pool
    // hands out 0, 1, 2, ...).
    explicit StudentBlockAllocator(int total_blocks)
        : refcount_(std::size_t(total_blocks), 0), cached_(std::size_t(total_blocks), 0),
          parked_at_(std::size_t(total_blocks)) {
        for (int b = total_blocks - 1; b >= 0; b--) free_.push_back(b);
    }

    int total() const override { return int(refcount_.size()); }
    int free_count() const override { return int(free_.size()); }
    int parked_count() const override { return int(parked_.size()); }
    bool is_cached(int b) const override { return cached_[std::size_t(b)] != 0; }
    int refcount(int b) const override { return refcount_[std::size_t(b)]; }

    // Task 1: the top of free_ (the block freed last) if any is free, else
    // evict the least recently parked one (call on_evict(b) first, when set,
    // so the prefix cache forgets it; then it is not cached any more);
    // refcount 1. -1 when every block is held.
    int allocate() override;
    // Task 2: one more holder. A parked block stops being parked (leaves
    // parked_). Retaining a free block is an internal error: throw.
    void retain(int b) override;
    // Task 2: one holder less. At 0: parked (at the most recent end) when
    // cached, else back on the free list. Releasing a block nobody holds is a
    // double free: throw, and change nothing.
    void release(int b) override;
    // Task 2: a held block becomes cached. Caching a block nobody holds: throw.
    void set_cached(int b) override;

private:
    std::vector<int> refcount_;  // (total) sequences holding each block
    std::vector<char> cached_;   // (total) 1 while the prefix cache knows the block
    std::vector<int> free_;      // free block ids, a stack (take from the back)
    std::list<int> parked_;      // parked ids, front = least recently parked (evicted first)
    // (total) where a parked block sits in parked_, so that retain() unparks it in O(1).
    std::vector<std::list<int>::iterator> parked_at_;
};

// Cached blocks by key. key(block i of a prompt) = chain(key(block i-1),
// its block_size token ids), key(block -1) = kRoot (prefix_index.hpp).
class StudentPrefixCache final : public pd::PrefixIndex {
public:
    // Given: sizes the per-block arrays and registers forget() as blocks.on_evict.
    StudentPrefixCache(pd::BlockPool& blocks, int block_size)
        : blocks_(blocks), block_size_(block_size), key_(std::size_t(blocks.total())),
          parent_(std::size_t(blocks.total())), tokens_(std::size_t(blocks.total()) * std::size_t(block_size)) {
        block_of_key_.reserve(std::size_t(blocks.total()));
        blocks_.on_evict = [this](int b) { forget(b); };
    }
    StudentPrefixCache(const StudentPrefixCache&) = delete;
    StudentPrefixCache& operator=(const StudentPrefixCache&) = delete;

    // Task 3: the key of a block of `tokens` after the block keyed `parent`.
    // Deterministic; changes when the parent, any id, or the ids' order changes.
    static std::uint64_t chain(std::uint64_t parent, std::span<const int> tokens);

    // Task 4: walk the prompt a whole block at a time from kRoot; stop at the
    // first block not cached (same key AND same parent AND same ids), at
    // max_blocks, or where fewer than block_size tokens are left. Each block
    // found is retained for the caller, its id and key appended.
    int match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
              std::vector<std::uint64_t>& keys_out) override;

    // Task 4: remember a held full block (its key, parent and ids) and mark it
    // cached in the pool. When its prefix is cached already (in this block or
    // another), change nothing. Returns the key either way.
    std::uint64_t insert(std::uint64_t parent, std::span<const int> tokens, int block) override;

    int cached_blocks() const override { return int(block_of_key_.size()); }

private:
    // Task 5: the pool is reusing parked `block`: drop its entry.
    void forget(int block);

    pd::BlockPool& blocks_;
    int block_size_;
    std::unordered_map<std::uint64_t, int> block_of_key_;  // key -> the cached block holding that prefix
    std::vector<std::uint64_t> key_, parent_;              // (total) of each cached block
    std::vector<int> tokens_;                              // (total, block_size) ids of each cached block
};

// The engine's options with your allocator and prefix cache plugged in.
inline pd::serve::PagedOptions student_paged_options(int block_size, int total_blocks, bool prefix_caching) {
    pd::serve::PagedOptions o;
    o.block_size = block_size, o.total_blocks = total_blocks, o.prefix_caching = prefix_caching;
    o.make_block_pool = [](int n) { return std::make_unique<StudentBlockAllocator>(n); };
    o.make_prefix_index = [](pd::BlockPool& blocks, int bs) {
        return std::make_unique<StudentPrefixCache>(blocks, bs);
    };
    return o;
}

}  // namespace pd::lab07
