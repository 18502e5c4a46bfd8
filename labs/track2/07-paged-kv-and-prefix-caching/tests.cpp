// Lab 07 tests: your block allocator against the rules of block_pool.hpp
// restated here the slow way, your prefix cache on hand-built chains, both
// inside the kit's real paged KV cache, and finally inside the real paged
// serving engine on the bundled model: greedy ids with and without prefix
// caching must be the same.
//   meson test -C build --suite track2-07        (all of them)
//   build/labs/track2/07-paged-kv-and-prefix-caching/lab07_tests --test-case='lab07.lookup.*'
#include <algorithm>
#include <set>
#include <string>

#include "engine/model.hpp"
#include "engine/paged_kv_cache.hpp"
#include "exercise.hpp"
#include "load/model_source.hpp"
#include "lab_test.hpp"

using namespace pd::lab07;
using pd::lab::Inputs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)

namespace {

// ---- The pool's rules, restated (block_pool.hpp, README task 1 and 2):
// every block's refcount and cached flag, the free stack and the parked
// blocks oldest first, kept in plain vectors and searched linearly.
struct PoolModel {
    std::vector<int> ref;
    std::vector<bool> cached;
    std::vector<int> free_stack, parked;

    explicit PoolModel(int n) : ref(std::size_t(n), 0), cached(std::size_t(n), false) {
        for (int b = n - 1; b >= 0; b--) free_stack.push_back(b);
    }
    int allocate(int* evicted) {
        int b = -1;
        if (!free_stack.empty()) {
            b = free_stack.back();
            free_stack.pop_back();
        } else if (!parked.empty()) {
            b = *evicted = parked.front();
            parked.erase(parked.begin());
            cached[std::size_t(b)] = false;
        } else {
            return -1;
        }
        ref[std::size_t(b)] = 1;
        return b;
    }
    void retain(int b) {
        if (ref[std::size_t(b)]++ == 0) parked.erase(std::find(parked.begin(), parked.end(), b));
    }
    void release(int b) {
        if (--ref[std::size_t(b)] > 0) return;
        (cached[std::size_t(b)] ? parked : free_stack).push_back(b);
    }
    std::vector<int> held() const {
        std::vector<int> out;
        for (int b = 0; b < int(ref.size()); b++)
            if (ref[std::size_t(b)] > 0) out.push_back(b);
        return out;
    }
};

// Every block's refcount and cached flag, and both counts, as the model has them.
void check_same_state(const StudentBlockAllocator& a, const PoolModel& m, const std::string& after) {
    INFO("after ", after);
    REQUIRE(a.total() == int(m.ref.size()));
    for (int b = 0; b < a.total(); b++) {
        CHECK_MESSAGE(a.refcount(b) == m.ref[std::size_t(b)], "refcount of block ", b);
        CHECK_MESSAGE(a.is_cached(b) == m.cached[std::size_t(b)], "cached flag of block ", b);
    }
    CHECK_MESSAGE(a.free_count() == int(m.free_stack.size()), "free blocks: refcount 0, not cached");
    CHECK_MESSAGE(a.parked_count() == int(m.parked.size()), "parked blocks: refcount 0, cached");
    CHECK_MESSAGE(a.available() == a.free_count() + a.parked_count(), "available = free + parked");
}

// One seeded run of random calls on a pool of a random size, each checked
// against the model. Returns what the grader compares: every allocate()'s
// answer and eviction, and the counts after every call.
std::vector<int> random_calls(Inputs& in) {
    const int n = in.integer(2, 12), calls = in.integer(150, 300);
    StudentBlockAllocator a(n);
    PoolModel m(n);
    int evicted_by_pool = -1;
    a.on_evict = [&](int b) {
        CHECK_MESSAGE(a.refcount(b) == 0, "on_evict is called with a parked block, before it is handed out");
        evicted_by_pool = b;
    };
    std::vector<int> seen;
    for (int i = 0; i < calls; i++) {
        const std::vector<int> held = m.held();
        const int op = held.empty() ? 0 : in.integer(0, 3);
        std::string what;
        if (op == 0) {
            int evicted = -1;
            evicted_by_pool = -1;
            const int want = m.allocate(&evicted), got = a.allocate();
            what = "allocate() = " + std::to_string(got);
            CHECK_MESSAGE(got == want, "allocate(): the top of the free stack (most recently freed), else "
                                       "the least recently parked block, else -1");
            CHECK_MESSAGE(evicted_by_pool == evicted, "on_evict is called exactly when a parked block is reused");
            seen.push_back(got), seen.push_back(evicted);
        } else {
            const int b = held[std::size_t(in.integer(0, int(held.size()) - 1))];
            if (op == 1) {
                a.release(b), m.release(b);
                what = "release(" + std::to_string(b) + ")";
            } else if (op == 2) {
                a.set_cached(b), m.cached[std::size_t(b)] = true;
                what = "set_cached(" + std::to_string(b) + ")";
            } else {
                a.retain(b), m.retain(b);
                what = "retain(" + std::to_string(b) + ")";
            }
        }
        // Now and then a sequence attaches a parked block (a prefix hit).
        if (!m.parked.empty() && in.integer(0, 5) == 0) {
            const int p = m.parked[std::size_t(in.integer(0, int(m.parked.size()) - 1))];
            a.retain(p), m.retain(p);
            what += ", then retain(parked " + std::to_string(p) + ")";
        }
        check_same_state(a, m, what);
        seen.push_back(a.free_count()), seen.push_back(a.parked_count());
    }
    return seen;
}

}  // namespace

