// A lab's rubric: solutions/<track>/<NN-name>/rubric.json. Each check is worth
// its points, all or nothing (except an output check with compare.scale, whose
// points scale with one of the program's numbers against the reference's):
//   "test"   runs the lab's doctest binary with --test-case=<test_case>; passes
//            when at least one test case ran and none failed
//   "output" runs the lab program with <args> --json FILE, built once with the
//            student's code and once with the reference solution, and compares
//            the JSON fields named in compare.fields
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "compare.hpp"

namespace pd::grade {

struct RubricError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Check {
    std::string name;         // the gradebook column
    std::string kind;         // "test" or "output"
    std::string description;  // optional, shown in reports
    double points = 0;
    double timeout_s = 0;     // optional; 0: the grader's --timeout
    std::string test_case;    // kind "test": a doctest filter ("lab03.kv_cache.*", commas for several)
    std::vector<std::string> args;  // kind "output": the program's arguments; "{seed}" is replaced
    CompareSpec compare;      // kind "output"
};

// A symbol the student's exercise may not call (the exercise is to write it):
// each one found among the undefined symbols of their compiled exercise
// (nm -C -u) costs its points, the total never going below 0.
struct Forbidden {
    std::string symbol;  // demangled: "pd::argmax" matches "pd::argmax(...)" and itself; '*' within one part of the name
    double points = 0;
    std::string why;     // shown in the report
};

struct Rubric {
    std::string lab;          // "03"
    std::string title;        // optional
    std::vector<Check> checks;
    std::vector<Forbidden> may_not_use;  // optional
    double max_points() const;
};

// Parses and checks a rubric; throws RubricError with a message that says what
// to fix, naming `origin` (the file).
Rubric parse_rubric(const json& j, const std::string& origin);
Rubric load_rubric(const std::string& path);

}  // namespace pd::grade
