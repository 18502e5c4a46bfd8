// Included by each lab's tests.cpp (one per test program): how a starter
// function that still throws NotImplemented shows up in the test output.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

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
