// Decode (one query per sequence, memory-bound): the query heads that share a
// KV head are served together, so each cached K and V row is read from memory
// once per group, not once per query head. Keys come in chunks of 64 with an
// online softmax (running max and sum, the output rescaled when the max
// grows), so no scratch proportional to the context is needed and decode
// allocates nothing. Chunks never cross a tile (KvTiles): the paged cache's
// blocks are read one at a time, the contiguous cache is one tile.
//
// Prefill (T queries, compute-bound): blocks of two vectors' worth of queries
// of one head (32 with AVX-512), held in the lanes. The scores S^T (keys x
// queries) come from a register-blocked product of K and the transposed,
// pre-scaled query block; the causal softmax runs down the columns (one
// vector of queries at a time); then O = P V, a few query rows at a time. Its
// share of prefill FLOPs is small (about 6% at P = 512 for the bench model),
// but done one dot product at a time it would cost more than all the matrix
// products.
#include "engine/attention_kernels.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/isa.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/attention_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Calls f(i, nt, rows) for the rows first .. last-1 of T (rows of Dh floats),
// one run per tile: rows first+i .. first+i+nt-1 are contiguous from `rows`.
template <class F>
HWY_INLINE void for_each_tile(const KvTiles& T, int first, int last, int Dh, F f) {
    for (int j = first; j < last;) {
        const int tile_end = T.tile_rows == INT_MAX ? last : (j / T.tile_rows + 1) * T.tile_rows;
        const int nt = std::min(tile_end, last) - j;
        f(j - first, nt, T.row(j, Dh));
        j += nt;
    }
}

// --- decode -------------------------------------------------------------------

constexpr int kChunk = 64;  // keys per online-softmax step
// Query heads per pass over a chunk's keys and values: 4 H score chains plus
// 4 key vectors, or 4 H value sums plus a row vector, within the registers.
constexpr int kHeadsPerPass = kRegs >= 32 ? 4 : 2;

// Calls f.template operator()<H>(i0) for groups of heads i0 .. i0+H-1 that
// cover heads 0 .. G-1, H at most kHeadsPerPass.
template <class F>
HWY_INLINE void for_head_groups(int G, F f) {
    int i = 0;
    for (; i + kHeadsPerPass <= G; i += kHeadsPerPass) f.template operator()<kHeadsPerPass>(i);
    const int rest = G - i;
    if (rest == 3) f.template operator()<3>(i);
    if (rest == 2) f.template operator()<2>(i);
    if (rest == 1) f.template operator()<1>(i);
}

// out[t] = (out[t] + the columns Dv .. Dh-1 of q . K row t) * scale for nk
// rows from k: the part of the scores past the last whole vector of D.
HWY_INLINE void finish_scores(float* out, const float* q, const float* k, int nk, int Dh, int Dv, float scale) {
    for (int t = 0; t < nk; t++) {
        for (int c = Dv; c < Dh; c++) out[t] += q[c] * k[std::size_t(t) * Dh + c];
        out[t] *= scale;
    }
}

#if HWY_TARGET != HWY_SCALAR
using D4 = hn::Full128<float>;  // four keys' scores
using V4 = hn::Vec<D4>;

// The lanes of v folded to one 128-bit block: halves added until 4 lanes are left.
template <class DB>
HWY_INLINE V4 Fold4(DB db, hn::Vec<DB> v) {
    if constexpr (hn::MaxLanes(DB()) > 4) {
        const hn::Half<DB> dh;
        return Fold4(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
    } else {
        return v;
    }
}
// The sums of four vectors' lanes, [sum a, sum b, sum c, sum e]: two rounds
// of interleaving add within each 128-bit block, then the blocks are folded;
// a quarter of the shuffles of four separate sums.
HWY_INLINE V4 Sum4(V a, V b, V c, V e) {
    const D d;
    const hn::RepartitionToWide<hn::RebindToUnsigned<D>> d64;
    const V ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));  // a02 b02 a13 b13 a block
    const V ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
    const auto ab64 = hn::BitCast(d64, ab), ce64 = hn::BitCast(d64, ce);
    const V lo = hn::BitCast(d, hn::InterleaveLower(d64, ab64, ce64));  // a02 b02 c02 e02
    const V hi = hn::BitCast(d, hn::InterleaveUpper(d64, ab64, ce64));  // a13 b13 c13 e13
    return Fold4(d, hn::Add(lo, hi));
}

