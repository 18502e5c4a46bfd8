// Shared basics: the error type every bad input becomes, and bf16 conversion.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace pd {

// A problem with what the user gave us (a file, a flag, a prompt). Programs
// print its message and exit with code 2; it never means a bug in the kit.
struct UserError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
    throw UserError(fmt::format(f, std::forward<Args>(args)...));
}

// bf16 is the top half of an IEEE float. Rounding to nearest-even on the way
// down matches PyTorch's .to(torch.bfloat16).
using bf16 = std::uint16_t;

inline float bf16_to_f32(bf16 h) {
    std::uint32_t bits = std::uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline bf16 f32_to_bf16(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16((bits >> 16) | 0x40);  // keep NaN a NaN
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return bf16(bits >> 16);
}

// IEEE half precision to float (safetensors F16 checkpoints).
float f16_to_f32(std::uint16_t h);

}  // namespace pd
