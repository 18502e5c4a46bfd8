// Lab 03 tests: the head map against pd::kv_head_for, the byte count against
// the formula and KVCache::bytes_for_tokens, append/commit against the
// engine's kv_write and against a cache the engine filled, and single-head
// attention against pd::attend_one, a double-precision reference and the
// engine's real attention output. Sizes, positions, prompts and values derive
// from PDLAB_TEST_SEED (randn() and pd::lab::Inputs); the head map is checked
// exhaustively. Run: meson test -C build --suite track1-03
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "engine/attention.hpp"
#include "check.hpp"
#include "exercise.hpp"
#include "engine/model.hpp"
#include "load/model_source.hpp"

#include "lab_test.hpp"  // NotImplemented shown with its hint; pd::lab::needs(), observe()

using namespace pd;
using pd::lab::needs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using namespace pd::test;
namespace ex = pd::lab03;

namespace {

Config shape_of(const std::string& spec) {
    unsigned long long seed = 0;
    return synthetic_config(spec, seed);
}

// Fills K and V of every layer/sequence/head/position with distinct random values.
void fill_random(KVCache& c, std::uint64_t seed) {
    auto k = randn(c.k.size(), seed), v = randn(c.v.size(), seed + 1);
    c.k = k, c.v = v;
}

// Where in the cache does this exact row of D floats sit? For failure messages.
std::string find_row(const KVCache& c, const std::vector<float>& buf, const float* row) {
    const std::size_t D = std::size_t(c.head_dim);
    for (int l = 0; l < c.n_layers; l++)
        for (int b = 0; b < c.batch; b++)
            for (int h = 0; h < c.n_kv_heads; h++)
                for (int p = 0; p < c.max_seq; p++) {
                    std::size_t off = (((std::size_t(l) * c.batch + b) * c.n_kv_heads + h) * c.max_seq + p) * D;
                    if (std::memcmp(buf.data() + off, row, sizeof(float) * D) == 0)
                        return fmt::format("layer {}, sequence {}, head {}, position {}", l, b, h, p);
                }
    return "nowhere (it was not copied whole)";
}

// Double-precision attention of one query over the first n keys of one head.
std::vector<float> ref_attend(const float* q, const KVCache& c, int l, int b, int h, int n, bool scaled = true) {
    const int D = c.head_dim;
    std::vector<double> s(static_cast<std::size_t>(n));
    double mx = -1e300;
    for (int j = 0; j < n; j++) {
        const float* k = kv_key(c, l, b, h, j);
        double d = 0;
        for (int i = 0; i < D; i++) d += double(q[i]) * k[i];
        s[std::size_t(j)] = scaled ? d / std::sqrt(double(D)) : d;
        mx = std::max(mx, s[std::size_t(j)]);
    }
    double sum = 0;
    for (double& x : s) sum += x = std::exp(x - mx);
    std::vector<double> o(std::size_t(D), 0.0);
    for (int j = 0; j < n; j++) {
        const float* v = kv_value(c, l, b, h, j);
        for (int i = 0; i < D; i++) o[std::size_t(i)] += s[std::size_t(j)] / sum * v[i];
    }
    return std::vector<float>(o.begin(), o.end());
}

bool close_all(const std::vector<float>& a, const std::vector<float>& b, float tol) {
    for (std::size_t i = 0; i < a.size(); i++)
        if (!(std::fabs(a[i] - b[i]) <= tol + tol * std::fabs(b[i]))) return false;
    return true;
}

}  // namespace

// ---------------------------------------------------------------- Task 1: gqa

TEST_CASE("lab03.gqa.matches_engine_head_map") {
    needs([] { ex::kv_head_for_query(0, 2, 1); });
    for (int n_heads = 1; n_heads <= 32; n_heads++)
        for (int n_kv = 1; n_kv <= n_heads; n_kv++) {
            if (n_heads % n_kv != 0) continue;
            for (int h = 0; h < n_heads; h++) {
                int want = kv_head_for(h, n_heads, n_kv);
                int got = ex::kv_head_for_query(h, n_heads, n_kv);
                observe(fmt::format("kv_head_for_query({}, {}, {})", h, n_heads, n_kv), got);
                if (got == want) continue;
                std::string hint = (got == h % n_kv)
                    ? "you interleaved the heads (h % n_kv_heads); the heads of a group are CONSECUTIVE: h / group_size"
                    : "group_size = n_heads / n_kv_heads query heads share each KV head, so the answer is h / group_size";
                FAIL_CHECK(fmt::format("query head {} of {} with {} KV heads should read KV head {}, got {}: {}", h,
                                       n_heads, n_kv, want, got, hint));
            }
        }
}