// dots[h] = [q_h . K row t over the first Dv columns, t = 0..3] for the H
// heads from q (rows of Dh) and the 4 keys from row k: 4 H independent chains
// of multiply-adds.
template <int H>
HWY_INLINE void dots_4_keys(V4* dots, const float* q, const float* k, int Dh, int Dv) {
    const D d;
    V acc[H][4];
    for (auto& a : acc)
        for (auto& v : a) v = hn::Zero(d);
    for (int c = 0; c < Dv; c += kLanes)
        for (int t = 0; t < 4; t++) {
            const V kv = hn::LoadU(d, k + std::size_t(t) * Dh + c);
            for (int h = 0; h < H; h++) acc[h][t] = hn::MulAdd(hn::LoadU(d, q + std::size_t(h) * Dh + c), kv, acc[h][t]);
        }
    for (int h = 0; h < H; h++) dots[h] = Sum4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
}

// The same for as many keys as DB has lanes, key t in lane t: the 4-key
// blocks combined in registers, so the softmax reads whole vectors that were
// stored whole (no store forwarding from narrow stores).
template <int H, class DB>
HWY_INLINE void dots_keys(DB db, hn::Vec<DB>* dots, const float* q, const float* k, int Dh, int Dv) {
    if constexpr (hn::MaxLanes(DB()) > 4) {
        const hn::Half<DB> dh;
        hn::Vec<decltype(dh)> lo[H], hi[H];
        dots_keys<H>(dh, lo, q, k, Dh, Dv);
        dots_keys<H>(dh, hi, q, k + std::size_t(hn::MaxLanes(dh)) * Dh, Dh, Dv);
        for (int h = 0; h < H; h++) dots[h] = hn::Combine(db, hi[h], lo[h]);
    } else {
        dots_4_keys<H>(dots, q, k, Dh, Dv);
    }
}
#endif

// s[i][t] = q_i . K[t] * scale for the heads i0 .. i0+H-1 and the nc keys of
// a chunk from K: a vector of keys at a time, then 4, then one by one. Each
// score sums the same products in the same order whichever way it is taken.
template <int H>
HWY_INLINE void chunk_scores(float (*s)[kChunk], const float* q, const float* K, int nc, int i0, int Dh, float scale) {
    const D d;
    const int Dv = Dh / kLanes * kLanes;
    q += std::size_t(i0) * Dh;
    int t = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane: nothing to fold
    for (; t + kLanes <= nc; t += kLanes) {
        const float* k = K + std::size_t(t) * Dh;
        V dots[H];
        dots_keys<H>(d, dots, q, k, Dh, Dv);
        for (int h = 0; h < H; h++) {
            float* out = s[i0 + h] + t;
            if (Dv == Dh) {
                hn::Store(hn::Mul(dots[h], hn::Set(d, scale)), d, out);
            } else {
                hn::Store(dots[h], d, out);
                finish_scores(out, q + std::size_t(h) * Dh, k, kLanes, Dh, Dv, scale);
            }
        }
    }
    for (; t + 4 <= nc; t += 4) {
        const float* k = K + std::size_t(t) * Dh;
        V4 dots[H];
        dots_4_keys<H>(dots, q, k, Dh, Dv);
        for (int h = 0; h < H; h++) {
            hn::StoreU(dots[h], D4(), s[i0 + h] + t);
            finish_scores(s[i0 + h] + t, q + std::size_t(h) * Dh, k, 4, Dh, Dv, scale);
        }
    }
#endif
    for (; t < nc; t++) {
        const float* k = K + std::size_t(t) * Dh;
        for (int h = 0; h < H; h++) {
            V acc = hn::Zero(d);
            for (int c = 0; c < Dv; c += kLanes)
                acc = hn::MulAdd(hn::LoadU(d, q + std::size_t(h) * Dh + c), hn::LoadU(d, k + c), acc);
            s[i0 + h][t] = LaneSum(d, acc);
            finish_scores(s[i0 + h] + t, q + std::size_t(h) * Dh, k, 1, Dh, Dv, scale);
        }
    }
}

