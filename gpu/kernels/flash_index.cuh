// The index math of the flash prefill (tiled_attention_kernel in
// attention_pair.cu), as small __host__ __device__ functions: the kernel calls
// them on the GPU, and tests/gpu/test_flash_index.cpp walks the kernel's grid
// with them on the CPU against the CPU engine's attention_prefill, over ragged
// query counts, cached prefixes and GQA groupings, so that a GPU run has the
// tensor-core products, the launches and the speed left to test.
//
//   causal   query i of the T last of S positions sees keys 0 .. S - T + i
//   tiles    a block of kFlashBr queries walks key tiles of kFlashBc up to the
//            keys its last query sees; a warp of 16 rows skips the tiles past
//            what its last row sees; the last tile may be short
//   softmax  each row's running max m and sum l over the tiles seen so far,
//            and the factor alpha that rescales what was summed before a new max
#pragma once

#include <cmath>

#include <cuda_runtime_api.h>

#include "attention_pair.cuh"

namespace pd::gpu {

// Keys query i (0 .. T-1) sees: positions 0 .. S - T + i (the naive kernels too).
__host__ __device__ inline int visible_keys(const AttentionShape& s, int i) { return s.S - s.T + i + 1; }

// Keys of the tile starting at key j0 that query i sees: <= 0 none, >= the
// tile's width all, else the first n (the causal diagonal). Rows at or past T
// (padding of the last block) see none.
__host__ __device__ inline int flash_row_keys(const AttentionShape& s, int i, int j0) {
    return i < s.T ? visible_keys(s, i) - j0 : 0;
}

// Keys the block of queries b0 .. b0 + kFlashBr - 1 walks: those its last query sees.
__host__ __device__ inline int flash_block_keys(const AttentionShape& s, int b0) {
    const int last = b0 + kFlashBr < s.T ? b0 + kFlashBr - 1 : s.T - 1;
    return visible_keys(s, last);
}

// Keys a warp's rows i0 .. i0 + rows - 1 need (0 when they all lie past T):
// tiles from there on are skipped.
__host__ __device__ inline int flash_warp_keys(const AttentionShape& s, int i0, int rows) {
    if (i0 >= s.T) return 0;
    return visible_keys(s, i0 + rows < s.T ? i0 + rows - 1 : s.T - 1);
}

// Keys in the tile starting at j0: kFlashBc, or fewer at the end of the sequence.
__host__ __device__ inline int flash_tile_keys(const AttentionShape& s, int j0) {
    return s.S - j0 < kFlashBc ? s.S - j0 : kFlashBc;
}

// One query row's online softmax: the largest score m and the sum l of
// e^(score - m) over the tiles seen so far (m = -inf before the first).
struct RunningSoftmax {
    float m = -INFINITY, l = 0.0f;

    // A tile whose largest visible score is tile_max arrives: m becomes the
    // larger of the two and l is rescaled to it. Returns alpha = e^(m_old - m_new),
    // the factor for the output summed so far (0 on the first tile, 1 when the
    // max stays).
    __host__ __device__ float rescale_to(float tile_max) {
        const float m_new = fmaxf(m, tile_max);
        const float alpha = expf(m - m_new);
        m = m_new;
        l *= alpha;
        return alpha;
    }

    // The tile's sum of e^(score - m), taken after rescale_to.
    __host__ __device__ void add(float tile_sum) { l += tile_sum; }
};

}  // namespace pd::gpu
