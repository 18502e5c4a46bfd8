// What the instructor gets in --out: gradebook.csv (one row per student, one
// column per check), reports/<student>.md (each check's result, why it failed
// and how to reproduce it) and grading.md (the run as a whole).
#pragma once

#include <string>
#include <vector>

#include "checks.hpp"
#include "context.hpp"

namespace pd::grade {

// Points as the gradebook writes them: "2", "0.5".
std::string fmt_points(double p);

// Rewritten whole after every student, so an interrupted run keeps what it has.
void write_gradebook(const Context& c, const std::vector<StudentResult>& results);
void write_report(const Context& c, const StudentResult& r);
void write_summary(const Context& c, const std::vector<StudentResult>& results, const std::string& started,
                   double seconds);

}  // namespace pd::grade