// Online softmax of one head's chunk: p = exp(s - new max) in place (lanes
// past nc padded with -inf give 0); returns the factor that rescales what
// was accumulated under the old max.
HWY_INLINE float chunk_softmax(float* s, int nc, float& m, float& l) {
    const D d;
    const int padded = (nc + kLanes - 1) / kLanes * kLanes;
    for (int t = nc; t < padded; t++) s[t] = kNegInf;
    V mv = hn::Set(d, kNegInf);
    for (int t = 0; t < padded; t += kLanes) mv = hn::Max(mv, hn::Load(d, s + t));
    const float m_new = std::max(m, LaneMax(d, mv));
    const float alpha = std::exp(m - m_new);  // 0 on the first chunk (m = -inf)
    V sum = hn::Zero(d);
    for (int t = 0; t < padded; t += kLanes) {
        const V p = Exp(d, hn::Sub(hn::Load(d, s + t), hn::Set(d, m_new)));
        hn::Store(p, d, s + t);
        sum = hn::Add(sum, p);
    }
    l = l * alpha + LaneSum(d, sum);
    m = m_new;
    return alpha;
}

// out_i = out_i * alpha_i + sum_t p_it V[t] for heads i0 .. i0+H-1 and
// the CV vectors of columns from c: the sums stay in registers over the
// chunk's keys (H CV independent chains) and meet memory once.
template <int H, int CV>
HWY_INLINE void values_block(float* out, const float (*p)[kChunk], const float* alpha, const float* Vc, int nc, int i0,
                             int c, int Dh) {
    const D d;
    V acc[H][CV];
    for (int h = 0; h < H; h++)
        for (int v = 0; v < CV; v++)
            acc[h][v] = hn::Mul(hn::LoadU(d, out + std::size_t(i0 + h) * Dh + c + v * kLanes), hn::Set(d, alpha[i0 + h]));
    for (int t = 0; t < nc; t++) {
        const float* row = Vc + std::size_t(t) * Dh + c;
        for (int v = 0; v < CV; v++) {
            const V vv = hn::LoadU(d, row + v * kLanes);
            for (int h = 0; h < H; h++) acc[h][v] = hn::MulAdd(hn::Set(d, p[i0 + h][t]), vv, acc[h][v]);
        }
    }
    for (int h = 0; h < H; h++)
        for (int v = 0; v < CV; v++) hn::StoreU(acc[h][v], d, out + std::size_t(i0 + h) * Dh + c + v * kLanes);
}

// The same for heads i0 .. i0+H-1 and all Dh columns: 4 vectors at a time,
// then one, then the columns past the last whole vector.
template <int H>
HWY_INLINE void chunk_values(float* out, const float (*p)[kChunk], const float* alpha, const float* Vc, int nc, int i0,
                             int Dh) {
    const int Dv = Dh / kLanes * kLanes;
    int c = 0;
    for (; c + 4 * kLanes <= Dv; c += 4 * kLanes) values_block<H, 4>(out, p, alpha, Vc, nc, i0, c, Dh);
    for (; c < Dv; c += kLanes) values_block<H, 1>(out, p, alpha, Vc, nc, i0, c, Dh);
    if (Dv == Dh) return;
    for (int i = i0; i < i0 + H; i++) {
        float* o = out + std::size_t(i) * Dh;
        for (c = Dv; c < Dh; c++) o[c] *= alpha[i];
        for (int t = 0; t < nc; t++)
            for (c = Dv; c < Dh; c++) o[c] += p[i][t] * Vc[std::size_t(t) * Dh + c];
    }
}

// out[0 .. n) /= l, a vector at a time (the same quotients as one by one).
HWY_INLINE void divide_row(float* out, int n, float l) {
    const D d;
    int c = 0;
    for (; c + kLanes <= n; c += kLanes) hn::StoreU(hn::Div(hn::LoadU(d, out + c), hn::Set(d, l)), d, out + c);
    for (; c < n; c++) out[c] /= l;
}

// K and V bytes requested ahead of the rows being read, together: half of a
// 1 MiB L2. A decode call reads each cached row once, and its rows are short
// runs (a KV head's rows of one layer, 41 KB at 160 positions and D = 64), too
// short for the hardware prefetchers to get far ahead. So the call asks for
// its first rows all at once (every row, up to this many bytes) and then
// keeps that far ahead: at bench-llama-125m's decode (2 threads, about 160
// and 540 positions) attention took about a fifth less time than with the
// hardware prefetchers alone, and than with one chunk ahead or a quarter of
// this (docs/performance.md).
constexpr std::size_t kPrefetchKvBytes = std::size_t(512) << 10;

