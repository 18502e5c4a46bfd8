// Lab 09 tests: your schedule against the rule restated, your packing
// against a reference that walks the cache row by row (not block by block),
// round trips between random block tables of two caches, and a real prefill
// on one paged engine continued by decoding on another from your messages,
// against decoding on in place. No MPI here: the transport is a vector.
// mpirun runs the whole disaggregated program as lab09.mpi (meson.build).
//   meson test -C build --suite track2-09        (all of them)
//   build/labs/track2/09-disaggregation/lab09_tests --test-case='lab09.pack.*'
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common.hpp"
#include "engine/sampler.hpp"
#include "exercise.hpp"
#include "load/model_source.hpp"
#include "lab_test.hpp"
#include "serve/paged_serving_engine.hpp"
#include "show.hpp"

using namespace pd::lab09;
using pd::BlockTable;
using pd::PagedKVCache;
using pd::lab::Inputs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)

namespace {

// A schedule as "[[0, 3), [3, 6)]", and as {0, 3, 3, 6} (labs/common/show.hpp).
std::string show(const std::vector<LayerRange>& plan) {
    return pd::lab::show_each(plan, [](const LayerRange& r) { return fmt::format("[{}, {})", r.first, r.last); });
}

std::vector<int> flat(const std::vector<LayerRange>& plan) {
    return pd::lab::flat_fields(plan, &LayerRange::first, &LayerRange::last);
}

// A cache of random geometry whose every float is distinct and nonzero.
PagedKVCache random_cache(Inputs& in, int min_blocks) {
    const int blocks = std::max(min_blocks, in.integer(1, 24));
    PagedKVCache c = pd::make_paged_kv_cache(in.integer(1, 6), in.integer(1, 3), 2 * in.integer(1, 8),
                                             in.integer(1, 8), blocks, 4096);
    for (std::size_t i = 0; i < c.k.size(); i++) c.k[i] = float(i + 1), c.v[i] = -float(i + 1);
    return c;
}

// `n` distinct blocks of the pool in random order, holding `len` positions (some reserved ahead).
BlockTable random_table(Inputs& in, const PagedKVCache& c, int n) {
    std::vector<int> ids(std::size_t(c.total_blocks()));
    std::iota(ids.begin(), ids.end(), 0);
    for (int k = int(ids.size()) - 1; k > 0; k--) std::swap(ids[std::size_t(k)], ids[std::size_t(in.integer(0, k))]);
    BlockTable t;
    t.blocks.assign(ids.begin(), ids.begin() + n);
    const int used = in.integer(1, n);  // the rest are reserved ahead, not sent
    t.len = (used - 1) * c.block_size + in.integer(1, c.block_size);
    return t;
}

LayerRange random_range(Inputs& in, const PagedKVCache& c) {
    const int first = in.integer(0, c.n_layers - 1);
    return {first, in.integer(first + 1, c.n_layers)};
}

// The layout restated one float at a time: layer, block, K then V, head, row, dim.
std::vector<float> reference_pack(const PagedKVCache& c, const BlockTable& t, LayerRange r) {
    std::vector<float> out;
    for (int l = r.first; l < r.last; l++)
        for (int i = 0; i < pd::blocks_for(c, t.len); i++)
            for (int kv = 0; kv < 2; kv++)
                for (int h = 0; h < c.n_kv_heads; h++) {
                    const int b = t.blocks[std::size_t(i)];
                    const float* tile = kv == 0 ? pd::paged_key_tile(c, l, b, h) : pd::paged_value_tile(c, l, b, h);
                    out.insert(out.end(), tile, tile + c.tile_stride());
                }
    return out;
}

std::vector<float> packed(const PagedKVCache& c, const BlockTable& t, LayerRange r) {
    std::vector<float> out(packed_floats(c, pd::blocks_for(c, t.len), r));
    pack_kv(c, t, r, out);
    return out;
}

// 16 floats at seeded places of a message: what the grader compares.
std::vector<float> sample(Inputs& in, const std::vector<float>& v) {
    std::vector<float> s;
    for (int k = 0; k < 16 && !v.empty(); k++) s.push_back(v[std::size_t(in.integer(0, int(v.size()) - 1))]);
    return s;
}

}  // namespace

