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

    // Row j (of D floats); rows j .. up to the end of its tile follow it contiguously.
    const float* row(int j, int D) const {
        const float* tile = blocks ? base + std::size_t(blocks[j / tile_rows]) * block_stride : base;
        return tile + std::size_t(j % tile_rows) * D;
    }
};
inline KvTiles contiguous_tiles(const float* rows) { return KvTiles{rows}; }

// Decode: G query heads (q: G rows of D, contiguous) that share one KV head,
// against its cached keys first .. n-1 (K, V: rows of D, in tiles; first > 0
// under a sliding window). out: G rows of D. G <= kMaxDecodeGroup.
constexpr int kMaxDecodeGroup = 8;
void attention_decode_group(float* out, const float* q, const KvTiles& K, const KvTiles& V, int first, int n, int G,
                            int D);

// Prefill: one block of nq <= prefill_block_queries() queries of one head
// (rows t0 .. t0+nq-1 of q and out, row stride `stride`; positions
// start+t0 ..) against the keys of its KV head, causal: the query at
// position p sees keys p-window+1 .. p (window 0: keys 0 .. p).
void attention_prefill_block(float* out, const float* q, std::size_t stride, const KvTiles& K, const KvTiles& V,
                             int start, int t0, int nq, int D, int window);

// The first key a query at position `pos` sees (window 0: no window).
inline int first_visible_key(int pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }

// Queries per prefill block: two vectors' worth, so 32 with AVX-512.
int prefill_block_queries();

}  // namespace pd