TEST_CASE("lab03.gqa.mha_gqa_mqa") {
    needs([] { ex::kv_head_for_query(0, 2, 1); });
    for (int h = 0; h < 8; h++) {
        CHECK_MESSAGE(ex::kv_head_for_query(h, 8, 8) == h, fmt::format(
            "MHA (8 query heads, 8 KV heads): query head {} has its own KV head {}", h, h));
        CHECK_MESSAGE(ex::kv_head_for_query(h, 8, 1) == 0, fmt::format(
            "MQA (8 query heads, 1 KV head): every query head, {} included, reads KV head 0", h));
        CHECK_MESSAGE(ex::kv_head_for_query(h, 8, 2) == h / 4, fmt::format(
            "GQA (8 query heads, 2 KV heads): heads 0-3 read KV head 0 and 4-7 read KV head 1; head {} reads {}", h,
            h / 4));
    }
    // Every KV head serves exactly group_size query heads (Llama 3.2 1B: 32 query, 8 KV heads).
    std::vector<int> served(8, 0);
    for (int h = 0; h < 32; h++) served[std::size_t(ex::kv_head_for_query(h, 32, 8))]++;
    observe("query heads served by each of 8 KV heads (32 query heads)", served);
    for (int k = 0; k < 8; k++)
        CHECK_MESSAGE(served[std::size_t(k)] == 4, fmt::format(
            "with 32 query heads and 8 KV heads each KV head serves 4 query heads; KV head {} serves {}", k,
            served[std::size_t(k)]));
}

TEST_CASE("lab03.gqa.bad_arguments") {
    needs([] { ex::kv_head_for_query(0, 2, 1); });
    CHECK_THROWS_AS_MESSAGE(ex::kv_head_for_query(0, 8, 3), UserError,
                            "8 query heads cannot be shared evenly by 3 KV heads: fail with a UserError");
    CHECK_THROWS_AS_MESSAGE(ex::kv_head_for_query(8, 8, 2), UserError, "query head 8 of 8 (0..7) is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::kv_head_for_query(-1, 8, 2), UserError, "query head -1 is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::kv_head_for_query(0, 8, 0), UserError,
                            "0 KV heads is impossible (and would divide by zero)");
}

// ---------------------------------------------------------------- Task 2: bytes

TEST_CASE("lab03.bytes.formula") {
    needs([] { ex::kv_cache_bytes(shape_of("mha-h8-d64"), 1, 1, 4); });
    const char* specs[] = {"mha-h8-d64", "bench-llama-125m", "llama-1b", "gpt2-124m",
                           "llama,dim=512,heads=8,kv_heads=8", "llama,dim=512,heads=8,kv_heads=2",
                           "llama,dim=512,heads=8,kv_heads=1", "llama,dim=256,layers=4,heads=8,kv_heads=2"};
    for (const char* spec : specs) {
        Config c = shape_of(spec);
        pd::lab::Inputs in(301);
        for (int B : {0, 1, in.integer(2, 64)})
            for (int S : {0, 1, in.integer(2, 100), in.integer(101, 1 << 17)})
                for (std::size_t bytes : {std::size_t(1), std::size_t(2), std::size_t(4)}) {
                    unsigned long long want = 2ull * c.n_layers * B * c.n_kv_heads * S * c.head_dim * bytes;
                    std::size_t got = ex::kv_cache_bytes(c, B, S, bytes);
                    observe(fmt::format("kv_cache_bytes({}, B={}, S={}, {})", spec, B, S, bytes), got);
                    std::string hint;
                    if (want != 0 && got * 2 == want) hint = " (half: both K AND V are cached)";
                    else if (want != 0 && c.n_heads != c.n_kv_heads && got == want / c.n_kv_heads * c.n_heads)
                        hint = " (you counted query heads; the cache holds n_kv_heads heads)";
                    CHECK_MESSAGE(got == want, fmt::format(
                        "{} (L={}, H_kv={}, D={}), B={}, S={}, {} bytes/element: expected 2 x L x B x H_kv x S x D "
                        "x bytes = {}, got {}{}", spec, c.n_layers, c.n_kv_heads, c.head_dim, B, S, bytes, want, got,
                        hint));
                }
        // The engine's own count, for one sequence in f32.
        KVCache probe;
        probe.n_layers = c.n_layers, probe.n_kv_heads = c.n_kv_heads, probe.head_dim = c.head_dim;
        CHECK_MESSAGE(ex::kv_cache_bytes(c, 1, 100, 4) == probe.bytes_for_tokens(100), fmt::format(
            "{}: 100 tokens of one sequence in f32 take KVCache::bytes_for_tokens(100) = {} bytes", spec,
            probe.bytes_for_tokens(100)));
        CHECK(ex::kv_cache_bytes(c, 1, 1, 4) == c.kv_elems_per_token() * 4);
    }
}

