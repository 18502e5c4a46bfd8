// Included by a lab's exercise.cpp that holds Highway kernels (lab 11): it makes
// Highway compile that exercise.cpp once per instruction set the kit builds for.
// foreach_target.h includes "exercise.cpp" again for each target (labs/meson.build
// puts the compiled file's folder first on the include path, so it finds the
// includer), as src/measure/stream_sum.cpp does by hand. In the includer, what
// stands between HWY_BEFORE_NAMESPACE() and HWY_AFTER_NAMESPACE() becomes one
// kernel per target; what stands in #if HWY_ONCE is compiled once.
// No include guard: every pass through exercise.cpp includes this again
// (foreach_target.h and highway.h keep their own count).
#include "engine/hwy_config.hpp"  // the instruction sets the engine's kernels are built for
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "exercise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
