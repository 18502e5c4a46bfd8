// The Highway loops of vector_ops.hpp. Compiled once per instruction set
// (foreach_target); the exported functions pick the best one at run time,
// after PDLAB_ISA has had its say (kernel_isa()). Column tails that do not
// fill a vector are done one float at a time.
#include "vector_ops.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>

#include "engine/isa.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "vector_ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd::lab14 {
namespace HWY_NAMESPACE {
using pd::HWY_NAMESPACE::D;
using pd::HWY_NAMESPACE::Exp;
using pd::HWY_NAMESPACE::kLanes;
using pd::HWY_NAMESPACE::LaneMax;
using pd::HWY_NAMESPACE::LaneSum;
using pd::HWY_NAMESPACE::V;
namespace hn = hwy::HWY_NAMESPACE;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// s[r] = scale * q . K[r] for KB consecutive keys: each vector of q is loaded
// once for all KB of them, and KB independent sums keep the FMA units busy.
template <int KB>
HWY_INLINE void dot_keys(float* s, const float* q, const float* K, int dim, float scale) {
    const D d;
    const int whole = dim / kLanes * kLanes;
    V acc[KB];
    for (int r = 0; r < KB; r++) acc[r] = hn::Zero(d);
    for (int c = 0; c < whole; c += kLanes) {
        const V qv = hn::LoadU(d, q + c);
        for (int r = 0; r < KB; r++) acc[r] = hn::MulAdd(qv, hn::LoadU(d, K + std::size_t(r) * dim + c), acc[r]);
    }
    for (int r = 0; r < KB; r++) {
        float dot = LaneSum(d, acc[r]);
        for (int c = whole; c < dim; c++) dot += q[c] * K[std::size_t(r) * dim + c];
        s[r] = dot * scale;
    }
}

void ScoresRow(float* s, const float* q, const float* K, int n, int dim, float scale) {
    int j = 0;
    for (; j + 4 <= n; j += 4) dot_keys<4>(s + j, q, K + std::size_t(j) * dim, dim, scale);
    for (; j < n; j++) dot_keys<1>(s + j, q, K + std::size_t(j) * dim, dim, scale);
}

float MaxOf(const float* s, int n) {
    const D d;
    V mv = hn::Set(d, kNegInf);
    int j = 0;
    for (; j + kLanes <= n; j += kLanes) mv = hn::Max(mv, hn::LoadU(d, s + j));
    float m = LaneMax(d, mv);
    for (; j < n; j++) m = std::max(m, s[j]);
    return m;
}

// The tail goes through a masked vector, not std::exp, so that every element
// gets the same exponential whatever its index.
float ExpShiftedSum(float* s, int n, float m) {
    const D d;
    const V mv = hn::Set(d, m);
    V sum = hn::Zero(d);
    int j = 0;
    for (; j + kLanes <= n; j += kLanes) {
        const V p = Exp(d, hn::Sub(hn::LoadU(d, s + j), mv));
        hn::StoreU(p, d, s + j);
        sum = hn::Add(sum, p);
    }
    if (j < n) {
        const auto valid = hn::FirstN(d, std::size_t(n - j));
        const V p = hn::IfThenElseZero(valid, Exp(d, hn::Sub(hn::MaskedLoad(valid, d, s + j), mv)));
        hn::BlendedStore(p, valid, d, s + j);
        sum = hn::Add(sum, p);
    }
    return LaneSum(d, sum);
}

void ScaleRow(float* o, float a, int dim) {
    const D d;
    const V av = hn::Set(d, a);
    int c = 0;
    for (; c + kLanes <= dim; c += kLanes) hn::StoreU(hn::Mul(hn::LoadU(d, o + c), av), d, o + c);
    for (; c < dim; c++) o[c] *= a;
}

// Columns c0 .. c0 + CB vectors of o += sum_j p[j] V[j]: the CB vectors of
// sums stay in registers while the n rows of V stream past.
template <int CB>
HWY_INLINE void weighted_columns(float* o, const float* p, const float* Vr, int n, int dim, int c0) {
    const D d;
    V acc[CB];
    for (int k = 0; k < CB; k++) acc[k] = hn::LoadU(d, o + c0 + k * kLanes);
    for (int j = 0; j < n; j++) {
        const V pj = hn::Set(d, p[j]);
        const float* v = Vr + std::size_t(j) * dim + c0;
        for (int k = 0; k < CB; k++) acc[k] = hn::MulAdd(pj, hn::LoadU(d, v + k * kLanes), acc[k]);
    }
    for (int k = 0; k < CB; k++) hn::StoreU(acc[k], d, o + c0 + k * kLanes);
}

void AddWeightedRows(float* o, const float* p, const float* Vr, int n, int dim) {
    const int whole = dim / kLanes * kLanes;
    int c = 0;
    for (; c + 8 * kLanes <= whole; c += 8 * kLanes) weighted_columns<8>(o, p, Vr, n, dim, c);
    for (; c + 4 * kLanes <= whole; c += 4 * kLanes) weighted_columns<4>(o, p, Vr, n, dim, c);
    for (; c < whole; c += kLanes) weighted_columns<1>(o, p, Vr, n, dim, c);
    for (; c < dim; c++) {
        float sum = o[c];
        for (int j = 0; j < n; j++) sum += p[j] * Vr[std::size_t(j) * dim + c];
        o[c] = sum;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace pd::lab14
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd::lab14 {

HWY_EXPORT(ScoresRow);
HWY_EXPORT(MaxOf);
HWY_EXPORT(ExpShiftedSum);
HWY_EXPORT(ScaleRow);
HWY_EXPORT(AddWeightedRows);

void scores_row(float* s, const float* q, const float* K, int n, int D, float scale) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    HWY_DYNAMIC_DISPATCH(ScoresRow)(s, q, K, n, D, scale);
}

float max_of(const float* s, int n) {
    kernel_isa();
    return HWY_DYNAMIC_DISPATCH(MaxOf)(s, n);
}

float exp_shifted_sum(float* s, int n, float m) {
    kernel_isa();
    return HWY_DYNAMIC_DISPATCH(ExpShiftedSum)(s, n, m);
}

void scale_row(float* o, float a, int D) {
    kernel_isa();
    HWY_DYNAMIC_DISPATCH(ScaleRow)(o, a, D);
}

void add_weighted_rows(float* o, const float* p, const float* V, int n, int D) {
    kernel_isa();
    HWY_DYNAMIC_DISPATCH(AddWeightedRows)(o, p, V, n, D);
}

}  // namespace pd::lab14
#endif
