// Lab 01 tests: greedy, softmax with temperature and top-k sampling, checked
// against plain (double-precision) references written here. Every size, logit,
// shift, distribution and sampler seed derives from PDLAB_TEST_SEED (through
// randn() and pd::lab::Inputs). Run: meson test -C build --suite track1-01
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "check.hpp"
#include "common.hpp"
#include "exercise.hpp"

#include "lab_test.hpp"  // NotImplemented shown with its hint; pd::lab::needs(), observe()

using namespace pd;
using pd::lab::needs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using namespace pd::test;
namespace ex = pd::lab01;

namespace {

// softmax(x / T) in double, the obvious way (with the max subtracted).
std::vector<double> ref_softmax(const std::vector<float>& x, double T) {
    double mx = *std::max_element(x.begin(), x.end());
    std::vector<double> p(x.size());
    double s = 0;
    for (std::size_t i = 0; i < x.size(); i++) s += p[i] = std::exp((x[i] - mx) / T);
    for (double& v : p) v /= s;
    return p;
}

double entropy(const std::vector<float>& p) {
    double h = 0;
    for (float v : p)
        if (v > 0) h -= v * std::log(double(v));
    return h;
}

// The first index of the largest value: the reference greedy pick.
int ref_argmax(const std::vector<float>& x) {
    return int(std::max_element(x.begin(), x.end()) - x.begin());  // max_element keeps the first of equals
}

// The k best ids (ties: lower id first), found by a full stable sort.
std::set<int> ref_top_k(const std::vector<float>& x, int k) {
    std::vector<int> ids(x.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return x[a] > x[b]; });
    return std::set<int>(ids.begin(), ids.begin() + k);
}

std::string show(const std::vector<float>& x) {
    if (x.size() > 8) return fmt::format("{} values", x.size());
    return fmt::format("[{}]", fmt::join(x, ", "));
}

}  // namespace

// ---------------------------------------------------------------- greedy

TEST_CASE("lab01.greedy.matches_reference") {
    needs([] { ex::greedy(std::vector<float>{1.0f}); });
    pd::lab::Inputs in(101);
    int seed = 1;
    for (int n : {1, 2, in.integer(3, 64), in.integer(65, 4096), in.integer(4097, 60000)}) {
        auto x = randn(std::size_t(n), std::uint64_t(seed++), 3.0f);
        int want = ref_argmax(x);
        int got = ex::greedy(x);
        observe(fmt::format("greedy over {} logits", n), got);
        CHECK_MESSAGE(got == want, fmt::format(
            "greedy() over {} random logits returned id {}, but the largest logit ({}) is at id {}",
            n, got, x[std::size_t(want)], want));
    }
}

TEST_CASE("lab01.greedy.edges") {
    needs([] { ex::greedy(std::vector<float>{1.0f}); });
    struct Case {
        std::vector<float> x;
        int want;
        const char* lesson;
    };
    const float ninf = -std::numeric_limits<float>::infinity();
    // Every finite logit is shifted by the same seeded amount (still all negative
    // where the case says so): the greedy id never depends on a shift.
    const float shift = float(pd::lab::Inputs(102).uniform(-20.0, -10.0));
    Case cases[] = {
        {{1, 3, 3, 2}, 1, "on a tie the FIRST index wins (compare with >, not >=)"},
        {{0.5f, 0.5f, 0.5f}, 0, "all logits equal: the first index wins"},
        {{-7, -3, -5}, 1, "every logit negative: start from logits[0], not from 0.0"},
        {{1, 2, 3, 4, 9}, 4, "the largest is the last one: does your loop reach the end?"},
        {{9, 2, 3}, 0, "the largest is the first one"},
        {{ninf, -1e30f, ninf}, 1, "-inf logits (masked tokens) can never win"},
        {{42}, 0, "a single logit is the answer"},
    };
    for (auto& c : cases) {
        for (float& v : c.x)
            if (std::isfinite(v) && std::fabs(v) < 1e29f) v += shift;
        int got = ex::greedy(c.x);
        observe(fmt::format("greedy({})", show(c.x)), got);
        CHECK_MESSAGE(got == c.want, fmt::format("greedy({}) returned {}, expected {}: {}", show(c.x), got,
                                                 c.want, c.lesson));
    }
}

TEST_CASE("lab01.greedy.another_seed_gives_other_inputs") {
    // What a grader relies on: PDLAB_TEST_SEED reaches the inputs, so answers
    // copied from one seed's run do not pass under another.
    pd::lab::Inputs a(101, 1), b(101, 2), a_again(101, 1);
    const auto xa = a.normals(64);
    CHECK_MESSAGE(xa != b.normals(64), "PDLAB_TEST_SEED 1 and 2 drew the same logits");
    CHECK_MESSAGE(xa == a_again.normals(64), "the same PDLAB_TEST_SEED must draw the same logits");
}