TEST_CASE("lab03.bytes.uses_kv_heads_not_query_heads") {
    needs([] { ex::kv_cache_bytes(shape_of("mha-h8-d64"), 1, 1, 4); });
    Config mha = shape_of("llama,dim=512,heads=8,kv_heads=8");
    Config gqa = shape_of("llama,dim=512,heads=8,kv_heads=2");
    Config mqa = shape_of("llama,dim=512,heads=8,kv_heads=1");
    std::size_t a = ex::kv_cache_bytes(mha, 1, 1024, 2), b = ex::kv_cache_bytes(gqa, 1, 1024, 2),
                c = ex::kv_cache_bytes(mqa, 1, 1024, 2);
    observe("kv_cache_bytes of MHA, GQA (2 KV heads), MQA: 1024 tokens, bf16", std::vector<std::size_t>{a, b, c});
    CHECK_MESSAGE(a == 4 * b, fmt::format(
        "GQA with 2 KV heads caches a quarter of MHA's 8: expected {} / 4 = {}, got {}. The cache holds K/V per KV "
        "head (n_kv_heads), not per query head", a, a / 4, b));
    CHECK_MESSAGE(a == 8 * c, fmt::format("MQA (1 KV head) caches an eighth of MHA: expected {}, got {}", a / 8, c));
    // Known figure: a Llama-3.2-1B-shaped model (16 layers, 8 KV heads, D=64) in bf16 keeps 32 KiB per token.
    Config l1b = shape_of("llama-1b");
    CHECK_MESSAGE(ex::kv_cache_bytes(l1b, 1, 1, 2) == 32768u, "llama-1b shape, bf16: 2*16*8*64*2 = 32768 bytes per token");
    CHECK_MESSAGE(ex::kv_cache_bytes(l1b, 1, 4096, 2) == 128u * 1024 * 1024, "llama-1b, 4096 tokens, bf16: 128 MiB");
}

TEST_CASE("lab03.bytes.no_overflow") {
    needs([] { ex::kv_cache_bytes(shape_of("mha-h8-d64"), 1, 1, 4); });
    Config l1b = shape_of("llama-1b");
    // 64 sequences of 131072 tokens: 2^38 bytes, far past what an int holds.
    std::size_t got = ex::kv_cache_bytes(l1b, 64, 131072, 2);
    observe("kv_cache_bytes(llama-1b, B=64, S=131072, 2)", got);
    CHECK_MESSAGE(got == (std::size_t(1) << 38), fmt::format(
        "64 x 131072 tokens of llama-1b in bf16 are 2^38 = {} bytes, got {}: multiply in std::size_t from the "
        "first factor on (an int product overflows at 2^31)", std::size_t(1) << 38, got));
}

