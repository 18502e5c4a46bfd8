// Lab 12: what you write. Weight-only int8 quantization with symmetric
// per-group scales, the scheme behind the engine's --precision int8: one
// row of a weight matrix at a time, as a decode kernel sees it.
//
// A row of n weights is cut into groups of G consecutive values; the last
// group holds what is left (n - G * floor(n / G) values) when G does not divide n.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pd::lab12 {

// One quantized row.
struct QuantizedRow {
    int group = 0;                  // G: values per scale
    std::vector<std::int8_t> q;     // (n) integers in [-127, 127]
    std::vector<float> scales;      // (ceil(n / G)) scale of each group, in order
};

// Task 1 (README "Group quantization"): for each group,
//   scale = max |w| over the group / 127   (0 when every weight of the group is 0)
//   q     = w / scale rounded to the nearest integer, kept within [-127, 127]
//           (0 for every weight of an all-zero group)
// Throws std::invalid_argument when w is empty or group < 1.
QuantizedRow quantize_row(std::span<const float> w, int group);

// Task 2: the weights the row stands for, q * scale of its group: (n) values.
std::vector<float> dequantize_row(const QuantizedRow& row);

// Task 3 (README "The int8 dot product"): sum over k of w_k * x_k with the
// quantized row, computed the way the int8 kernel does it: for each group,
// the sum of q_k * x_k, times the group's scale once; the groups' results
// added up. Exactly dot(dequantize_row(row), x) in exact arithmetic.
// Throws std::invalid_argument when x and the row differ in length.
double dot_int8(const QuantizedRow& row, std::span<const float> x);

}  // namespace pd::lab12
