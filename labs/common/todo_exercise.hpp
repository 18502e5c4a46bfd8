// The seam between a lab and the student: every exercise function starts as a
// stub that throws NotImplemented, naming the file, the function and a hint.
#pragma once

#include <stdexcept>
#include <string>

namespace pd::lab {

struct NotImplemented : std::logic_error {
    std::string file, function, hint;
    NotImplemented(std::string file, std::string function, std::string hint);
};

}  // namespace pd::lab

// Use as the body of a starter function: TODO_EXERCISE("hint ...");
#define TODO_EXERCISE(hint) throw ::pd::lab::NotImplemented(__FILE__, __func__, hint)
