// The read loop of the bandwidth probe (roofline.cpp), in Highway.
#pragma once

#include <cstddef>

namespace pd {

// Sum of n floats (n a multiple of 128, p 64-byte aligned) with 8 independent
// vector accumulators: eight loads in flight per step, no dependency chain
// longer than one add, so the loop runs at the rate memory delivers.
float stream_sum(const float* p, std::size_t n);

}  // namespace pd