TEST_CASE("lab01.greedy.empty_is_rejected") {
    needs([] { ex::greedy(std::vector<float>{1.0f}); });
    std::vector<float> none;
    CHECK_THROWS_AS_MESSAGE(ex::greedy(none), UserError,
                            "greedy() of an empty row must fail with pd::fail(...) (a UserError): "
                            "there is no token to pick");
}

// ---------------------------------------------------------------- softmax

TEST_CASE("lab01.softmax.matches_reference") {
    needs([] { ex::softmax_with_temperature(std::vector<float>{1.0f}, 1.0f); });
    pd::lab::Inputs in(103);
    int seed = 10;
    for (int n : {1, 2, in.integer(3, 16), in.integer(17, 512), in.integer(513, 8192)})
        for (float T : {0.25f, 1.0f, 3.0f}) {
            auto x = randn(std::size_t(n), std::uint64_t(seed++), 2.0f);
            auto p = ex::softmax_with_temperature(x, T);
            // Two correct softmaxes: each within the test's tolerance of the reference.
            observe(fmt::format("softmax of {} logits, T={}", n, T), p, {2e-6, 2e-4});
            REQUIRE_MESSAGE(p.size() == x.size(), fmt::format(
                "softmax returned {} probabilities for {} logits: one per logit", p.size(), x.size()));
            double sum = 0;
            for (float v : p) sum += v;
            CHECK_MESSAGE(std::fabs(sum - 1.0) < 1e-4, fmt::format(
                "probabilities over {} logits at T={} sum to {}, not 1: divide every exp by the sum of all of them",
                n, T, sum));
            auto want = ref_softmax(x, T);
            std::vector<float> wantf(want.begin(), want.end());
            check_close(p, wantf, 1e-6f, 1e-4f,
                        fmt::format("softmax(logits / T) with n={} T={} (p_i = exp((x_i-max)/T) / sum)", n, T));
        }
}

TEST_CASE("lab01.softmax.large_logits_do_not_overflow") {
    needs([] { ex::softmax_with_temperature(std::vector<float>{1.0f}, 1.0f); });
    std::vector<float> x = {1000.0f, 999.0f, 998.0f};  // exp(1000) is inf in float
    auto p = ex::softmax_with_temperature(x, 1.0f);
    observe("softmax of [1000, 999, 998]", p, {2e-6, 2e-4});
    REQUIRE(p.size() == 3);
    for (float v : p)
        REQUIRE_MESSAGE(std::isfinite(v), "softmax of [1000, 999, 998] gave inf or NaN: exp(1000) overflows a "
                                          "float. Subtract the largest logit first: exp(x - max) is at most 1, and "
                                          "the result is the same because the factor cancels in the division");
    std::vector<float> want = {0.66524096f, 0.24472847f, 0.09003057f};
    check_close(p, want, 1e-6f, 1e-4f, "softmax of [1000, 999, 998]");
    auto q = ex::softmax_with_temperature(std::vector<float>{-1000.0f, -1001.0f}, 1.0f);
    observe("softmax of [-1000, -1001]", q, {2e-6, 2e-4});
    for (float v : q)
        CHECK_MESSAGE(std::isfinite(v), "softmax of [-1000, -1001] gave NaN: exp(-1000) underflows to 0 and 0/0 is "
                                        "NaN; subtracting the max fixes this too");
}

TEST_CASE("lab01.softmax.temperature_shapes_the_distribution") {
    needs([] { ex::softmax_with_temperature(std::vector<float>{1.0f}, 1.0f); });
    // Id 0 is the best; a seeded shift of every logit changes no probability.
    const float shift = float(pd::lab::Inputs(104).uniform(-30.0, 30.0));
    std::vector<float> x = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
    for (float& v : x) v += shift;
    // Cold: nearly all mass on the best id.
    auto cold = ex::softmax_with_temperature(x, 0.01f);
    observe("softmax at T=0.01", cold, {2e-6, 2e-4});
    CHECK_MESSAGE(cold[0] > 0.999f, fmt::format(
        "at T=0.01 the best logit should take almost all the probability (that is why T -> 0 is greedy), got {}",
        cold[0]));
    // Hotter is flatter: entropy rises and the top probability falls with T.
    double last_h = -1, last_top = 2;
    for (float T : {0.3f, 0.7f, 1.0f, 2.0f, 5.0f, 20.0f}) {
        auto p = ex::softmax_with_temperature(x, T);
        observe(fmt::format("softmax at T={}", T), p, {2e-6, 2e-4});
        double h = entropy(p);
        CHECK_MESSAGE(h > last_h, fmt::format(
            "raising T to {} should flatten the distribution (higher entropy), but entropy went {} -> {}: "
            "divide the logits by T, do not multiply", T, last_h, h));
        CHECK_MESSAGE(p[0] < last_top, fmt::format(
            "raising T to {} should lower the best id's probability, got {} after {}", T, p[0], last_top));
        last_h = h, last_top = p[0];
    }
    // Very hot: close to uniform.
    auto hot = ex::softmax_with_temperature(x, 1e4f);
    observe("softmax at T=10000", hot, {2e-6, 2e-4});
    for (float v : hot)
        CHECK_MESSAGE(std::fabs(v - 0.2f) < 1e-3f, fmt::format(
            "at T=10000 every one of 5 ids should have probability about 1/5, got {}", v));
}

