// f32 -> bf16 rounding (to nearest even, NaN kept a NaN: exactly
// pd::f32_to_bf16), vectorised for the prefill products, which round every
// row of x before a bf16 matrix product.
#pragma once

#include <cstddef>

#include "common.hpp"

namespace pd {

// out[i] = f32_to_bf16(x[i]) for i < n.
void to_bf16(const float* x, bf16* out, std::size_t n);

// out[i] = bf16_to_f32(f32_to_bf16(x[i])): the bf16 value, kept in f32.
void round_to_bf16(const float* x, float* out, std::size_t n);

}  // namespace pd
