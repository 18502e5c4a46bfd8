// The instruction set the CPU kernels run with, chosen once per process.
//
// One binary carries every kernel for AVX-512, AVX2, NEON and a portable
// fallback (Google Highway's dynamic dispatch); the best one this CPU has is
// used, unless PDLAB_ISA caps it, so that one machine can test the paths of
// others:
//   PDLAB_ISA=best     the default
//   PDLAB_ISA=avx512   AVX-512 kernels (x86)
//   PDLAB_ISA=avx2     AVX2 kernels, and oneDNN capped at AVX2 too (x86)
//   PDLAB_ISA=neon     NEON kernels (ARM64, its baseline and only choice)
//   PDLAB_ISA=scalar   the portable fallback (x86; slow, for tests)
// Asking for an instruction set the CPU lacks, or a name not listed, is a
// UserError that says what this machine offers.
#pragma once

#include <string>
#include <vector>

namespace pd {

// Applies PDLAB_ISA (once; later calls are free) and returns the kernels'
// instruction set, e.g. "AVX2". Every kernel entry point calls it first.
const std::string& kernel_isa();

// The PDLAB_ISA names this machine can run, best first, e.g.
// {"avx512", "avx2", "scalar"}: what the tests iterate over.
std::vector<std::string> available_isas();

// True where the AVX-512 BF16 product (vdpbf16ps) may be used: the CPU has
// it and PDLAB_ISA does not cap below AVX-512.
bool use_avx512_bf16();

// True where the AVX-512 VNNI int8/int4 decode kernel (vpdpwssd) may be used:
// the CPU has it and PDLAB_ISA does not cap below AVX-512.
bool use_avx512_vnni();

}  // namespace pd
