// engine.paged: the paged KV cache against the contiguous one. The block
// allocator's invariants, the block table, attention read through it, the
// mixed-batch forward, prefix caching and the serving engine built on them.
#include <algorithm>
#include <vector>

#include "check.hpp"
#include "common.hpp"
#include "engine/block_allocator.hpp"

using namespace pd;
using namespace pd::test;

// --- the block allocator ------------------------------------------------------

TEST_CASE("engine.paged.allocator_every_block_free_xor_held") {
    BlockAllocator a(4);
    CHECK(a.available() == 4);
    std::vector<int> got;
    for (int i = 0; i < 4; i++) got.push_back(a.allocate());
    std::sort(got.begin(), got.end());
    const std::vector<int> all_four = {0, 1, 2, 3};
    CHECK_MESSAGE(got == all_four, "four allocations must hand out four different blocks");
    CHECK_MESSAGE(a.allocate() == -1, "with every block held, allocate() must say so (-1), not reuse one");
    CHECK(a.check_invariants() == "");
    a.release(2);
    CHECK(a.free_count() == 1);
    CHECK_MESSAGE(a.allocate() == 2, "the one free block is the one just released");
    CHECK(a.check_invariants() == "");
}

TEST_CASE("engine.paged.allocator_refuses_a_double_free") {
    BlockAllocator a(2);
    const int b = a.allocate();
    a.release(b);
    CHECK_THROWS_WITH_AS(a.release(b), doctest::Contains("double free"), UserError);
    CHECK_THROWS_AS(a.retain(b), UserError);  // a free block cannot gain a holder
    CHECK(a.check_invariants() == "");
}

TEST_CASE("engine.paged.allocator_shares_a_block_by_refcount") {
    BlockAllocator a(2);
    const int b = a.allocate();
    a.retain(b);  // a second sequence shares it
    CHECK(a.refcount(b) == 2);
    a.release(b);
    CHECK_MESSAGE(a.free_count() == 1, "a block still held by one sequence must not go free");
    a.release(b);
    CHECK(a.free_count() == 2);
    CHECK(a.check_invariants() == "");
}

TEST_CASE("engine.paged.allocator_parks_cached_blocks_and_evicts_lru") {
    BlockAllocator a(3);
    std::vector<int> evicted;
    a.on_evict = [&](int b) { evicted.push_back(b); };
    const int b0 = a.allocate(), b1 = a.allocate(), b2 = a.allocate();
    a.set_cached(b0), a.set_cached(b1);
    a.release(b1), a.release(b0), a.release(b2);  // parked: b1 then b0; b2 free
    CHECK(a.free_count() == 1);
    CHECK(a.parked_count() == 2);
    CHECK(a.available() == 3);
    CHECK(a.check_invariants() == "");
    CHECK_MESSAGE(a.allocate() == b2, "a free block goes before any parked one");
    CHECK(evicted.empty());
    a.retain(b1);  // a prefix hit takes b1 back from the parked list
    a.release(b1); // ... and parks it again, now the most recent
    CHECK_MESSAGE(a.allocate() == b0, "the least recently parked block is evicted first");
    CHECK(evicted.size() == 1);
    CHECK(evicted[0] == b0);
    CHECK_FALSE(a.is_cached(b0));
    CHECK(a.check_invariants() == "");
}