TEST_CASE("lab09.schedule.random_sizes") {
    pd::lab::needs([] { transfer_schedule(1, 1); });
    CHECK_MESSAGE((flat(transfer_schedule(8, 3)) == std::vector<int>{0, 3, 3, 6, 6, 8}),
                  "8 layers, 3 a message: [0, 3), [3, 6), [6, 8); yours " << show(transfer_schedule(8, 3)));
    Inputs in(1);
    for (int trial = 0; trial < 300; trial++) {
        const int layers = in.integer(1, 64), k = in.integer(1, 80);
        const auto got = transfer_schedule(layers, k);
        observe("schedule: trial " + std::to_string(trial), flat(got));
        INFO(layers << " layers, " << k << " a message; yours " << show(got));
        const std::size_t messages = std::size_t((layers + k - 1) / k);
        REQUIRE_MESSAGE(got.size() == messages, "ceil(layers / layers_per_message) = " << messages << " messages");
        for (std::size_t m = 0; m < got.size(); m++) {
            const LayerRange want{int(m) * k, std::min(layers, int(m + 1) * k)};
            CHECK_MESSAGE(got[m] == want, "message " << m << " should carry layers [" << want.first << ", "
                                                     << want.last << "): consecutive, in order, none twice");
        }
    }
}

TEST_CASE("lab09.pack.against_row_walk") {
    pd::lab::needs([] {
        PagedKVCache c = pd::make_paged_kv_cache(1, 1, 2, 1, 1, 8);
        packed_floats(c, 1, {0, 1});
    });
    Inputs in(2);
    for (int trial = 0; trial < 120; trial++) {
        const PagedKVCache c = random_cache(in, 1);
        const BlockTable t = random_table(in, c, in.integer(1, c.total_blocks()));
        const LayerRange r = random_range(in, c);
        const std::size_t n = packed_floats(c, pd::blocks_for(c, t.len), r);
        const std::vector<float> want = reference_pack(c, t, r);
        INFO("layers " << c.n_layers << ", kv heads " << c.n_kv_heads << ", block " << c.block_size
             << ", head_dim " << c.head_dim << "; table of " << t.blocks.size() << " blocks, len " << t.len
             << "; message layers [" << r.first << ", " << r.last << ")");
        observe("packed floats: trial " + std::to_string(trial), n);
        REQUIRE_MESSAGE(n == want.size(), "packed_floats: 2 (K and V) x layers x blocks x block_stride() = "
                                              << want.size() << ", only the blocks that hold t.len positions");
        const std::vector<float> got = packed(c, t, r);
        observe("packed sample: trial " + std::to_string(trial), sample(in, got));
        const auto bad = std::mismatch(got.begin(), got.end(), want.begin());
        CHECK_MESSAGE(bad.first == got.end(),
                      "first wrong float at " << (bad.first - got.begin()) << ": " << *bad.first << ", expected "
                      << *bad.second << " (negative: a V value; layer outside, then blocks in table order, K then V)");
    }
}

TEST_CASE("lab09.roundtrip.random_tables") {
    pd::lab::needs([] {
        PagedKVCache c = pd::make_paged_kv_cache(1, 1, 2, 1, 1, 8);
        unpack_kv({}, {0, 1}, c, BlockTable{{0}, 0});
    });
    Inputs in(3);
    for (int trial = 0; trial < 120; trial++) {
        const PagedKVCache a = random_cache(in, 1);
        const BlockTable ta = random_table(in, a, in.integer(1, a.total_blocks()));
        const int need = pd::blocks_for(a, ta.len);
        // The receiver: the same geometry, its own pool size and block ids, zeros.
        PagedKVCache b = pd::make_paged_kv_cache(a.n_layers, a.n_kv_heads, a.head_dim, a.block_size,
                                                 need + in.integer(0, 12), 4096);
        BlockTable tb = random_table(in, b, need);
        tb.len = ta.len;
        const int k = in.integer(1, a.n_layers);
        INFO("table " << ta.blocks.size() << " blocks -> " << tb.blocks.size() << ", len " << ta.len << ", "
             << k << " layers a message");
        for (const LayerRange& r : transfer_schedule(a.n_layers, k)) unpack_kv(packed(a, ta, r), r, b, tb);
        const LayerRange all{0, a.n_layers};
        const std::vector<float> back = packed(b, tb, all);
        observe("round trip: trial " + std::to_string(trial), sample(in, back));
        CHECK_MESSAGE(back == reference_pack(a, ta, all),
                      "the receiver's blocks should hold what the sender's did, every layer, K and V");
        std::vector<int> untouched(std::size_t(b.total_blocks()), 1);
        for (int i = 0; i < need; i++) untouched[std::size_t(tb.blocks[std::size_t(i)])] = 0;
        bool clean = true;
        for (int blk = 0; blk < b.total_blocks(); blk++)
            for (int l = 0; l < b.n_layers && untouched[std::size_t(blk)]; l++)
                clean = clean && std::all_of(pd::paged_key_tile(b, l, blk, 0),
                                             pd::paged_key_tile(b, l, blk, 0) + b.block_stride(),
                                             [](float x) { return x == 0; });
        CHECK_MESSAGE(clean, "unpack_kv wrote into a block that is not among the sequence's first "
                             "blocks_for(len) blocks");
    }
}

