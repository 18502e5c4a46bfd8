// Lab 07 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-5).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track2-07
#include "exercise.hpp"

#include <algorithm>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab07 {

int StudentBlockAllocator::allocate() {
    TODO_EXERCISE("README task 1: the free stack first; else the front of parked_ (tell on_evict, uncache it)");
}

void StudentBlockAllocator::retain(int b) {
    (void)b;
    TODO_EXERCISE("README task 2: a block with refcount 0 is parked (cached) or free (an error); parked_at_ finds it");
}

void StudentBlockAllocator::release(int b) {
    (void)b;
    TODO_EXERCISE("README task 2: check first, then count down; at 0 the block parks or goes free");
}

void StudentBlockAllocator::set_cached(int b) {
    (void)b;
    TODO_EXERCISE("README task 2: only a held block may be cached");
}

std::uint64_t StudentPrefixCache::chain(std::uint64_t parent, std::span<const int> tokens) {
    (void)parent, (void)tokens;
    TODO_EXERCISE("README task 3: start from a mix of the parent key, fold in each id, mixing after each");
}

int StudentPrefixCache::match(std::span<const int> tokens, int max_blocks, std::vector<int>& blocks_out,
                              std::vector<std::uint64_t>& keys_out) {
    (void)tokens, (void)max_blocks, (void)blocks_out, (void)keys_out;
    TODO_EXERCISE("README task 4: key the next whole block after the last key found; a hit must match parent and ids too");
}

std::uint64_t StudentPrefixCache::insert(std::uint64_t parent, std::span<const int> tokens, int block) {
    (void)parent, (void)tokens, (void)block;
    TODO_EXERCISE("README task 4: compute the key; if the prefix is known already, leave everything as it is");
}

void StudentPrefixCache::forget(int block) {
    (void)block;
    TODO_EXERCISE("README task 5: erase the block's key from block_of_key_");
}

}  // namespace pd::lab07
