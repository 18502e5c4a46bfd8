// Weight-only int8 (and int4) quantization with symmetric per-group scales:
// the plain reference that the packing (matmul.cpp), the decode kernel
// (panel_quantized.cpp) and the tests agree on. Also the decode kernel's rounding
// of x to int16 per group (quantize_activations), so that it multiplies
// integers by integers.
//
// A row of W (out, in) is cut into groups of G consecutive inputs (the last
// one shorter when G does not divide `in`). Each group g keeps one scale
//   s_g = max |w| over the group / 127            (0 for an all-zero group)
// and its weights as q = round(w / s_g), an integer in [-127, 127]; the
// weight it stands for is q * s_g, within s_g / 2 of w. -128 is never used,
// so that q and -q are both representable (symmetric).
//
// int4 is the same with 7 for 127: q in [-7, 7] (-8 unused), s = max |w| / 7,
// 15 levels instead of 255, so each weight moves up to 18 times further.
//
// Scales are f32, not bf16: at G = 64 they cost 4/64 = 0.0625 bytes per
// weight (6% of int8's bytes) against 3% in bf16, and an f32 scale is the
// exact max/127, so the round-trip bound |w - q s| <= s/2 holds as stated;
// a bf16 scale, rounded down, would let round(w / s) pass 127 and clip.
#pragma once

#include <cstdint>
#include <vector>

namespace pd {

inline constexpr int kInt8Max = 127;
inline constexpr int kInt4Max = 7;
inline constexpr int kInt16Max = 32767;

// One group of n weights -> n values in [-max_q, max_q]; returns the scale, max |w| / max_q.
float quantize_group(const float* w, int n, std::int8_t* q, int max_q = kInt8Max);

// A row-major (rows, cols) matrix quantized in groups of `group` along each row.
struct QuantizedMatrix {
    int rows = 0, cols = 0, group = 0;
    std::vector<std::int8_t> q;  // (rows, cols), in [-max_q, max_q] (int4's too: one per byte here)
    std::vector<float> scales;   // (rows, groups_per_row())
    int groups_per_row() const { return (cols + group - 1) / group; }
};

// max_q: kInt8Max for int8, kInt4Max for int4.
QuantizedMatrix quantize_rows(const float* w, int rows, int cols, int group, int max_q = kInt8Max);

// The weights the integers stand for: q * s, (rows, cols) row-major.
std::vector<float> dequantize_rows(const QuantizedMatrix& m);

// x (n) -> q (n) int16 and scales (ceil(n / group)), in groups of `group`,
// the same groups as the weights': s = max |x| over the group / max_q,
// q = round(x / s). Each x comes back as q * s within s / 2: with max_q =
// 32767 (int8 weights), 2^-16 of its group's largest |x|, 256 times finer
// than the weights' int8 steps, so the product's error stays the weights'
// (see panel_quantized.cpp); int4 weights take max_q = 127, still 18 times
// finer than their own steps (x_quantized_max, matmul.hpp). A NaN in a group
// makes its scale NaN, so that it reaches the output as in f32.
void quantize_activations(const float* x, int n, int group, std::int16_t* q, float* scales, int max_q = kInt16Max);

}  // namespace pd
