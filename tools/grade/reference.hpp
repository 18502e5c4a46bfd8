// The reference solution, graded first: it must build and pass every check of
// the rubric under this run's seed, or the rubric (or a test) is wrong and no
// student is graded. Its output checks' JSON is what students are compared
// with, and its test counts are what a student's test run must reach.
#pragma once

#include "context.hpp"

namespace pd::grade {

// Fills c.reference_json and c.reference_cases; throws KitError, listing every
// failing check, when the solution does not build or does not pass.
void prepare_reference(Context& c);

}  // namespace pd::grade