namespace {

constexpr const char* kModel = "synthetic:llama,dim=64,ffn=96,layers=4,heads=4,kv_heads=2,vocab=97,ctx=96";

pd::serve::PagedServingEngine paged(std::shared_ptr<const pd::Model> m) {
    return pd::serve::PagedServingEngine(std::move(m), {8, 64, 0, 1, false});
}

// Greedy tokens of `seq` on `e`, from `token` on: n decode steps.
std::vector<int> decode(pd::serve::PagedServingEngine& e, int seq, int token, int n) {
    std::vector<int> out = {token};
    for (int k = 1; k < n; k++) {
        REQUIRE(e.reserve(seq, e.cached_len(seq) + 1));
        const pd::serve::SeqWork w{seq, {&out.back(), 1}, 1};
        out.push_back(pd::argmax(e.step({&w, 1}), e.config().vocab_size));
    }
    return out;
}

}  // namespace

TEST_CASE("lab09.transfer.same_tokens_as_colocated") {
    pd::lab::needs([] { transfer_schedule(1, 1); });
    auto model = pd::load_model(kModel, pd::Precision::f32, false).model;
    Inputs in(4);
    for (int trial = 0; trial < 6; trial++) {
        const std::vector<int> prompt = in.tokens(in.integer(1, 60), 97);
        const int k = in.integer(1, 4), n = in.integer(2, 20);
        auto prefill = paged(model), decoder = paged(model);
        // Prefill: the messages leave from the layer hook, as the prefill worker sends them.
        prefill.open(1, prompt);
        REQUIRE(prefill.reserve(1, int(prompt.size())));
        const auto plan = transfer_schedule(model->config.n_layers, k);
        std::vector<std::vector<float>> wire;
        prefill.set_layer_hook([&](int layer) {
            for (const LayerRange& r : plan)
                if (r.last == layer + 1) {
                    BlockTable t = prefill.block_table(1);
                    t.len = int(prompt.size());
                    wire.emplace_back(packed_floats(prefill.kv_cache(), pd::blocks_for(prefill.kv_cache(), t.len), r));
                    pack_kv(prefill.kv_cache(), t, r, wire.back());
                }
        });
        const pd::serve::SeqWork w{1, prompt, 1};
        const int first = pd::argmax(prefill.step({&w, 1}), 97);
        prefill.set_layer_hook({});
        // Decode elsewhere: another engine whose first blocks are taken, so the ids differ.
        REQUIRE(decoder.adopt(7, std::vector<int>(17, 5)) != nullptr);
        const BlockTable* t = decoder.adopt(2, prompt);
        REQUIRE(t != nullptr);
        REQUIRE(wire.size() == plan.size());
        for (std::size_t m = 0; m < plan.size(); m++) unpack_kv(wire[m], plan[m], decoder.kv_cache(), *t);
        const std::vector<int> moved = decode(decoder, 2, first, n), stayed = decode(prefill, 1, first, n);
        observe("tokens after the transfer: trial " + std::to_string(trial), moved);
        INFO("prompt of " << prompt.size() << " tokens, " << k << " layers a message, " << n << " tokens");
        CHECK_MESSAGE(moved == stayed, "decoding from the moved blocks must give the tokens decoding in place "
                                       "gives: a block, layer or K/V out of place changes them");
    }
}

namespace {

// Runs of m layers, the last shorter: the schedule, built here so that the
// decision tests do not depend on task 1.
std::vector<LayerRange> runs_of(int n_layers, int m) {
    std::vector<LayerRange> plan;
    for (int l = 0; l < n_layers; l += m) plan.push_back({l, std::min(n_layers, l + m)});
    return plan;
}

// The pipeline of exercise.hpp, restated: each message's start and end, by layer.
double expected_exposed(const SplitCase& c, const std::vector<LayerRange>& plan, int n_layers) {
    const double wire = c.kv_bytes * 8 / c.link_gbps / 1e6;
    double done = 0;
    for (const LayerRange& r : plan) {
        const double ready = c.prefill_ms * r.last / n_layers;
        done = std::max(done, ready) + wire * r.size() / n_layers;
    }
    return done - c.prefill_ms;
}

const pd::lab::Tolerance kMsTol{1e-9, 1e-9};

bool near(double got, double want) { return std::abs(got - want) <= kMsTol.atol + kMsTol.rtol * std::abs(want); }

}  // namespace