TEST_CASE("lab03.bytes.bad_arguments") {
    needs([] { ex::kv_cache_bytes(shape_of("mha-h8-d64"), 1, 1, 4); });
    Config c = shape_of("mha-h8-d64");
    CHECK_THROWS_AS_MESSAGE(ex::kv_cache_bytes(c, -1, 10, 4), UserError, "a negative batch must be rejected");
    CHECK_THROWS_AS_MESSAGE(ex::kv_cache_bytes(c, 1, -10, 4), UserError, "a negative token count must be rejected");
    CHECK_THROWS_AS_MESSAGE(ex::kv_cache_bytes(c, 1, 10, 0), UserError, "0 bytes per element must be rejected");
}

// ---------------------------------------------------------------- Task 3: kv_cache

TEST_CASE("lab03.kv_cache.append_writes_at_seq_len") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 4, 2); c.seq_len = {1}; std::vector<float> x(2); ex::append_kv(c, 0, 0, x.data(), x.data()); ex::commit_kv(c, 0); });
    // A seeded cache: 2-4 layers, 2-3 sequences, 2-4 KV heads, 6-12 positions,
    // head_dim 2-8, every sequence partly filled; one token goes into (layer, seq).
    pd::lab::Inputs in(302);
    const int L = in.integer(2, 4), B = in.integer(2, 3), H = in.integer(2, 4), S = in.integer(6, 12),
              D = in.integer(2, 8);
    KVCache mine = make_kv_cache(L, B, H, S, D);
    for (int& len : mine.seq_len) len = in.integer(0, S - 1);
    const int layer = in.integer(0, L - 1), seq = in.integer(0, B - 1), pos = mine.seq_len[std::size_t(seq)];
    const std::vector<int> lens_before = mine.seq_len;
    KVCache want = mine;
    auto k = randn(std::size_t(H * D), 101), v = randn(std::size_t(H * D), 102);  // n_kv_heads * head_dim
    ex::append_kv(mine, layer, seq, k.data(), v.data());
    kv_write(want, layer, seq, pos, k.data(), v.data());  // the engine's write at position seq_len[seq]
    observe("K after append_kv", mine.k);
    observe("V after append_kv", mine.v);
    observe("seq_len after append_kv", mine.seq_len);
    for (int h = 0; h < H; h++) {
        const float* kh = k.data() + h * D;
        if (std::memcmp(kv_key(mine, layer, seq, h, pos), kh, sizeof(float) * std::size_t(D)) != 0) {
            std::string where = find_row(mine, mine.k, kh);
            FAIL_CHECK(fmt::format(
                "K of head {} should be at layer {}, sequence {}, head {}, position {} (seq_len[{}] = {}: positions "
                "0..{} are in use, so the new token goes at {}); it landed at {}{}", h, layer, seq, h, pos, seq, pos,
                pos - 1, pos, where,
                where.find(fmt::format("position {}", pos)) != std::string::npos || where.rfind("nowhere", 0) == 0
                    ? ". Head h's row of k_new starts at k_new + h * head_dim" : ""));
        }
        const float* vh = v.data() + h * D;
        if (std::memcmp(kv_value(mine, layer, seq, h, pos), vh, sizeof(float) * std::size_t(D)) != 0)
            FAIL_CHECK(fmt::format("V of head {} should be at layer {}, sequence {}, head {}, position {}; it landed at {}{}",
                                   h, layer, seq, h, pos, find_row(mine, mine.v, vh),
                                   find_row(mine, mine.k, vh).rfind("layer", 0) == 0 ? " (and a copy is in K: K and V swapped?)" : ""));
    }
    CHECK_MESSAGE(mine.k == want.k, "append_kv changed K somewhere other than the new token's rows");
    CHECK_MESSAGE(mine.v == want.v, "append_kv changed V somewhere other than the new token's rows");
    CHECK_MESSAGE(mine.seq_len == lens_before, fmt::format(
        "append_kv changed seq_len to [{}]: it must not. Every layer appends the same token at the same position; "
        "commit_kv advances seq_len once, after the last layer", fmt::join(mine.seq_len, ", ")));
}

