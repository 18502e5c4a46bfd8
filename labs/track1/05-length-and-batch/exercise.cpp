// Lab 05 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-2).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track1-05
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab05 {

int batched_decode_step(Engine& engine, Batch& batch) {
    (void)engine, (void)batch;
    TODO_EXERCISE(
        "README task 1: gather, one engine.decode() for the gathered rows, pick per row (your own "
        "loop over the vocabulary), scatter back; exercise.hpp lists the checks");
}

Fit fit_linear_quadratic(std::span<const double> P, std::span<const double> ms) {
    (void)P, (void)ms;
    TODO_EXERCISE(
        "README \"Prefill: a line plus a parabola\": least squares for three unknowns (the normal "
        "equations are 3x3); scale P first so P^4 keeps its digits; r2 as exercise.hpp defines it");
}

}  // namespace pd::lab05
