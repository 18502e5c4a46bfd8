// Lab 14 on the GPU (--device cuda): the same pair, gpu/kernels/attention_pair.cuh's
// naive_attention and tiled_attention (the twins of kernels.hpp), on the
// program's problems. gpu_pair.cpp implements this where the kit has the CUDA
// backend; no_gpu_pair.cpp, built otherwise, refuses with the reason.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "base/timing.hpp"

namespace pd::lab14 {

// Checks that the GPU pair can run here and returns the card ("NVIDIA H200,
// 132 SMs, 140 GiB"); otherwise fails (exit 2) with one sentence: no CUDA
// backend in this build, no usable GPU, or a head_dim the tiled kernel does
// not take (tensor-core tiles: a multiple of 16, 16 .. 256).
std::string require_gpu_pair(int head_dim);

// Both GPU kernels on one problem: outputs (T, n_heads, D), the ms per call
// of each (median and spread of `repeats` timed runs of `calls` calls after
// `warmup` runs, the two kernels' runs alternating; CUDA events around each
// run), and the scratch bytes each reported (naive: one head's T x S floats
// in global memory; tiled: one block's shared memory).
// q, K, V are rounded to bf16 on the way to the GPU, the type a GPU model's
// attention reads: both kernels read the same bytes, and sum in f32.
struct GpuPair {
    std::vector<float> naive_out, tiled_out;
    Stats naive_ms, tiled_ms;
    std::size_t naive_bytes = 0, tiled_bytes = 0;
};
// The GPU tiled kernel's tiles, Br x Bc (gpu/kernels/attention_pair.cuh's kFlashBr x
// kFlashBc): compile-time constants there, so the tile sweep is the CPU's alone.
Tiles gpu_tiles();

GpuPair run_gpu_pair(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& K,
                     const std::vector<float>& V, int warmup, int repeats, int calls);

}  // namespace pd::lab14