// ---- Task 1 and 2: reference counts, the free stack, parking.

TEST_CASE("lab07.allocator.fresh_pool") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    StudentBlockAllocator a(3);
    CHECK_MESSAGE(a.allocate() == 0, "a fresh pool hands out 0, 1, 2 (the given constructor stacks them so)");
    CHECK(a.allocate() == 1);
    CHECK(a.allocate() == 2);
    CHECK_MESSAGE(a.allocate() == -1, "every block held: allocate() answers -1");
    for (int b = 0; b < 3; b++) CHECK_MESSAGE(a.refcount(b) == 1, "a new owner: refcount 1");
    a.release(1);
    CHECK_MESSAGE(a.allocate() == 1, "the block freed last comes back first (the top of the stack)");
}

TEST_CASE("lab07.allocator.random_calls_against_the_rules") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    Inputs in(1);
    for (int run = 0; run < 20; run++) {
        INFO("random run ", run);
        observe("allocations, evictions and counts of run " + std::to_string(run), random_calls(in));
    }
}

TEST_CASE("lab07.allocator.misuse_throws_and_changes_nothing") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    StudentBlockAllocator a(2);
    const int b = a.allocate();
    a.release(b);
    CHECK_THROWS_MESSAGE(a.release(b), "a double free must be refused: two owners would later get one block");
    CHECK_MESSAGE(a.free_count() == 2, "a refused release changes nothing (the block is on the free stack once)");
    CHECK(a.refcount(b) == 0);
    CHECK_THROWS_MESSAGE(a.retain(b), "retaining a free block must be refused: nobody's K/V are in it");
    CHECK_THROWS_MESSAGE(a.set_cached(b), "only a held block (filled by a sequence) may be cached");
    CHECK(a.allocate() == b);
    CHECK(a.allocate() != b);
    CHECK(a.free_count() == 0);
}

// ---- All or nothing, and running out, inside the kit's real paged KV cache.

TEST_CASE("lab07.exhaustion.reserve_is_all_or_nothing") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    Inputs in(2);
    for (int run = 0; run < 10; run++) {
        const int total = in.integer(3, 16), bs = in.integer(1, 8);
        INFO("run ", run, ": ", total, " blocks of ", bs, " positions");
        pd::PagedKVCache c = pd::make_paged_kv_cache(
            2, 2, 4, bs, total, 64 * bs, [](int n) { return std::make_unique<StudentBlockAllocator>(n); });
        std::vector<pd::BlockTable> tables;
        std::vector<int> granted;
        for (;;) {
            pd::BlockTable t;
            const int len = in.integer(1, 3 * bs), before = c.blocks->available();
            const bool ok = pd::paged_reserve(c, t, len);
            const int need = pd::blocks_for(c, len);
            CHECK_MESSAGE(ok == (need <= before), "reserve succeeds exactly when enough blocks are available");
            if (!ok) {
                CHECK_MESSAGE(t.blocks.empty(), "a refused reserve keeps none of the blocks it asked for");
                CHECK_MESSAGE(c.blocks->available() == before, "a refused reserve takes nothing from the pool");
                break;
            }
            CHECK(int(t.blocks.size()) == need);
            CHECK(c.blocks->available() == before - need);
            tables.push_back(std::move(t)), granted.push_back(need);
        }
        std::set<int> distinct;
        int handed = 0;
        for (const auto& t : tables) distinct.insert(t.blocks.begin(), t.blocks.end()), handed += int(t.blocks.size());
        CHECK_MESSAGE(int(distinct.size()) == handed, "no block may be in two tables: it would hold two sequences' K/V");
        for (auto& t : tables) pd::paged_release(c, t);
        CHECK_MESSAGE(c.blocks->free_count() == total, "every block released: all free again");
        observe("blocks granted in run " + std::to_string(run), granted);
    }
}

