// Observations: the values a lab test judged (the student's results on the
// seeded inputs), written per test case to the file PDLAB_OBSERVE names.
//
// Why: the tests run in the same process as the exercise, so the exercise can
// print a passing doctest summary and exit. The grader (tools/grade,
// observations.cpp) therefore also runs the reference solution's test binary
// under the same hidden seed and compares both files outside the sandbox: a
// test case passes only when its observed values match the solution's, and
// those exist only by computing them. Unset, PDLAB_OBSERVE costs nothing.
//
// A test records what it checks with pd::lab::observe(what, got, tolerance):
// `got` is a number, a bool or a vector of them; `tolerance` is how far two
// correct implementations may be apart (atol + rtol * |reference|; the default
// is exact, right for ids, counts, sizes). Record only values every correct
// implementation agrees on (not a sampled token, not a time).
//
// The file: one JSON line per test case that ran, written when it ends,
// {"case": "lab03.bytes.formula", "passed": true,
//  "obs": [{"what": "...", "atol": 0, "rtol": 0, "v": 42}, ...]}
// Non-finite floats are written as null. The file stops growing at
// kMaxObservedBytes (the grader then finds test cases missing).
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

namespace pd::lab {

struct Tolerance {
    double atol = 0, rtol = 0;
};

namespace observing {

inline constexpr std::size_t kMaxObservedBytes = std::size_t(8) << 20;

class Recorder {
public:
    bool enabled() const { return path_ != nullptr; }
    void start(std::string_view test_case) {
        case_ = std::string(test_case);
        obs_ = nlohmann::json::array();
    }
    void add(std::string_view what, nlohmann::json value, Tolerance tol) {
        obs_.push_back({{"what", std::string(what)}, {"atol", tol.atol}, {"rtol", tol.rtol}, {"v", std::move(value)}});
    }
    // One line per test case, flushed at once: a crash later keeps what ended.
    void finish(bool passed) {
        if (!enabled()) return;
        std::string line = nlohmann::json{{"case", case_}, {"passed", passed}, {"obs", obs_}}.dump(
                               -1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        obs_ = nlohmann::json::array();
        if (written_ + line.size() > kMaxObservedBytes) return;
        if (!out_.is_open()) out_.open(path_, std::ios::app);
        out_ << line << std::flush;
        written_ += line.size();
    }

private:
    const char* path_ = std::getenv("PDLAB_OBSERVE");
    std::string case_;
    nlohmann::json obs_ = nlohmann::json::array();
    std::ofstream out_;
    std::size_t written_ = 0;
};

inline Recorder& recorder() {
    static Recorder r;
    return r;
}

// A doctest listener: it brackets every test case that runs.
struct Listener : doctest::IReporter {
    explicit Listener(const doctest::ContextOptions&) {}
    void test_case_start(const doctest::TestCaseData& tc) override { recorder().start(tc.m_name); }
    void test_case_end(const doctest::CurrentTestCaseStats& s) override { recorder().finish(s.testCaseSuccess); }
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace observing

// Records `got` (a number, a bool, or a vector of them) as one observation of
// the running test case; `what` names it in the grader's report.
template <class T>
void observe(std::string_view what, const T& got, Tolerance tol = {}) {
    auto& r = observing::recorder();
    if (r.enabled()) r.add(what, nlohmann::json(got), tol);
}

// The same for n floats at `got` (a row of a buffer).
inline void observe(std::string_view what, const float* got, std::size_t n, Tolerance tol = {}) {
    auto& r = observing::recorder();
    if (r.enabled()) r.add(what, nlohmann::json(std::vector<float>(got, got + n)), tol);
}

}  // namespace pd::lab

REGISTER_LISTENER("pdlab_observations", 1, pd::lab::observing::Listener);
