// The model's weights on the GPU (host side, C++20, g++): the kernels' copy
// of the shape, every matrix and vector uploaded once into an arena, the
// rotary tables, and the bytes all that takes, which the engine checks
// against free memory before uploading (device_memory.hpp).
#pragma once

#include <cstddef>

#include "cuda_check.cuh"
#include "model.cuh"
#include "engine/weights.hpp"

namespace pd::gpu {

// The kernels' copy of the model's shape.
DeviceShape device_shape(const Config& c);

// f32 weights with a tied head: the head is the embedding, kept once.
bool head_shares_embedding(const Weights& w);

// Bytes upload_weights puts on the device; int8 matrices count twice: as
// stored (q and scales) and as the bf16 copy cuBLAS reads.
std::size_t weight_bytes_on_device(const Weights& w);

// Uploads the loaded row-major (out, in) matrices as they are (f32), rounded
// to bf16 as the CPU's packing does, or (int8) quantized with the CPU's own
// quantize_rows plus a bf16 copy for cuBLAS; then the norms and embeddings.
// Fills every weight pointer of `dm`, whose shape and bf16 are set.
void upload_weights(DeviceModel& dm, DeviceArena& arena, const Weights& w);

// Rotary tables for the S positions the cache holds (rotary families), not
// the model's whole context: (S, head_dim/2) each, into dm.rope_cos / rope_sin.
void upload_rope(DeviceModel& dm, DeviceArena& arena, const Config& c, int S);

}  // namespace pd::gpu
