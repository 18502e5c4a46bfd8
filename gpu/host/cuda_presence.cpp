// probe_cuda() and the sentences of why_cuda_unusable() (cuda_presence.hpp).
#include "cuda_presence.hpp"

#include <fmt/format.h>

#include "ops.cuh"

namespace pd::gpu {

std::string cuda_version_text(int version) {
    return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

CudaFacts probe_cuda() {
    CudaFacts f;
    cudaRuntimeGetVersion(&f.runtime_version);
    cudaDriverGetVersion(&f.driver_version);  // leaves 0 when no driver is installed
    f.count_error = cudaGetDeviceCount(&f.device_count);
    cudaGetLastError();  // an error here is not sticky: clear it
    if (f.count_error != cudaSuccess || f.device_count == 0) return f;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaSetDevice(0) != cudaSuccess) {
        f.count_error = cudaGetLastError();
        return f;
    }
    f.name = prop.name;
    f.major = prop.major, f.minor = prop.minor;
    const char* why = nullptr;
    f.kernels_load = kernels_runnable(&why);
    if (!f.kernels_load) f.kernel_error = why ? why : "unknown reason";
    return f;
}

std::string why_cuda_unusable(const CudaFacts& f, const std::string& built_archs) {
    const std::string runtime = cuda_version_text(f.runtime_version);
    if (f.driver_version == 0)
        return fmt::format(
            "no NVIDIA driver found on this machine (the kit's CUDA {} runtime could not load the "
            "driver's libcuda.so.1): install the NVIDIA driver for your GPU, after which nvidia-smi "
            "lists it",
            runtime);
    const std::string driver = cuda_version_text(f.driver_version);
    if (f.driver_version < f.runtime_version)
        return fmt::format(
            "the NVIDIA driver is too old for this build's CUDA: it runs CUDA up to {}, the kit was "
            "built with CUDA {}; update the driver, or build the kit with a CUDA Toolkit no newer "
            "than {}",
            driver, runtime, driver);
    if (f.count_error == cudaErrorNoDevice || (f.count_error == cudaSuccess && f.device_count == 0))
        return fmt::format(
            "no NVIDIA GPU found: the driver (CUDA {}) is installed but sees no GPU; nvidia-smi "
            "shows what it sees, and CUDA_VISIBLE_DEVICES, if set, must name one",
            driver);
    if (f.count_error != cudaSuccess)
        return fmt::format("the CUDA runtime cannot use this machine's GPU ({}; driver CUDA {}, runtime "
                           "CUDA {}); nvidia-smi shows what the driver sees",
                           cudaGetErrorString(f.count_error), driver, runtime);
    if (f.major * 10 + f.minor < kMinComputeCapability)
        return fmt::format(
            "GPU 0 ({}) has compute capability {}.{}, and the kit's GPU kernels need {}.{} or newer "
            "(A100, RTX 30xx/40xx, L4, H100): they use bf16 tensor-core fragments and bf16 "
            "arithmetic, which this GPU lacks",
            f.name, f.major, f.minor, kMinComputeCapability / 10, kMinComputeCapability % 10);
    if (!f.kernels_load)
        return fmt::format(
            "GPU 0 ({}, compute capability {}.{}) cannot run this build's kernels ({}): the kit was "
            "compiled for -Dgpu_archs={}; reconfigure with -Dgpu_archs=native (or add {}{}) and "
            "rebuild",
            f.name, f.major, f.minor, f.kernel_error, built_archs, f.major, f.minor);
    return {};
}

}  // namespace pd::gpu