TEST_CASE("lab01.softmax.bad_temperature_is_rejected") {
    needs([] { ex::softmax_with_temperature(std::vector<float>{1.0f}, 1.0f); });
    std::vector<float> x = {1, 2, 3};
    for (float T : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
        CHECK_THROWS_AS_MESSAGE(ex::softmax_with_temperature(x, T), UserError, fmt::format(
            "temperature {} must be rejected with pd::fail(...): T has to be finite and > 0 "
            "(note that NaN > 0 is false, so test !(T > 0))", T));
    CHECK_THROWS_AS_MESSAGE(ex::softmax_with_temperature(std::vector<float>{}, 1.0f), UserError,
                            "softmax of an empty row must fail with a UserError");
}

// ---------------------------------------------------------------- top-k

TEST_CASE("lab01.top_k.k1_is_greedy") {
    needs([] { std::mt19937_64 r(1); ex::sample_top_k(std::vector<float>{1.0f}, 1.0f, 1, r); });
    pd::lab::Inputs in(105);
    const int n = in.integer(2, 1000);
    auto x = randn(std::size_t(n), 21, 2.0f);
    std::mt19937_64 rng(in.seed());
    int best = ref_argmax(x);
    for (float T : {0.1f, 1.0f, 50.0f})
        for (int i = 0; i < 50; i++) {
            int got = ex::sample_top_k(x, T, 1, rng);
            observe(fmt::format("sample_top_k, k=1, T={}", T), got);
            REQUIRE_MESSAGE(got == best, fmt::format(
                "top-k with k=1 (T={}) returned id {}; with one candidate left it must be the argmax, id {}", T,
                got, best));
        }
}

TEST_CASE("lab01.top_k.never_outside_the_top_k") {
    needs([] { std::mt19937_64 r(1); ex::sample_top_k(std::vector<float>{1.0f}, 1.0f, 1, r); });
    pd::lab::Inputs in(106);
    std::mt19937_64 rng(in.seed());
    const int n = in.integer(60, 400);
    auto x = randn(std::size_t(n), 22, 1.0f);
    for (int k : {2, in.integer(3, 10), in.integer(11, n - 1), n})
        for (float T : {0.5f, 1.0f, 10.0f}) {
            auto allowed = ref_top_k(x, k);
            for (int i = 0; i < 1000; i++) {
                int got = ex::sample_top_k(x, T, k, rng);
                REQUIRE_MESSAGE((got >= 0 && got < n), fmt::format(
                    "sample_top_k returned {}, which is not a vocabulary id (0..{}): return the id itself "
                    "(ids[i]), not its rank i among the candidates", got, n - 1));
                REQUIRE_MESSAGE(allowed.count(got) == 1, fmt::format(
                    "sample_top_k(k={}, T={}) returned id {} (logit {}), which is not among the {} largest "
                    "logits: draw only from the k best ids", k, T, got, x[std::size_t(got)], k));
            }
        }
    // Ties at the cut: the lower ids win the places.
    std::vector<float> tie = {1, 1, 1, 1, 0};
    for (int i = 0; i < 500; i++) {
        int got = ex::sample_top_k(tie, 1.0f, 2, rng);
        REQUIRE_MESSAGE((got == 0 || got == 1), fmt::format(
            "logits [1, 1, 1, 1, 0] with k=2 returned id {}: four ids tie, and ties go to the lower id, so "
            "only ids 0 and 1 may come out", got));
    }
    std::vector<float> flat(64, 0.5f);  // 64 equal logits: the top 4 are ids 0..3
    for (int i = 0; i < 500; i++) {
        int got = ex::sample_top_k(flat, 1.0f, 4, rng);
        REQUIRE_MESSAGE((got >= 0 && got < 4), fmt::format(
            "64 equal logits with k=4 returned id {}: ties go to the lower id, so only ids 0..3 may come out "
            "(std::sort is not stable: break ties by id in the comparison)", got));
    }
}

TEST_CASE("lab01.top_k.frequencies_follow_the_renormalised_softmax") {
    needs([] { std::mt19937_64 r(1); ex::sample_top_k(std::vector<float>{1.0f}, 1.0f, 1, r); });
    // Four seeded probabilities (each >= 0.05 before normalising) and two ids
    // that are almost impossible; the logits are their logarithms.
    pd::lab::Inputs in(107);
    std::vector<double> p;
    for (int i = 0; i < 4; i++) p.push_back(in.uniform(0.05, 1.0));
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& v : p) v /= total;
    p.insert(p.end(), {1e-4, 1e-4});
    std::vector<float> x;
    for (double v : p) x.push_back(float(std::log(v)));
    std::mt19937_64 rng(in.seed());
    const int N = 40000;
    for (int k : {2, 3, 6})
        for (float T : {1.0f, 2.0f, 0.5f}) {
            // Expected: softmax(x / T) restricted to the top k, renormalised.
            auto allowed = ref_top_k(x, k);
            std::vector<double> want(x.size(), 0.0);
            double s = 0;
            for (int id : allowed) s += want[std::size_t(id)] = std::pow(p[std::size_t(id)], 1.0 / T);
            for (double& w : want) w /= s;
            std::vector<int> count(x.size(), 0);
            for (int i = 0; i < N; i++) count[std::size_t(ex::sample_top_k(x, T, k, rng))]++;
            // Not the drawn ids (a correct sampler may draw others) but their
            // frequencies: two correct samplers are within twice the test's 0.012.
            std::vector<double> freq;
            for (int c : count) freq.push_back(double(c) / N);
            observe(fmt::format("sample_top_k frequencies, k={}, T={}", k, T), freq, {0.024, 0});
            for (std::size_t id = 0; id < x.size(); id++) {
                double f = double(count[id]) / N;
                CHECK_MESSAGE(std::fabs(f - want[id]) < 0.012, fmt::format(
                    "k={} T={}: id {} came out {:.4f} of the time, expected {:.4f}. The draw must follow "
                    "softmax(logits / T) over the k candidates only, renormalised so they sum to 1 (draw u in "
                    "[0, total weight of the k), not in [0, 1) of the full distribution)",
                    k, T, id, f, want[id]));
            }
        }
}

