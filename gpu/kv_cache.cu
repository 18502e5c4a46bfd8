// The device KV cache; the CPU twins are src/engine/kv_cache.cpp and
// src/engine/paged_kv_cache.cpp.
#include "kv_cache.cuh"

#include <numeric>

#include "common.cuh"

namespace pd::gpu {

namespace {

__global__ void kv_write_kernel(KVLayer c, const float* k_new, const float* v_new, int stride,
                                const int* slots, const int* pos, long n) {
    const int D = c.head_dim, HD = c.n_kv_heads * c.head_dim;
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        const long r = i / HD;
        const int j = int(i % HD), h = j / D, d = j % D;
        const std::size_t dst = c.row(slots[r], h, pos[r]) + d;
        c.k[dst] = k_new[r * stride + j];
        c.v[dst] = v_new[r * stride + j];
    }
}

DeviceKVCache make_pool(int n_layers, int n_kv_heads, int head_dim, int block_size, int n_blocks, int max_seq) {
    DeviceKVCache c;
    c.n_layers = n_layers, c.n_kv_heads = n_kv_heads, c.head_dim = head_dim;
    c.block_size = block_size, c.n_blocks = n_blocks, c.max_seq = max_seq;
    const std::size_t n = std::size_t(n_layers) * c.layer_elems();
    c.k.resize(n);
    c.v.resize(n);
    c.k.zero();
    c.v.zero();
    return c;
}

}  // namespace

DeviceKVCache make_device_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim) {
    DeviceKVCache c = make_pool(n_layers, n_kv_heads, head_dim, max_seq, batch, max_seq);
    std::vector<int> identity(batch);
    std::iota(identity.begin(), identity.end(), 0);
    c.table.upload(identity);
    c.batch = batch;
    c.seq_len.assign(batch, 0);
    return c;
}

DeviceKVCache make_device_paged_kv_cache(int n_layers, int n_kv_heads, int head_dim, int block_size,
                                         int n_blocks, int max_seq) {
    return make_pool(n_layers, n_kv_heads, head_dim, block_size, n_blocks, max_seq);
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
    kv_write_kernel<<<grid_for(n, 256), 256, 0, s>>>(c, k_new, v_new, stride, slots, pos, n);
    PD_CUDA_LAUNCHED();
}

}  // namespace pd::gpu
