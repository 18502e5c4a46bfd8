// The KV cache on the GPU. Mirrors src/engine/kv_cache.hpp: the same layout, per
// layer K and V each (batch, n_kv_heads, max_seq, head_dim) in f32, in device
// memory; the sequence lengths stay on the host, since the host decides every
// position and passes them to the kernels.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda_check.cuh"

namespace pd::gpu {

// One layer's K and V: what the attention kernels read.
struct KVLayer {
    float* k = nullptr;  // (batch, n_kv_heads, max_seq, head_dim)
    float* v = nullptr;
    int batch = 0, n_kv_heads = 0, max_seq = 0, head_dim = 0;

    // Offset of the row (b, h, pos) in k or v, in floats.
    __host__ __device__ std::size_t row(int b, int h, int pos) const {
        return ((std::size_t(b) * n_kv_heads + h) * max_seq + pos) * head_dim;
    }
};

struct DeviceKVCache {
    int n_layers = 0, batch = 0, n_kv_heads = 0, max_seq = 0, head_dim = 0;
    DeviceBuffer<float> k, v;   // (layer, batch, n_kv_heads, max_seq, head_dim)
    std::vector<int> seq_len;   // (batch) usable positions per sequence, on the host

    std::size_t layer_elems() const {
        return std::size_t(batch) * n_kv_heads * max_seq * head_dim;
    }
    KVLayer layer(int l) {
        return {k.data() + l * layer_elems(), v.data() + l * layer_elems(), batch, n_kv_heads, max_seq,
                head_dim};
    }
    std::size_t capacity_bytes() const { return k.bytes() + v.bytes(); }
};

// Allocates the cache (zeroed) on the current device.
DeviceKVCache make_device_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim);

// Writes the K and V of `rows` new tokens into one layer: row r's k
// (n_kv_heads * head_dim floats at k_new + r * stride) goes to sequence
// slots[r] at position pos[r], and likewise its v. slots and pos are device
// arrays. The twin is pd::kv_write, called once per row.
void kv_write(KVLayer c, const float* k_new, const float* v_new, int stride, const int* slots,
              const int* pos, int rows, cudaStream_t s);

}  // namespace pd::gpu
