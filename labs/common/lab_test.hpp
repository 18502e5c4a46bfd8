// Included by each lab's tests.cpp (one per test program): how a starter
// function that still throws NotImplemented shows up in the test output, the
// seeded inputs every graded check draws from, and pd::lab::observe (the
// values a check judged, for the grader: observe.hpp).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "observe.hpp"
#include "todo_exercise.hpp"

// A NotImplemented escaping a check fails the test case with its hint.
REGISTER_EXCEPTION_TRANSLATOR(const pd::lab::NotImplemented& e) {
    return doctest::String(fmt::format("{}() is not implemented yet; hint: {}", e.function, e.hint).c_str());
}

namespace pd::lab {

// Calls the exercise once up front: if it is not implemented yet, the test case
// stops here with one message instead of one per check.
template <class F>
void needs(F&& f) {
    try {
        f();
    } catch (const NotImplemented& e) {
        FAIL(fmt::format("{}() is not implemented yet (exercise.cpp); hint: {}", e.function, e.hint));
    } catch (...) {
    }
}

}  // namespace pd::lab

// ---- Seeded inputs. Every graded input of a lab test (sizes, values, traces)
// is drawn from an Inputs: one stream per test case, mixed with
// PDLAB_TEST_SEED, so a grader who sets PDLAB_TEST_SEED=<hidden> gives every
// student inputs nobody has seen, and a solution that hard-codes the outputs of
// the default seed fails. Unset, the seed is 0: `meson test` is reproducible.
namespace pd::lab {

inline std::uint64_t env_test_seed() {
    const char* env = std::getenv("PDLAB_TEST_SEED");
    return env ? std::strtoull(env, nullptr, 10) : 0;
}

class Inputs {
public:
    // `stream` tells the test cases apart; `test_seed` is PDLAB_TEST_SEED unless a
    // test compares two seeds on purpose.
    explicit Inputs(std::uint64_t stream, std::uint64_t test_seed = env_test_seed())
        : rng_(stream * 0x9e3779b97f4a7c15ull ^ (test_seed + 0x632be59bd9b4e019ull)) {}

    // Uniform integer in [lo, hi], both included.
    int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
    std::vector<float> normals(std::size_t n, float scale = 1.0f) {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<float> v(n);
        for (float& x : v) x = d(rng_);
        return v;
    }
    // n token ids in [0, vocab).
    std::vector<int> tokens(int n, int vocab) {
        std::vector<int> t(std::size_t(n > 0 ? n : 0));
        for (int& x : t) x = integer(0, vocab - 1);
        return t;
    }
    // A seed for an RNG the exercise itself consumes (e.g. a sampler's).
    std::uint64_t seed() { return rng_(); }

private:
    std::mt19937_64 rng_;
};

}  // namespace pd::lab
