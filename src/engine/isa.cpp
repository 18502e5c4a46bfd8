#include "engine/isa.hpp"

#include <cstdint>
#include <cstdlib>

#include "common.hpp"
#include "engine/hwy_config.hpp"
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace pd {

namespace {

// A PDLAB_ISA name, the Highway target it selects, and how we print it.
struct Isa {
    const char* name;
    std::int64_t target;
    const char* shown;
};

constexpr Isa kIsas[] = {
    {"avx512", HWY_AVX3, "AVX-512"},
    {"avx2", HWY_AVX2, "AVX2"},
    {"neon", HWY_NEON, "NEON"},
#ifdef HWY_NEON_WITHOUT_AES  // Highway 1.2: NEON on a CPU without the AES extension
    {"neon", HWY_NEON_WITHOUT_AES, "NEON"},
#endif
    {"scalar", HWY_EMU128, "portable (no SIMD)"},
    {"scalar", HWY_SCALAR, "portable (no SIMD)"},
};

const Isa* isa_of_target(std::int64_t target) {
    for (const Isa& i : kIsas)
        if (i.target == target) return &i;
    return nullptr;
}

// The compiled targets in `supported`, best (lowest bit) first.
std::vector<std::int64_t> targets_in(std::int64_t supported) {
    std::vector<std::int64_t> out;
    for (std::int64_t t = supported & HWY_TARGETS; t != 0; t &= t - 1) out.push_back(t & -t);
    return out;
}

// The compiled targets this CPU can run, whatever PDLAB_ISA says: read once,
// before choose() caps what Highway reports.
const std::vector<std::int64_t>& runnable_targets() {
    static const std::vector<std::int64_t> all = targets_in(hwy::SupportedTargets());
    return all;
}

// oneDNN follows an x86 cap, so that bf16 prefill takes the path such a CPU has.
void cap_onednn(std::int64_t target) {
#if defined(__x86_64__)
    if (target == HWY_AVX2) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    if (target == HWY_EMU128 || target == HWY_SCALAR) dnnl::set_max_cpu_isa(dnnl::cpu_isa::sse41);
#else
    (void)target;
#endif
}

std::string choose() {
    const char* env = std::getenv("PDLAB_ISA");
    const std::string want = env ? env : "best";
    if (want != "best") {
        const Isa* chosen = nullptr;
        for (std::int64_t t : runnable_targets())
            if (const Isa* i = isa_of_target(t); i && want == i->name) chosen = i;
        if (!chosen) {
            std::string have;
            for (const std::string& n : available_isas()) have += " " + n;
            fail("PDLAB_ISA={} is not an instruction set this build can run on this CPU; use best or one of:{}",
                 want, have);
        }
        // Keep the chosen target and every lesser one (higher bits).
        hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(chosen->target - 1));
        cap_onednn(chosen->target);
    }
    const std::int64_t used = targets_in(hwy::SupportedTargets()).front();
    const Isa* i = isa_of_target(used);
    return i ? i->shown : hwy::TargetName(used);
}

}  // namespace

const std::string& kernel_isa() {
    static const std::string isa = choose();
    return isa;
}

std::vector<std::string> available_isas() {
    std::vector<std::string> names;
    for (std::int64_t t : runnable_targets())
        if (const Isa* i = isa_of_target(t); i && (names.empty() || names.back() != i->name)) names.push_back(i->name);
    return names;
}

// The AVX-512 extension kernels run where the CPU has the extension
// (__builtin_cpu_supports takes only a literal, so each caller asks) and
// PDLAB_ISA leaves AVX-512 chosen. ARM64 has neither.
#if defined(__x86_64__)
#define PDLAB_AVX512_WITH(feature) (kernel_isa() == "AVX-512" && __builtin_cpu_supports(feature))
#else
#define PDLAB_AVX512_WITH(feature) false
#endif

bool use_avx512_bf16() {
    static const bool use = PDLAB_AVX512_WITH("avx512bf16");
    return use;
}

bool use_avx512_vnni() {
    static const bool use = PDLAB_AVX512_WITH("avx512vnni");
    return use;
}

}  // namespace pd
