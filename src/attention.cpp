#include "attention.hpp"
#include "simd.hpp"

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* in the
// cvt/unpack/permute intrinsics, GCC bug 105593, fixed in 13): not our code.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>
#include <vector>

#include "ops.hpp"

// Two kernels, one per phase, and the plain attend_one() the labs read.
//
// Decode (one query per sequence, memory-bound): for each (sequence, KV head)
// the group of query heads that share it is served together, so each cached K
// and V row is read from memory once per group, not once per query head. Keys
// come in chunks of 64 with an online softmax (running max and sum, the
// accumulators rescaled when the max grows), so no scratch proportional to the
// context is needed and decode allocates nothing.
//
// Prefill (T queries, compute-bound): blocks of 32 queries of one head. The
// scores S^T (keys x 32 queries) come from a register-blocked product of K and
// the transposed, pre-scaled query block; the causal softmax runs down the
// columns (16 queries per vector); then O = P V, 4 query rows at a time. All
// AVX-512, with a vectorised exp. Its share of prefill FLOPs is small (about
// 6% at P = 512 for the bench model), but done one dot product at a time it
// would cost more than all the matrix products.

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

namespace {

#if defined(__AVX512F__)



// Mask of the valid lanes in 16-float chunk c of a D-float row (DC chunks).
inline __mmask16 chunk_mask(int c, int D) {
    int left = D - 16 * c;
    return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

// --- decode ---------------------------------------------------------------------

constexpr int kChunk = 64;     // keys per online-softmax step
constexpr int kMaxGroup = 8;   // query heads served per pass over a KV head

// G query heads (q: G rows of D, contiguous) against n keys of one KV head
// (K, V: n rows of D, contiguous). out: G rows of D.
template <int DC>
void decode_group(float* out, const float* q, const float* K, const float* V, int n, int G, int D) {
    const float scale = 1.0f / std::sqrt(float(D));
    alignas(64) float s[kMaxGroup][kChunk];
    alignas(64) float o[kMaxGroup][DC * 16];
    float m[kMaxGroup], l[kMaxGroup];
    __mmask16 cm[DC];
    for (int c = 0; c < DC; c++) cm[c] = chunk_mask(c, D);
    for (int i = 0; i < G; i++) {
        m[i] = -std::numeric_limits<float>::infinity();
        l[i] = 0;
        for (int c = 0; c < DC; c++) _mm512_store_ps(o[i] + 16 * c, _mm512_setzero_ps());
    }
    for (int j0 = 0; j0 < n; j0 += kChunk) {
        const int nc = std::min(kChunk, n - j0);
        // Scores: 16 keys at a time, one dot product per lane after reduce16.
        for (int i = 0; i < G; i++) {
            __m512 qv[DC];
            for (int c = 0; c < DC; c++) qv[c] = _mm512_maskz_loadu_ps(cm[c], q + std::size_t(i) * D + 16 * c);
            for (int jb = 0; jb < nc; jb += 16) {
                const int nk = std::min(16, nc - jb);
                __m512 acc[16];
                for (int t = 0; t < 16; t++) {
                    acc[t] = _mm512_setzero_ps();
                    if (t < nk) {
                        const float* k = K + std::size_t(j0 + jb + t) * D;
                        for (int c = 0; c < DC; c++)
                            acc[t] = _mm512_fmadd_ps(qv[c], _mm512_maskz_loadu_ps(cm[c], k + 16 * c), acc[t]);
                    }
                }
                __m512 sv = _mm512_mul_ps(simd::reduce16(acc), _mm512_set1_ps(scale));
                if (nk < 16)
                    sv = _mm512_mask_blend_ps(__mmask16((1u << nk) - 1),
                                              _mm512_set1_ps(-std::numeric_limits<float>::infinity()), sv);
                _mm512_store_ps(s[i] + jb, sv);
            }
            // Online softmax: new max, rescale what was accumulated, exponentiate.
            const int nb = (nc + 15) / 16;
            __m512 mv = _mm512_load_ps(s[i]);
            for (int jb = 1; jb < nb; jb++) mv = _mm512_max_ps(mv, _mm512_load_ps(s[i] + 16 * jb));
            float m_new = std::max(m[i], _mm512_reduce_max_ps(mv));
            float alpha = std::exp(m[i] - m_new);  // 0 on the first chunk (m = -inf)
            __m512 mn = _mm512_set1_ps(m_new), sum = _mm512_setzero_ps();
            for (int jb = 0; jb < nb; jb++) {
                __m512 p = simd::exp512(_mm512_sub_ps(_mm512_load_ps(s[i] + 16 * jb), mn));
                _mm512_store_ps(s[i] + 16 * jb, p);
                sum = _mm512_add_ps(sum, p);
            }
            l[i] = l[i] * alpha + _mm512_reduce_add_ps(sum);
            m[i] = m_new;
            if (alpha != 1.0f)
                for (int c = 0; c < DC; c++)
                    _mm512_store_ps(o[i] + 16 * c, _mm512_mul_ps(_mm512_load_ps(o[i] + 16 * c), _mm512_set1_ps(alpha)));
        }
        // o_i += sum_j p_ij v_j: each V row loaded once for up to 16/DC heads.
        constexpr int HB = DC >= 16 ? 1 : 16 / DC;
        for (int i0 = 0; i0 < G; i0 += HB) {
            const int hb = std::min(HB, G - i0);
            __m512 acc[HB][DC];
            for (int i = 0; i < HB; i++)
                for (int c = 0; c < DC; c++) acc[i][c] = i < hb ? _mm512_load_ps(o[i0 + i] + 16 * c) : _mm512_setzero_ps();
            for (int j = 0; j < nc; j++) {
                const float* v = V + std::size_t(j0 + j) * D;
                __m512 vv[DC];
                for (int c = 0; c < DC; c++) vv[c] = _mm512_maskz_loadu_ps(cm[c], v + 16 * c);
                for (int i = 0; i < HB; i++) {
                    if (i >= hb) break;
                    __m512 p = _mm512_set1_ps(s[i0 + i][j]);
                    for (int c = 0; c < DC; c++) acc[i][c] = _mm512_fmadd_ps(p, vv[c], acc[i][c]);
                }
            }
            for (int i = 0; i < hb; i++)
                for (int c = 0; c < DC; c++) _mm512_store_ps(o[i0 + i] + 16 * c, acc[i][c]);
        }
    }
    for (int i = 0; i < G; i++) {
        __m512 inv = _mm512_set1_ps(1.0f / l[i]);
        for (int c = 0; c < DC; c++)
            _mm512_mask_storeu_ps(out + std::size_t(i) * D + 16 * c, cm[c],
                                  _mm512_mul_ps(_mm512_load_ps(o[i] + 16 * c), inv));
    }
}

using DecodeFn = void (*)(float*, const float*, const float*, const float*, int, int, int);

DecodeFn decode_kernel(int D) {
    switch ((D + 15) / 16) {
        case 1: return decode_group<1>;
        case 2: return decode_group<2>;
        case 3: return decode_group<3>;
        case 4: return decode_group<4>;
        case 5: return decode_group<5>;
        case 6: return decode_group<6>;
        case 7: return decode_group<7>;
        case 8: return decode_group<8>;
        default: return nullptr;  // head_dim > 128: the plain path
    }
}

// --- prefill --------------------------------------------------------------------

constexpr int kQB = 32;  // queries per block: two vectors of scores per key

// Per-thread scratch of the prefill kernel: Q^T (D x 32) and S^T (keys x 32).
// Grows with the longest prompt seen; decode never touches it.
float* prefill_scratch(std::size_t floats) {
    thread_local std::vector<float, std::allocator<float>> buf;
    if (buf.size() < floats + 16) buf.resize(floats + 16);
    auto p = reinterpret_cast<std::uintptr_t>(buf.data());
    return reinterpret_cast<float*>((p + 63) & ~std::uintptr_t(63));
}

// S^T[j][0..32) = K[j] . Q^T for keys j in [0, n): 8 keys x 32 queries per step
// of d, 16 accumulators, every K element broadcast once from L1.
void scores_block(float* St, const float* Qt, const float* K, int n, int D) {
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m512 a[8][2];
        for (int r = 0; r < 8; r++) a[r][0] = a[r][1] = _mm512_setzero_ps();
        const float* k = K + std::size_t(j) * D;
        for (int d = 0; d < D; d++) {
            __m512 q0 = _mm512_load_ps(Qt + d * kQB), q1 = _mm512_load_ps(Qt + d * kQB + 16);
            for (int r = 0; r < 8; r++) {
                __m512 kb = _mm512_set1_ps(k[std::size_t(r) * D + d]);
                a[r][0] = _mm512_fmadd_ps(kb, q0, a[r][0]);
                a[r][1] = _mm512_fmadd_ps(kb, q1, a[r][1]);
            }
        }
        for (int r = 0; r < 8; r++) {
            _mm512_store_ps(St + std::size_t(j + r) * kQB, a[r][0]);
            _mm512_store_ps(St + std::size_t(j + r) * kQB + 16, a[r][1]);
        }
    }
    for (; j < n; j++) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        const float* k = K + std::size_t(j) * D;
        for (int d = 0; d < D; d++) {
            __m512 kb = _mm512_set1_ps(k[d]);
            a0 = _mm512_fmadd_ps(kb, _mm512_load_ps(Qt + d * kQB), a0);
            a1 = _mm512_fmadd_ps(kb, _mm512_load_ps(Qt + d * kQB + 16), a1);
        }
        _mm512_store_ps(St + std::size_t(j) * kQB, a0);
        _mm512_store_ps(St + std::size_t(j) * kQB + 16, a1);
    }
}

