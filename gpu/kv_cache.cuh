// The KV cache on the GPU, addressed through a block table. Mirrors
// src/engine/kv_cache.hpp (contiguous, track 1) and src/engine/paged_kv_cache.hpp
// (paged, track 2) with ONE layout and ONE addressing rule, so one kv_write and
// one decode-attention kernel serve both:
//
//   K, V per layer : (n_blocks, n_kv_heads, block_size, head_dim) f32
//   table          : (batch, max_blocks) block ids; sequence b's position p
//                    lives in block table[b][p / block_size], row p % block_size
//
// Within a block each KV head's (block_size, head_dim) tile is contiguous, so
// consecutive keys of one head are consecutive rows of head_dim floats: a warp
// reading a few keys with 16-byte loads reads whole 128-byte lines, and a
// block of 16 positions is 4 KiB per head (head_dim 64), far above the 128
// bytes a coalesced read needs. (Heads outermost within a block, rather than
// positions, is what makes a head's keys contiguous.)
//
// The contiguous cache is the degenerate case: block_size = max_seq, one block
// per sequence, table[b] = {b}. Its memory is then exactly the old
// (batch, n_kv_heads, max_seq, head_dim) layout, which the cuBLAS prefill
// attention relies on. The paged cache has blocks of a few positions and a
// table the engine uploads before each pass (the block allocator, the prefix
// cache and the tables' contents stay on the host). Sequence lengths stay on
// the host too: the host decides every position and passes them to the kernels.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda_check.cuh"

namespace pd::gpu {

// One layer's K and V and the table that addresses them: what the kernels read.
struct KVLayer {
    float* k = nullptr;          // (n_blocks, n_kv_heads, block_size, head_dim)
    float* v = nullptr;
    const int* table = nullptr;  // (batch, max_blocks) block ids, device memory
    int batch = 0;               // sequences the table has rows for
    int max_blocks = 0;          // table entries per sequence
    int block_size = 0;          // positions per block
    int n_kv_heads = 0, max_seq = 0, head_dim = 0;

    // Offset in floats of the first row of KV head h's tile in `block`.
    __host__ __device__ std::size_t tile(int block, int h) const {
        return (std::size_t(block) * n_kv_heads + h) * block_size * head_dim;
    }
    // Offset in floats of the row (sequence b, KV head h, position pos): reads the table.
    __device__ std::size_t row(int b, int h, int pos) const {
        const int block = table[std::size_t(b) * max_blocks + pos / block_size];
        return tile(block, h) + std::size_t(pos % block_size) * head_dim;
    }
};

struct DeviceKVCache {
    int n_layers = 0, n_kv_heads = 0, head_dim = 0;
    int block_size = 0, n_blocks = 0;  // the pool: n_blocks blocks of block_size positions
    int max_seq = 0;                   // positions one sequence may reach
    int batch = 0;                     // sequences the table holds now
    DeviceBuffer<float> k, v;          // (layer, block, kv_head, block_size, head_dim)
    DeviceBuffer<int> table;           // (batch, max_blocks())
    std::vector<int> seq_len;          // contiguous cache: (batch) usable positions, on the host

    int max_blocks() const { return (max_seq + block_size - 1) / block_size; }
    std::size_t layer_elems() const { return std::size_t(n_blocks) * n_kv_heads * block_size * head_dim; }
    KVLayer layer(int l) {
        return {k.data() + l * layer_elems(), v.data() + l * layer_elems(), table.data(), batch, max_blocks(),
                block_size, n_kv_heads, max_seq, head_dim};
    }
    std::size_t capacity_bytes() const { return k.bytes() + v.bytes(); }
};

// Device bytes of K and V of a pool (all layers): what the engine checks
// against free memory before allocating it.
inline std::size_t device_kv_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, int n_blocks) {
    return 2 * sizeof(float) * std::size_t(n_layers) * n_blocks * n_kv_heads * block_size * head_dim;
}

// The contiguous cache (zeroed) on the current device: `batch` blocks of
// max_seq positions and the identity table, table[b] = {b}.
DeviceKVCache make_device_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim);

// A paged pool (zeroed) of n_blocks blocks of block_size positions; its table
// is empty until set_block_tables.
DeviceKVCache make_device_paged_kv_cache(int n_layers, int n_kv_heads, int head_dim, int block_size,
                                         int n_blocks, int max_seq);

// Uploads `batch` rows of block ids, (batch, max_blocks()) row-major on the
// host (entries past a sequence's blocks are never read), growing the table
// when needed. Asynchronous on `s` (pageable source: the copy has left
// `rows` when this returns).
void set_block_tables(DeviceKVCache& c, const std::vector<int>& rows, int batch, cudaStream_t s);

// Writes the K and V of `rows` new tokens into one layer: row r's k
// (n_kv_heads * head_dim floats at k_new + r * stride) goes to sequence
// slots[r] at position pos[r], through the table, and likewise its v. slots
// and pos are device arrays. The twins are pd::kv_write (contiguous) and
// pd::paged_write (paged), called once per row.
void kv_write(KVLayer c, const float* k_new, const float* v_new, int stride, const int* slots,
              const int* pos, int rows, cudaStream_t s);

}  // namespace pd::gpu
