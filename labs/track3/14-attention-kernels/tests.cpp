// Lab 14 tests: your tile_update against the running max, sum and output it
// must keep (computed in double from their definitions) after every tile;
// finish_row; then the tiled kernel built on both against a double-precision
// reference and the naive kernel, prefill and decode, at lengths that are and
// are not multiples of the tile, with tiles of 16, 32 and 64 keys; scores far
// outside exp's range; and the scratch each kernel allocates. Every input
// (shapes, head counts, values, tile splits, query blocks) is drawn from
// PDLAB_TEST_SEED through lab_test.hpp's Inputs.
//   meson test -C build --suite track3-14
//   build/labs/track3/14-attention-kernels/lab14_tests --test-case='lab14.tiled.*'
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "check.hpp"
#include "exercise.hpp"
#include "kernels.hpp"
#include "lab_test.hpp"

using namespace pd::lab14;
using pd::lab::Inputs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using pd::test::check_close;

namespace {

// Float kernels against a double reference: the outputs are weighted averages
// of values of size ~1, summed over up to a thousand keys in float.
constexpr float kAtol = 2e-5f, kRtol = 2e-4f;

// Stop a test case with the hint when a function it needs is still the starter's.
void needs_finish_row() {
    pd::lab::needs([] {
        float o = 0;
        finish_row(RowState{0.0f, 1.0f}, &o, 1);
    });
}

void needs_tile_update() {
    pd::lab::needs([] {
        RowState st;
        float o = 0, s = 0, v = 1;
        tile_update(st, &o, &s, &v, 1, 1);
    });
}

void needs_exercise() {
    needs_tile_update();
    needs_finish_row();
}

// --- tile_update and finish_row, one row at a time ------------------------------

// What a row's state must be once its first `keys` keys went by, from the definitions.
struct Running {
    double m = 0, l = 0;
    std::vector<double> o;  // (D) sum_j exp(s_j - m) V_j
};

Running running_after(const std::vector<float>& s, const std::vector<float>& V, int keys, int D) {
    Running r{*std::max_element(s.begin(), s.begin() + keys), 0, std::vector<double>(D, 0.0)};
    for (int j = 0; j < keys; j++) {
        const double w = std::exp(double(s[j]) - r.m);
        r.l += w;
        for (int c = 0; c < D; c++) r.o[c] += w * V[std::size_t(j) * D + c];
    }
    return r;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// A row after its last tile: your state and unnormalised output.
struct Row {
    RowState st;
    std::vector<float> o;
};

// Feeds the row's keys to tile_update in tiles of the given sizes and checks
// m, l and o after each.
Row check_tiles(const std::vector<float>& s, const std::vector<float>& V, const std::vector<int>& tiles,
                               int D, const std::string& what) {
    RowState st;
    std::vector<float> o(D, 0.0f);
    int seen = 0;
    for (std::size_t k = 0; k < tiles.size(); k++) {
        std::vector<float> tile(s.begin() + seen, s.begin() + seen + tiles[k]);  // yours to overwrite
        tile_update(st, o.data(), tile.data(), V.data() + std::size_t(seen) * D, tiles[k], D);
        seen += tiles[k];
        const Running want = running_after(s, V, seen, D);
        const std::string at = fmt::format("{}, after tile {} of {} ({} keys seen)", what, k + 1, tiles.size(), seen);
        observe(at + ": m, l", std::vector<float>{st.m, st.l}, {0, 1e-5});
        observe(at + ": o", o, {1e-5 * want.l, 1e-4});
        CHECK_MESSAGE(st.m == float(want.m), at << ": m = " << st.m << ", expected " << want.m
                                                << ", the largest score seen so far, this tile's included");
        CHECK_MESSAGE(std::fabs(st.l - want.l) <= 1e-5 * want.l,
                      at << ": l = " << st.l << ", expected " << want.l
                         << " = sum of exp(s - m) over every key seen, for the NEW m: the old l must be "
                            "multiplied by exp(m_old - m_new) before this tile's terms are added");
        check_close(o.data(), to_float(want.o).data(), D, float(1e-5 * want.l), 1e-4f,
                    at + ": o must be sum of exp(s - m_new) * v over every key seen; rescale the old o by "
                         "exp(m_old - m_new) (0 on the first tile, when m_old = -inf) and add this tile's terms");
    }
    return {st, o};
}

// n keys split into tiles of 1 .. max_tile keys (seeded); the last one may be short.
std::vector<int> random_split(Inputs& in, int n, int max_tile) {
    std::vector<int> tiles;
    for (int left = n; left > 0; left -= tiles.back()) tiles.push_back(std::min(left, in.integer(1, max_tile)));
    return tiles;
}

TEST_CASE("lab14.tile_update.keeps_the_running_max_sum_and_output") {
    needs_tile_update();
    Inputs in(1401);
    for (int trial = 0; trial < 6; trial++) {
        const int n = in.integer(1, 300), D = 4 * in.integer(1, 20);
        const std::vector<float> s = in.normals(n, 3.0f), V = in.normals(std::size_t(n) * D);
        check_tiles(s, V, random_split(in, n, 70), D, fmt::format("row {} ({} keys, D = {})", trial, n, D));
    }
}

TEST_CASE("lab14.tile_update.a_much_larger_max_in_a_later_tile") {
    // Tile 2's scores sit 40 above tile 1's: everything tile 1 added must shrink
    // by about e^-40. Tile 3 is back near 0: a smaller max changes nothing (factor 1).
    needs_tile_update();
    Inputs in(1402);
    const int D = 4 * in.integer(2, 16);
    std::vector<int> tiles = {in.integer(1, 64), in.integer(1, 64), in.integer(1, 64)};
    std::vector<float> s;
    for (int k = 0; k < 3; k++)
        for (float x : in.normals(tiles[k])) s.push_back(x + (k == 1 ? 40.0f : 0.0f));
    const std::vector<float> V = in.normals(s.size() * D);
    check_tiles(s, V, tiles, D, "scores near 0, then near 40, then near 0");
}

TEST_CASE("lab14.tile_update.one_key_at_a_time") {
    needs_tile_update();
    Inputs in(1403);
    const int n = in.integer(2, 40), D = in.integer(1, 40);
    const std::vector<float> s = in.normals(n, 5.0f), V = in.normals(std::size_t(n) * D);
    check_tiles(s, V, std::vector<int>(n, 1), D, fmt::format("{} tiles of one key (D = {})", n, D));
}

TEST_CASE("lab14.finish_row.divides_by_l") {
    needs_finish_row();
    Inputs in(1404);
    const int D = in.integer(1, 80);
    RowState st;
    st.m = float(in.uniform(-5, 5));
    st.l = float(in.uniform(1, 1000));
    std::vector<float> o = in.normals(D, 30.0f), want(D);
    for (int c = 0; c < D; c++) want[c] = float(double(o[c]) / st.l);
    finish_row(st, o.data(), D);
    observe("o / l", o, {1e-6, 1e-6});
    check_close(o, want, 1e-6f, 1e-6f,
                fmt::format("finish_row with l = {}: o holds sum of exp(s - m) v and l the sum of the weights; "
                            "their ratio is the weighted average (m is already inside both)", st.l));
}

TEST_CASE("lab14.finish_row.tiles_then_finish_is_softmax_times_v") {
    needs_exercise();
    Inputs in(1405);
    for (int trial = 0; trial < 4; trial++) {
        const int n = in.integer(1, 500), D = 4 * in.integer(1, 16);
        const std::vector<float> s = in.normals(n, 4.0f), V = in.normals(std::size_t(n) * D);
        const std::string what = fmt::format("row {} ({} keys, D = {})", trial, n, D);
        Row row = check_tiles(s, V, random_split(in, n, 64), D, what);
        finish_row(row.st, row.o.data(), D);
        const std::vector<float>& o = row.o;
        const Running r = running_after(s, V, n, D);
        std::vector<float> want(D);
        for (int c = 0; c < D; c++) want[c] = float(r.o[c] / r.l);
        observe(what + ": softmax(s) V", o, {kAtol, kRtol});
        check_close(o, want, kAtol, kRtol, what + ": the row's output must be softmax(s) V");
    }
}

// --- the kernels -----------------------------------------------------------------

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

std::string describe(const AttentionShape& s) {
    return fmt::format("{} queries over {} keys, {} heads / {} KV heads, D = {}", s.T, s.S, s.n_heads, s.n_kv_heads,
                       s.D);
}

// Causal attention in double, straight from the definition.
std::vector<float> reference(const Problem& p) {
    const AttentionShape& s = p.shape;
    std::vector<float> out(p.q.size());
    for (int h = 0; h < s.n_heads; h++)
        for (int i = 0; i < s.T; i++) {
            const float* q = p.q.data() + (std::size_t(i) * s.n_heads + h) * s.D;
            const std::size_t kv = std::size_t(h / (s.n_heads / s.n_kv_heads)) * s.S * s.D;
            const int n = s.S - s.T + i + 1;
            std::vector<double> w(n);
            for (int j = 0; j < n; j++) {
                for (int c = 0; c < s.D; c++) w[j] += double(q[c]) * p.K[kv + std::size_t(j) * s.D + c];
                w[j] /= std::sqrt(double(s.D));
            }
            const double m = *std::max_element(w.begin(), w.end());
            double l = 0;
            for (double& x : w) l += (x = std::exp(x - m));
            for (int c = 0; c < s.D; c++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += w[j] * p.V[kv + std::size_t(j) * s.D + c];
                out[(std::size_t(i) * s.n_heads + h) * s.D + c] = float(acc / l);
            }
        }
    return out;
}

std::vector<float> run_naive(const Problem& p) {
    std::vector<float> out(p.q.size(), -7.0f);
    naive_attention(out.data(), p.q.data(), p.K.data(), p.V.data(), p.shape);
    return out;
}

std::vector<float> run_tiled(const Problem& p, Tiles t) {
    std::vector<float> out(p.q.size(), -7.0f);
    tiled_attention(out.data(), p.q.data(), p.K.data(), p.V.data(), p.shape, t);
    return out;
}

const int kLengths[] = {1, 7, 64, 100, 257, 1000};
const int kTileKeys[] = {16, 32, 64};

// The tiled kernel (your tile update inside) against the reference, at every
// tile size, with a seeded query block; the naive kernel as a second witness.
void check_against_reference(Inputs& in, int T, int S, const char* phase) {
    const Problem p = random_problem(in, T, S);
    const std::vector<float> want = reference(p);
    const std::string what = fmt::format("{}: {}", phase, describe(p.shape));
    check_close(run_naive(p), want, kAtol, kRtol, what + ", the kit's naive kernel (if only this fails, the kit is broken)");
    const std::size_t last_row = std::size_t(T - 1) * p.shape.n_heads * p.shape.D;
    for (int Bc : kTileKeys) {
        const Tiles t{in.integer(1, 20), Bc};
        const std::vector<float> got = run_tiled(p, t);
        const std::string at = fmt::format("{}, tiles Br = {} x Bc = {}", what, t.Br, t.Bc);
        observe(at + ": last query row", got.data() + last_row, got.size() - last_row, {kAtol, kRtol});
        check_close(got, want, kAtol, kRtol,
                    at + (S % Bc ? " (the last tile is short: it holds S % Bc keys)" : "") +
                        ". A row that is right only for short lengths usually mishandles the rescaling "
                        "between tiles; wrong near the diagonal, the short causal tiles");
    }
}

TEST_CASE("lab14.tiled.prefill_matches_the_reference") {
    needs_exercise();
    Inputs in(1406);
    for (int L : kLengths) check_against_reference(in, L, L, "prefill");
}

TEST_CASE("lab14.tiled.decode_matches_the_reference") {
    needs_exercise();
    Inputs in(1407);
    for (int L : kLengths) check_against_reference(in, 1, L, "decode");
}

TEST_CASE("lab14.tiled.a_prompt_after_a_cache") {
    // A second chunk of a prompt: T queries at the end of S cached positions.
    needs_exercise();
    Inputs in(1408);
    const int S = in.integer(100, 400);
    check_against_reference(in, in.integer(2, 60), S, "queries after a cache");
}

// --- scores far outside exp's range --------------------------------------------

// Scores exactly center + spread * u_j (u_j seeded, |u_j| <= 1): q is A along
// its first axis and 0 elsewhere, so a score is one product, with one rounding.
Problem hostile_problem(Inputs& in, int T, int S, float center, float spread) {
    const int D = 32;
    Problem p{{T, S, 2, 1, D}, std::vector<float>(std::size_t(T) * 2 * D, 0.0f), in.normals(std::size_t(S) * D),
              in.normals(std::size_t(S) * D)};
    const float A = 1000.0f * std::sqrt(float(D));  // q . k / sqrt(D) = 1000 * k[0]
    for (std::size_t r = 0; r < std::size_t(T) * 2; r++) p.q[r * D] = A;
    for (int j = 0; j < S; j++) p.K[std::size_t(j) * D] = (center + spread * float(in.uniform(-1, 1))) / 1000.0f;
    return p;
}

void check_hostile(const Problem& p, const std::string& what) {
    const std::vector<float> want = reference(p);
    const std::vector<float> got = run_tiled(p, {8, 32});
    const auto bad = std::count_if(got.begin(), got.end(), [](float x) { return !std::isfinite(x); });
    observe(what, got.data() + got.size() - 2 * p.shape.D, 2 * p.shape.D, {5e-4, 1e-3});
    REQUIRE_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size()
                                   << " outputs are inf or NaN. exp(x) overflows float above x = 88.7 and is 0 "
                                      "below about -104; every exponent must be a score minus the running max "
                                      "(<= 0), and l >= 1 then.");
    check_close(got, want, 5e-4f, 1e-3f, what + " (the tolerance allows for the scores' own float rounding)");
}

TEST_CASE("lab14.hostile.scores_near_plus_1000") {
    needs_exercise();
    Inputs in(1409);
    check_hostile(hostile_problem(in, 1, 1000, 1000.0f, 3.0f), "decode, scores 1000 +- 3");
    check_hostile(hostile_problem(in, 257, 257, 1000.0f, 3.0f), "prefill, scores 1000 +- 3");
}

TEST_CASE("lab14.hostile.scores_near_minus_1000") {
    needs_exercise();
    Inputs in(1410);
    check_hostile(hostile_problem(in, 1, 1000, -1000.0f, 3.0f), "decode, scores -1000 +- 3");
    check_hostile(hostile_problem(in, 100, 100, -1000.0f, 3.0f), "prefill, scores -1000 +- 3");
}

TEST_CASE("lab14.hostile.scores_spread_over_plus_minus_1000") {
    // The running max jumps by hundreds between tiles: the factor exp(m_old - m_new) underflows to 0.
    needs_exercise();
    Inputs in(1411);
    check_hostile(hostile_problem(in, 1, 1000, 0.0f, 1000.0f), "decode, scores in [-1000, 1000]");
    check_hostile(hostile_problem(in, 257, 257, 0.0f, 1000.0f), "prefill, scores in [-1000, 1000]");
}

// --- scratch -------------------------------------------------------------------

TEST_CASE("lab14.scratch.tiled_needs_one_tile_naive_the_whole_matrix") {
    needs_exercise();
    Inputs in(1412);
    const Tiles t{in.integer(1, 16), 16 * in.integer(1, 4)};
    for (int S : {64, 1000, 4096}) {
        for (int T : {1, std::min(S, 300)}) {
            const Problem p = random_problem(in, T, S);
            std::vector<float> out(p.q.size());
            const std::size_t naive = naive_attention(out.data(), p.q.data(), p.K.data(), p.V.data(), p.shape);
            const std::size_t tiled = tiled_attention(out.data(), p.q.data(), p.K.data(), p.V.data(), p.shape, t);
            const std::size_t rows = std::min(t.Br, T);
            const std::string what = fmt::format("{}, tiles {} x {}", describe(p.shape), t.Br, t.Bc);
            observe(what + ": naive and tiled scratch bytes", std::vector<std::size_t>{naive, tiled});
            CHECK_MESSAGE(naive == std::size_t(T) * S * sizeof(float), what << ": naive holds T x S scores");
            CHECK_MESSAGE(tiled == rows * (t.Bc * sizeof(float) + sizeof(RowState)),
                          what << ": tiled holds one Br x Bc tile and Br row states, whatever S");
            check_close(out, reference(p), kAtol, kRtol, what + ": tiled output");
        }
    }
}

// --- the seed ------------------------------------------------------------------

TEST_CASE("lab14.seed.another_seed_gives_other_inputs") {
    // A grader runs these tests under a PDLAB_TEST_SEED nobody has seen: the
    // inputs must change with it, or hard-coded answers would pass.
    const std::uint64_t now = pd::lab::env_test_seed();
    Inputs a(1406, now), b(1406, now + 1);
    CHECK_MESSAGE(random_problem(a, 7, 7).q != random_problem(b, 7, 7).q,
                  "PDLAB_TEST_SEED " << now << " and " << now + 1 << " gave the same queries");
}

}  // namespace