TEST_CASE("lab07.exhaustion.parked_blocks_are_taken_when_nothing_is_free") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    StudentBlockAllocator a(3);
    std::vector<int> evicted;
    a.on_evict = [&](int b) { evicted.push_back(b); };
    const int x = a.allocate(), y = a.allocate(), z = a.allocate();
    a.set_cached(x), a.set_cached(y);
    a.release(y), a.release(x);  // y parks first: it is the least recently parked
    CHECK(a.free_count() == 0);
    CHECK_MESSAGE(a.parked_count() == 2, "a cached block at refcount 0 parks; it does not go free");
    CHECK_MESSAGE(a.available() == 2, "parked blocks count as available");
    CHECK_MESSAGE(a.allocate() == y, "nothing free: the least recently parked block is reused");
    CHECK(a.allocate() == x);
    CHECK_MESSAGE((evicted == std::vector<int>{y, x}), "on_evict names each reused parked block, in order");
    CHECK_MESSAGE(!a.is_cached(x), "a reused block is not cached any more: its old prefix is gone");
    CHECK(a.allocate() == -1);
    a.release(z);
    CHECK(a.allocate() == z);
}

// ---- Task 3: the chain.

TEST_CASE("lab07.chain.key_depends_on_parent_every_id_and_order") {
    pd::lab::needs([] { StudentPrefixCache::chain(0, {}); });
    Inputs in(3);
    std::set<std::uint64_t> keys;
    int blocks = 0;
    bool all_ok = true;
    for (int run = 0; run < 200; run++) {
        const int bs = in.integer(2, 16);
        std::vector<int> ids = in.tokens(bs, 32000);
        const std::uint64_t parent = in.seed(), key = StudentPrefixCache::chain(parent, ids);
        INFO("block ", run, " of ", bs, " ids");
        bool ok = key == StudentPrefixCache::chain(parent, ids);
        CHECK_MESSAGE(ok, "the same parent and ids give the same key");
        ok = ok && key != StudentPrefixCache::chain(parent ^ 1, ids);
        CHECK_MESSAGE(key != StudentPrefixCache::chain(parent ^ 1, ids),
                      "another parent (another prefix before this block) must give another key");
        const int i = in.integer(0, bs - 1);
        std::vector<int> changed = ids;
        changed[std::size_t(i)] ^= 1 << in.integer(0, 14);
        ok = ok && key != StudentPrefixCache::chain(parent, changed);
        CHECK_MESSAGE(key != StudentPrefixCache::chain(parent, changed), "changing id ", i, " must change the key");
        std::vector<int> swapped = ids;
        if (swapped[0] != swapped[1]) {
            std::swap(swapped[0], swapped[1]);
            ok = ok && key != StudentPrefixCache::chain(parent, swapped);
            CHECK_MESSAGE(key != StudentPrefixCache::chain(parent, swapped),
                          "the same ids in another order are another prompt: another key");
        }
        all_ok = all_ok && ok;
        keys.insert(key), blocks++;
    }
    CHECK_MESSAGE(int(keys.size()) == blocks, "200 random blocks gave only ", keys.size(),
                  " distinct keys: mix every bit of the parent and of each id");
    observe("every chain property held", all_ok);
}

