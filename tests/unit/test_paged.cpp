// engine.paged: the paged KV cache against the contiguous one. The block
// allocator's invariants, the block table, attention read through it, the
// mixed-batch forward, prefix caching and the serving engine built on them.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "check.hpp"
#include "common.hpp"
#include "engine/attention.hpp"
#include "engine/block_allocator.hpp"
#include "engine/model.hpp"
#include "load/model_source.hpp"
#include "engine/engine.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/slot_serving_engine.hpp"
#include "engine/paged_kv_cache.hpp"
#include "engine/step_plan.hpp"

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

// --- the paged cache and its block tables ---------------------------------------

namespace {

// The engine's own pool (a cache made without a factory) checks itself.
std::string invariants(const PagedKVCache& c) {
    return dynamic_cast<const BlockAllocator&>(*c.blocks).check_invariants();
}

// A small pool: 2 layers, 2 KV heads of 4 floats, blocks of 4 positions.
PagedKVCache small_pool(int total_blocks) { return make_paged_kv_cache(2, 2, 4, 4, total_blocks, 64); }

// The (n_kv_heads * head_dim) K row written for (layer, pos) by writer `gen`:
// a value that names all three (V rows are the negatives).
std::vector<float> row_for(int layer, int pos, float sign, int gen = 0) {
    std::vector<float> r(8);
    for (int i = 0; i < 8; i++) r[i] = sign * (100000.0f * gen + 1000.0f * layer + 10.0f * pos + i);
    return r;
}

void write_positions(PagedKVCache& c, BlockTable& t, int from, int to, int gen = 0) {
    for (int p = from; p < to; p++)
        for (int l = 0; l < c.n_layers; l++)
            paged_write(c, l, t, p, row_for(l, p, 1, gen).data(), row_for(l, p, -1, gen).data());
    t.len = to;
}

void check_positions(const PagedKVCache& c, const BlockTable& t, int from, int to) {
    for (int p = from; p < to; p++)
        for (int l = 0; l < c.n_layers; l++)
            for (int h = 0; h < c.n_kv_heads; h++) {
                INFO("layer " << l << ", position " << p << ", kv head " << h);
                CHECK(paged_key(c, l, t, h, p)[1] == row_for(l, p, 1)[h * 4 + 1]);
                CHECK(paged_value(c, l, t, h, p)[3] == row_for(l, p, -1)[h * 4 + 3]);
            }
}

}  // namespace

TEST_CASE("engine.paged.block_table_round_trips_rows_across_blocks") {
    PagedKVCache c = small_pool(6);
    BlockTable a, b;
    // Interleave two sequences so that neither one's blocks are consecutive.
    for (int len = 4; len <= 12; len += 4) {
        REQUIRE(paged_reserve(c, a, len));
        REQUIRE(paged_reserve(c, b, len - 1));
    }
    CHECK_MESSAGE(a.blocks.size() == 3, "12 positions in blocks of 4 take 3 blocks");
    CHECK(b.blocks.size() == 3);
    write_positions(c, a, 0, 12);
    write_positions(c, b, 0, 11);
    INFO("a row read through the table must be the row written at that position, whatever block holds it");
    check_positions(c, a, 0, 12);
    check_positions(c, b, 0, 11);
    paged_release(c, a);
    paged_release(c, b);
    CHECK(c.blocks->free_count() == 6);
    CHECK(invariants(c) == "");
}

TEST_CASE("engine.paged.reserve_false_leaves_nothing_allocated") {
    PagedKVCache c = small_pool(3);
    BlockTable a, b;
    REQUIRE(paged_reserve(c, a, 8));  // 2 of 3 blocks
    CHECK_FALSE_MESSAGE(paged_reserve(c, b, 8), "8 positions need 2 blocks and only 1 is free");
    CHECK_MESSAGE(b.blocks.empty(), "a refused reserve must not keep part of what it asked for");
    CHECK(c.blocks->free_count() == 1);
    CHECK_MESSAGE(paged_reserve(c, a, 8), "a sequence that already has its blocks needs none more");
    CHECK(invariants(c) == "");
}