// Asks for every 64-byte line of one row of n floats, once.
HWY_INLINE void prefetch_lines(const float* row, int n) {
    const auto end = reinterpret_cast<std::uintptr_t>(row + n);
    for (auto a = reinterpret_cast<std::uintptr_t>(row) & ~std::uintptr_t(63); a < end; a += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(a));
}

// Asks for K and V rows [from, to) (rows of Dh floats) to be brought into L1.
HWY_INLINE void prefetch_rows(const KvTiles& K, const KvTiles& V, int from, int to, int Dh) {
    for (int j = from; j < to; j++) prefetch_lines(K.row(j, Dh), Dh), prefetch_lines(V.row(j, Dh), Dh);
}

void DecodeGroup(float* out, const float* q, const KvTiles& K, const KvTiles& Vt, int first, int n, int G, int Dh) {
    const int ahead = int(std::max<std::size_t>(1, kPrefetchKvBytes / (2 * std::size_t(Dh) * sizeof(float))));
    prefetch_rows(K, Vt, first, std::min(n, first + ahead), Dh);
    const float scale = 1.0f / std::sqrt(float(Dh));
    HWY_ALIGN float s[kMaxDecodeGroup][kChunk];
    float m[kMaxDecodeGroup], l[kMaxDecodeGroup], alpha[kMaxDecodeGroup];
    for (int i = 0; i < G; i++) m[i] = kNegInf, l[i] = 0.0f;
    std::fill(out, out + std::size_t(G) * Dh, 0.0f);
    for_each_tile(K, first, n, Dh, [&](int i, int nt, const float* Kt) {
        const float* Vc = Vt.row(first + i, Dh);
        for (int j0 = 0; j0 < nt; j0 += kChunk) {
            const int nc = std::min(kChunk, nt - j0), row = first + i + j0;
            prefetch_rows(K, Vt, std::min(n, row + ahead), std::min(n, row + ahead + nc), Dh);
            const float* Kc = Kt + std::size_t(j0) * Dh;
            const float* Vcc = Vc + std::size_t(j0) * Dh;
            for_head_groups(G, [&]<int H>(int i0) { chunk_scores<H>(s, q, Kc, nc, i0, Dh, scale); });
            for (int h = 0; h < G; h++) alpha[h] = chunk_softmax(s[h], nc, m[h], l[h]);
            for_head_groups(G, [&]<int H>(int i0) { chunk_values<H>(out, s, alpha, Vcc, nc, i0, Dh); });
        }
    });
    for (int i = 0; i < G; i++) divide_row(out + std::size_t(i) * Dh, Dh, l[i]);
}

// --- prefill ------------------------------------------------------------------

constexpr int kQB = 2 * kLanes;  // queries per block: two vectors of scores per key
// Keys per step of the score product: 2 accumulators each, plus the two
// query vectors and a broadcast, within the register file.
constexpr int kKeysPerStep = std::clamp((kRegs - 3) / 2, 1, 8);

// Per-thread scratch: Q^T (D x kQB), S^T (keys x kQB), 1/l (kQB). Grows with
// the longest prompt seen; decode never touches it.
float* prefill_scratch(std::size_t floats) {
    thread_local std::vector<float> buf;
    if (buf.size() < floats + 16) buf.resize(floats + 16);
    return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(buf.data()) + 63) & ~std::uintptr_t(63));
}

// S^T[j][0..kQB) = K[j] . Q^T for the KB keys from j: every K element
// broadcast once against two vectors of queries.
template <int KB>
HWY_INLINE void scores_keys(float* St, const float* Qt, const float* K, int j, int Dh) {
    const D d;
    V a[KB][2];
    for (int r = 0; r < KB; r++) a[r][0] = a[r][1] = hn::Zero(d);
    const float* k = K + std::size_t(j) * Dh;
    for (int c = 0; c < Dh; c++) {
        const V q0 = hn::Load(d, Qt + c * kQB), q1 = hn::Load(d, Qt + c * kQB + kLanes);
        for (int r = 0; r < KB; r++) {
            const V kb = hn::Set(d, k[std::size_t(r) * Dh + c]);
            a[r][0] = hn::MulAdd(kb, q0, a[r][0]);
            a[r][1] = hn::MulAdd(kb, q1, a[r][1]);
        }
    }
    for (int r = 0; r < KB; r++) {
        hn::Store(a[r][0], d, St + std::size_t(j + r) * kQB);
        hn::Store(a[r][1], d, St + std::size_t(j + r) * kQB + kLanes);
    }
}