// ---- Task 4 and 5: the lookup, through your allocator and your cache.
namespace {

// One sequence's prompt written block by block, as the engine's step() does:
// a block for each block_size positions, and each full one offered with the
// key of the block before it. Returns the blocks; `keys` gets the keys.
std::vector<int> fill_and_offer(StudentBlockAllocator& a, StudentPrefixCache& p, int bs,
                                const std::vector<int>& prompt, std::vector<std::uint64_t>& keys) {
    std::vector<int> blocks;
    for (std::size_t i = 0; i < prompt.size(); i += std::size_t(bs)) blocks.push_back(a.allocate());
    std::uint64_t parent = pd::PrefixIndex::kRoot;
    for (std::size_t i = 0; (i + 1) * std::size_t(bs) <= prompt.size(); i++) {
        parent = p.insert(parent, std::span(prompt).subspan(i * std::size_t(bs), std::size_t(bs)), blocks[i]);
        keys.push_back(parent);
    }
    return blocks;
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// match() on a fresh output pair; releases what it attached. Returns how many.
int hits(StudentPrefixCache& p, StudentBlockAllocator& a, const std::vector<int>& prompt, int max_blocks,
         std::vector<int>* blocks = nullptr) {
    std::vector<int> got;
    std::vector<std::uint64_t> keys;
    const int n = p.match(prompt, max_blocks, got, keys);
    CHECK_MESSAGE(int(got.size()) == n, "match() appends one block per hit");
    CHECK_MESSAGE(int(keys.size()) == n, "match() appends one key per hit");
    if (blocks) *blocks = got;
    for (int b : got) a.release(b);
    return n;
}

}  // namespace

TEST_CASE("lab07.lookup.hash_chain_hits_whole_blocks_only") {
    pd::lab::needs([] {
        StudentBlockAllocator a(1);
        std::vector<int> b;
        std::vector<std::uint64_t> k;
        StudentPrefixCache(a, 1).match({}, 0, b, k);
    });
    Inputs in(4);
    for (int run = 0; run < 10; run++) {
        const int bs = in.integer(2, 8), full = in.integer(2, 5), rest = in.integer(1, bs - 1);
        INFO("run ", run, ": blocks of ", bs, ", a prompt of ", full, " full blocks + ", rest);
        StudentBlockAllocator a(64);
        StudentPrefixCache p(a, bs);
        const std::vector<int> prompt = in.tokens(full * bs + rest, 1000);
        std::vector<std::uint64_t> keys;
        const std::vector<int> blocks = fill_and_offer(a, p, bs, prompt, keys);
        CHECK_MESSAGE(p.cached_blocks() == full, "every full block is cached; the partial last one is not");
        std::vector<int> got;
        std::vector<std::uint64_t> got_keys;
        const int n = p.match(prompt, 100, got, got_keys);
        CHECK_MESSAGE(n == full, "the same prompt: every full block hits, the partial one cannot");
        CHECK(got == std::vector<int>(blocks.begin(), blocks.begin() + full));
        CHECK_MESSAGE(got_keys == keys, "match() gives the keys insert() gave");
        for (int i = 0; i < n; i++) CHECK_MESSAGE(a.refcount(got[std::size_t(i)]) == 2, "each hit is retained for the caller");
        for (int b : got) a.release(b);
        const int k = in.integer(1, full - 1);
        std::vector<int> results = {n};
        results.push_back(hits(p, a, prompt, k));
        CHECK_MESSAGE(results.back() == k, "never more than max_blocks");
        // The prompt cut inside block k: blocks 0 .. k-1 hit, block k does not.
        const std::vector<int> cut(prompt.begin(), prompt.begin() + k * bs + in.integer(1, bs - 1));
        results.push_back(hits(p, a, cut, 100));
        CHECK_MESSAGE(results.back() == k, "a prompt ending mid-block reuses its whole blocks only");
        // Block 1's ids after another block 0: same ids, other parent, other key.
        const std::vector<int> moved = concat(in.tokens(bs, 1000), std::vector<int>(prompt.begin() + bs, prompt.end()));
        results.push_back(hits(p, a, moved, 100));
        CHECK_MESSAGE(results.back() == 0, "block 1 after another block 0 is another prefix: no hit anywhere");
        const std::vector<int> other_second = concat(std::vector<int>(prompt.begin(), prompt.begin() + bs),
                                                     in.tokens(bs, 1000));
        results.push_back(hits(p, a, other_second, 100));
        CHECK_MESSAGE(results.back() == 1, "the first block matches; the walk stops at the first miss");
        observe("hits of run " + std::to_string(run), results);
    }
}

TEST_CASE("lab07.lookup.insert_keeps_the_first_copy") {
    pd::lab::needs([] {
        StudentBlockAllocator a(1);
        a.allocate();
        StudentPrefixCache(a, 1).insert(0, std::vector<int>{1}, 0);
    });
    StudentBlockAllocator a(8);
    StudentPrefixCache p(a, 4);
    const std::vector<int> ids = {5, 6, 7, 8};
    const int first = a.allocate(), second = a.allocate();
    const std::uint64_t k1 = p.insert(pd::PrefixIndex::kRoot, ids, first);
    CHECK_MESSAGE(a.is_cached(first), "insert() marks the block cached in the pool");
    CHECK_MESSAGE(p.insert(pd::PrefixIndex::kRoot, ids, first) == k1, "offering a block again changes nothing");
    CHECK_MESSAGE(p.insert(pd::PrefixIndex::kRoot, ids, second) == k1, "another block of the same prefix has the same key");
    CHECK_MESSAGE(!a.is_cached(second), "the second copy of a cached prefix stays uncached: it goes free on release");
    CHECK(p.cached_blocks() == 1);
    a.release(second);
    CHECK(a.free_count() == 7);
    a.release(first);
    CHECK_MESSAGE(a.parked_count() == 1, "the cached copy parks");
    std::vector<int> got;
    CHECK(hits(p, a, ids, 1, &got) == 1);
    CHECK_MESSAGE((got == std::vector<int>{first}), "a hit on a parked block reattaches it");
    CHECK_MESSAGE(a.parked_count() == 1, "released again after the hit, it parks again");
}

// ---- LRU eviction of parked (free cached) blocks.

TEST_CASE("lab07.eviction.least_recently_used_cached_block_goes_first") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    Inputs in(5);
    const int bs = in.integer(2, 8);
    StudentBlockAllocator a(4);
    StudentPrefixCache p(a, bs);
    // Three one-block prompts A, B, C, each cached, then released in that order.
    std::vector<std::vector<int>> prompt;
    std::vector<int> block;
    for (int i = 0; i < 3; i++) {
        prompt.push_back(in.tokens(bs, 1000));
        std::vector<std::uint64_t> keys;
        block.push_back(fill_and_offer(a, p, bs, prompt.back(), keys)[0]);
    }
    for (int b : block) a.release(b);
    REQUIRE(a.parked_count() == 3);
    CHECK_MESSAGE(hits(p, a, prompt[0], 1) == 1, "A is still cached");  // A used again: now the most recent
    std::vector<int> evicted;
    a.on_evict = [&, inner = a.on_evict](int b) {  // still tell your cache, and note the order
        evicted.push_back(int(std::find(block.begin(), block.end(), b) - block.begin()));
        inner(b);
    };
    a.allocate();
    CHECK_MESSAGE(evicted.empty(), "a free block is taken before any parked one");
    a.allocate();
    CHECK(p.cached_blocks() == 2);
    CHECK_MESSAGE(hits(p, a, prompt[1], 1) == 0, "B parked first and was not used since: evicted first");
    CHECK_MESSAGE(hits(p, a, prompt[2], 1) == 1, "C is still cached");  // C now the most recent
    a.allocate();
    a.allocate();
    CHECK_MESSAGE((evicted == std::vector<int>{1, 0, 2}), "eviction order: B, then A (touched before C), then C");
    CHECK_MESSAGE(p.cached_blocks() == 0, "every evicted block is forgotten by the cache");
    for (int i = 0; i < 3; i++) CHECK_MESSAGE(hits(p, a, prompt[std::size_t(i)], 1) == 0, "prompt ", i, " evicted");
    observe("eviction order", evicted);
}