TEST_CASE("engine.paged.truncate_frees_blocks_and_copies_a_shared_tail") {
    PagedKVCache c = small_pool(5);
    BlockTable a;
    REQUIRE(paged_reserve(c, a, 12));
    write_positions(c, a, 0, 12);
    BlockTable b;  // b shares a's first two blocks (a common prefix)
    for (int i = 0; i < 2; i++) c.blocks->retain(a.blocks[i]), b.blocks.push_back(a.blocks[i]);
    b.len = 8;
    REQUIRE(paged_truncate(c, a, 6));
    CHECK_MESSAGE(a.blocks.size() == 2, "6 positions keep 2 blocks; the third goes back");
    CHECK_MESSAGE(a.blocks[1] != b.blocks[1], "position 6 will be written into a's second block, shared "
                                              "with b: truncate must give a its own copy");
    check_positions(c, a, 0, 6);
    write_positions(c, a, 6, 8, 1);  // new rows 6, 7 in a's copy ...
    check_positions(c, b, 0, 8);  // ... and b still reads its own rows
    CHECK(invariants(c) == "");
}

TEST_CASE("engine.paged.bad_sizes_are_refused") {
    CHECK_THROWS_WITH_AS(small_pool(0), doctest::Contains("at least 1 block"), UserError);
    CHECK_THROWS_AS(make_paged_kv_cache(2, 2, 4, 0, 4, 64), UserError);
    CHECK_THROWS_WITH_AS(make_paged_kv_cache(32, 8, 128, 16, 1 << 30, 4096), doctest::Contains("fewer blocks"),
                         UserError);
}

// --- attention through the block table ------------------------------------------

namespace {

struct SpanCase {
    int start, n;  // positions start .. start+n-1 are the span's rows
};

// Random K/V for `len` positions of sequence b in the contiguous cache, and
// the same rows through a block table; blocks were handed out interleaved
// with other sequences, so the table is not in block order.
void copy_into_blocks(PagedKVCache& pc, BlockTable& t, const KVCache& kc, int b, int len) {
    t.len = len;
    std::vector<float> k(kc.n_kv_heads * kc.head_dim), v(k.size());
    for (int l = 0; l < kc.n_layers; l++)
        for (int p = 0; p < len; p++) {
            for (int h = 0; h < kc.n_kv_heads; h++) {
                std::copy_n(kv_key(kc, l, b, h, p), kc.head_dim, k.begin() + h * kc.head_dim);
                std::copy_n(kv_value(kc, l, b, h, p), kc.head_dim, v.begin() + h * kc.head_dim);
            }
            paged_write(pc, l, t, p, k.data(), v.data());
        }
}

void check_paged_attention(int n_heads, int n_kv_heads, int D, int block_size, const std::vector<SpanCase>& cases,
                           int window = 0) {
    const int B = int(cases.size()), S = 96, layer = 1;
    KVCache kc = make_kv_cache(2, B, n_kv_heads, S, D);
    kc.k = randn(kc.k.size(), 11), kc.v = randn(kc.v.size(), 12);
    PagedKVCache pc = make_paged_kv_cache(2, n_kv_heads, D, block_size, B * (S / block_size + 1), S);
    std::vector<BlockTable> tables(B);
    for (int len = block_size; len < S + block_size; len += block_size)  // interleaved block ids
        for (int b = 0; b < B; b++) REQUIRE(paged_reserve(pc, tables[b], std::min(len, cases[b].start + cases[b].n)));
    std::vector<PagedSpan> spans;
    int rows = 0;
    for (int b = 0; b < B; b++) {
        copy_into_blocks(pc, tables[b], kc, b, cases[b].start + cases[b].n);
        spans.push_back({&tables[b], rows, cases[b].start, cases[b].n});
        rows += cases[b].n;
    }
    const std::size_t stride = std::size_t(n_heads) * D;
    const std::vector<float> q = randn(rows * stride, 13);
    std::vector<float> got(q.size()), want(q.size());
    attention_paged(got.data(), q.data(), pc, layer, spans, n_heads, window);
    for (const PagedSpan& s : spans) {  // the contiguous kernels, one sequence at a time
        const int b = int(&s - spans.data());
        if (s.n == 1) attention_decode(want.data() + s.row0 * stride, q.data() + s.row0 * stride, kc, layer, &b, &s.start, 1, n_heads, window);
        else attention_prefill(want.data() + s.row0 * stride, q.data() + s.row0 * stride, kc, layer, b, s.start, s.n, n_heads, window);
    }
    // Prefill reads keys in the same order either way; decode's online
    // softmax steps at block edges instead of every 64 keys: rounding only.
    check_close(got, want, 1e-5f, 1e-4f, fmt::format("paged attention (H {}, H_kv {}, D {}, block {}, window {}) against "
                                                     "the contiguous kernels", n_heads, n_kv_heads, D, block_size, window));
}

}  // namespace

