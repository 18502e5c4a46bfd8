// The prefill products (M > kSmallM rows): oneDNN's matmul on a copy of the
// weights packed once, at load, into the blocked layout its JIT kernels
// prefer. Compute-bound. Used by matmul.cpp only.
#pragma once

#include <memory>
#include <string>

#include "engine/matmul.hpp"

namespace pd {

// Packs the row-major (out, in) f32 weights in L.precision. Where oneDNN has
// no bf16 matmul for this CPU (below AVX512_CORE, or PDLAB_ISA=avx2), bf16
// weights are packed widened to f32 and x is rounded to bf16 before each
// product: the same arithmetic (bf16 x bf16 products are exact in f32, summed
// in f32), twice the bytes. int8 Linears pass their dequantized weights (q * s)
// and are packed as bf16 ones: prefill is compute-bound, so their bytes matter
// little there, and oneDNN 2.6 has no per-group scales on matmul weights.
std::shared_ptr<PackedWeights> onednn_pack(const Linear& L, const float* w_out_in);

// Whether oneDNN has a bf16 matmul on this CPU, under PDLAB_ISA's cap (it
// has none below AVX512_CORE, nor on ARM64). Asked once.
bool onednn_has_bf16();

// y (M, out) = x (M, in) @ W^T + b, for any M.
void onednn_forward(const Linear& L, const float* x, int M, float* y);

// oneDNN's name for the kernel of M rows (e.g. "brg:avx512_core"), and
// " (bf16 as f32)" where bf16 is widened.
std::string onednn_impl_name(const Linear& L, int M);

}  // namespace pd
