// Whether a CUDA engine fits on the GPU, counted before anything is
// allocated (host side, C++20, g++): the weights, the KV cache, the rotary
// tables, the run state at its largest and the cuBLAS workspace, against the
// device's free memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "model.cuh"
#include "engine/model.hpp"

namespace pd::gpu {

// UserError, naming each part and what to try, when the engine's peak does
// not fit in the free memory of `prop`'s device: m's weights as uploaded
// (weights_upload.hpp), a KV cache of `kv` bytes (described by kv_shape) and
// rotary tables for S positions, a run state of `run_state` bytes and the
// cuBLAS workspace.
void check_device_memory(const cudaDeviceProp& prop, const Model& m, std::size_t kv, const std::string& kv_shape,
                         std::size_t run_state, int S);

// Bytes of the contiguous cache's run state after a prefill of S tokens
// (activations for S rows and its score scratch) and a decode of `batch`
// rows (one row of logits per sequence): the largest ensure_run_state
// makes it with Keep::last. A prefill keeping every position's logits
// (Keep::all) needs (S, vocab) floats more, allocated when it comes.
std::size_t peak_run_state_bytes(const DeviceModel& dm, int batch, int S);

// The paged cache's: a step of S rows (a whole context's chunk), each a
// query of the decode kernel, and logits for `sequences` rows (one per live
// sequence, each of which holds a block).
std::size_t peak_paged_run_state_bytes(const DeviceModel& dm, int sequences, int S);

}  // namespace pd::gpu