TEST_CASE("lab03.kv_cache.commit_advances_once") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 4, 2); c.seq_len = {1}; std::vector<float> x(2); ex::append_kv(c, 0, 0, x.data(), x.data()); ex::commit_kv(c, 0); });
    KVCache c = make_kv_cache(2, 2, 1, 4, 2);
    auto k = randn(2, 7), v = randn(2, 8);
    for (int l = 0; l < 2; l++) ex::append_kv(c, l, 1, k.data(), v.data());
    CHECK_MESSAGE(c.seq_len[1] == 0, "after appending to both layers, seq_len is still 0 until commit_kv");
    CHECK_MESSAGE(std::memcmp(kv_key(c, 1, 1, 0, 0), k.data(), sizeof(float) * 2) == 0,
                  "the first token of an empty sequence goes at position 0");
    int len = ex::commit_kv(c, 1);
    observe("commit_kv(seq 1) and then seq_len", std::vector<int>{len, c.seq_len[0], c.seq_len[1]});
    CHECK_MESSAGE(len == 1, fmt::format("commit_kv returns the new length: 1, got {}", len));
    CHECK_MESSAGE(c.seq_len == std::vector<int>({0, 1}), fmt::format(
        "commit_kv(seq 1) should make seq_len [0, 1], got [{}]", fmt::join(c.seq_len, ", ")));
    // The next token lands one position further on.
    auto k2 = randn(2, 9), v2 = randn(2, 10);
    ex::append_kv(c, 0, 1, k2.data(), v2.data());
    observe("K after a second append", c.k);
    CHECK_MESSAGE(std::memcmp(kv_key(c, 0, 1, 0, 1), k2.data(), sizeof(float) * 2) == 0,
                  "after one commit the next append goes to position 1");
    CHECK_MESSAGE(std::memcmp(kv_key(c, 0, 1, 0, 0), k.data(), sizeof(float) * 2) == 0,
                  "the second append overwrote position 0: read the position from seq_len");
}

TEST_CASE("lab03.kv_cache.replays_an_engine_cache") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 4, 2); c.seq_len = {1}; std::vector<float> x(2); ex::append_kv(c, 0, 0, x.data(), x.data()); ex::commit_kv(c, 0); });
    // Let the engine fill a cache (prefill 7 tokens, decode 3), then rebuild it
    // position by position with append_kv + commit_kv: the two must be identical.
    auto lm = load_model("synthetic:llama,dim=64,ffn=96,layers=3,heads=4,kv_heads=2,vocab=97,ctx=32",
                         Precision::f32, false);
    const Model& m = *lm.model;
    KVCache eng = make_kv_cache(m, 1);
    RunState st = make_run_state(m.config, 1);
    pd::lab::Inputs in(303);
    const int P = in.integer(1, 12), steps = in.integer(1, 8), total = P + steps;  // ctx = 32
    prefill(m, eng, st, 0, in.tokens(P, 97));
    int slot = 0;
    for (int t : in.tokens(steps, 97)) decode(m, eng, st, {&slot, 1}, {&t, 1});
    REQUIRE(eng.seq_len[0] == total);

    // Rebuilt in sequence 1 of a two-sequence cache: sequence 0 must stay empty.
    KVCache mine = make_kv_cache(m, 2);
    const int H = eng.n_kv_heads, D = eng.head_dim;
    std::vector<float> k(static_cast<std::size_t>(H * D)), v(static_cast<std::size_t>(H * D));
    for (int pos = 0; pos < total; pos++) {
        for (int l = 0; l < eng.n_layers; l++) {
            for (int h = 0; h < H; h++) {
                std::memcpy(k.data() + h * D, kv_key(eng, l, 0, h, pos), sizeof(float) * D);
                std::memcpy(v.data() + h * D, kv_value(eng, l, 0, h, pos), sizeof(float) * D);
            }
            ex::append_kv(mine, l, 1, k.data(), v.data());
        }
        int len = ex::commit_kv(mine, 1);
        REQUIRE_MESSAGE(len == pos + 1, fmt::format("after committing token {} the length is {}, got {}", pos, pos + 1, len));
    }
    // Copies of the engine's values: two processes' engines agree to rounding at most.
    observe("seq_len of the rebuilt cache", mine.seq_len);
    observe("K of the rebuilt cache", mine.k, {1e-6, 1e-5});
    observe("V of the rebuilt cache", mine.v, {1e-6, 1e-5});
    CHECK_MESSAGE(mine.seq_len == std::vector<int>({0, total}), fmt::format(
        "after {} tokens in sequence 1, seq_len should be [0, {}], got [{}]", total, total,
        fmt::join(mine.seq_len, ", ")));
    int bad = 0;
    for (int l = 0; l < eng.n_layers; l++)
        for (int h = 0; h < H; h++)
            for (int pos = 0; pos < eng.max_seq; pos++) {
                bool k_ok = std::memcmp(kv_key(mine, l, 1, h, pos), kv_key(eng, l, 0, h, pos), sizeof(float) * D) == 0;
                bool v_ok = std::memcmp(kv_value(mine, l, 1, h, pos), kv_value(eng, l, 0, h, pos), sizeof(float) * D) == 0;
                if ((!k_ok || !v_ok) && bad++ == 0)
                    FAIL_CHECK(fmt::format("layer {}, KV head {}, position {}: your rebuilt {} differs from the engine's "
                                           "cache. Append at seq_len, in every layer, for every head", l, h, pos,
                                           k_ok ? "V" : "K"));
            }
    for (int l = 0; l < eng.n_layers; l++)
        for (int h = 0; h < H; h++)
            for (int pos = 0; pos < eng.max_seq; pos++)
                if (std::any_of(kv_key(mine, l, 0, h, pos), kv_key(mine, l, 0, h, pos) + D, [](float x) { return x != 0; }) &&
                    bad++ == 0)
                    FAIL_CHECK(fmt::format("sequence 0 was written (layer {}, head {}, position {}) although only "
                                           "sequence 1 was appended to", l, h, pos));
}

