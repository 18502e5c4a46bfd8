// Lab 14's --device cuda where the kit was built without the CUDA backend
// (gpu_pair.hpp): every entry refuses with the same sentence.
#include "gpu_pair.hpp"

#include "common.hpp"

namespace pd::lab14 {
namespace {

[[noreturn]] void no_backend() {
    fail("--device cuda is not available: this build has no CUDA backend (configure with -Dcuda=enabled "
         "where nvcc is installed). Use --device cpu.");
}

}  // namespace

std::string require_gpu_pair(int) { no_backend(); }

Tiles gpu_tiles() { no_backend(); }

GpuPair run_gpu_pair(const AttentionShape&, const std::vector<float>&, const std::vector<float>&,
                     const std::vector<float>&, int, int, int) {
    no_backend();
}

}  // namespace pd::lab14
