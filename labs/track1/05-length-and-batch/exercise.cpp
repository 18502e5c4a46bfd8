// Lab 05 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-3).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track1-05
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab05 {

void batched_attention(float* out, const float* q, const KVCache& cache, int layer,
                       std::span<const int> slots, std::span<const int> lens, int n_heads) {
    (void)out, (void)q, (void)cache, (void)layer, (void)slots, (void)lens, (void)n_heads;
    TODO_EXERCISE(
        "README \"A ragged batch\": for each (row, head), lab 03's attention of one head, over "
        "that row's own length; exercise.hpp gives the shapes, the head map and what to reject");
}

int batched_decode_step(Engine& engine, Batch& batch) {
    (void)engine, (void)batch;
    TODO_EXERCISE(
        "README task 2: gather, one engine.decode() for the gathered rows, pick per row (your own "
        "loop over the vocabulary), scatter back; exercise.hpp lists the checks");
}

Fit fit_linear_quadratic(std::span<const double> P, std::span<const double> ms) {
    (void)P, (void)ms;
    TODO_EXERCISE(
        "README \"Prefill: a line plus a parabola\": least squares for three unknowns (the normal "
        "equations are 3x3); scale P first so P^4 keeps its digits; r2 as exercise.hpp defines it");
}

}  // namespace pd::lab05