// ---- Your allocator and cache inside the real paged serving engine.
namespace {

int argmax(const float* v, int n) { return int(std::max_element(v, v + n) - v); }

// One request served alone, greedy: open (maybe attaching cached blocks), the
// rest of the prompt as one chunk, then n_new - 1 decode steps; close.
std::vector<int> serve_greedy(pd::serve::PagedServingEngine& e, int seq, const std::vector<int>& prompt, int n_new,
                              int* covered) {
    *covered = e.open(seq, prompt);
    const int V = e.config().vocab_size;
    REQUIRE(e.reserve(seq, int(prompt.size()) + n_new));
    const std::span<const int> rest(prompt.data() + *covered, prompt.size() - std::size_t(*covered));
    std::vector<int> ids = {argmax(e.step(std::vector<pd::serve::SeqWork>{{seq, rest}}), V)};
    while (int(ids.size()) < n_new) {
        const int last = ids.back();
        ids.push_back(argmax(e.step(std::vector<pd::serve::SeqWork>{{seq, {&last, 1}}}), V));
    }
    e.close(seq);
    return ids;
}

}  // namespace

TEST_CASE("lab07.engine.same_greedy_ids_with_and_without_prefix_caching") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    auto lm = pd::load_model("tiny", pd::Precision::f32, false);
    const int V = lm.model->config.vocab_size, bs = 16, total = 64;
    using pd::serve::make_paged_serving_engine;
    auto yours = make_paged_serving_engine(lm.model, student_paged_options(bs, total, true));
    auto plain = make_paged_serving_engine(lm.model, student_paged_options(bs, total, false));
    auto kits = make_paged_serving_engine(lm.model, {.block_size = bs, .total_blocks = total});
    Inputs in(6);
    const std::vector<int> system = in.tokens(3 * bs, V);  // three whole blocks
    struct Case {
        const char* what;
        std::vector<int> prompt;
        int covered;  // prompt tokens open() must take from the cache
    };
    const std::vector<Case> cases = {
        {"no hit: the first request", concat(system, in.tokens(in.integer(1, bs - 1), V)), 0},
        {"full-prefix hit: the last block is computed again, for the last token's logits", system, 2 * bs},
        {"hit ending mid-block: only whole blocks are reused",
         concat(std::vector<int>(system.begin(), system.begin() + 2 * bs + in.integer(1, bs - 1)), in.tokens(9, V)), 2 * bs},
        {"hit on every whole block of a longer prompt", concat(system, in.tokens(in.integer(1, 2 * bs), V)), 3 * bs},
        {"no hit: a different first block", concat(in.tokens(bs, V), system), 0},
    };
    int seq = 0;
    for (const Case& c : cases) {
        INFO(c.what);
        int covered = -1, plain_covered = -1, kits_covered = -1;
        const auto got = serve_greedy(*yours, seq, c.prompt, 8, &covered);
        const auto want = serve_greedy(*plain, seq, c.prompt, 8, &plain_covered);
        CHECK_MESSAGE(covered == c.covered, "prompt tokens taken from your prefix cache");
        CHECK_MESSAGE(plain_covered == 0, "without prefix caching nothing is taken from the cache");
        CHECK_MESSAGE(got == want, "reusing cached blocks must give the ids that computing the prompt gives");
        CHECK_MESSAGE(got == serve_greedy(*kits, seq, c.prompt, 8, &kits_covered),
                      "your allocator and cache must give the ids the kit's own give");
        CHECK_MESSAGE(covered == kits_covered, "the kit's own prefix cache covers as much");
        observe(std::string("covered: ") + c.what, covered);
        observe(std::string("greedy ids: ") + c.what, got);
        seq++;
    }
    CHECK_MESSAGE(yours->free_blocks() == total, "after every close, parked prefix blocks still count as available");
    CHECK(yours->memory_use().reserved_bytes == 0);
}