// Causal softmax down the columns of S^T, whose row r is key k0 + r (n
// keys): query i of the block, at position p = q0 + i, sees keys k0 .. p, and
// under a sliding window (window > 0) only p-window+1 .. p. Leaves P^T in St,
// 1/l in inv_l.
HWY_INLINE void causal_softmax(float* St, float* inv_l, int k0, int n, int q0, int window) {
    const D d;
    for (int h = 0; h < kQB; h += kLanes) {
        const V pos = hn::Iota(d, float(q0 + h));  // exact: positions < 2^24
        const int last_pos = q0 + h + kLanes - 1;
        V mx = hn::Set(d, kNegInf);
        for (int r = 0; r < n; r++) {
            const int j = k0 + r;
            float* s = St + std::size_t(r) * kQB + h;
            V sv = hn::Load(d, s);
            if (j > q0 + h) {  // after some lane's position
                sv = hn::IfThenElse(hn::Lt(pos, hn::Set(d, float(j))), hn::Set(d, kNegInf), sv);
                hn::Store(sv, d, s);
            }
            if (window > 0 && j + window <= last_pos) {  // out of some lane's window
                sv = hn::IfThenElse(hn::Ge(pos, hn::Set(d, float(j + window))), hn::Set(d, kNegInf), sv);
                hn::Store(sv, d, s);
            }
            mx = hn::Max(mx, sv);
        }
        V l = hn::Zero(d);
        for (int r = 0; r < n; r++) {
            float* s = St + std::size_t(r) * kQB + h;
            const V p = Exp(d, hn::Sub(hn::Load(d, s), mx));
            hn::Store(p, d, s);
            l = hn::Add(l, p);
        }
        hn::Store(hn::Div(hn::Set(d, 1.0f), l), d, inv_l + h);
    }
}

// out rows i = inv_l[i] * sum_j P^T[j][i] V[j] for the nq queries, where a
// row of V is DC whole vectors: QS query rows x DC vectors of sums, the QS
// broadcast probabilities and one V vector fit the registers, and each V row
// is loaded once per QS queries.
template <int DC>
HWY_INLINE void values_rows(float* out, std::size_t ld, const float* Pt, const float* inv_l, const KvTiles& Vt,
                            int first, int last, int nq) {
    const D d;
    constexpr int QS = std::clamp((kRegs - 1) / (DC + 1), 1, 8);
    constexpr int Dh = DC * kLanes;
    for (int i0 = 0; i0 < nq; i0 += QS) {
        V acc[QS][DC];
        for (auto& row : acc)
            for (auto& a : row) a = hn::Zero(d);
        for_each_tile(Vt, first, last, Dh, [&](int t0, int nt, const float* Vc) {
            for (int j = 0; j < nt; j++) {
                const float* p = Pt + std::size_t(t0 + j) * kQB + i0;
                V pb[QS];
                for (int i = 0; i < QS; i++) pb[i] = hn::Set(d, p[i]);
                for (int c = 0; c < DC; c++) {
                    const V vv = hn::LoadU(d, Vc + std::size_t(j) * Dh + c * kLanes);
                    for (int i = 0; i < QS; i++) acc[i][c] = hn::MulAdd(pb[i], vv, acc[i][c]);
                }
            }
        });
        for (int i = 0; i < QS && i0 + i < nq; i++)
            for (int c = 0; c < DC; c++)
                hn::StoreU(hn::Mul(acc[i][c], hn::Set(d, inv_l[i0 + i])), d, out + (i0 + i) * ld + c * kLanes);
    }
}

