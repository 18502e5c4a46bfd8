// The attention kernels of both phases, in Highway (one source for every
// instruction set; see isa.hpp). attention.cpp splits the work into these
// calls and runs them on the threads.
#pragma once

#include <climits>
#include <cstddef>

namespace pd {

// One KV head's cached keys (or values) in one layer, as tiles of contiguous
// (rows, head_dim) memory: the contiguous cache is a single tile, the paged
// cache one tile per block, found through the block table. The kernels walk
// the keys tile by tile, so one kernel serves both layouts.
struct KvTiles {
    const float* base = nullptr;   // contiguous: row 0; paged: this head's tile in block 0
    const int* blocks = nullptr;   // paged: the block table; null when contiguous
    std::size_t block_stride = 0;  // paged: floats from one block's tile to the next block's
    int tile_rows = INT_MAX;       // rows per tile (paged: the block size)

    // The tile whose first row is row j (j a multiple of tile_rows).
    const float* tile(int j) const { return blocks ? base + std::size_t(blocks[j / tile_rows]) * block_stride : base; }
};
inline KvTiles contiguous_tiles(const float* rows) { return KvTiles{rows}; }

// Decode: G query heads (q: G rows of D, contiguous) that share one KV head,
// against its n cached keys (K, V: n rows of D, in tiles). out: G rows of D.
// G <= kMaxDecodeGroup.
constexpr int kMaxDecodeGroup = 8;
void attention_decode_group(float* out, const float* q, const KvTiles& K, const KvTiles& V, int n, int G, int D);

// Prefill: one block of nq <= prefill_block_queries() queries of one head
// (rows t0 .. t0+nq-1 of q and out, row stride `stride`; positions
// start+t0 ..) against keys 0 .. start+t0+nq-1 of its KV head, causal.
void attention_prefill_block(float* out, const float* q, std::size_t stride, const KvTiles& K, const KvTiles& V,
                             int start, int t0, int nq, int D);

// Queries per prefill block: two vectors' worth, so 32 with AVX-512.
int prefill_block_queries();

}  // namespace pd
