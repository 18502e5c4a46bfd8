// Lab 10 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-4).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track3-10
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab10 {

Count count_matmul(const std::string& name, double rows, int in, int out, Precision p) {
    (void)name, (void)rows, (void)in, (void)out, (void)p;
    TODO_EXERCISE(
        "README \"One product\": count the multiply-adds of (rows, in) x (in, out); for the bytes, ask "
        "which operand must come from DRAM and how many times (exercise.hpp states the model)");
}

std::vector<Count> count_phase(const Config& c, const PhaseShape& s) {
    (void)c, (void)s;
    TODO_EXERCISE(
        "README \"A whole pass\": how many rows each phase pushes through the layers, how many "
        "(query, position) pairs attention sees, which K/V positions cross the bus; seven rows in "
        "exercise.hpp's order");
}

double attainable_gflops(double intensity, double peak_gflops, double bandwidth_gbps) {
    (void)intensity, (void)peak_gflops, (void)bandwidth_gbps;
    TODO_EXERCISE("README \"The roofline\": two roofs, and a kernel is under both; check the units");
}

long compute_bound_batch(const Config& c, Precision p, double context, double ridge) {
    (void)c, (void)p, (void)context, (void)ridge;
    TODO_EXERCISE(
        "README \"When batching stops being free\": write the intensity of B sequences from one "
        "sequence's counts (which bytes are shared, which are per sequence) and solve for B; a loop "
        "over B may never end");
}

}  // namespace pd::lab10
