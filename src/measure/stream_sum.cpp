#include "measure/stream_sum.hpp"

#include "engine/isa.hpp"

#include "engine/hwy_config.hpp"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "measure/stream_sum.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "engine/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pd {
namespace HWY_NAMESPACE {
float StreamSum(const float* p, std::size_t n) {
    const D d;
    const std::size_t N = hn::Lanes(d);
    auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    std::size_t i = 0;
    for (; i + 8 * N <= n; i += 8 * N) {
        a0 = hn::Add(a0, hn::Load(d, p + i));
        a1 = hn::Add(a1, hn::Load(d, p + i + N));
        a2 = hn::Add(a2, hn::Load(d, p + i + 2 * N));
        a3 = hn::Add(a3, hn::Load(d, p + i + 3 * N));
        a4 = hn::Add(a4, hn::Load(d, p + i + 4 * N));
        a5 = hn::Add(a5, hn::Load(d, p + i + 5 * N));
        a6 = hn::Add(a6, hn::Load(d, p + i + 6 * N));
        a7 = hn::Add(a7, hn::Load(d, p + i + 7 * N));
    }
    for (; i < n; i += N) a0 = hn::Add(a0, hn::Load(d, p + i));
    return LaneSum(d, hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))));
}

}  // namespace HWY_NAMESPACE
}  // namespace pd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pd {

HWY_EXPORT(StreamSum);

float stream_sum(const float* p, std::size_t n) {
    kernel_isa();  // applies PDLAB_ISA before the first dispatch
    return HWY_DYNAMIC_DISPATCH(StreamSum)(p, n);
}

}  // namespace pd
#endif
