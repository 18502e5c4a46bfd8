// The doctest runner of the GPU tests (gpu.kernels, gpu.model). Without a
// usable GPU it exits 77, which meson reports as SKIP, and says why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "engine/engine.hpp"

int main(int argc, char** argv) {
    std::string why;
    if (!pd::cuda_available(&why)) {
        std::printf("SKIP: the GPU tests need a CUDA GPU: %s\n", why.c_str());
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
