// What the AVX-512 decode kernels share (panel_bf16_avx512.cpp,
// panel_quantized_avx512.cpp). Include it after their `#pragma GCC target`
// and <immintrin.h>: it uses AVX-512 intrinsics, compiled for that target only.
#pragma once

namespace pd::avx512 {

// Stores the 32 sums of one row of y, masked to the panel's ncols outputs.
inline void store_panel_row(float* y, __m512 a, __m512 b, const float* bias, int ncols) {
    const __mmask16 m0 = ncols >= 16 ? 0xFFFF : __mmask16((1u << ncols) - 1);
    const __mmask16 m1 = ncols >= 32 ? 0xFFFF : ncols > 16 ? __mmask16((1u << (ncols - 16)) - 1) : 0;
    if (bias) {
        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m0, bias));
        b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(m1, bias + 16));
    }
    _mm512_mask_storeu_ps(y, m0, a);
    _mm512_mask_storeu_ps(y + 16, m1, b);
}

}  // namespace pd::avx512
