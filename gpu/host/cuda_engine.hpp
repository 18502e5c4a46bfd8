// The CUDA backend behind the device seam (src/engine/engine.hpp). src/engine/engine.cpp
// includes this header when the kit is built with PDLAB_HAVE_CUDA and calls
// the two functions below; nothing else in src/ knows the GPU exists.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/engine.hpp"

namespace pd {

// Whether a CUDA GPU is present now and can run this build's kernels. When
// not, *why_not says why in one sentence (no driver, no device, wrong
// architecture). Cheap after the first call.
bool cuda_device_present(std::string* why_not = nullptr);

// Uploads the model's weights to GPU 0 (f32 or bf16, as the host model has
// them) and allocates the device KV cache for opts.batch sequences of
// opts.max_seq positions (0: the model's context length). make_engine has
// checked the options and that a GPU is present.
std::unique_ptr<Engine> make_cuda_engine(std::shared_ptr<const Model> model, const EngineOptions& opts);

// The paged serving engine's forward on GPU 0 (engine.hpp's PagedForward):
// uploads the weights as make_cuda_engine does and allocates device K/V for
// every block of `pool` (whose host vectors stay empty).
std::unique_ptr<PagedForward> make_cuda_paged_forward(std::shared_ptr<const Model> model,
                                                      const PagedKVCache& pool, const CudaSettings& cuda);

// Bytes of one cached K or V element on the GPU: 4, or 2 with a bf16 cache
// (cuda.kv). Needs no GPU.
std::size_t cuda_kv_elem_bytes(const CudaSettings& cuda);

// "NVIDIA H200 (132 SMs, 139.8 GiB, compute capability 9.0)"; empty without a GPU.
std::string cuda_device_summary();

}  // namespace pd