TEST_CASE("engine.paged.attention_matches_the_contiguous_kernels") {
    // A prefill chunk after a cached prefix, a decode step, a chunk from position 0, a long decode.
    const std::vector<SpanCase> mixed = {{13, 40}, {30, 1}, {0, 7}, {90, 1}};
    check_paged_attention(8, 2, 64, 16, mixed);  // GQA, the default block
    check_paged_attention(4, 4, 32, 5, mixed);   // MHA, blocks not a power of two
    check_paged_attention(4, 1, 20, 16, mixed);  // MQA, a head size no vector width divides
    check_paged_attention(16, 1, 16, 80, mixed); // two decode slices; a block larger than a decode chunk
    check_paged_attention(8, 2, 64, 16, mixed, 21);  // a sliding window starting inside a block
    check_paged_attention(4, 1, 20, 5, mixed, 3);
}

// --- the mixed-batch forward --------------------------------------------------

namespace {

// The bundled model, and small synthetic ones of the other attention kinds and family.
const char* kForwardModels[] = {
    "tiny",
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=4,vocab=97,ctx=128",  // MHA
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=1,vocab=97,ctx=128",  // MQA
    "synthetic:gpt2,dim=64,ffn=256,layers=2,heads=4,vocab=97,ctx=128",             // GPT-2
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=128,window=19",  // Mistral's window
};

// Both caches run every row through different kernels (a batch of 60 rows
// takes oneDNN where one sequence's 5 take the decode kernel): rounding only.
constexpr float kTol = 5e-4f;

std::vector<int> prompt_of(int n, int vocab, int seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; i++) t[i] = (i * 31 + seed * 17 + 3) % vocab;
    return t;
}

// Sequences in a paged cache of the model, driven by forward_batch.
struct PagedRun {
    const Model& m;
    PagedKVCache cache;
    RunState st;
    std::vector<BlockTable> tables;

    PagedRun(const Model& model, int n_seqs, int block_size = 16)
        : m(model), cache(make_paged_kv_cache(model, block_size, 64)), st(make_run_state(model.config, 4)),
          tables(n_seqs) {}

    struct Work {
        int seq;
        std::vector<int> tokens;
        bool logits = true;
    };
    // One step; returns the logits of the items that asked, rows in order.
    std::vector<float> step(const std::vector<Work>& work) {
        std::vector<BatchItem> items;
        int kept = 0;
        for (const Work& w : work) {
            BlockTable& t = tables[w.seq];
            REQUIRE(paged_reserve(cache, t, t.len + int(w.tokens.size())));
            items.push_back({&t, w.tokens, w.logits});
            kept += w.logits;
        }
        const float* l = forward_batch(m, cache, st, items);
        return std::vector<float>(l, l + std::size_t(kept) * m.config.vocab_size);
    }
};

std::vector<float> rows_of(const float* p, int rows, int V) { return std::vector<float>(p, p + std::size_t(rows) * V); }

}  // namespace

