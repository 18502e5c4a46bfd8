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

// The merged softmax statistics of `used` splits: M, the largest max, and
// L = sum_i e^(m_i - M) l_i. part_ml: (used, 2) pairs (m_i, l_i).
struct SoftmaxStats {
    float m = 0.0f, l = 0.0f;
};
__host__ __device__ inline SoftmaxStats merge_split_stats(const float* part_ml, int used) {
    float M = -INFINITY;
    for (int i = 0; i < used; i++) M = fmaxf(M, part_ml[i * 2]);
    float L = 0.0f;
    for (int i = 0; i < used; i++) L += expf(part_ml[i * 2] - M) * part_ml[i * 2 + 1];
    return {M, L};
}

// Element d of the merged output: sum_i e^(m_i - M) o_i[d] / L. part_o: (used, D).
__host__ __device__ inline float merge_split_value(const float* part_ml, const float* part_o, int used, int D, int d,
                                                   SoftmaxStats s) {
    float acc = 0.0f;
    for (int i = 0; i < used; i++) acc += expf(part_ml[i * 2] - s.m) * part_o[std::size_t(i) * D + d];
    return acc * (1.0f / s.l);  // as the merge kernel always did: one reciprocal per element
}

}  // namespace pd::gpu