TEST_CASE("lab07.engine.eviction_under_pressure_keeps_the_ids") {
    pd::lab::needs([] { StudentBlockAllocator(1).allocate(); });
    auto lm = pd::load_model("tiny", pd::Precision::f32, false);
    const int V = lm.model->config.vocab_size, bs = 16, total = 8;
    auto yours = pd::serve::make_paged_serving_engine(lm.model, student_paged_options(bs, total, true));
    auto plain = pd::serve::make_paged_serving_engine(lm.model, student_paged_options(bs, total, false));
    Inputs in(7);
    // Prompts of 4 to 7 blocks in a pool of 8: every request evicts some of
    // the last one's parked blocks; a repeat of an older prompt may hit what is left.
    std::vector<std::vector<int>> prompts;
    for (int i = 0; i < 3; i++) prompts.push_back(in.tokens(in.integer(4 * bs, 7 * bs - 8), V));
    std::vector<int> covered_all;
    for (int r = 0; r < 8; r++) {
        const auto& prompt = prompts[std::size_t(in.integer(0, 2))];
        INFO("request ", r, " of ", prompt.size(), " tokens");
        int covered = -1, none = -1;
        const auto got = serve_greedy(*yours, r, prompt, 6, &covered);
        CHECK_MESSAGE(got == serve_greedy(*plain, r, prompt, 6, &none),
                      "a block reused after an eviction must hold its new owner's K/V, not the old prefix's");
        covered_all.push_back(covered);
        CHECK(yours->free_blocks() == total);
    }
    observe("covered per request", covered_all);
}

TEST_CASE("lab07.seed.other_seed_other_inputs") {
    Inputs a(4, 0), b(4, 1);
    bool differ = false;
    for (int t = 0; t < 10; t++) differ = differ || a.tokens(16, 1000) != b.tokens(16, 1000);
    CHECK_MESSAGE(differ, "PDLAB_TEST_SEED must change the prompts");
}
