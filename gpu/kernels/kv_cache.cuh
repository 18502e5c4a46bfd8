// The KV cache on the GPU, addressed through a block table. Mirrors
// src/engine/kv_cache.hpp (contiguous, track 1) and src/engine/paged_kv_cache.hpp
// (paged, track 2) with ONE layout and ONE addressing rule, so one kv_write and
// one decode-attention kernel serve both:
//
//   K, V per layer : (n_blocks, n_kv_heads, block_size, head_dim) f32, or
//                    bf16 (PDLAB_CUDA_KV=bf16: half the bytes decode reads)
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
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda_check.cuh"

namespace pd::gpu {

// The element type of the cached K and V. f32 (the default) holds what the
// CPU's cache holds; bf16 halves the bytes every decode step reads, and is
// read only by the kernels that take it: decode attention and the flash
// prefill (kv_write and rope_kv_write write it). The cuBLAS prefill
// attention of f32 models reads f32 K/V.
enum class KVPrecision { f32, bf16 };

inline std::size_t kv_elem_bytes(KVPrecision p) { return p == KVPrecision::bf16 ? 2 : sizeof(float); }

// One layer's K and V and the table that addresses them: what the kernels
// read. K and V are f32 (k, v) or bf16 bits (k16, v16); the other pair is null.
struct KVLayer {
    float* k = nullptr;          // (n_blocks, n_kv_heads, block_size, head_dim)
    float* v = nullptr;
    const int* table = nullptr;  // (batch, max_blocks) block ids, device memory
    int batch = 0;               // sequences the table has rows for
    int max_blocks = 0;          // table entries per sequence
    int block_size = 0;          // positions per block
    int n_kv_heads = 0, max_seq = 0, head_dim = 0;
    std::uint16_t* k16 = nullptr;  // the same layout in bf16, for a bf16 cache
    std::uint16_t* v16 = nullptr;

    __host__ __device__ bool bf16() const { return k16 != nullptr; }
    // Offset in elements of the first row of KV head h's tile in `block`.
    __host__ __device__ std::size_t tile(int block, int h) const {
        return (std::size_t(block) * n_kv_heads + h) * block_size * head_dim;
    }
    // Offset in elements of the row (sequence b, KV head h, position pos): reads the table.
    __host__ __device__ std::size_t row(int b, int h, int pos) const {
        const int block = table[std::size_t(b) * max_blocks + pos / block_size];
        return tile(block, h) + std::size_t(pos % block_size) * head_dim;
    }
};

struct DeviceKVCache {
    int n_layers = 0, n_kv_heads = 0, head_dim = 0;
    int block_size = 0, n_blocks = 0;  // the pool: n_blocks blocks of block_size positions
    int max_seq = 0;                   // positions one sequence may reach
    int batch = 0;                     // sequences the table holds now
    KVPrecision precision = KVPrecision::f32;
    DeviceBuffer<float> k, v;          // f32: (layer, block, kv_head, block_size, head_dim)
    DeviceBuffer<std::uint16_t> k16, v16;  // bf16: the same (the other pair stays empty)
    DeviceBuffer<int> table;           // (batch, max_blocks())
    std::vector<int> seq_len;          // contiguous cache: (batch) usable positions, on the host

    int max_blocks() const { return (max_seq + block_size - 1) / block_size; }
    std::size_t layer_elems() const { return std::size_t(n_blocks) * n_kv_heads * block_size * head_dim; }
    KVLayer layer(int l) {
        KVLayer c{nullptr, nullptr, table.data(), batch, max_blocks(), block_size, n_kv_heads, max_seq, head_dim};
        const std::size_t at = std::size_t(l) * layer_elems();
        if (precision == KVPrecision::bf16) c.k16 = k16.data() + at, c.v16 = v16.data() + at;
        else c.k = k.data() + at, c.v = v.data() + at;
        return c;
    }
    std::size_t capacity_bytes() const { return k.bytes() + v.bytes() + k16.bytes() + v16.bytes(); }
};

// Device bytes of K and V of a pool (all layers) of `p` elements: what the
// engine checks against free memory before allocating it.
inline std::size_t device_kv_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, int n_blocks,
                                   KVPrecision p) {
    return 2 * kv_elem_bytes(p) * std::size_t(n_layers) * n_blocks * n_kv_heads * block_size * head_dim;
}

// The contiguous cache (zeroed) on the current device: `batch` blocks of
// max_seq positions and the identity table, table[b] = {b}.
DeviceKVCache make_device_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim,
                                   KVPrecision p = KVPrecision::f32);

// A paged pool (zeroed) of n_blocks blocks of block_size positions; its table
// is empty until set_block_tables.
DeviceKVCache make_device_paged_kv_cache(int n_layers, int n_kv_heads, int head_dim, int block_size,
                                         int n_blocks, int max_seq, KVPrecision p = KVPrecision::f32);

// Uploads `batch` rows of block ids, (batch, max_blocks()) row-major on the
// host (entries past a sequence's blocks are never read), growing the table
// when needed. Asynchronous on `s` (pageable source: the copy has left
// `rows` when this returns).
void set_block_tables(DeviceKVCache& c, const std::vector<int>& rows, int batch, cudaStream_t s);

// Writes the K and V of `rows` new tokens into one layer: row r's k
// (n_kv_heads * head_dim floats at k_new + r * stride) goes to sequence
// slots[r] at position pos[r], through the table, and likewise its v. slots
// and pos are device arrays. The twins are pd::kv_write (contiguous) and
// pd::paged_write (paged), called once per row. A bf16 cache stores each
// value rounded to nearest even.
void kv_write(KVLayer c, const float* k_new, const float* v_new, int stride, const int* slots,
              const int* pos, int rows, cudaStream_t s);

// Llama's steps 4 and 5 in one kernel: rotary on the q and k heads of `rows`
// [q | k | v] rows (qkv, row stride `stride`; n_heads query heads, then
// c.n_kv_heads key heads, then as many value heads, head_dim each) at
// positions pos[r], the q heads rotated in place, the rotated k and the v
// written into the cache as kv_write does. The row's k part is left
// unrotated: every attention path reads K from the cache. The same numbers
// as rope() (ops.cuh) and then kv_write(); the twins are pd::rope, then
// pd::kv_write (contiguous) or pd::paged_write (paged). cos/sin tables
// (max_seq, head_dim/2); slots, pos on the device.
void rope_kv_write(KVLayer c, float* qkv, int stride, int n_heads, const int* slots, const int* pos,
                   const float* cos_table, const float* sin_table, int rows, cudaStream_t s);

}  // namespace pd::gpu
