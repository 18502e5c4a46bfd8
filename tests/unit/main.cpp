// The doctest runner for every C++ unit test of the kit. meson test runs it
// once per area with --test-case=<area>.*, so each area is its own test.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

int main(int argc, char** argv) {
    doctest::Context ctx(argc, argv);
    int rc = ctx.run();
    if (ctx.shouldExit()) return rc;
    return rc;
}
