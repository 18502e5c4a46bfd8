#include "engine/bf16_convert.hpp"

#include "engine/isa.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/bf16_convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {

// The bits of f32 lanes rounded to bf16 (in the top 16 bits, the rest zero):
// add 0x7fff plus the lowest kept bit, then clear the low half. NaNs get a
// quiet bit instead, so that rounding never turns one into infinity.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> rounded_bits(V v) {
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
    const auto rounded = hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb));
    const auto nan = hn::RebindMask(du, hn::IsNaN(v));
    return hn::And(hn::IfThenElse(nan, hn::Or(bits, hn::Set(du, 0x400000u)), rounded), hn::Set(du, 0xffff0000u));
}

void ToBf16(const float* x, bf16* out, std::size_t n) {
    const D d;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<std::uint16_t, D> d16;
    const std::size_t N = hn::Lanes(d);
    std::size_t i = 0;
    for (; i + N <= n; i += N) {  // the top halves, <= 0xffff: exact as int32, then narrowed
        const auto top = hn::BitCast(di, hn::ShiftRight<16>(rounded_bits(hn::LoadU(d, x + i))));
        hn::StoreU(hn::DemoteTo(d16, top), d16, out + i);
    }
    for (; i < n; i++) out[i] = f32_to_bf16(x[i]);
}

void RoundToBf16(const float* x, float* out, std::size_t n) {
    const D d;
    const std::size_t N = hn::Lanes(d);
    std::size_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::BitCast(d, rounded_bits(hn::LoadU(d, x + i))), d, out + i);
    for (; i < n; i++) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(ToBf16);
HWY_EXPORT(RoundToBf16);

void to_bf16(const float* x, bf16* out, std::size_t n) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    HWY_DYNAMIC_DISPATCH(ToBf16)(x, out, n);
}

void round_to_bf16(const float* x, float* out, std::size_t n) {
    kernel_isa();
    HWY_DYNAMIC_DISPATCH(RoundToBf16)(x, out, n);
}

}  // namespace pd
#endif