TEST_CASE("lab09.decision.hand_worked") {
    pd::lab::needs([] { split_verdict({1, 1, 1, 1}, runs_of(1, 1), 1); });
    // 4 layers, a 40 ms prefill (10 ms a layer), 20 MB over 8 Gb/s: 20 ms on the wire.
    struct Case {
        double gbps;
        int per_message;
        double exposed;
        const char* why;
    };
    for (const Case& k : {Case{8, 4, 20, "one message after the prefill: all 20 ms"},
                          Case{8, 1, 5, "a message a layer, 5 ms each, each landed before the next is ready: the last"},
                          Case{8, 2, 10, "two messages of 10 ms, ready at 20 and 40 ms: the second"},
                          Case{2, 1, 50, "a slow link, 20 ms a layer against 10 ms of compute: the queue grows, "
                                         "done at 30, 50, 70, 90 ms"}}) {
        const SplitVerdict v = split_verdict({20e6, 40, k.gbps, 30}, runs_of(4, k.per_message), 4);
        observe(std::string(k.why) + " transfer", v.transfer_ms, kMsTol);
        observe(std::string(k.why) + " exposed", v.exposed_ms, kMsTol);
        observe(std::string(k.why) + " pays", v.pays);
        INFO(k.gbps << " Gb/s, " << k.per_message << " layers a message");
        CHECK_MESSAGE(near(v.transfer_ms, 20e6 * 8 / k.gbps / 1e6), "transfer_ms: every byte over the link");
        CHECK_MESSAGE(near(v.exposed_ms, k.exposed), k.why << "; yours " << v.exposed_ms << " ms");
        CHECK_MESSAGE(v.pays == (k.exposed < 30), "pays: exposed below the 30 ms stall it removes");
    }
}

TEST_CASE("lab09.decision.random_pipelines") {
    pd::lab::needs([] { split_verdict({1, 1, 1, 1}, runs_of(1, 1), 1); });
    Inputs in(7);
    for (int trial = 0; trial < 300; trial++) {
        const int layers = in.integer(1, 96), per = in.integer(1, layers + 2);
        const SplitCase c{in.uniform(0, 2e9), in.uniform(0, 5000), in.integer(0, 3) ? in.uniform(0.5, 800) : 1e-3,
                          in.uniform(0, 500)};
        const auto plan = runs_of(layers, per);
        const SplitVerdict v = split_verdict(c, plan, layers);
        const double want = expected_exposed(c, plan, layers);
        observe("trial " + std::to_string(trial) + " exposed", v.exposed_ms, kMsTol);
        observe("trial " + std::to_string(trial) + " pays", v.pays);
        INFO(c.kv_bytes << " bytes, prefill " << c.prefill_ms << " ms, " << c.link_gbps << " Gb/s, " << layers
                        << " layers, " << per << " a message; expected " << want << " ms, yours " << v.exposed_ms);
        CHECK(near(v.exposed_ms, want));
        if (std::abs(want - c.stall_ms) > 1e-6 * c.stall_ms) CHECK(v.pays == (want < c.stall_ms));
    }
}

TEST_CASE("lab09.decision.bad_values_are_refused") {
    pd::lab::needs([] { split_verdict({1, 1, 1, 1}, runs_of(1, 1), 1); });
    const auto plan = runs_of(4, 1);
    struct Bad {
        SplitCase c;
        int layers;
        const char* names;
    };
    for (const Bad& b : {Bad{{-1, 40, 8, 30}, 4, "-1"}, Bad{{1e6, -5, 8, 30}, 4, "-5"}, Bad{{1e6, 40, 0, 30}, 4, "0"},
                         Bad{{1e6, 40, NAN, 30}, 4, "nan"}, Bad{{1e6, 40, 8, 30}, 0, "0"}}) {
        INFO("kv_bytes " << b.c.kv_bytes << ", prefill " << b.c.prefill_ms << ", link " << b.c.link_gbps
                         << ", layers " << b.layers);
        CHECK_THROWS_AS(split_verdict(b.c, plan, b.layers), pd::UserError);
        CHECK_THROWS_WITH(split_verdict(b.c, plan, b.layers), doctest::Contains(b.names));
    }
    CHECK_THROWS_AS(split_verdict({1e6, 40, 8, 30}, std::vector<LayerRange>{}, 4), pd::UserError);
}

TEST_CASE("lab09.seed.other_seed_other_inputs") {
    Inputs a(2, 0), b(2, 1);
    bool differ = false;
    for (int t = 0; t < 10; t++) {
        const PagedKVCache ca = random_cache(a, 1), cb = random_cache(b, 1);
        differ = differ || ca.n_layers != cb.n_layers || ca.block_size != cb.block_size || ca.head_dim != cb.head_dim;
    }
    CHECK_MESSAGE(differ, "PDLAB_TEST_SEED must change the random caches");
}