TEST_CASE("lab03.kv_cache.another_seed_gives_other_inputs") {
    // What a grader relies on: PDLAB_TEST_SEED reaches the inputs, so answers
    // copied from one seed's run do not pass under another.
    pd::lab::Inputs a(303, 1), b(303, 2), a_again(303, 1);
    const auto ta = a.tokens(32, 97);
    CHECK_MESSAGE(ta != b.tokens(32, 97), "PDLAB_TEST_SEED 1 and 2 drew the same prompt");
    CHECK_MESSAGE(ta == a_again.tokens(32, 97), "the same PDLAB_TEST_SEED must draw the same prompt");
}

TEST_CASE("lab03.kv_cache.full_and_bad_arguments") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 4, 2); c.seq_len = {1}; std::vector<float> x(2); ex::append_kv(c, 0, 0, x.data(), x.data()); ex::commit_kv(c, 0); });
    KVCache c = make_kv_cache(2, 2, 2, 3, 4);
    std::vector<float> k(8, 1.0f), v(8, 2.0f);
    c.seq_len = {3, 0};
    CHECK_THROWS_AS_MESSAGE(ex::append_kv(c, 0, 0, k.data(), v.data()), UserError,
                            "sequence 0 holds 3 of 3 positions: appending must fail (writing at position 3 would "
                            "run into the next head's rows)");
    CHECK_THROWS_AS_MESSAGE(ex::commit_kv(c, 0), UserError, "committing to a full sequence must fail");
    CHECK_THROWS_AS_MESSAGE(ex::append_kv(c, 2, 1, k.data(), v.data()), UserError, "layer 2 of 2 (0..1) is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::append_kv(c, -1, 1, k.data(), v.data()), UserError, "layer -1 is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::append_kv(c, 0, 2, k.data(), v.data()), UserError, "sequence 2 of a batch of 2 is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::commit_kv(c, -1), UserError, "sequence -1 is out of range");
    CHECK(c.seq_len == std::vector<int>({3, 0}));
}

// ---------------------------------------------------------------- Task 4: attention

