// Matrix products: y = x @ W^T + b for every Linear layer of the model.
//
// Two kernels, picked by the number of rows M:
//  - M > kSmallM (prefill): oneDNN's matmul on weights packed once, at load,
//    into the blocked layout its JIT kernels prefer. Compute-bound.
//  - M <= kSmallM (decode, batched decode): our own AVX-512 kernel that streams
//    each weight row from memory once and reuses it for all M rows of x.
//    Memory-bound: its speed is the weight bytes over DRAM bandwidth.
#pragma once

#include <memory>
#include <vector>

#include "common.hpp"

namespace pd {

enum class Precision { f32, bf16 };
const char* precision_name(Precision p);
Precision parse_precision(const std::string& s);  // "f32" | "bf16", else UserError
std::size_t bytes_per_weight(Precision p);

constexpr int kSmallM = 16;

struct PackedWeights;  // oneDNN memory + primitive cache (matmul.cpp)

struct Linear {
    int in = 0, out = 0;
    Precision precision = Precision::f32;
    std::vector<float> w;          // (out, in) row-major, when precision == f32
    std::vector<bf16> w16;         // (out, in) row-major, when precision == bf16
    std::vector<float> bias;       // (out), or empty
    std::shared_ptr<PackedWeights> packed;  // oneDNN's copy for M > kSmallM

    std::size_t weight_bytes() const { return std::size_t(in) * out * bytes_per_weight(precision); }
};

// Takes ownership of row-major f32 weights (out, in) and prepares both the
// row-major copy in `precision` and the oneDNN-packed copy.
Linear make_linear(std::vector<float> w_out_in, std::vector<float> bias, int in, int out,
                   Precision precision);

// y (M, out) = x (M, in) @ W^T + b. Allocates nothing once a shape has been seen.
void linear_forward(const Linear& L, const float* x, int M, float* y);

// The small-M kernel alone, exposed for tests and benchmarks.
void linear_small_m(const Linear& L, const float* x, int M, float* y);

// Name of the oneDNN implementation used for M rows (e.g. "brg:avx512_core"),
// so benchmarks can show that no reference kernel slipped in.
std::string linear_impl_name(const Linear& L, int M);

}  // namespace pd
