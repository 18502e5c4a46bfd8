// This machine's GPU for the engine (cuda_engine.hpp): whether it can run
// this build, asked once (cuda_presence.hpp's probe and sentence), and its
// one-line summary.
#include <fmt/format.h>

#include "cuda_engine.hpp"
#include "cuda_presence.hpp"

namespace pd {

namespace {

struct Presence {
    bool present = false;
    std::string why_not;
};

// PDLAB_GPU_ARCHS: -Dgpu_archs, set by gpu/meson.build.
Presence detect_device() {
    Presence p;
    p.why_not = gpu::why_cuda_unusable(gpu::probe_cuda(), PDLAB_GPU_ARCHS);
    p.present = p.why_not.empty();
    return p;
}

const Presence& presence() {
    static const Presence p = detect_device();
    return p;
}

}  // namespace

bool cuda_device_present(std::string* why_not) {
    const Presence& p = presence();
    if (!p.present && why_not) *why_not = p.why_not;
    return p.present;
}

std::string cuda_device_summary() {
    if (!cuda_device_present()) return {};
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        cudaGetLastError();
        return "CUDA GPU 0";
    }
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    return fmt::format("{} ({} SMs, {:.1f} GiB, compute capability {}.{}, CUDA runtime {}, driver {})",
                       prop.name, prop.multiProcessorCount, double(prop.totalGlobalMem) / kGiB,
                       prop.major, prop.minor, gpu::cuda_version_text(runtime),
                       gpu::cuda_version_text(driver));
}

}  // namespace pd
