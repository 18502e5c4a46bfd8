// The index math of the KV writes (kv_write and rope_kv_write in
// kv_cache.cu), as small __host__ __device__ functions: the kernels call them
// on the GPU, and tests/gpu/test_kv_write_index.cpp runs their grid-stride
// loops with them on the CPU against the CPU engine's rope and kv_write, over
// a shuffled block table, ragged positions and GQA shapes.
//
//   kv_write       element i of the rows' k (or v) values: row r, its value j,
//                  which is element d of KV head h
//   rope_kv_write  element i: rotary pair j of head h of row r, over the row's
//                  query heads and then its key heads (a [q | k | v] row)
//   rotation       one pair, the same arithmetic for both rope kernels
// Where an element lands in the cache is KVLayer::row (kv_cache.cuh).
#pragma once

#include <cuda_runtime.h>

namespace pd::gpu {

struct KvWriteElement {
    long r;    // the row (a token: slots[r], pos[r])
    int j;     // its value, 0 .. n_kv_heads * head_dim - 1
    int h, d;  // that is element d of KV head h
};
__host__ __device__ inline KvWriteElement kv_write_element(long i, int n_kv_heads, int head_dim) {
    const int per_row = n_kv_heads * head_dim;
    const int j = int(i % per_row);
    return {i / per_row, j, j / head_dim, j % head_dim};
}

struct RopePair {
    long r;  // the row
    int h;   // its head: 0 .. n_heads-1 query heads, then the key heads
    int j;   // the pair (x[j], x[j + head_dim / 2]) of that head
};
__host__ __device__ inline RopePair rope_pair(long i, int n_heads, int n_kv_heads, int head_dim) {
    const int half = head_dim / 2;
    const long per_row = long(n_heads + n_kv_heads) * half;
    const int rem = int(i % per_row);
    return {i / per_row, rem / half, rem % half};
}

// Rotary embedding ("rotate half") of one pair (a, b) = (x[j], x[j + D/2]) by
// the angle whose cosine and sine are c and s. The rope kernel (ops.cu) and
// the fused rope + KV write both call it, so they round alike.
__host__ __device__ inline float2 rotate_pair(float a, float b, float c, float s) {
    return make_float2(a * c - b * s, b * c + a * s);
}

}  // namespace pd::gpu
