// Lab 14 starter: replace the TODO_EXERCISE with your code (README.md, "Tasks").
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track3-14
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "todo_exercise.hpp"
#include "vector_ops.hpp"

namespace pd::lab14 {

void tiled_attention_head(float* out, const float* q, const float* K, const float* V, const HeadShape& shape,
                          Tiles tiles, TileScratch scratch) {
    (void)out, (void)q, (void)K, (void)V, (void)shape, (void)tiles, (void)scratch;
    TODO_EXERCISE(
        "README \"The online softmax\" and \"Your kernel\": per block of Br queries, per tile of Bc keys, the "
        "block's scores into scratch.scores, then each row folds its tile into its (m, l) and its output row; "
        "near the diagonal a row sees only part of a tile; at the end divide each row by its l");
}

}  // namespace pd::lab14
