// Per-instruction-set helpers shared by the Highway kernels. Like every
// Highway "-inl.h" header it is compiled once per target: each kernel source
// includes it inside its foreach_target loop, after hwy/highway.h.
#if defined(PDLAB_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PDLAB_SIMD_INL_H_
#undef PDLAB_SIMD_INL_H_
#else
#define PDLAB_SIMD_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Every kernel works on f32 vectors of the target's full width.
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
constexpr int kLanes = int(HWY_LANES(float));  // 16 with AVX-512, 8 with AVX2, 4 with NEON
// Vector registers, for choosing how many accumulators a kernel keeps.
constexpr int kRegs = HWY_TARGET == HWY_AVX2 ? 16 : 32;

// 2^k for integer lanes k in [-126, 127], built from the exponent bits.
template <class D, class VI>
HWY_INLINE hn::Vec<D> Pow2(D d, VI k) {
    const hn::RebindToSigned<D> di;
    return hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k, hn::Set(di, 127))));
}

// exp(x), about 1 ulp: Cephes' expf polynomial on [-ln2/2, ln2/2], then
// scaled by 2^n (in two halves, so that n = 128 and n = -150 stay in range).
// Below -104 (and for -inf, the masked scores of attention) the result is 0:
// those lanes compute exp(0) before being zeroed, because exp(-104) is
// subnormal and a subnormal product costs a microcode assist (on Zen 5 it
// was a fifth of a one-key decode attention call, whose padding is -inf).
// Every other lane, a NaN included, is clamped as before the zeroing.
template <class D>
HWY_INLINE hn::Vec<D> Exp(D d, hn::Vec<D> x) {
    using V = hn::Vec<D>;
    const hn::RebindToSigned<D> di;
    const auto underflow = hn::Lt(x, hn::Set(d, -104.0f));
    x = hn::IfThenZeroElse(underflow, hn::Min(hn::Max(x, hn::Set(d, -104.0f)), hn::Set(d, 88.7f)));
    const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
    V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);
    r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
    V p = hn::Set(d, 1.9875691500e-4f);
    p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
    p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
    p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
    p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
    p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
    const auto ni = hn::ConvertTo(di, n);
    const auto half = hn::ShiftRight<1>(ni);
    p = hn::Mul(hn::Mul(p, Pow2(d, half)), Pow2(d, hn::Sub(ni, half)));
    return hn::IfThenZeroElse(underflow, p);
}

// Sum and maximum of all lanes, as a scalar.
template <class D>
HWY_INLINE float LaneSum(D d, hn::Vec<D> v) {
    return hn::GetLane(hn::SumOfLanes(d, v));
}
template <class D>
HWY_INLINE float LaneMax(D d, hn::Vec<D> v) {
    return hn::GetLane(hn::MaxOfLanes(d, v));
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#endif  // PDLAB_SIMD_INL_H_
