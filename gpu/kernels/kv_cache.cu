// The device KV cache; the CPU twins are src/engine/kv_cache.cpp and
// src/engine/paged_kv_cache.cpp.
#include "kv_cache.cuh"

#include <numeric>

#include "common.cuh"
#include "kv_write_index.cuh"

namespace pd::gpu {

namespace {

// T: float or __nv_bfloat16, the cache's element type (K, V: the layer's k, v or k16, v16).
template <typename T>
__global__ void kv_write_kernel(KVLayer c, T* K, T* V, const float* k_new, const float* v_new, int stride,
                                const int* slots, const int* pos, long n) {
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        const KvWriteElement e = kv_write_element(i, c.n_kv_heads, c.head_dim);
        const std::size_t dst = c.row(slots[e.r], e.h, pos[e.r]) + e.d;
        store(K + dst, k_new[e.r * stride + e.j]);
        store(V + dst, v_new[e.r * stride + e.j]);
    }
}

// Thread i takes rotary pair j (of D/2) of head h of row r, over the row's
// n_heads query heads and then its n_kv_heads key heads (which follow the q
// heads in a [q | k | v] row): a q pair is rotated in place; a k pair is
// rotated into the cache, and the v pair at the same place of the row's
// value head goes there too, so the k threads cover all of K and V.
template <typename T>
__global__ void rope_kv_write_kernel(KVLayer c, T* K, T* V, float* qkv, int stride, int n_heads,
                                     const int* slots, const int* pos, const float* cos_table,
                                     const float* sin_table, long n) {
    const int D = c.head_dim, half = D / 2;
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        const auto [r, h, j] = rope_pair(i, n_heads, c.n_kv_heads, D);
        const int p = pos[r];
        float* x = qkv + r * stride + long(h) * D;  // q head h, or k head h - n_heads
        const float2 rot = rotate_pair(x[j], x[j + half], cos_table[long(p) * half + j],
                                       sin_table[long(p) * half + j]);
        if (h < n_heads) {
            x[j] = rot.x;
            x[j + half] = rot.y;
            continue;
        }
        const int kv_h = h - n_heads;
        const float* v = x + long(c.n_kv_heads) * D;  // the value head kv_h, KV heads after k head kv_h
        const std::size_t dst = c.row(slots[r], kv_h, p);
        store(K + dst + j, rot.x);
        store(K + dst + j + half, rot.y);
        store(V + dst + j, v[j]);
        store(V + dst + j + half, v[j + half]);
    }
}

DeviceKVCache make_pool(int n_layers, int n_kv_heads, int head_dim, int block_size, int n_blocks, int max_seq,
                        KVPrecision p) {
    DeviceKVCache c;
    c.n_layers = n_layers, c.n_kv_heads = n_kv_heads, c.head_dim = head_dim;
    c.block_size = block_size, c.n_blocks = n_blocks, c.max_seq = max_seq;
    c.precision = p;
    const std::size_t n = std::size_t(n_layers) * c.layer_elems();
    auto allocate = [n](auto& k, auto& v) {  // the pair of the cache's precision; the other stays empty
        k.resize(n);
        v.resize(n);
        k.zero();
        v.zero();
    };
    if (p == KVPrecision::bf16) allocate(c.k16, c.v16);
    else allocate(c.k, c.v);
    return c;
}

}  // namespace

DeviceKVCache make_device_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim,
                                   KVPrecision p) {
    DeviceKVCache c = make_pool(n_layers, n_kv_heads, head_dim, max_seq, batch, max_seq, p);
    std::vector<int> identity(batch);
    std::iota(identity.begin(), identity.end(), 0);
    c.table.upload(identity);
    c.batch = batch;
    c.seq_len.assign(batch, 0);
    return c;
}

DeviceKVCache make_device_paged_kv_cache(int n_layers, int n_kv_heads, int head_dim, int block_size,
                                         int n_blocks, int max_seq, KVPrecision p) {
    return make_pool(n_layers, n_kv_heads, head_dim, block_size, n_blocks, max_seq, p);
}

void set_block_tables(DeviceKVCache& c, const std::vector<int>& rows, int batch, cudaStream_t s) {
    const std::size_t n = std::size_t(batch) * c.max_blocks();
    PD_GPU_REQUIRE(rows.size() >= n);
    c.table.ensure(n);
    c.batch = batch;
    if (n) PD_CUDA(cudaMemcpyAsync(c.table.data(), rows.data(), n * sizeof(int), cudaMemcpyHostToDevice, s));
}

void kv_write(KVLayer c, const float* k_new, const float* v_new, int stride, const int* slots,
              const int* pos, int rows, cudaStream_t s) {
    const long n = long(rows) * c.n_kv_heads * c.head_dim;
    if (n <= 0) return;
    with_kv_elements(c, [&](auto* K, auto* V) {
        kv_write_kernel<<<grid_for(n, 256), 256, 0, s>>>(c, K, V, k_new, v_new, stride, slots, pos, n);
    });
    PD_CUDA_LAUNCHED();
}

void rope_kv_write(KVLayer c, float* qkv, int stride, int n_heads, const int* slots, const int* pos,
                   const float* cos_table, const float* sin_table, int rows, cudaStream_t s) {
    PD_GPU_REQUIRE(c.head_dim % 2 == 0 && c.n_kv_heads > 0);
    const long n = long(rows) * (n_heads + c.n_kv_heads) * (c.head_dim / 2);
    if (n <= 0) return;
    with_kv_elements(c, [&](auto* K, auto* V) {
        rope_kv_write_kernel<<<grid_for(n, 256), 256, 0, s>>>(c, K, V, qkv, stride, n_heads, slots, pos, cos_table,
                                                              sin_table, n);
    });
    PD_CUDA_LAUNCHED();
}

}  // namespace pd::gpu
