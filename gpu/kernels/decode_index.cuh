// The index math of split-K decode attention (attention.cu), as small
// __host__ __device__ functions: the kernels call them on the GPU, and
// tests/gpu/test_host.cpp runs them on the CPU against the CPU engine's
// attention, over ragged lengths, small blocks and every GQA grouping, so that
// a GPU run has mostly the launches, the memory and the speed left to test.
//
//   splits   keys 0 .. n_keys-1 cut into runs of kDecodeKeysPerSplit positions
//   blocks   the block-table entries a split's positions lie in
//   heads    query head h reads KV head h / (n_heads / n_kv_heads)
//   merge    the splits' (max m_i, sum l_i, o_i) into one softmax-weighted sum
#pragma once

#include <cmath>
#include <cstddef>

#include <cuda_runtime.h>

#include "attention.cuh"
#include "kv_cache.cuh"

namespace pd::gpu {

// Positions k0 .. k0+n-1; n <= 0: the split lies beyond the sequence.
struct KeyRange {
    int k0 = 0, n = 0;
};

// The splits that hold keys of a sequence of n_keys positions.
__host__ __device__ inline int decode_splits_used(int n_keys) {
    return (n_keys + kDecodeKeysPerSplit - 1) / kDecodeKeysPerSplit;
}

// The keys of split `split` of a sequence of n_keys positions.
__host__ __device__ inline KeyRange decode_split_keys(int split, int n_keys) {
    const int k0 = split * kDecodeKeysPerSplit;
    const int left = n_keys - k0;
    return {k0, left < kDecodeKeysPerSplit ? left : kDecodeKeysPerSplit};
}

// The KV head that serves query head h (the CPU's kv_head_for).
__host__ __device__ inline int kv_head_of(int h, int n_heads, int n_kv_heads) { return h / (n_heads / n_kv_heads); }

// Table entries first .. first+count-1 hold the positions of `keys` (n >= 1).
struct BlockRange {
    int first = 0, count = 0;
};
__host__ __device__ inline BlockRange blocks_of(KeyRange keys, int block_size) {
    const int first = keys.k0 / block_size;
    return {first, (keys.k0 + keys.n - 1) / block_size - first + 1};
}

// Offset in K or V of position p of KV head kv_h, where blk holds the ids of
// the table entries `blocks` (blk[0] is entry blocks.first).
__host__ __device__ inline std::size_t split_key_offset(const KVLayer& c, const int* blk, BlockRange blocks, int kv_h,
                                                        int p) {
    return c.tile(blk[p / c.block_size - blocks.first], kv_h) + std::size_t(p % c.block_size) * c.head_dim;
}

// The merged softmax statistics of splits first, first + stride, ... below
// `used` (first 0, stride 1: all of them; a lane's share when a warp merges):
// M, the largest max, and L = sum_i e^(m_i - M) l_i. part_ml: (used, 2) pairs
// (m_i, l_i). No split at all gives M = -inf, L = 0.
struct SoftmaxStats {
    float m = 0.0f, l = 0.0f;
};
__host__ __device__ inline SoftmaxStats merge_split_stats(const float* part_ml, int used, int first = 0,
                                                          int stride = 1) {
    float M = -INFINITY;
    for (int i = first; i < used; i += stride) M = fmaxf(M, part_ml[i * 2]);
    float L = 0.0f;
    for (int i = first; i < used; i += stride) L += expf(part_ml[i * 2] - M) * part_ml[i * 2 + 1];
    return {M, L};
}

// The statistics of two disjoint sets of splits as one set's. Symmetric in a
// and b, so the lanes of a butterfly all reach the same value. A set with no
// split (m = -inf; a split's max is finite) adds e^(-inf) x 0 = 0, unless
// both are empty: then e^(-inf - -inf) would be NaN, so an empty a gives b.
__host__ __device__ inline SoftmaxStats combine_stats(SoftmaxStats a, SoftmaxStats b) {
    if (a.m == -INFINITY) return b;
    const float M = fmaxf(a.m, b.m);
    return {M, expf(a.m - M) * a.l + expf(b.m - M) * b.l};
}

// Split i's weight in the merged output: e^(m_i - M) / L.
__host__ __device__ inline float split_weight(const float* part_ml, int i, SoftmaxStats s) {
    return expf(part_ml[i * 2] - s.m) / s.l;
}

// Element d of the merged output, or of a run of `used` splits' share of it:
// sum_i w_i o_i[d]. weights: (used) split weights; part_o: (used, D). On the GPU the loop is unrolled, so that 16
// splits' loads are in flight at once rather than one after another.
__host__ __device__ inline float merge_split_value(const float* weights, const float* part_o, int used, int D,
                                                   int d) {
    float acc = 0.0f;
#ifdef __CUDA_ARCH__
#pragma unroll 16
#endif
    for (int i = 0; i < used; i++) acc += weights[i] * part_o[std::size_t(i) * D + d];
    return acc;
}

}  // namespace pd::gpu
