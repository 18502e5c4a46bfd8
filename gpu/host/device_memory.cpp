#include "device_memory.hpp"

#include <algorithm>

#include "common.hpp"
#include "attention.cuh"
#include "matmul.cuh"
#include "weights_upload.hpp"

namespace pd::gpu {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

void check_device_memory(const cudaDeviceProp& prop, const Model& m, std::size_t kv, const std::string& kv_shape,
                         std::size_t run_state, int S) {
    const Config& c = m.config;
    std::size_t free_b = 0, total_b = 0;
    PD_CUDA(cudaMemGetInfo(&free_b, &total_b));
    const double weights = double(weight_bytes_on_device(m.w));
    const std::size_t rope = c.traits().positions == Positions::rotary ? std::size_t(S) * c.head_dim * sizeof(float) : 0;
    const double cache = double(kv + rope);
    const double work = double(run_state + kBlasWorkspaceBytes);
    const double need = weights + cache + work;
    if (need > double(free_b))
        fail("the model needs about {:.2f} GiB on the GPU (weights {:.2f} GiB, KV cache {:.2f} GiB "
             "for {}, activations, attention scratch and cuBLAS workspace "
             "{:.2f} GiB) but {} has {:.2f} GiB free: try --precision bf16, a smaller --batch, fewer "
             "KV blocks or a shorter context",
             need / kGiB, weights / kGiB, cache / kGiB, kv_shape, work / kGiB, prop.name, double(free_b) / kGiB);
}

std::size_t peak_run_state_bytes(const DeviceModel& dm, int batch, int S) {
    const std::size_t scratch = std::max(attention_scratch_floats(dm.shape, dm.flash_prefill, S, S, S, 0),
                                         attention_scratch_floats(dm.shape, dm.flash_prefill, batch, S));
    return run_state_bytes(dm.shape, dm.bf16, std::max(S, batch), batch, scratch);
}

std::size_t peak_paged_run_state_bytes(const DeviceModel& dm, int sequences, int S) {
    return run_state_bytes(dm.shape, dm.bf16, S, sequences, attention_scratch_floats(dm.shape, dm.flash_prefill, S, S));
}

}  // namespace pd::gpu
