// engine.speculative: rolling a sequence back (Engine::truncate), verifying k
// draft tokens in one target pass, and the draft-verify-accept loop
// (src/engine/speculative.hpp): greedy speculation gives the target's own
// greedy tokens, and the sampling rule keeps the target's distribution.
#include <algorithm>
#include <string>
#include <vector>

#include "check.hpp"
#include "engine/engine.hpp"
#include "engine/generate.hpp"
#include "io/model_source.hpp"

using namespace pd;
using namespace pd::test;

namespace {

const char* kSmallLlama = "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64";

std::vector<int> tokens_of(int n, int vocab, std::uint64_t seed) {
    std::mt19937_64 rng(seed_for(seed));
    std::vector<int> t(n);
    for (int& x : t) x = int(rng() % std::uint64_t(vocab));
    return t;
}

std::vector<float> decode_one(Engine& e, int token) {
    int slot = 0;
    const float* p = e.decode({&slot, 1}, {&token, 1});
    return std::vector<float>(p, p + e.config().vocab_size);
}

}  // namespace

TEST_CASE("engine.speculative.truncate_then_decode_equals_never_decoded") {
    auto lm = load_model(kSmallLlama, Precision::f32, false);
    auto rolled = make_engine(lm.model, {});
    auto fresh = make_engine(lm.model, {});
    const auto prompt = tokens_of(9, 97, 1), dropped = tokens_of(5, 97, 2), kept = tokens_of(4, 97, 3);
    rolled->prefill(0, prompt);
    for (int t : dropped) decode_one(*rolled, t);  // positions 9..13, then thrown away
    rolled->truncate(0, int(prompt.size()));
    CHECK(rolled->cache_len(0) == int(prompt.size()));
    fresh->prefill(0, prompt);
    for (std::size_t i = 0; i < kept.size(); i++) {
        // The same kernels on the same rows: exactly equal, not merely close. A
        // difference means the dropped rows were still read (attention past
        // seq_len) or the new row went to the wrong position.
        std::vector<float> got = decode_one(*rolled, kept[i]), want = decode_one(*fresh, kept[i]);
        check_close(got, want, 0.0f, 0.0f, fmt::format("decode {} after truncating 5 tokens away", i));
    }
    CHECK(rolled->cache_len(0) == fresh->cache_len(0));
}

TEST_CASE("engine.speculative.truncate_refuses_growth_and_bad_slots") {
    auto lm = load_model(kSmallLlama, Precision::f32, false);
    auto e = make_engine(lm.model, {});
    e->prefill(0, tokens_of(6, 97, 4));
    CHECK_THROWS_WITH_AS(e->truncate(0, 7), doctest::Contains("it holds 6"), UserError);
    CHECK_THROWS_WITH_AS(e->truncate(0, -1), doctest::Contains("from 0 to 6"), UserError);
    CHECK_THROWS_WITH_AS(e->truncate(1, 0), doctest::Contains("outside the cache's batch of 1"), UserError);
    CHECK(e->cache_len(0) == 6);  // a refused truncation changes nothing
    e->truncate(0, 6);            // to its own length: a no-op
    e->truncate(0, 0);            // to nothing: like reset
    CHECK(e->cache_len(0) == 0);
}
