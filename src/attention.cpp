#include "attention.hpp"

#include <omp.h>

#include <cmath>

#include "ops.hpp"

namespace pd {

void attend_one(float* out, const float* q, const KVCache& c, int layer, int b, int kv_h,
                int n_keys, float* scores) {
    const int D = c.head_dim;
    const float scale = 1.0f / std::sqrt(float(D));
    // scores[s] = q . k_s / sqrt(D)
    for (int s = 0; s < n_keys; s++) {
        const float* k = kv_key(c, layer, b, kv_h, s);
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int i = 0; i < D; i++) dot += q[i] * k[i];
        scores[s] = dot * scale;
    }
    softmax(scores, n_keys);
    // out = sum_s p_s v_s
    for (int i = 0; i < D; i++) out[i] = 0.0f;
    for (int s = 0; s < n_keys; s++) {
        const float* v = kv_value(c, layer, b, kv_h, s);
        const float p = scores[s];
#pragma omp simd
        for (int i = 0; i < D; i++) out[i] += p * v[i];
    }
}

void attention_prefill(float* out, const float* q, const KVCache& c, int layer, int b, int start,
                       int T, int n_heads, float* scratch) {
    const int D = c.head_dim, stride = n_heads * D;
    // Every (query, head) pair is independent. Later queries see more keys, so
    // a dynamic schedule keeps both threads busy to the end.
#pragma omp parallel for collapse(2) schedule(dynamic, 4)
    for (int t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            float* scores = scratch + std::size_t(omp_get_thread_num()) * c.max_seq;
            attend_one(out + std::size_t(t) * stride + h * D, q + std::size_t(t) * stride + h * D,
                       c, layer, b, kv_head_for(h, n_heads, c.n_kv_heads), start + t + 1, scores);
        }
}

void attention_decode(float* out, const float* q, const KVCache& c, int layer, const int* slots,
                      const int* pos, int rows, int n_heads, float* scratch) {
    const int D = c.head_dim, stride = n_heads * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < n_heads; h++) {
            float* scores = scratch + std::size_t(omp_get_thread_num()) * c.max_seq;
            attend_one(out + std::size_t(r) * stride + h * D, q + std::size_t(r) * stride + h * D,
                       c, layer, slots[r], kv_head_for(h, n_heads, c.n_kv_heads), pos[r] + 1,
                       scores);
        }
}

}  // namespace pd
