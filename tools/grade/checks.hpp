// Running a rubric's checks (rubric.hpp) against the lab as it is built in
// WORK/build, each under the run's seed and limits, and what they found.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "context.hpp"
#include "observations.hpp"

namespace pd::grade {

enum class Outcome { passed, wrong, not_implemented, crash, timeout, memory, error, not_run };

const char* outcome_name(Outcome o);

struct CheckResult {
    Outcome outcome = Outcome::not_run;
    double points = 0;
    std::string detail;   // "4 test cases passed"
    std::string reason;   // one line: why it failed
    std::string excerpt;  // the failing output
    double seconds = 0;
    std::string command;  // how to run it by hand
    int cases = 0;        // test checks: the test cases that ran
    std::vector<CaseObservations> observed;  // test checks: what those test cases observed
};

struct StudentResult {
    std::string name;
    std::string status;
    double total = 0;
    std::vector<CheckResult> checks;
    std::vector<std::string> notes;
    std::string build_excerpt;
    double build_seconds = 0;
};

// Runs every check in `scratch`. `produced` (the reference run, while
// c.reference_json is still empty) collects the output checks' JSON.
std::vector<CheckResult> run_checks(const Context& c, const fs::path& scratch,
                                    std::vector<std::optional<json>>* produced);

// "ok", or the kinds of failure, each once, in check order ("crash, timeout").
std::string status_of(const StudentResult& r);

}  // namespace pd::grade