TEST_CASE("engine.paged.forward_matches_the_contiguous_cache") {
    for (const char* spec : kForwardModels) {
        INFO(spec);
        auto lm = load_model(spec, Precision::f32, false);
        const Model& m = *lm.model;
        const int V = m.config.vocab_size;
        const std::vector<int> lens = {5, 23, 40};  // inside one block, across two, across three
        KVCache kc = make_kv_cache(m, 3, 64);
        RunState ks = make_run_state(m.config, 3);
        PagedRun paged(m, 3);
        std::vector<PagedRun::Work> prefills;
        std::vector<float> want;
        for (int b = 0; b < 3; b++) {
            const auto p = prompt_of(lens[b], V, b);
            const auto l = rows_of(prefill(m, kc, ks, b, p), 1, V);
            want.insert(want.end(), l.begin(), l.end());
            prefills.push_back({b, p});
        }
        check_close(paged.step(prefills), want, kTol, kTol, "three prompts in one paged step against three prefills");
        const std::vector<int> slots = {0, 1, 2};
        std::vector<int> next = {7, 8, 9};
        for (int i = 0; i < 4; i++) {
            want = rows_of(decode(m, kc, ks, slots, next), 3, V);
            const auto got = paged.step({{0, {next[0]}}, {1, {next[1]}}, {2, {next[2]}}});
            check_close(got, want, kTol, kTol, fmt::format("decode step {} of three sequences of different lengths", i));
            for (int& t : next) t = (t * 5 + 1) % V;
        }
    }
}

TEST_CASE("engine.paged.mixed_step_equals_running_each_alone") {
    auto lm = load_model("tiny", Precision::f32, false);
    const Model& m = *lm.model;
    const int V = m.config.vocab_size;
    // A has 10 tokens cached and brings a chunk of 12; B has 20 and decodes one; C starts with a chunk of 9.
    auto setup = [&](PagedRun& r) { r.step({{0, prompt_of(10, V, 1)}, {1, prompt_of(20, V, 2)}}); };
    const std::vector<int> a_chunk = prompt_of(12, V, 3), b_token = {42}, c_chunk = prompt_of(9, V, 4);
    PagedRun mixed(m, 3);
    setup(mixed);
    const auto got = mixed.step({{0, a_chunk}, {1, b_token}, {2, c_chunk}});
    PagedRun alone(m, 3);
    setup(alone);
    std::vector<float> want;
    for (const auto& w : std::vector<PagedRun::Work>{{0, a_chunk}, {1, b_token}, {2, c_chunk}}) {
        const auto l = alone.step({w});
        want.insert(want.end(), l.begin(), l.end());
    }
    check_close(got, want, kTol, kTol, "A's chunk + B's decode + C's chunk in one pass, against each in its own pass");
    CHECK(mixed.tables[0].len == 22);
    CHECK(mixed.tables[1].len == 21);
    CHECK(mixed.tables[2].len == 9);
}

TEST_CASE("engine.paged.chunked_prefill_gives_the_logits_of_one_pass") {
    auto lm = load_model("tiny", Precision::f32, false);
    const Model& m = *lm.model;
    const int V = m.config.vocab_size;
    const auto prompt = prompt_of(57, V, 5);  // chunks 1, 7, 16, 33
    KVCache kc = make_kv_cache(m, 1, 64);
    RunState ks = make_run_state(m.config, 1);
    const auto all = rows_of(prefill(m, kc, ks, 0, prompt, Keep::all), 57, V);
    PagedRun chunked(m, 1);
    int at = 0;
    for (int n : {1, 7, 16, 33}) {
        const std::vector<int> chunk(prompt.begin() + at, prompt.begin() + at + n);
        const auto got = chunked.step({{0, chunk}});
        at += n;
        check_close(got.data(), all.data() + std::size_t(at - 1) * V, V, kTol, kTol,
                    fmt::format("the last row of the chunk ending at position {} against one pass over the prompt", at - 1));
    }
}

