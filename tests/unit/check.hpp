// Helpers shared by the unit tests: random inputs, the llm.c-style
// closeness check |got - ref| <= atol + rtol * |ref|, lists of EOS ids, and the
// message of a refusal.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "common.hpp"

namespace pd::test {

// Every random input is drawn from (seed, PDLAB_TEST_SEED): the tests are
// reproducible, and a grader can set PDLAB_TEST_SEED to inputs nobody has seen.
inline std::uint64_t seed_for(std::uint64_t seed) {
    const char* env = std::getenv("PDLAB_TEST_SEED");
    return env ? seed * 0x9e3779b97f4a7c15ull + std::strtoull(env, nullptr, 10) : seed;
}

inline std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed_for(seed));
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// Checks every element; reports the worst one so a failure says where to look.
inline void check_close(const float* got, const float* ref, std::size_t n, float atol, float rtol,
                        const std::string& what) {
    std::size_t worst = 0, bad = 0;
    double worst_excess = -1;
    for (std::size_t i = 0; i < n; i++) {
        double tol = atol + rtol * std::fabs(ref[i]);
        double err = std::fabs(double(got[i]) - ref[i]);
        if (!(err <= tol)) bad++;
        if (!(err - tol <= worst_excess)) worst_excess = err - tol, worst = i;
    }
    INFO(fmt::format("{}: {} of {} elements outside atol {} + rtol {}*|ref|; worst at index {}: got {} "
                     "expected {}", what, bad, n, atol, rtol, worst, got[worst], ref[worst]));
    CHECK(bad == 0);
}

inline void check_close(const std::vector<float>& got, const std::vector<float>& ref, float atol,
                        float rtol, const std::string& what) {
    REQUIRE(got.size() == ref.size());
    check_close(got.data(), ref.data(), got.size(), atol, rtol, what);
}

// Two lists of three EOS ids for `run` (tokens generated past every EOS): run[p]
// is the 2nd id of one, the 3rd of the other, and the other ids are none of
// run[0..p]. A run that honours either list ends at run[p]'s first occurrence.
inline std::vector<std::vector<int>> eos_lists_hitting(const std::vector<int>& run, std::size_t p) {
    const auto end = run.begin() + std::ptrdiff_t(p) + 1;
    std::vector<int> misses;
    for (int id = 0; misses.size() < 2; id++)
        if (std::find(run.begin(), end, id) == end) misses.push_back(id);
    return {{misses[0], run[p], misses[1]}, {misses[0], misses[1], run[p]}};
}

// `run` up to and including the first occurrence of run[p]: where either list
// of eos_lists_hitting(run, p) stops it.
inline std::vector<int> until_first(const std::vector<int>& run, std::size_t p) {
    return {run.begin(), std::find(run.begin(), run.end(), run[p]) + 1};
}

// The message of the pd::UserError that f() throws ("" when it throws none):
// what a test of a refusal looks into.
template <class F>
std::string user_error_of(F&& f) {
    try {
        f();
    } catch (const pd::UserError& e) {
        return e.what();
    }
    return "";
}

}  // namespace pd::test