TEST_CASE("lab03.attention.matches_engine_and_reference") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 2, 2); std::vector<float> q(2), o(2); ex::attend_one_head(o.data(), q.data(), c, 0, 0, 0, 1); });
    pd::lab::Inputs in(304);
    int seed = 300;
    for (int D : {in.integer(1, 16), 64, in.integer(65, 160)}) {
        KVCache c = make_kv_cache(2, 2, 3, 300, D);
        fill_random(c, std::uint64_t(D));
        std::vector<float> scores(300), eng(static_cast<std::size_t>(D)), mine(static_cast<std::size_t>(D));
        for (int n : {1, 2, in.integer(3, 32), in.integer(33, 299), 300}) {
            auto q = randn(std::size_t(D), std::uint64_t(seed++));
            ex::attend_one_head(mine.data(), q.data(), c, 1, 1, 2, n);
            attend_one(eng.data(), q.data(), c, 1, 1, 2, n, scores.data());
            auto ref = ref_attend(q.data(), c, 1, 1, 2, n);
            // Two correct kernels: each within the test's tolerance of the reference.
            observe(fmt::format("attend_one_head, head_dim {}, {} keys", D, n), mine, {2e-5, 2e-4});
            if (!close_all(mine, ref, 1e-4f)) {
                std::string why;
                if (n > 1 && close_all(mine, ref_attend(q.data(), c, 1, 1, 2, n, false), 1e-4f))
                    why = ": it matches attention WITHOUT the 1/sqrt(head_dim) scale; divide the scores by sqrt(D)";
                else if (n > 1 && close_all(mine, ref_attend(q.data(), c, 1, 1, 2, n - 1), 1e-4f))
                    why = ": it matches attention over n_keys - 1 keys; the query's own position n_keys-1 counts";
                else if (n < 300 && close_all(mine, ref_attend(q.data(), c, 1, 1, 2, n + 1), 1e-4f))
                    why = ": it matches attention over n_keys + 1 keys; read positions 0..n_keys-1 only";
                else if (close_all(mine, ref_attend(q.data(), c, 0, 1, 2, n), 1e-4f))
                    why = ": it matches layer 0; read the layer you were given";
                else if (close_all(mine, ref_attend(q.data(), c, 1, 0, 2, n), 1e-4f))
                    why = ": it matches sequence 0; read the sequence you were given";
                FAIL_CHECK(fmt::format("head_dim {}, {} keys: the output differs from softmax(q.K/sqrt(D)) V{}", D, n, why));
            }
            check_close(mine, eng, 1e-5f, 1e-4f, fmt::format("against pd::attend_one, head_dim {}, {} keys", D, n));
        }
    }
}

TEST_CASE("lab03.attention.one_key_returns_its_value") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 2, 2); std::vector<float> q(2), o(2); ex::attend_one_head(o.data(), q.data(), c, 0, 0, 0, 1); });
    KVCache c = make_kv_cache(1, 1, 1, 8, 32);
    fill_random(c, 5);
    auto q = randn(32, 6);
    std::vector<float> out(32);
    ex::attend_one_head(out.data(), q.data(), c, 0, 0, 0, 1);
    observe("attend_one_head over one key", out, {2e-6, 2e-6});
    std::vector<float> v0(kv_value(c, 0, 0, 0, 0), kv_value(c, 0, 0, 0, 0) + 32);
    check_close(out, v0, 1e-6f, 1e-6f,
                "with a single key the softmax weight is 1, so the output is exactly V[0] (the token attends to itself)");
}

TEST_CASE("lab03.attention.reads_only_the_first_n_keys") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 2, 2); std::vector<float> q(2), o(2); ex::attend_one_head(o.data(), q.data(), c, 0, 0, 0, 1); });
    KVCache c = make_kv_cache(1, 1, 2, 40, 16);
    fill_random(c, 11);
    // Poison every position from 10 on: a correct kernel never looks at them.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int h = 0; h < 2; h++)
        for (int p = 10; p < 40; p++)
            for (int i = 0; i < 16; i++) kv_key(c, 0, 0, h, p)[i] = nan, kv_value(c, 0, 0, h, p)[i] = nan;
    auto q = randn(16, 12);
    std::vector<float> out(16);
    const int head = pd::lab::Inputs(305).integer(0, 1);
    ex::attend_one_head(out.data(), q.data(), c, 0, 0, head, 10);
    observe("attend_one_head over 10 keys before poisoned ones", out, {2e-5, 2e-4});
    for (float x : out)
        REQUIRE_MESSAGE(std::isfinite(x), "the output is NaN: you read cache positions at or after n_keys = 10. A query "
                                          "sees positions 0..n_keys-1 only (causal attention; later rows are not "
                                          "written yet)");
    check_close(out, ref_attend(q.data(), c, 0, 0, head, 10), 1e-5f, 1e-4f, "10 keys with poisoned positions after them");
}

