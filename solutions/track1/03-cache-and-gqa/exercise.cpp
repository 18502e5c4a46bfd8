// Lab 03 reference solution.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pd::lab03 {

namespace {

void check_seq(const KVCache& c, int seq) {
    if (seq < 0 || seq >= c.batch) fail("sequence {} is outside the cache's batch of {}", seq, c.batch);
}

void check_layer(const KVCache& c, int layer) {
    if (layer < 0 || layer >= c.n_layers) fail("layer {} is outside 0..{}", layer, c.n_layers - 1);
}

}  // namespace

int kv_head_for_query(int h, int n_heads, int n_kv_heads) {
    if (n_heads < 1 || n_kv_heads < 1) fail("head counts must be positive, got {} query and {} KV heads", n_heads, n_kv_heads);
    if (n_heads % n_kv_heads != 0)
        fail("{} query heads cannot be split evenly among {} KV heads", n_heads, n_kv_heads);
    if (h < 0 || h >= n_heads) fail("query head {} is outside 0..{}", h, n_heads - 1);
    const int group_size = n_heads / n_kv_heads;  // consecutive query heads share one KV head
    return h / group_size;
}

std::size_t kv_cache_bytes(const Config& c, int batch, int tokens, std::size_t bytes_per_elem) {
    if (batch < 0) fail("batch must be >= 0, got {}", batch);
    if (tokens < 0) fail("tokens must be >= 0, got {}", tokens);
    if (bytes_per_elem < 1) fail("bytes per element must be >= 1, got {}", bytes_per_elem);
    // K and V, for every layer, sequence, KV head, position and head dimension.
    return std::size_t(2) * std::size_t(c.n_layers) * std::size_t(batch) * std::size_t(c.n_kv_heads) *
           std::size_t(tokens) * std::size_t(c.head_dim) * bytes_per_elem;
}

void append_kv(KVCache& cache, int layer, int seq, const float* k_new, const float* v_new) {
    check_layer(cache, layer);
    check_seq(cache, seq);
    const int pos = cache.seq_len[std::size_t(seq)];  // the first free position (positions start at 0)
    if (pos >= cache.max_seq)
        fail("sequence {} is full: all {} positions are in use", seq, cache.max_seq);
    const std::size_t D = std::size_t(cache.head_dim);
    for (int h = 0; h < cache.n_kv_heads; h++) {
        std::memcpy(kv_key(cache, layer, seq, h, pos), k_new + std::size_t(h) * D, sizeof(float) * D);
        std::memcpy(kv_value(cache, layer, seq, h, pos), v_new + std::size_t(h) * D, sizeof(float) * D);
    }
}

int commit_kv(KVCache& cache, int seq) {
    check_seq(cache, seq);
    int& len = cache.seq_len[std::size_t(seq)];
    if (len >= cache.max_seq) fail("sequence {} is full: all {} positions are in use", seq, cache.max_seq);
    return ++len;
}

void attend_one_head(float* out, const float* q, const KVCache& cache, int layer, int seq, int kv_head,
                     int n_keys) {
    check_layer(cache, layer);
    check_seq(cache, seq);
    if (kv_head < 0 || kv_head >= cache.n_kv_heads)
        fail("KV head {} is outside 0..{}", kv_head, cache.n_kv_heads - 1);
    if (n_keys < 1 || n_keys > cache.max_seq)
        fail("n_keys must be between 1 and the cache's {} positions, got {}", cache.max_seq, n_keys);
    const int D = cache.head_dim;
    const float scale = 1.0f / std::sqrt(float(D));
    std::vector<float> p(std::size_t(n_keys), 0.0f);
    float mx = -INFINITY;
    for (int s = 0; s < n_keys; s++) {
        const float* k = kv_key(cache, layer, seq, kv_head, s);
        float dot = 0.0f;
        for (int i = 0; i < D; i++) dot += q[i] * k[i];
        p[std::size_t(s)] = dot * scale;
        mx = std::max(mx, p[std::size_t(s)]);
    }
    float sum = 0.0f;
    for (float& x : p) sum += x = std::exp(x - mx);
    for (int i = 0; i < D; i++) out[i] = 0.0f;
    for (int s = 0; s < n_keys; s++) {
        const float* v = kv_value(cache, layer, seq, kv_head, s);
        const float w = p[std::size_t(s)] / sum;
        for (int i = 0; i < D; i++) out[i] += w * v[i];
    }
}

}  // namespace pd::lab03