// out rows i (stride ld) = sum_j P^T[j][i] V[j] * inv_l[i], for the nq valid
// queries; QS query rows at a time with DC vectors each in registers.
template <int DC>
void pv_block(float* out, std::size_t ld, const float* Pt, const float* inv_l, const float* V, int n,
              int D, int nq) {
    constexpr int QS = DC >= 16 ? 1 : 16 / DC;
    __mmask16 cm[DC];
    for (int c = 0; c < DC; c++) cm[c] = chunk_mask(c, D);
    for (int i0 = 0; i0 < nq; i0 += QS) {
        __m512 acc[QS][DC];
        for (int i = 0; i < QS; i++)
            for (int c = 0; c < DC; c++) acc[i][c] = _mm512_setzero_ps();
        for (int j = 0; j < n; j++) {
            const float* v = V + std::size_t(j) * D;
            const float* p = Pt + std::size_t(j) * kQB + i0;
            __m512 vv[DC];
            for (int c = 0; c < DC; c++) vv[c] = _mm512_maskz_loadu_ps(cm[c], v + 16 * c);
            for (int i = 0; i < QS; i++) {
                __m512 pb = _mm512_set1_ps(p[i]);
                for (int c = 0; c < DC; c++) acc[i][c] = _mm512_fmadd_ps(pb, vv[c], acc[i][c]);
            }
        }
        for (int i = 0; i < QS && i0 + i < nq; i++) {
            __m512 inv = _mm512_set1_ps(inv_l[i0 + i]);
            for (int c = 0; c < DC; c++)
                _mm512_mask_storeu_ps(out + (i0 + i) * ld + 16 * c, cm[c], _mm512_mul_ps(acc[i][c], inv));
        }
    }
}

