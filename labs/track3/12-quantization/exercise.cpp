// Lab 12 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-3).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track3-12
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab12 {

QuantizedRow quantize_row(std::span<const float> w, int group) {
    (void)w, (void)group;
    TODO_EXERCISE(
        "README \"Group quantization\": how many groups does a row of n values have when the "
        "last one may be short? Find each group's largest |w| first; what must an all-zero "
        "group's scale and values be so that nothing divides by zero?");
}

std::vector<float> dequantize_row(const QuantizedRow& row) {
    (void)row;
    TODO_EXERCISE("README task 2: which group does value k belong to?");
}

double dot_int8(const QuantizedRow& row, std::span<const float> x) {
    (void)row, (void)x;
    TODO_EXERCISE(
        "README \"The int8 dot product\": one running sum per group, multiplied by the scale "
        "once at the group's end; accumulate in double");
}

}  // namespace pd::lab12
