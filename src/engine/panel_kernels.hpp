// The decode kernels: a few rows of x (M <= kSmallM) times a Linear's weights
// in column panels (see Linear in matmul.hpp). matmul.cpp splits the panels
// among the threads; these do one thread's share.
#pragma once

#include <cstdint>

#include "engine/matmul.hpp"

namespace pd {

// The operands of one small-M product.
struct PanelJob {
    const Linear* L;
    const float* x;  // (M, in) f32; for bf16 from M = kBf16RoundXMinM on, already rounded to bf16
    int M;
    float* y;        // (M, out)
    // AVX-512 BF16 only: x split into bf16 halves (see panel_bf16_avx512.cpp),
    // each (M, ldx) k-pairs; null elsewhere.
    const std::uint32_t* x_hi = nullptr;
    const std::uint32_t* x_lo = nullptr;
    int ldx = 0;  // also int8's and int4's: the row stride of x_int16, n_groups * G
    // int8 and int4 only: x rounded to integers per group (quantize_activations; int16
    // storage, in [-x_quantized_max, x_quantized_max]), (M, ldx)
    // zero past K, and its scales, (M, n_groups).
    const std::int16_t* x_int16 = nullptr;
    const float* x_scales = nullptr;
};

// y[:, panels first..last) for all M rows: the Highway kernel of the chosen
// instruction set (see isa.hpp), f32 or bf16 weights.
void panel_products(const PanelJob& job, int first, int last);

// The same for int8 and int4 weights (panel_quantized.cpp): the Highway
// kernel of the chosen instruction set, on x_int16 and x_scales.
void panel_products_quantized(const PanelJob& job, int first, int last);

// x (M, K) -> xq (M, ldx) int16 in [-max_q, max_q] in groups of G, zero from
// K to ldx, and scales (M, ceil(K / G)): quantize_activations (quantize.hpp)
// with SIMD, for panel_products_quantized's x_int16 and x_scales; max_q is
// x_quantized_max of the weights' precision.
void quantize_x_int16(const float* x, int M, int K, int G, int max_q, std::int16_t* xq, int ldx, float* scales);

// The same with vdpbf16ps, for bf16 weights where use_avx512_bf16(); needs
// x_hi/x_lo from split_x_avx512_bf16. x86 builds only.
void panel_products_avx512_bf16(const PanelJob& job, int first, int last);

// The same as panel_products_quantized with AVX-512 VNNI (vpdpwssd for int8,
// vpdpbusd for int4), for int8 and int4 weights where use_avx512_vnni(); the
// same integer sums. x86 builds only.
void panel_products_avx512_vnni(const PanelJob& job, int first, int last);

// x (M, K) f32 -> hi, lo (M, Kp) bf16 with hi + lo ~ x to about 2^-16 (lo
// is zero from M = kBf16RoundXMinM on); Kp = K rounded up to 32, zero-padded.
void split_x_avx512_bf16(const float* x, int M, int K, int Kp, bf16* hi, bf16* lo);

}  // namespace pd