// The host layer's batch step (step_plan.hpp): each item's rows without
// logits, item by item, then every kept row, item by item (one run at the
// end, as the GPU takes them); a run of attention per part of an item, a
// one-token item's a decode query; commit advances each table's length.
TEST_CASE("engine.paged.batch_plan_rows") {
    auto lm = load_model("synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=2,vocab=97,ctx=16", Precision::f32,
                         false);
    const Config& c = lm.model->config;
    PagedKVCache pool = make_paged_kv_cache(*lm.model, /*block_size=*/4, /*total_blocks=*/16);
    BlockTable a{{7, 2}, 3}, b{{5, 6}, 0}, d{{1, 9, 4}, 9};
    const std::vector<int> ta = {11, 12}, tb = {20, 21, 22}, td = {30};
    StepPlan p;
    plan_batch(p, c, pool, std::vector<BatchItem>{{&a, ta, 1}, {&b, tb, 0}, {&d, td, 1}});
    CHECK(p.kind == StepKind::batch);
    CHECK(p.token == std::vector<int>{11, 20, 21, 22, 12, 30});
    CHECK(p.slot == std::vector<int>{0, 1, 1, 1, 0, 2});
    CHECK(p.pos == std::vector<int>{3, 0, 1, 2, 4, 9});
    CHECK((p.first_kept == 4 && p.n_kept == 2));
    auto span_is = [](const PagedSpan& s, const BlockTable* t, int row0, int start, int n, bool chunk) {
        return s.table == t && s.row0 == row0 && s.start == start && s.n == n && s.chunk == chunk;
    };
    REQUIRE(p.spans.size() == 4);
    CHECK(span_is(p.spans[0], &a, 0, 3, 1, true));   // a's first row: a prefill query of a's chunk
    CHECK(span_is(p.spans[1], &b, 1, 0, 3, true));
    CHECK(span_is(p.spans[2], &a, 4, 4, 1, true));
    CHECK(span_is(p.spans[3], &d, 5, 9, 1, false));  // d's one token: a decode query
    commit(p);
    CHECK((a.len == 5 && b.len == 3 && d.len == 10));
    std::vector<int> seq_len(3);
    CHECK_THROWS_WITH_AS(commit(p, seq_len), doctest::Contains("internal error"), std::exception);
    // A speculative verify item keeps every row: all of its rows go to the end.
    plan_batch(p, c, pool, std::vector<BatchItem>{{&d, td, 0}, {&a, std::span(ta.data(), 1), 1}, {&b, tb, 3}});
    CHECK(p.token == std::vector<int>{30, 11, 20, 21, 22});
    CHECK((p.first_kept == 1 && p.n_kept == 4));
    // A sequence without room for its tokens is the engine's error, said as such.
    BlockTable short_table{{3}, 3};
    CHECK_THROWS_WITH_AS(plan_batch(p, c, pool, std::vector<BatchItem>{{&short_table, ta, 1}}),
                         doctest::Contains("internal error"), std::exception);
}

TEST_CASE("engine.paged.forward_refuses_bad_batches") {
    auto lm = load_model("synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=2,vocab=97,ctx=32", Precision::f32, false);
    PagedRun r(*lm.model, 2);
    CHECK_THROWS_WITH_AS(r.step({{0, {1, 2, 97}}}), doctest::Contains("out of range"), UserError);
    CHECK_THROWS_WITH_AS(r.step({{0, prompt_of(33, 97, 1)}}), doctest::Contains("context length of 32"), UserError);
    CHECK_THROWS_WITH_AS(r.step({{0, {1}}, {0, {2}}}), doctest::Contains("twice"), UserError);
    CHECK(r.tables[0].len == 0);
}

// --- the paged serving engine and its prefix cache --------------------------------

