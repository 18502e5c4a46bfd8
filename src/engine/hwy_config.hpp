// Which instruction sets the Highway kernels are compiled for. Every kernel
// source includes this before any Highway header, so that all of them (and
// isa.cpp, which names the chosen one) agree on the list.
//
// Compiled: AVX-512 (Highway's AVX3), AVX2, NEON on ARM64, and the portable
// fallback (Highway's SCALAR or EMU128). Left out to keep the build short:
// SSSE3/SSE4 (x86 CPUs without AVX2 are a decade old; they get the fallback),
// AVX3_DL (the one kernel that uses VNNI is a target-specific file,
// panel_quantized_avx512.cpp, as Highway 1.0 has no vpdpwssd) and SVE (Apple Silicon has none;
// NEON runs on every ARM64 CPU).
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
    (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
