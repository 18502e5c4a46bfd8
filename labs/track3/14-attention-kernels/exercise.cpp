// Lab 14 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-2).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track3-14
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "todo_exercise.hpp"
#include "vector_ops.hpp"

namespace pd::lab14 {

void tile_update(RowState& st, float* o, float* s, const float* V, int n, int D) {
    (void)st, (void)o, (void)s, (void)V, (void)n, (void)D;
    TODO_EXERCISE(
        "README \"The online softmax\": which m the tile's terms are taken against, the factor that "
        "moves the old l and o onto it, and in which order to apply it; vector_ops.hpp has the loops");
}

void finish_row(const RowState& st, float* o, int D) {
    (void)st, (void)o, (void)D;
    TODO_EXERCISE(
        "README \"The online softmax\", the last line of the derivation: what o and l hold once every "
        "key has been seen, and what the softmax-weighted average is made of");
}

}  // namespace pd::lab14
