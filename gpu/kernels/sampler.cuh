// Choosing the next token on the GPU, so that greedy decoding copies back one
// int per row instead of the logits. Mirrors src/engine/sampler.hpp; the CPU
// twin of argmax is pd::argmax.
#pragma once

#include <cuda_runtime_api.h>

namespace pd::gpu {

// out[r] = the index of the largest of logits[r, 0..n) for r < rows, the
// first one on ties, as pd::argmax (which also keeps index 0 when
// logits[r, 0] is NaN and never picks a NaN elsewhere). One block per row.
void argmax(int* out, const float* logits, int rows, int n, cudaStream_t s);

}  // namespace pd::gpu
