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
    int ldx = 0;
};

// y[:, panels first..last) for all M rows: the Highway kernel of the chosen
// instruction set (see isa.hpp), f32 or bf16 weights.
void panel_products(const PanelJob& job, int first, int last);

// The same for int8 weights (panel_int8.cpp): the Highway kernel of the
// chosen instruction set, x in f32.
void panel_products_int8(const PanelJob& job, int first, int last);

// The same with vdpbf16ps, for bf16 weights where use_avx512_bf16(); needs
// x_hi/x_lo from split_x_avx512_bf16. x86 builds only.
void panel_products_avx512_bf16(const PanelJob& job, int first, int last);

// x (M, K) f32 -> hi, lo (M, Kp) bf16 with hi + lo ~ x to about 2^-16 (lo
// is zero from M = kBf16RoundXMinM on); Kp = K rounded up to 32, zero-padded.
void split_x_avx512_bf16(const float* x, int M, int K, int Kp, bf16* hi, bf16* lo);

}  // namespace pd