// The same for any head size: one vector of D at a time, a scalar tail.
HWY_INLINE void values_any(float* out, std::size_t ld, const float* Pt, const float* inv_l, const KvTiles& Vt,
                           int first, int last, int Dh, int nq) {
    const D d;
    constexpr int QS = 8;
    const int Dv = Dh / kLanes * kLanes;
    for (int i0 = 0; i0 < nq; i0 += QS) {
        const int qs = std::min(QS, nq - i0);
        for (int c = 0; c < Dv; c += kLanes) {
            V acc[QS];
            for (int i = 0; i < QS; i++) acc[i] = hn::Zero(d);
            for_each_tile(Vt, first, last, Dh, [&](int t0, int nt, const float* Vc) {
                for (int j = 0; j < nt; j++) {
                    const V vv = hn::LoadU(d, Vc + std::size_t(j) * Dh + c);
                    const float* p = Pt + std::size_t(t0 + j) * kQB + i0;
                    for (int i = 0; i < QS; i++) acc[i] = hn::MulAdd(hn::Set(d, p[i]), vv, acc[i]);
                }
            });
            for (int i = 0; i < qs; i++)
                hn::StoreU(hn::Mul(acc[i], hn::Set(d, inv_l[i0 + i])), d, out + (i0 + i) * ld + c);
        }
        for (int c = Dv; c < Dh; c++)
            for (int i = 0; i < qs; i++) {
                float sum = 0.0f;
                for_each_tile(Vt, first, last, Dh, [&](int t0, int nt, const float* Vc) {
                    for (int j = 0; j < nt; j++) sum += Pt[std::size_t(t0 + j) * kQB + i0 + i] * Vc[std::size_t(j) * Dh + c];
                });
                out[(i0 + i) * ld + c] = sum * inv_l[i0 + i];
            }
    }
}

HWY_INLINE void values_block(float* out, std::size_t ld, const float* Pt, const float* inv_l, const KvTiles& Vc,
                             int first, int last, int Dh, int nq) {
    switch (Dh % kLanes ? 0 : Dh / kLanes) {
        case 1: return values_rows<1>(out, ld, Pt, inv_l, Vc, first, last, nq);
        case 2: return values_rows<2>(out, ld, Pt, inv_l, Vc, first, last, nq);
        case 4: return values_rows<4>(out, ld, Pt, inv_l, Vc, first, last, nq);
        case 8: return values_rows<8>(out, ld, Pt, inv_l, Vc, first, last, nq);
        default: return values_any(out, ld, Pt, inv_l, Vc, first, last, Dh, nq);
    }
}

// S^T rows t0 .. t0+nt-1 from one tile of keys: KB keys per step, then one at a time.
HWY_INLINE void scores_tile(float* St, const float* Qt, const float* Kt, int nt, int Dh) {
    int j = 0;
    for (; j + kKeysPerStep <= nt; j += kKeysPerStep) scores_keys<kKeysPerStep>(St, Qt, Kt, j, Dh);
    for (; j < nt; j++) scores_keys<1>(St, Qt, Kt, j, Dh);
}

void PrefillBlock(float* out, const float* q, std::size_t stride, const KvTiles& K, const KvTiles& Vc, int start,
                  int t0, int nq, int Dh, int window) {
    const int first = first_visible_key(start + t0, window);  // the first query's first key
    const int last = start + t0 + nq;                         // one past the last query's position
    const int n = last - first;
    float* Qt = prefill_scratch(std::size_t(Dh) * kQB + std::size_t(n) * kQB + kQB);
    float* St = Qt + std::size_t(Dh) * kQB;
    float* inv_l = St + std::size_t(n) * kQB;
    const float scale = 1.0f / std::sqrt(float(Dh));
    for (int i = 0; i < kQB; i++)
        for (int c = 0; c < Dh; c++) Qt[c * kQB + i] = i < nq ? q[(t0 + i) * stride + c] * scale : 0.0f;
    for_each_tile(K, first, last, Dh,
                  [&](int k0, int nk, const float* Kt) { scores_tile(St + std::size_t(k0) * kQB, Qt, Kt, nk, Dh); });
    causal_softmax(St, inv_l, first, n, start + t0, window);
    values_block(out + t0 * stride, stride, St, inv_l, Vc, first, last, Dh, nq);
}

int PrefillBlockQueries() { return kQB; }

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(DecodeGroup);
HWY_EXPORT(PrefillBlock);
HWY_EXPORT(PrefillBlockQueries);

void attention_decode_group(float* out, const float* q, const KvTiles& K, const KvTiles& V, int first, int n, int G,
                            int D) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    HWY_DYNAMIC_DISPATCH(DecodeGroup)(out, q, K, V, first, n, G, D);
}

void attention_prefill_block(float* out, const float* q, std::size_t stride, const KvTiles& K, const KvTiles& V,
                             int start, int t0, int nq, int D, int window) {
    kernel_isa();
    HWY_DYNAMIC_DISPATCH(PrefillBlock)(out, q, stride, K, V, start, t0, nq, D, window);
}

int prefill_block_queries() {
    kernel_isa();
    return HWY_DYNAMIC_DISPATCH(PrefillBlockQueries)();
}

}  // namespace pd
#endif
