// The doctest runner for every C++ unit test of the kit. meson test runs it
// once per area with --test-case=<area>.*, so each area is its own test, and
// again with PDLAB_ISA set for each lesser instruction set (tests/meson.build).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/isa.hpp"

// exit code meson reads as "skipped"
constexpr int kSkip = 77;

// A run for PDLAB_ISA=name is skipped where this CPU cannot run that
// instruction set, or where it is the best one (the plain run covers it).
static bool isa_run_is_redundant() {
    const char* env = std::getenv("PDLAB_ISA");
    if (!env || std::string(env) == "best") return false;
    const auto isas = pd::available_isas();
    for (std::size_t i = 0; i < isas.size(); i++)
        if (isas[i] == env) {
            if (i > 0) return false;
            std::printf("PDLAB_ISA=%s is this machine's best instruction set: the plain run covers it\n", env);
            return true;
        }
    std::printf("PDLAB_ISA=%s: this machine cannot run it\n", env);
    return true;
}

int main(int argc, char** argv) {
    if (isa_run_is_redundant()) return kSkip;
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
