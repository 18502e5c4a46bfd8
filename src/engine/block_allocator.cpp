#include "engine/block_allocator.hpp"

#include <fmt/format.h>

#include "common.hpp"

namespace pd {

BlockAllocator::BlockAllocator(int total_blocks)
    : ref_(total_blocks, 0), cached_(total_blocks, 0), on_free_(total_blocks, 1),
      prev_(total_blocks, -1), next_(total_blocks, -1) {
    free_.reserve(total_blocks);
    // Lowest ids on top of the stack: a fresh cache fills blocks 0, 1, 2, ...
    for (int b = total_blocks - 1; b >= 0; b--) free_.push_back(b);
}

int BlockAllocator::allocate() {
    int b = -1;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
        on_free_[b] = 0;
    } else if (head_ >= 0) {
        b = head_;
        unpark(b);
        cached_[b] = 0;
        if (on_evict) on_evict(b);
    } else {
        return -1;
    }
    ref_[b] = 1;
    return b;
}

void BlockAllocator::retain(int b) {
    if (on_free_[b]) fail("internal error: block {} retained while free", b);
    if (ref_[b] == 0) unpark(b);
    ref_[b]++;
}

void BlockAllocator::release(int b) {
    if (ref_[b] <= 0) fail("internal error: block {} released but no sequence holds it (double free)", b);
    if (--ref_[b] > 0) return;
    if (cached_[b]) {  // park at the most recent end
        prev_[b] = tail_, next_[b] = -1;
        (tail_ >= 0 ? next_[tail_] : head_) = b;
        tail_ = b;
        parked_++;
    } else {
        on_free_[b] = 1;
        free_.push_back(b);
    }
}

void BlockAllocator::set_cached(int b) {
    if (ref_[b] <= 0) fail("internal error: block {} cached while nobody holds it", b);
    cached_[b] = 1;
}

void BlockAllocator::unpark(int b) {
    (prev_[b] >= 0 ? next_[prev_[b]] : head_) = next_[b];
    (next_[b] >= 0 ? prev_[next_[b]] : tail_) = prev_[b];
    prev_[b] = next_[b] = -1;
    parked_--;
}

std::string BlockAllocator::check_invariants() const {
    std::vector<char> in_lru(ref_.size(), 0);
    int n_lru = 0;
    for (int b = head_; b >= 0; b = next_[b], n_lru++) {
        if (n_lru > total()) return "the parked list has a cycle";
        in_lru[b] = 1;
    }
    if (n_lru != parked_) return fmt::format("{} parked blocks counted, {} on the list", parked_, n_lru);
    int n_free = 0;
    for (int b = 0; b < total(); b++) {
        const int states = int(on_free_[b] != 0) + int(ref_[b] > 0) + int(in_lru[b] != 0);
        if (states != 1)
            return fmt::format("block {} is in {} states (free {}, refcount {}, parked {})", b, states,
                               int(on_free_[b]), ref_[b], int(in_lru[b]));
        if (in_lru[b] && !cached_[b]) return fmt::format("block {} parked but not cached", b);
        n_free += on_free_[b];
    }
    if (n_free != free_count()) return fmt::format("{} blocks marked free, {} on the free list", n_free, free_count());
    return "";
}

}  // namespace pd
