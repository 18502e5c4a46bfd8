// AVX-512 helpers shared by the CPU kernels (matmul.cpp, attention.cpp).
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace pd::simd {

// Lane l of the result is the sum of the 16 lanes of v[l].
inline __m512 reduce16(__m512 v[16]) {
    __m512 w[8], x[4], y[2];
    for (int k = 0; k < 8; k++)
        w[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]),
                             _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    for (int k = 0; k < 4; k++) {
        __m512d a = _mm512_castps_pd(w[2 * k]), b = _mm512_castps_pd(w[2 * k + 1]);
        x[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    // x[k]: in each 128-bit lane L, the lane-L partial sums of v[4k .. 4k+3].
    for (int k = 0; k < 2; k++)
        y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0x88),   // lanes 0,2 | 0,2
                             _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0xDD));  // lanes 1,3 | 1,3
    return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));
}

}  // namespace pd::simd
#endif