using PvFn = void (*)(float*, std::size_t, const float*, const float*, const float*, int, int, int);

PvFn pv_kernel(int D) {
    switch ((D + 15) / 16) {
        case 1: return pv_block<1>;
        case 2: return pv_block<2>;
        case 3: return pv_block<3>;
        case 4: return pv_block<4>;
        case 5: return pv_block<5>;
        case 6: return pv_block<6>;
        case 7: return pv_block<7>;
        case 8: return pv_block<8>;
        default: return nullptr;
    }
}

// One block of up to 32 queries (rows t0 .. t0+nq-1 of q, positions
// start+t0 ..) of query head h against its KV head.
void prefill_block(float* out, const float* q, std::size_t stride, const float* K, const float* V,
                   int start, int t0, int nq, int D, PvFn pv) {
    const int n = start + t0 + nq;  // keys 0 .. position of the last query
    float* Qt = prefill_scratch(std::size_t(D) * kQB + std::size_t(n) * kQB + kQB);
    float* St = Qt + std::size_t(D) * kQB;
    float* inv_l = St + std::size_t(n) * kQB;
    const float scale = 1.0f / std::sqrt(float(D));
    for (int i = 0; i < kQB; i++)
        for (int d = 0; d < D; d++) Qt[d * kQB + i] = i < nq ? q[(t0 + i) * stride + d] * scale : 0.0f;
    scores_block(St, Qt, K, n, D);
    // Causal softmax down each column: query i (position start+t0+i) sees keys
    // 0 .. start+t0+i. Keys before start+t0 are seen by all 32.
    const int first_masked = start + t0;
    const __m512i pos0 = _mm512_add_epi32(_mm512_set1_epi32(first_masked),
                                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i pos1 = _mm512_add_epi32(pos0, _mm512_set1_epi32(16));
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 m0 = ninf, m1 = ninf;
    for (int j = 0; j < n; j++) {
        __m512 s0 = _mm512_load_ps(St + std::size_t(j) * kQB), s1 = _mm512_load_ps(St + std::size_t(j) * kQB + 16);
        if (j >= first_masked) {
            __m512i jv = _mm512_set1_epi32(j);
            s0 = _mm512_mask_blend_ps(_mm512_cmpge_epi32_mask(pos0, jv), ninf, s0);
            s1 = _mm512_mask_blend_ps(_mm512_cmpge_epi32_mask(pos1, jv), ninf, s1);
            _mm512_store_ps(St + std::size_t(j) * kQB, s0);
            _mm512_store_ps(St + std::size_t(j) * kQB + 16, s1);
        }
        m0 = _mm512_max_ps(m0, s0);
        m1 = _mm512_max_ps(m1, s1);
    }
    __m512 l0 = _mm512_setzero_ps(), l1 = _mm512_setzero_ps();
    for (int j = 0; j < n; j++) {
        float* s = St + std::size_t(j) * kQB;
        __m512 p0 = simd::exp512(_mm512_sub_ps(_mm512_load_ps(s), m0));
        __m512 p1 = simd::exp512(_mm512_sub_ps(_mm512_load_ps(s + 16), m1));
        _mm512_store_ps(s, p0);
        _mm512_store_ps(s + 16, p1);
        l0 = _mm512_add_ps(l0, p0);
        l1 = _mm512_add_ps(l1, p1);
    }
    _mm512_storeu_ps(inv_l, _mm512_div_ps(_mm512_set1_ps(1.0f), l0));
    _mm512_storeu_ps(inv_l + 16, _mm512_div_ps(_mm512_set1_ps(1.0f), l1));
    pv(out + t0 * stride, stride, St, inv_l, V, n, D, nq);
}

#endif  // __AVX512F__

}  // namespace

