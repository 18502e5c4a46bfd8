// The values a lab's tests judged (labs/common/observe.hpp writes them per test
// case to the file PDLAB_OBSERVE names), read and compared outside the
// sandbox. A test check passes only when the student's observations match
// the reference solution's under the same seed: printing a passing doctest
// summary is not enough, the values have to be computed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pd::grade {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Observation {
    std::string what;        // "kv_cache_bytes(llama-1b, B=1, S=4096, 2)"
    double atol = 0, rtol = 0;
    json value;              // a number, a bool, or an array of them
};

struct CaseObservations {
    std::string test_case;   // "lab03.bytes.formula"
    bool passed = false;     // doctest's own verdict on the test case
    std::vector<Observation> obs;
};

// The largest observation file the grader reads (the writer stops at 8 MiB).
inline constexpr std::size_t kMaxObservationBytes = std::size_t(16) << 20;

// Parses one observation file; throws std::runtime_error with a one-line
// reason ("line 3: no \"case\"") when it is not what observe.hpp writes.
std::vector<CaseObservations> parse_observations(const std::string& text);

// Reads and parses `file` (a student's program wrote it: size-capped, no
// symlinks); nullopt with `why` when it is missing or garbled.
std::optional<std::vector<CaseObservations>> read_observations(const fs::path& file, std::string& why);

struct Mismatch {
    bool wrong_values = false;  // values differ (a wrong answer), else cases missing, extra or garbled
    std::string reason;         // one line
};

// Compares the student's observations of one check with the reference
// solution's: the same test cases in the same order, each passed, each with
// the same observations, values within the reference's tolerance.
std::optional<Mismatch> compare_observations(const std::vector<CaseObservations>& got,
                                             const std::vector<CaseObservations>& want);

// How many observations the test cases hold together.
std::size_t count_observations(const std::vector<CaseObservations>& cases);

}  // namespace pd::grade