TEST_CASE("lab01.top_k.same_seed_same_draws") {
    needs([] { std::mt19937_64 r(1); ex::sample_top_k(std::vector<float>{1.0f}, 1.0f, 1, r); });
    auto x = randn(100, 23, 1.0f);
    pd::lab::Inputs in(108);
    const std::uint64_t s1 = in.seed(), s2 = s1 + 1 + std::uint64_t(in.integer(0, 1000));
    auto draw = [&](std::uint64_t seed) {
        std::mt19937_64 rng(seed);
        std::vector<int> out;
        for (int i = 0; i < 64; i++) out.push_back(ex::sample_top_k(x, 1.0f, 20, rng));
        return out;
    };
    CHECK_MESSAGE(draw(s1) == draw(s1), "two runs from the same seed drew different tokens: take all randomness "
                                      "from the rng argument (no std::random_device, no static state)");
    CHECK_MESSAGE(draw(s1) != draw(s2), "different seeds drew exactly the same 64 tokens: are you using rng?");
}

TEST_CASE("lab01.top_k.bad_arguments_are_rejected") {
    needs([] { std::mt19937_64 r(1); ex::sample_top_k(std::vector<float>{1.0f}, 1.0f, 1, r); });
    std::vector<float> x = {1, 2, 3, 4};
    std::mt19937_64 rng(1);
    for (float T : {0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN()})
        CHECK_THROWS_AS_MESSAGE(ex::sample_top_k(x, T, 2, rng), UserError,
                                fmt::format("temperature {} must be rejected with a UserError", T));
    for (int k : {0, -1, 5})
        CHECK_THROWS_AS_MESSAGE(ex::sample_top_k(x, 1.0f, k, rng), UserError, fmt::format(
            "k={} with a vocabulary of 4 must be rejected: k has to be between 1 and the vocabulary size", k));
    CHECK_THROWS_AS_MESSAGE(ex::sample_top_k(std::vector<float>{}, 1.0f, 1, rng), UserError,
                            "sampling from an empty row must fail with a UserError");
}
