// Whether this machine can run the GPU track, and when it cannot, what is
// missing in the student's words: no NVIDIA driver, no GPU, a driver older than
// the kit's CUDA, a GPU older than the kernels need, or a build without code
// for this GPU. probe_cuda() asks the CUDA runtime; why_cuda_unusable() turns
// its answers into one sentence, so that every case is tested without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace pd::gpu {

// The oldest GPU the kernels run on, as compute capability x 10: lab 14's
// attention pair multiplies bf16 tensor-core fragments (wmma), and the bf16
// GEMVs and caches use bf16 arithmetic, both of which need 8.0 (A100, RTX 30xx).
inline constexpr int kMinComputeCapability = 80;

// What the CUDA runtime said about this machine.
struct CudaFacts {
    cudaError_t count_error = cudaSuccess;  // cudaGetDeviceCount's answer
    int runtime_version = 0;                // the kit's CUDA runtime: 13000 for 13.0
    int driver_version = 0;                 // the newest CUDA the driver runs; 0: no NVIDIA driver
    int device_count = 0;
    std::string name;                       // GPU 0's name
    int major = 0, minor = 0;               // GPU 0's compute capability
    bool kernels_load = true;               // this build holds code GPU 0 runs
    std::string kernel_error;               // ... and when not, the runtime's reason
};

// Asks the runtime about GPU 0 (and makes it current when there is one).
CudaFacts probe_cuda();

// Empty when GPU 0 can run this build; else one sentence saying what is
// missing and how to fix it. built_archs: the -Dgpu_archs the kit was built with.
std::string why_cuda_unusable(const CudaFacts& f, const std::string& built_archs);

// "13.0" for the runtime's and driver's 13000.
std::string cuda_version_text(int version);

}  // namespace pd::gpu
