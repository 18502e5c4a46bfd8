// How the int8 GEMV (gemv_kernels.cuh) reads int8 weights, as small
// __host__ __device__ functions: the kernel calls them on the GPU, and
// tests/gpu/test_int8_unpack.cpp runs them on the CPU over every byte value
// and against the CPU's dequantize_rows (engine/quantize.hpp), so that a GPU
// run has the loads, the products and the speed left to test.
//
//   unpack   16 weights of a 16-byte chunk as floats, with integer tricks
//            instead of int-to-float conversions
//   groups   a chunk's scale: chunks of 16 inputs, groups of 16 << shift
// int4 has no GPU kernel (--precision int4 is CPU only), so nothing here unpacks it.
#pragma once

#include <cstring>

#include <cuda_runtime.h>

// nvcc's full unrolling of the loops below (the weights stay in registers),
// in the device pass only: the host compiler knows no such pragma.
#ifdef __CUDA_ARCH__
#define PD_UNROLL _Pragma("unroll")
#else
#define PD_UNROLL
#endif

namespace pd::gpu {

// __byte_perm(x, y, s): byte k of the result is byte (s >> 4k) & 7 of the
// eight bytes y:x (x the low four). The host's twin covers selectors 0-7,
// all the unpacking uses (not the sign-replicating ones).
__host__ __device__ inline unsigned byte_perm(unsigned x, unsigned y, unsigned s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned r = 0;
    for (int k = 0; k < 4; k++) r |= unsigned(bytes >> (8 * ((s >> (4 * k)) & 7u)) & 0xffu) << (8 * k);
    return r;
#endif
}

// The float whose bits are u.
__host__ __device__ inline float float_from_bits(unsigned u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// 16 int8 weights packed in w (weight k in byte k) as floats, exactly. Each
// byte is biased to q + 128 in [1, 255] (xor 0x80) and put by byte_perm in
// the low mantissa bits of 2^23 (0x4B000000), which makes the float
// 2^23 + 128 + q; subtracting 2^23 + 128 leaves q exactly. Two full-rate
// instructions per weight, where an int-to-float conversion runs at a
// quarter of the FMA rate on sm_90 and would cap the kernel below HBM speed.
__host__ __device__ __forceinline__ void int8x16_to_float(const uint4& w, float (&f)[16]) {
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
PD_UNROLL
    for (int j = 0; j < 4; j++) {
        const unsigned biased = words[j] ^ 0x80808080u;
PD_UNROLL
        for (int b = 0; b < 4; b++)  // result bytes: [byte b of biased, 0x00, 0x00, 0x4B]
            f[4 * j + b] = float_from_bits(byte_perm(biased, 0x4B000000u, 0x7540u | unsigned(b))) - 8388736.0f;
    }
}

// log2(group / 16) for a group of a power of two times 16 inputs (gemv_int8_fits).
__host__ __device__ inline int int8_group_shift(int group) {
    int shift = 0;
    while ((16 << shift) < group) shift++;
    return shift;
}

// The scale group of 16-byte chunk c of a row (inputs 16c .. 16c + 15): a
// group holds 1 << shift chunks, so none straddles two groups.
__host__ __device__ inline int int8_chunk_group(int c, int shift) { return c >> shift; }

}  // namespace pd::gpu
