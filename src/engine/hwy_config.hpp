// Which instruction sets the Highway kernels are compiled for. Every kernel
// source includes this before any Highway header, so that all of them (and
// isa.cpp, which names the chosen one) agree on the list.
//
// Compiled: AVX-512 (Highway's AVX3), AVX2, NEON on ARM64, and the portable
// fallback (Highway's SCALAR or EMU128). Left out to keep the build short:
// SSSE3/SSE4 (x86 CPUs without AVX2 are a decade old; they get the fallback),
// AVX3_DL (the one kernel that uses VNNI is a target-specific file,
// panel_quantized_avx512.cpp, as Highway 1.0 has no vpdpwssd) and SVE (Apple
// Silicon has none; NEON runs on every ARM64 CPU).
//
// Highway 1.2 (Debian 13) adds targets 1.0 (Debian 12) lacks: AVX3_ZEN4 and
// AVX3_SPR (AVX-512 plus extensions nothing here uses) and NEON_BF16. Left
// out too, so that both releases build and run the same kernels and name
// them the same (AVX-512, NEON). (Its NEON_WITHOUT_AES, the arm64 baseline,
// stays: isa.cpp names it NEON.) Highway 1.2 defines its version in
// hwy/base.h, which reads no target setting; 1.0 does not, and has none of
// these targets.
#pragma once

#include <hwy/base.h>

#if defined(HWY_MAJOR) && (HWY_MAJOR > 1 || HWY_MINOR >= 2)
#define PDLAB_HWY_1_2_TARGETS (HWY_AVX3_ZEN4 | HWY_AVX3_SPR | HWY_NEON_BF16)
#else
#define PDLAB_HWY_1_2_TARGETS 0
#endif

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
    (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | PDLAB_HWY_1_2_TARGETS)
#endif