TEST_CASE("lab03.attention.large_scores_are_stable") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 2, 2); std::vector<float> q(2), o(2); ex::attend_one_head(o.data(), q.data(), c, 0, 0, 0, 1); });
    KVCache c = make_kv_cache(1, 1, 1, 50, 64);
    fill_random(c, 13);
    auto q = randn(64, 14, 60.0f);  // scores in the hundreds: exp() overflows without the max trick
    std::vector<float> out(64);
    ex::attend_one_head(out.data(), q.data(), c, 0, 0, 0, 50);
    observe("attend_one_head with scores in the hundreds", out, {2e-4, 2e-3});
    for (float x : out)
        REQUIRE_MESSAGE(std::isfinite(x), "large scores gave inf/NaN: subtract the largest score before exp()");
    check_close(out, ref_attend(q.data(), c, 0, 0, 0, 50), 1e-4f, 1e-3f, "attention with scores in the hundreds");
}

TEST_CASE("lab03.attention.real_forward_pass") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 2, 2); std::vector<float> q(2), o(2); ex::attend_one_head(o.data(), q.data(), c, 0, 0, 0, 1); });
    // After a prefill, the run state holds the last layer's queries (st.q) and the
    // engine's attention output (st.att). Recompute that output head by head.
    auto lm = load_model("synthetic:llama,dim=128,ffn=256,layers=2,heads=8,kv_heads=2,vocab=101,ctx=64",
                         Precision::f32, false);
    const Model& m = *lm.model;
    const Config& cf = m.config;
    KVCache cache = make_kv_cache(m, 1);
    RunState st = make_run_state(cf, 1);
    pd::lab::Inputs in(306);
    const int P = in.integer(2, 40);
    prefill(m, cache, st, 0, in.tokens(P, 101));
    const int Q = cf.q_dim(), D = cf.head_dim, l = cf.n_layers - 1;
    std::vector<float> out(static_cast<std::size_t>(D));
    for (int t = 0; t < P; t++)
        for (int h = 0; h < cf.n_heads; h++) {
            int kvh = ex::kv_head_for_query(h, cf.n_heads, cf.n_kv_heads);
            ex::attend_one_head(out.data(), st.q.data() + std::size_t(t) * Q + h * D, cache, l, 0, kvh, t + 1);
            observe(fmt::format("attention output, prompt position {}, query head {}", t, h), out, {2e-4, 2e-3});
            check_close(out.data(), st.att.data() + std::size_t(t) * Q + h * D, std::size_t(D), 1e-4f, 1e-3f,
                        fmt::format("prompt position {}, query head {} (KV head {}), {} keys: the engine's attention "
                                    "output in the last layer", t, h, kvh, t + 1));
        }
}

TEST_CASE("lab03.attention.bad_arguments") {
    needs([] { KVCache c = make_kv_cache(1, 1, 1, 2, 2); std::vector<float> q(2), o(2); ex::attend_one_head(o.data(), q.data(), c, 0, 0, 0, 1); });
    KVCache c = make_kv_cache(2, 1, 2, 8, 4);
    std::vector<float> q(4, 1.0f), out(4);
    CHECK_THROWS_AS_MESSAGE(ex::attend_one_head(out.data(), q.data(), c, 0, 0, 0, 0), UserError,
                            "0 keys: there is nothing to attend to (n_keys >= 1: a token always sees itself)");
    CHECK_THROWS_AS_MESSAGE(ex::attend_one_head(out.data(), q.data(), c, 0, 0, 0, 9), UserError,
                            "9 keys in a cache of 8 positions is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::attend_one_head(out.data(), q.data(), c, 0, 0, 2, 3), UserError,
                            "KV head 2 of 2 (0..1) is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::attend_one_head(out.data(), q.data(), c, 2, 0, 0, 3), UserError,
                            "layer 2 of 2 is out of range");
    CHECK_THROWS_AS_MESSAGE(ex::attend_one_head(out.data(), q.data(), c, 0, 1, 0, 3), UserError,
                            "sequence 1 of a batch of 1 is out of range");
}
