#include "engine/attention.hpp"

#include <algorithm>
#include <cmath>

#include "engine/attention_kernels.hpp"
#include "engine/ops.hpp"
#include "engine/team.hpp"

// attend_one() is the plain attention of one query that the labs read; the
// fast kernels of both phases are in attention_kernels.cpp, and this file
// splits their work among the threads.

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
                       int T, int n_heads, int window) {
    const int D = c.head_dim, stride = n_heads * D;
    const int kQB = prefill_block_queries();
    const int nblocks = (T + kQB - 1) / kQB;
    // Items: (query block, head). Later blocks see more keys: handed out first.
    parallel_items(nblocks * n_heads, Schedule::dynamic, [&](int it) {
        const int qb = nblocks - 1 - it / n_heads, h = it % n_heads;
        const int kv_h = kv_head_for(h, n_heads, c.n_kv_heads);
        const int t0 = qb * kQB, nq = std::min(kQB, T - t0);
        attention_prefill_block(out + h * D, q + h * D, stride, contiguous_tiles(kv_key(c, layer, b, kv_h, 0)),
                                contiguous_tiles(kv_value(c, layer, b, kv_h, 0)), start, t0, nq, D, window);
    });
}

void attention_decode(float* out, const float* q, const KVCache& c, int layer, const int* slots,
                      const int* pos, int rows, int n_heads, int window) {
    const int D = c.head_dim, stride = n_heads * D;
    const int G = n_heads / c.n_kv_heads;
    // Items: (row, KV head, slice of at most kMaxDecodeGroup of its query heads).
    const int slices = (G + kMaxDecodeGroup - 1) / kMaxDecodeGroup, per_row = c.n_kv_heads * slices;
    parallel_items(rows * per_row, Schedule::fixed, [&](int it) {
        const int r = it / per_row, kv_h = (it % per_row) / slices, sl = it % slices;
        const int h0 = kv_h * G + sl * kMaxDecodeGroup, g = std::min(kMaxDecodeGroup, G - sl * kMaxDecodeGroup);
        attention_decode_group(out + std::size_t(r) * stride + h0 * D, q + std::size_t(r) * stride + h0 * D,
                               contiguous_tiles(kv_key(c, layer, slots[r], kv_h, 0)),
                               contiguous_tiles(kv_value(c, layer, slots[r], kv_h, 0)),
                               first_visible_key(pos[r], window), pos[r] + 1, g, D);
    });
}

// One KV head's keys (values) of one layer through a sequence's block table.
static KvTiles key_tiles(const PagedKVCache& c, int layer, const BlockTable& t, int kv_h) {
    return KvTiles{paged_key_tile(c, layer, 0, kv_h), t.blocks.data(), c.block_stride(), c.block_size};
}
static KvTiles value_tiles(const PagedKVCache& c, int layer, const BlockTable& t, int kv_h) {
    return KvTiles{paged_value_tile(c, layer, 0, kv_h), t.blocks.data(), c.block_stride(), c.block_size};
}

void attention_paged(float* out, const float* q, const PagedKVCache& c, int layer, std::span<const PagedSpan> spans,
                     int n_heads, int window) {
    const int D = c.head_dim, stride = n_heads * D, G = n_heads / c.n_kv_heads;
    const int kQB = prefill_block_queries(), slices = (G + kMaxDecodeGroup - 1) / kMaxDecodeGroup;
    // Items of a decode span: (KV head, slice of its query heads), as attention_decode.
    // Of a prefill span: (query block, head), later blocks first, as attention_prefill.
    auto decode_span = [](const PagedSpan& s) { return s.n == 1 && !s.chunk; };
    auto items_of = [&](const PagedSpan& s) {
        return decode_span(s) ? c.n_kv_heads * slices : (s.n + kQB - 1) / kQB * n_heads;
    };
    int total = 0;
    for (const PagedSpan& s : spans) total += items_of(s);
    parallel_items(total, Schedule::dynamic, [&](int it) {
        std::size_t i = 0;
        while (it >= items_of(spans[i])) it -= items_of(spans[i++]);
        const PagedSpan& s = spans[i];
        float* o = out + std::size_t(s.row0) * stride;
        const float* qs = q + std::size_t(s.row0) * stride;
        if (decode_span(s)) {
            const int kv_h = it / slices, sl = it % slices;
            const int h0 = kv_h * G + sl * kMaxDecodeGroup, g = std::min(kMaxDecodeGroup, G - sl * kMaxDecodeGroup);
            attention_decode_group(o + h0 * D, qs + h0 * D, key_tiles(c, layer, *s.table, kv_h),
                                   value_tiles(c, layer, *s.table, kv_h), first_visible_key(s.start, window), s.start + 1, g, D);
        } else {
            const int nblocks = (s.n + kQB - 1) / kQB, qb = nblocks - 1 - it / n_heads, h = it % n_heads;
            const int kv_h = kv_head_for(h, n_heads, c.n_kv_heads), t0 = qb * kQB;
            attention_prefill_block(o + h * D, qs + h * D, stride, key_tiles(c, layer, *s.table, kv_h),
                                    value_tiles(c, layer, *s.table, kv_h), s.start, t0, std::min(kQB, s.n - t0), D, window);
        }
    });
}

}  // namespace pd
