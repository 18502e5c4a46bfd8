// Lab 14 tests: your tiled_attention_head against causal attention computed in
// double straight from its definition. First one query over every key, where
// only the key tiles matter (one tile, a short last tile, one key per tile, a
// max that rises tile after tile); then many queries, where the diagonal tiles
// are cut by the causal mask; scores far outside exp's range; random problems
// through the kit's tiled_attention (GQA heads on threads); and the memory your
// kernel takes beyond the scratch it is handed. Every input (lengths, tiles,
// values, head shapes, the row stride) is drawn from PDLAB_TEST_SEED through
// lab_test.hpp's Inputs.
//   meson test -C build --suite track3-14
//   build/labs/track3/14-attention-kernels/lab14_tests --test-case='lab14.causal.*'
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "check.hpp"
#include "exercise.hpp"
#include "kernels.hpp"
#include "lab_test.hpp"
#include "memory_meter.hpp"

using namespace pd::lab14;
using pd::lab::Inputs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using pd::test::check_close;

namespace {

// Float kernels against a double reference: the outputs are weighted averages
// of values of size ~1, summed over up to a few thousand keys in float.
constexpr float kAtol = 2e-5f, kRtol = 2e-4f;
// What the kit's caller leaves between and after the spans it hands you: untouched, or you wrote there.
constexpr float kSentinel = -7.0f;
constexpr std::size_t kCanary = 64;

// --- one head ----------------------------------------------------------------------

// One head's problem: q (T rows of stride ld), K and V (S, D).
struct Head {
    HeadShape shape;
    std::vector<float> q, K, V;
};

// Random values; rows of q at a seeded stride >= D (other heads' rows between).
Head random_head(Inputs& in, int T, int S, int D) {
    const bool interleaved = in.integer(0, 1) == 1;
    const std::size_t ld = std::size_t(D) + (interleaved ? std::size_t(in.integer(1, 3 * D)) : 0);
    return {{T, S, D, ld}, in.normals(std::size_t(T) * ld, 1.5f), in.normals(std::size_t(S) * D),
            in.normals(std::size_t(S) * D)};
}

// Scores exactly q_i . k_j / sqrt(D) = score(j) for every query: q is A along
// its first axis and 0 elsewhere, so a score is one product, with one rounding.
template <class Score>
Head scored_head(Inputs& in, int T, int S, Score score) {
    const int D = 32;
    Head h{{T, S, D, std::size_t(D)}, std::vector<float>(std::size_t(T) * D, 0.0f), in.normals(std::size_t(S) * D),
           in.normals(std::size_t(S) * D)};
    const float A = 1000.0f * std::sqrt(float(D));  // q . k / sqrt(D) = 1000 * k[0]
    for (int i = 0; i < T; i++) h.q[std::size_t(i) * D] = A;
    for (int j = 0; j < S; j++) h.K[std::size_t(j) * D] = float(score(j)) / 1000.0f;
    return h;
}

std::string describe(const HeadShape& s, Tiles t) {
    return fmt::format("{} queries over {} keys, D = {}, row stride {}, tiles Br = {} x Bc = {}", s.T, s.S, s.D,
                       s.ld, t.Br, t.Bc);
}

// Causal attention of one head in double: (T, D) rows, contiguous.
std::vector<float> reference(const Head& h) {
    const HeadShape& s = h.shape;
    std::vector<float> out(std::size_t(s.T) * s.D);
    for (int i = 0; i < s.T; i++) {
        const float* q = h.q.data() + std::size_t(i) * s.ld;
        const int n = s.S - s.T + i + 1;
        std::vector<double> w(n);
        for (int j = 0; j < n; j++) {
            for (int c = 0; c < s.D; c++) w[j] += double(q[c]) * h.K[std::size_t(j) * s.D + c];
            w[j] /= std::sqrt(double(s.D));
        }
        const double m = *std::max_element(w.begin(), w.end());
        double l = 0;
        for (double& x : w) l += (x = std::exp(x - m));
        for (int c = 0; c < s.D; c++) {
            double acc = 0;
            for (int j = 0; j < n; j++) acc += w[j] * h.V[std::size_t(j) * s.D + c];
            out[std::size_t(i) * s.D + c] = float(acc / l);
        }
    }
    return out;
}

// A span of n T's followed by kCanary sentinels.
template <class T>
struct Guarded {
    std::vector<T> v;
    Guarded(std::size_t n, T sentinel) : v(n + kCanary, sentinel) {}
    std::span<T> span() { return {v.data(), v.size() - kCanary}; }
    bool canaries_intact(T sentinel) const {
        return std::all_of(v.end() - kCanary, v.end(), [&](const T& x) { return same(x, sentinel); });
    }
    static bool same(float a, float b) { return a == b; }
    static bool same(const RowState& a, const RowState& b) { return a.m == b.m && a.l == b.l; }
};

// Your kernel on one head with exactly the scratch tiled_attention hands it,
// sentinels after the scratch and between the output rows; their (T, D) rows.
// With `use`, the call alone runs under measure_memory.
std::vector<float> run_head(const Head& h, Tiles t, const std::string& what, MemoryUse* use = nullptr) {
    const HeadShape& s = h.shape;
    const std::size_t R = std::size_t(std::min(t.Br, s.T));
    Guarded<float> scores(R * t.Bc, kSentinel);
    Guarded<RowState> rows(R, RowState{kSentinel, kSentinel});
    std::vector<float> out(std::size_t(s.T) * s.ld + kCanary, kSentinel);
    const TileScratch scratch{scores.span(), rows.span()};
    auto call = [&] { tiled_attention_head(out.data(), h.q.data(), h.K.data(), h.V.data(), s, t, scratch); };
    if (use) *use = measure_memory(call);
    else call();
    CHECK_MESSAGE(scores.canaries_intact(kSentinel),
                  what << ": wrote past scratch.scores, which holds R = min(Br, T) rows of Bc scores");
    CHECK_MESSAGE(rows.canaries_intact(RowState{kSentinel, kSentinel}),
                  what << ": wrote past scratch.rows, which holds R = min(Br, T) row states");
    std::vector<float> got(std::size_t(s.T) * s.D);
    bool gaps_intact = std::all_of(out.end() - kCanary, out.end(), [](float x) { return x == kSentinel; });
    for (int i = 0; i < s.T; i++) {
        const float* row = out.data() + std::size_t(i) * s.ld;
        std::copy(row, row + s.D, got.begin() + std::ptrdiff_t(i) * s.D);
        gaps_intact = gaps_intact && std::all_of(row + s.D, row + s.ld, [](float x) { return x == kSentinel; });
    }
    CHECK_MESSAGE(gaps_intact, what << ": wrote outside the output rows: row i is the D floats at out + i * ld, "
                                       "and the floats between them belong to other heads");
    return got;
}

// The first row whose output is off, as a hint: which keys that row may see.
std::string first_wrong_row(const std::vector<float>& got, const std::vector<float>& want, const HeadShape& s,
                            Tiles t, float atol, float rtol) {
    for (int i = 0; i < s.T; i++)
        for (int c = 0; c < s.D; c++) {
            const std::size_t k = std::size_t(i) * s.D + c;
            if (std::fabs(double(got[k]) - want[k]) <= atol + rtol * std::fabs(want[k])) continue;
            const int sees = s.S - s.T + i + 1;
            return fmt::format("; the first wrong row is query {} (row {} of its block of {}), which sees keys 0 .. "
                               "{}: {} whole tiles of {} and {} keys of the next",
                               i, i % t.Br, t.Br, sees - 1, sees / t.Bc, t.Bc, sees % t.Bc);
        }
    return "";
}

// Your kernel against the reference, the values observed for the grader.
void check_head(const Head& h, Tiles t, const std::string& what, float atol = kAtol, float rtol = kRtol) {
    const std::string at = what + ": " + describe(h.shape, t);
    const std::vector<float> want = reference(h), got = run_head(h, t, at);
    observe(at, got, {atol, rtol});
    const auto bad = std::count_if(got.begin(), got.end(), [](float x) { return !std::isfinite(x); });
    CHECK_MESSAGE(bad == 0, at << ": " << bad << " of " << got.size()
                               << " outputs are inf or NaN. exp(x) overflows float above x = 88.7 and is 0 "
                                  "below about -104; every exponent must be a score minus the running max "
                                  "(<= 0), so that l >= 1");
    check_close(got, want, atol, rtol, at + first_wrong_row(got, want, h.shape, t, atol, rtol));
}

void needs_exercise() {
    pd::lab::needs([] {
        const float one = 1.0f;
        float out = 0, score = 0;
        RowState st{};
        tiled_attention_head(&out, &one, &one, &one, {1, 1, 1, 1}, {1, 1}, {{&score, 1}, {&st, 1}});
    });
}

const int kTileKeys[] = {16, 32, 64};

// --- one query: the key tiles alone ------------------------------------------------

TEST_CASE("lab14.tiles.one_tile") {
    // Every key in one tile: a plain softmax(q K^T / sqrt(D)) V, no rescaling yet.
    needs_exercise();
    Inputs in(1401);
    for (int Bc : kTileKeys) {
        const int S = in.integer(1, Bc), D = 4 * in.integer(1, 16);
        const Head h = random_head(in, 1, S, D);
        check_head(h, {in.integer(1, 16), Bc}, "one query, every key in one tile");
    }
}

TEST_CASE("lab14.tiles.a_short_last_tile") {
    needs_exercise();
    Inputs in(1402);
    for (int Bc : kTileKeys) {
        const int whole = in.integer(1, 6), rest = in.integer(1, Bc - 1), D = 4 * in.integer(1, 16);
        const Head h = random_head(in, 1, Bc * whole + rest, D);
        check_head(h, {in.integer(1, 16), Bc}, fmt::format("one query; the last tile holds S % Bc = {} keys", rest));
    }
}

TEST_CASE("lab14.tiles.one_key_per_tile") {
    needs_exercise();
    Inputs in(1403);
    const int S = in.integer(2, 60), D = in.integer(1, 40);
    check_head(random_head(in, 1, S, D), {1, 1}, "one query, tiles of one key");
}

TEST_CASE("lab14.tiles.a_rising_max") {
    // Each tile's scores sit 10 above the last one's: the max rises at every
    // tile, and everything folded before must shrink by about e^-10 each time.
    needs_exercise();
    Inputs in(1404);
    const int Bc = kTileKeys[in.integer(0, 2)], tiles = in.integer(3, 6);
    const double jitter = in.uniform(0.5, 2.0);
    std::vector<double> noise(std::size_t(Bc) * tiles);
    for (double& x : noise) x = in.uniform(-jitter, jitter);
    const Head h = scored_head(in, 1, Bc * tiles, [&](int j) { return 10.0 * (j / Bc) + noise[j]; });
    check_head(h, {1, Bc},
               "scores rise by 10 from tile to tile: the old l and o must be multiplied by exp(m_old - m_new) "
               "before the new tile's terms (taken against m_new) are added");
}

// --- many queries: the causal diagonal -----------------------------------------------

TEST_CASE("lab14.causal.the_diagonal_tile") {
    // A prompt (T = S) with blocks as tall as the tiles are wide: the tile on
    // the diagonal is a triangle, row r of the block seeing its first r + 1 keys.
    needs_exercise();
    Inputs in(1405);
    for (int Bc : kTileKeys) {
        const int S = Bc * in.integer(1, 4), D = 4 * in.integer(2, 16);
        check_head(random_head(in, S, S, D), {Bc, Bc},
                   "prefill, blocks of Br = Bc queries: query i sees keys 0 .. i, so each diagonal tile is cut "
                   "row by row");
    }
}

TEST_CASE("lab14.causal.blocks_and_tiles_out_of_step") {
    // Blocks and tiles of other sizes than each other and than the length: a
    // block's rows end in different tiles, and a row may see none of the last one.
    needs_exercise();
    Inputs in(1406);
    for (int trial = 0; trial < 4; trial++) {
        const int S = in.integer(2, 300), D = 4 * in.integer(1, 16);
        const Head h = random_head(in, S, S, D);
        const int Br = in.integer(1, 40), Bc = in.integer(1, 80);
        check_head(h, {Br, Bc}, "prefill, blocks and tiles of seeded sizes");
    }
}

TEST_CASE("lab14.causal.queries_after_a_cache") {
    // A second chunk of a prompt: T queries at the end of S cached positions.
    needs_exercise();
    Inputs in(1407);
    for (int trial = 0; trial < 3; trial++) {
        const int S = in.integer(50, 600), T = in.integer(2, std::min(S - 1, 80)), D = 4 * in.integer(1, 16);
        const Head h = random_head(in, T, S, D);
        const int Br = in.integer(1, 24), Bc = kTileKeys[in.integer(0, 2)];
        check_head(h, {Br, Bc}, "queries after a cache: query i sits at position S - T + i");
    }
}

// --- scores far outside exp's range --------------------------------------------

// The tolerance allows for the scores' own float rounding.
constexpr float kHostileAtol = 5e-4f, kHostileRtol = 1e-3f;

void check_hostile(Inputs& in, double center, double spread, const std::string& what) {
    for (auto [T, S] : {std::pair{1, 1000}, std::pair{257, 257}}) {
        const Head h = scored_head(in, T, S, [&](int) { return center + spread * in.uniform(-1, 1); });
        const int Br = in.integer(1, 16), Bc = kTileKeys[in.integer(0, 2)];
        check_head(h, {Br, Bc}, what, kHostileAtol, kHostileRtol);
    }
}

TEST_CASE("lab14.hostile.scores_near_plus_1000") {
    needs_exercise();
    Inputs in(1408);
    check_hostile(in, 1000, 3, "scores 1000 +- 3");
}

TEST_CASE("lab14.hostile.scores_near_minus_1000") {
    needs_exercise();
    Inputs in(1409);
    check_hostile(in, -1000, 3, "scores -1000 +- 3");
}

TEST_CASE("lab14.hostile.scores_spread_over_plus_minus_1000") {
    // The running max jumps by hundreds between tiles: the factor exp(m_old - m_new) underflows to 0.
    needs_exercise();
    Inputs in(1410);
    check_hostile(in, 0, 1000, "scores in [-1000, 1000]");
}

// --- the kit's tiled_attention, your kernel on every head ------------------------

// q (T, heads, D) and K, V (kv_heads, S, D), with a seeded GQA shape.
struct Problem {
    AttentionShape shape;
    std::vector<float> q, K, V;
};

Problem random_problem(Inputs& in, int T, int S) {
    const int kv = in.integer(1, 2), group = in.integer(1, 3), D = 4 * in.integer(4, 16);
    Problem p{{T, S, kv * group, kv, D}, {}, {}, {}};
    p.q = in.normals(std::size_t(T) * p.shape.n_heads * D, 1.5f);
    p.K = in.normals(std::size_t(kv) * S * D);
    p.V = in.normals(std::size_t(kv) * S * D);
    return p;
}

// Head h of a problem as one head (its q rows at stride heads * D).
Head head_of(const Problem& p, int h) {
    const AttentionShape& s = p.shape;
    const std::size_t ld = std::size_t(s.n_heads) * s.D, kv = std::size_t(h / (s.n_heads / s.n_kv_heads)) * s.S * s.D;
    Head one{{s.T, s.S, s.D, ld}, std::vector<float>(std::size_t(s.T) * ld, 0.0f),
             {p.K.begin() + std::ptrdiff_t(kv), p.K.begin() + std::ptrdiff_t(kv + std::size_t(s.S) * s.D)},
             {p.V.begin() + std::ptrdiff_t(kv), p.V.begin() + std::ptrdiff_t(kv + std::size_t(s.S) * s.D)}};
    for (int i = 0; i < s.T; i++)
        std::copy_n(p.q.begin() + std::ptrdiff_t(i * ld + std::size_t(h) * s.D), s.D,
                    one.q.begin() + std::ptrdiff_t(i * ld));
    return one;
}

// Every head's reference, laid out as (T, heads, D).
std::vector<float> reference(const Problem& p) {
    const AttentionShape& s = p.shape;
    std::vector<float> out(p.q.size());
    for (int h = 0; h < s.n_heads; h++) {
        const std::vector<float> one = reference(head_of(p, h));
        for (int i = 0; i < s.T; i++)
            std::copy_n(one.begin() + std::ptrdiff_t(i) * s.D, s.D,
                        out.begin() + std::ptrdiff_t((std::size_t(i) * s.n_heads + h) * s.D));
    }
    return out;
}

void check_problem(Inputs& in, int T, int S, const char* phase) {
    const Problem p = random_problem(in, T, S);
    const std::vector<float> want = reference(p);
    const AttentionShape& s = p.shape;
    const std::string what = fmt::format("{}: {} queries over {} keys, {} heads / {} KV heads, D = {}", phase, T, S,
                                         s.n_heads, s.n_kv_heads, s.D);
    std::vector<float> naive(p.q.size());
    naive_attention(naive.data(), p.q.data(), p.K.data(), p.V.data(), s);
    check_close(naive, want, kAtol, kRtol,
                what + ", the kit's naive kernel (if only this fails, the kit is broken, not your code)");
    const std::size_t last_row = std::size_t(T - 1) * s.n_heads * s.D;
    for (int Bc : {kTileKeys[0], kTileKeys[1], kTileKeys[2], in.integer(1, 100)}) {
        const Tiles t{in.integer(1, 20), Bc};
        std::vector<float> got(p.q.size(), kSentinel);
        tiled_attention(got.data(), p.q.data(), p.K.data(), p.V.data(), s, t);
        const std::string at = fmt::format("{}, tiles Br = {} x Bc = {}", what, t.Br, t.Bc);
        observe(at + ": last query row", got.data() + last_row, got.size() - last_row, {kAtol, kRtol});
        check_close(got, want, kAtol, kRtol, at + " (tiled_attention: your kernel on each head, in parallel)");
    }
}

const int kLengths[] = {1, 7, 64, 100, 257, 1000};

TEST_CASE("lab14.exact.prefill") {
    needs_exercise();
    Inputs in(1411);
    for (int L : kLengths) check_problem(in, L, L, "prefill");
}

TEST_CASE("lab14.exact.decode") {
    needs_exercise();
    Inputs in(1412);
    for (int L : kLengths) check_problem(in, 1, L, "decode");
}

TEST_CASE("lab14.exact.queries_after_a_cache") {
    needs_exercise();
    Inputs in(1413);
    const int S = in.integer(100, 400), T = in.integer(2, 60);
    check_problem(in, T, S, "queries after a cache");
}

// --- memory ----------------------------------------------------------------------

// Beyond its scratch, a kernel may use a few scalars and a little stack for its
// calls: far less than one row of S scores at these lengths (64 KiB and more).
constexpr std::size_t kSpareBytes = 16 * 1024;

TEST_CASE("lab14.scratch.one_tile_whatever_the_length") {
    needs_exercise();
    Inputs in(1414);
    const Tiles t{in.integer(1, 16), kTileKeys[in.integer(0, 2)]};
    for (auto [T, S] : {std::pair{1, 32768}, std::pair{in.integer(20, 64), 16384}}) {
        const Head h = random_head(in, T, S, 32);
        const std::string what = describe(h.shape, t);
        MemoryUse use;
        const std::vector<float> got = run_head(h, t, what, &use);
        const std::size_t row = std::size_t(S) * sizeof(float);
        observe(what + ": memory beyond the scratch within bounds", use.heap_peak + use.stack <= kSpareBytes);
        CHECK_MESSAGE(use.heap_peak + use.stack <= kSpareBytes,
                      what << ": your kernel took " << use.heap_peak << " bytes of heap and " << use.stack
                           << " of stack beyond its scratch (at most " << kSpareBytes << " allowed; one row of "
                           << S << " scores is " << row << "): the tile of scores belongs in scratch.scores, "
                           << "and nothing needs a whole row");
        const std::vector<float> want = reference(h);
        observe(what + ": output", got, {kAtol, kRtol});
        check_close(got, want, kAtol, kRtol, what + ": output");
    }
}

// --- the seed ------------------------------------------------------------------

TEST_CASE("lab14.seed.another_seed_gives_other_inputs") {
    // A grader runs these tests under a PDLAB_TEST_SEED nobody has seen: the
    // inputs must change with it, or hard-coded answers would pass.
    const std::uint64_t now = pd::lab::env_test_seed();
    Inputs a(1411, now), b(1411, now + 1);
    CHECK_MESSAGE(random_problem(a, 7, 7).q != random_problem(b, 7, 7).q,
                  "PDLAB_TEST_SEED " << now << " and " << now + 1 << " gave the same queries");
}

}  // namespace