namespace {

using serve::PagedOptions;
using serve::PagedServingEngine;

int argmax(const float* v, int n) { return int(std::max_element(v, v + n) - v); }

// One request served alone, greedy: open (maybe attaching cached blocks), the
// rest of the prompt as one chunk, then n_new - 1 decode steps; close.
// Returns the ids and, in `covered`, what open() took from the prefix cache.
std::vector<int> serve_greedy(PagedServingEngine& e, int seq, const std::vector<int>& prompt, int n_new,
                              int* covered = nullptr) {
    const int from = e.open(seq, prompt), V = e.config().vocab_size;
    if (covered) *covered = from;
    REQUIRE(e.reserve(seq, int(prompt.size()) + n_new));
    const std::span<const int> rest(prompt.data() + from, prompt.size() - from);
    std::vector<int> ids = {argmax(e.step(std::vector<serve::SeqWork>{{seq, rest}}), V)};
    while (int(ids.size()) < n_new) {
        const int last = ids.back();
        ids.push_back(argmax(e.step(std::vector<serve::SeqWork>{{seq, {&last, 1}}}), V));
    }
    CHECK(e.cached_len(seq) == int(prompt.size()) + n_new - 1);
    e.close(seq);
    return ids;
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("engine.paged.prefix_hits_give_the_greedy_ids_of_no_prefix_cache") {
    auto lm = load_model("tiny", Precision::f32, false);
    const int V = lm.model->config.vocab_size;
    auto cached = serve::make_paged_serving_engine(lm.model, {.block_size = 16, .total_blocks = 64});
    auto plain = serve::make_paged_serving_engine(lm.model, {.block_size = 16, .total_blocks = 64, .prefix_caching = false});
    const std::vector<int> system = prompt_of(48, V, 7);  // three whole blocks
    struct Case {
        const char* what;
        std::vector<int> prompt;
        int covered;  // prompt tokens open() must take from the cache
    };
    const std::vector<Case> cases = {
        {"no hit: the first request", concat(system, prompt_of(5, V, 8)), 0},
        {"full-prefix hit: the last block is recomputed for the last token's logits", system, 32},
        {"hit ending mid-block: only whole blocks are reused", concat(prompt_of(40, V, 7), prompt_of(9, V, 9)), 32},
        {"hit on every whole block of a longer prompt", concat(system, prompt_of(20, V, 10)), 48},
        {"no hit: a different first block", concat(prompt_of(16, V, 11), system), 0},
    };
    int seq = 0;
    for (const Case& c : cases) {
        INFO(c.what);
        int covered = -1;
        const auto got = serve_greedy(*cached, seq, c.prompt, 8, &covered);
        CHECK(covered == c.covered);
        CHECK_MESSAGE(got == serve_greedy(*plain, seq, c.prompt, 8),
                      "reusing cached blocks must give the ids that computing the prompt gives");
        seq++;
    }
    CHECK_MESSAGE(cached->free_blocks() == 64, "after every close, parked prefix blocks still count as free");
    CHECK(cached->memory_use().reserved_bytes == 0);
}

TEST_CASE("engine.paged.prefix_blocks_are_evicted_lru_under_pressure") {
    auto lm = load_model("tiny", Precision::f32, false);
    const int V = lm.model->config.vocab_size;
    auto e = serve::make_paged_serving_engine(lm.model, {.block_size = 16, .total_blocks = 8});
    const auto a = prompt_of(33, V, 1), b = prompt_of(33, V, 2);  // two whole blocks each, and a token
    serve_greedy(*e, 0, a, 4);  // parks a's 2 whole blocks ...
    serve_greedy(*e, 1, b, 4);  // ... then b's: a's are the least recently used
    CHECK(e->free_blocks() == 8);
    REQUIRE(e->open(2, prompt_of(60, V, 3)) == 0);
    REQUIRE(e->reserve(2, 96));  // 6 blocks: the 4 never-cached ones, then a's 2 parked ones
    e->close(2);
    int covered = -1;
    serve_greedy(*e, 3, b, 4, &covered);
    CHECK_MESSAGE(covered == 32, "b's blocks were parked more recently than a's: pressure must evict a's first");
    serve_greedy(*e, 4, a, 4, &covered);
    CHECK_MESSAGE(covered == 0, "a's blocks were evicted to make room: a must be computed again");
}

TEST_CASE("engine.paged.reserve_false_leaves_the_engine_unchanged") {
    auto lm = load_model("tiny", Precision::f32, false);
    auto e = serve::make_paged_serving_engine(lm.model, {.block_size = 16, .total_blocks = 4});
    const std::vector<int> p = {1, 2, 3};
    e->open(0, p), e->open(1, p);
    REQUIRE(e->reserve(0, 48));  // 3 of 4 blocks
    CHECK_FALSE_MESSAGE(e->reserve(1, 32), "32 positions need 2 blocks and only 1 is free");
    CHECK_MESSAGE(e->free_blocks() == 1, "a refused reserve must not keep part of what it asked for");
    CHECK(e->memory_use().reserved_bytes == 3 * e->bytes_per_block());
    CHECK(e->reserve(1, 16));
}

TEST_CASE("engine.paged.serving_engine_refuses_bad_input") {
    auto lm = load_model("tiny", Precision::f32, false);
    const int ctx = lm.model->config.max_seq_len;
    auto e = serve::make_paged_serving_engine(lm.model, {.block_size = 16, .total_blocks = 8});
    CHECK_THROWS_WITH_AS(e->open(0, std::vector<int>(ctx + 1, 1)), doctest::Contains("longer than the context"),
                         UserError);
    CHECK_THROWS_WITH_AS(e->open(0, std::vector<int>{}), doctest::Contains("at least one"), UserError);
    e->open(0, std::vector<int>{1});
    CHECK_THROWS_WITH_AS(e->open(0, std::vector<int>{1}), doctest::Contains("already open"), UserError);
    CHECK_THROWS_WITH_AS(e->reserve(0, ctx + 1), doctest::Contains("context length"), UserError);
    CHECK_THROWS_WITH_AS(e->close(5), doctest::Contains("not open"), UserError);
    CHECK_THROWS_WITH_AS(serve::make_paged_serving_engine(lm.model, {.total_blocks = 0}),
                         doctest::Contains("blocks or of KV bytes"), UserError);
    CHECK_THROWS_WITH_AS(serve::make_paged_serving_engine(lm.model, {.kv_bytes = 100}),
                         doctest::Contains("hold no block"), UserError);
    CHECK_THROWS_WITH_AS(serve::make_paged_serving_engine(lm.model, {.total_blocks = INT_MAX}),
                         doctest::Contains("fewer blocks"), UserError);
}

TEST_CASE("engine.paged.serving_engine_matches_the_slot_engine") {
    auto lm = load_model("tiny", Precision::f32, false);
    const int V = lm.model->config.vocab_size;
    auto engine = make_engine(lm.model, {.batch = 3, .max_seq = 96});
    serve::SlotServingEngine slot(*engine);
    auto paged = serve::make_paged_serving_engine(lm.model, {.block_size = 16, .total_blocks = 32});
    const auto a = prompt_of(30, V, 1), b = prompt_of(17, V, 2), c = prompt_of(40, V, 3);
    const std::vector<int> next = {5, 6, 7}, verify = {8, 9, 10, 11};
    // Step 1: A's whole prompt and B's first 10 tokens. Step 2: A decodes, B
    // finishes, C starts. Step 3: A verifies 3 proposed tokens (logits on all
    // 4 rows), B decodes; then A keeps 1 of them (truncate) and decodes over
    // the rows it dropped in step 4.
    const std::vector<std::vector<serve::SeqWork>> steps = {
        {{0, a}, {1, {b.data(), 10}, 0}},
        {{0, {&next[0], 1}}, {1, {b.data() + 10, 7}}, {2, c}},
        {{0, verify, 4}, {1, {&next[1], 1}}},
        {{0, {&next[2], 1}}, {2, {&next[1], 1}}},
    };
    const std::vector<std::vector<int>> prompts = {a, b, c};
    for (serve::ServingEngine* e : std::vector<serve::ServingEngine*>{&slot, paged.get()})
        for (int s = 0; s < 3; s++) {
            e->open(s, prompts[s]);
            REQUIRE(e->reserve(s, 64));
        }
    for (std::size_t i = 0; i < steps.size(); i++) {
        int kept = 0;
        for (const serve::SeqWork& w : steps[i]) kept += w.logit_rows;
        const auto want = rows_of(slot.step(steps[i]), kept, V);
        const auto got = rows_of(paged->step(steps[i]), kept, V);
        check_close(got, want, kTol, kTol, fmt::format("step {}: the paged engine's one pass against the slot engine's "
                                                       "prefills and batched decode", i + 1));
        if (i == 2)
            for (serve::ServingEngine* e : std::vector<serve::ServingEngine*>{&slot, paged.get()}) {
                const int blocks_before = e->free_blocks();
                e->truncate(0, e->cached_len(0) - 2);  // 30 + 1 + 2 of the verify item's 4 rows stay
                CHECK(e->cached_len(0) == 33);
                CHECK_MESSAGE(e->free_blocks() == blocks_before + 1, "the 4th block reserved, past 33 positions, goes back");
            }
    }
    for (int s = 0; s < 3; s++) CHECK(paged->cached_len(s) == slot.cached_len(s));
}