void attention_prefill(float* out, const float* q, const KVCache& c, int layer, int b, int start,
                       int T, int n_heads, float* scratch) {
    const int D = c.head_dim, stride = n_heads * D;
#if defined(__AVX512F__)
    if (PvFn pv = pv_kernel(D)) {
        const int nblocks = (T + kQB - 1) / kQB, items = nblocks * n_heads;
        auto item = [&](int it) {
            const int qb = nblocks - 1 - it / n_heads, h = it % n_heads;
            const int kv_h = kv_head_for(h, n_heads, c.n_kv_heads);
            const int t0 = qb * kQB, nq = std::min(kQB, T - t0);
            prefill_block(out + h * D, q + h * D, stride, kv_key(c, layer, b, kv_h, 0),
                          kv_value(c, layer, b, kv_h, 0), start, t0, nq, D, pv);
        };
        // Later blocks see more keys: hand them out first, dynamically. (No
        // "if" clause: libgomp allocates a team for every region it serialises.)
        if (items == 1 || omp_get_max_threads() == 1) {
            for (int it = 0; it < items; it++) item(it);
        } else {
#pragma omp parallel for schedule(dynamic, 1)
            for (int it = 0; it < items; it++) item(it);
        }
        return;
    }
#endif
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
#if defined(__AVX512F__)
    if (DecodeFn fn = decode_kernel(D)) {
        const int G = n_heads / c.n_kv_heads;
        // Work items: (row, KV head, slice of at most kMaxGroup of its query heads).
        const int slices = (G + kMaxGroup - 1) / kMaxGroup, per_row = c.n_kv_heads * slices;
        const int items = rows * per_row;
        auto item = [&](int it) {
            const int r = it / per_row, kv_h = (it % per_row) / slices, sl = it % slices;
            const int h0 = kv_h * G + sl * kMaxGroup, g = std::min(kMaxGroup, G - sl * kMaxGroup);
            fn(out + std::size_t(r) * stride + h0 * D, q + std::size_t(r) * stride + h0 * D,
               kv_key(c, layer, slots[r], kv_h, 0), kv_value(c, layer, slots[r], kv_h, 0), pos[r] + 1, g, D);
        };
        // No "if" clause: libgomp allocates a team for every region it
        // serialises, and decode must not allocate.
        if (items == 1 || omp_get_max_threads() == 1) {
            for (int it = 0; it < items; it++) item(it);
        } else {
#pragma omp parallel for schedule(static)
            for (int it = 0; it < items; it++) item(it);
        }
        return;
    }
#endif
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
