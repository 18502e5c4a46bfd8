// The rubric's may_not_use list against one student's compiled exercise: the
// undefined symbols of their exercise object (nm -C -u) are what it calls
// outside itself, so a forbidden engine function shows there however the call
// is spelled in the source.
#pragma once

#include "checks.hpp"

namespace pd::grade {

// Takes each forbidden symbol's points off r.total (never below 0), with a
// note per symbol and ", forbidden symbol" in the status. Call after the checks.
void apply_may_not_use(const Context& c, StudentResult& r);

// True when the demangled `name` is `symbol` or `symbol(...)`.
bool symbol_matches(const std::string& name, const std::string& symbol);

}  // namespace pd::grade
