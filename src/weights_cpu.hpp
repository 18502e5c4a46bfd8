// The CPU's copy of the model's matrices: each Matrix of weights.hpp packed
// into the decode kernel's column panels and oneDNN's blocked layout (a
// Linear, matmul.hpp), the panels of a decode step laid out in the order
// decode reads them. Made once per model, by the first CPU engine (or CPU
// forward pass) that needs it; a CUDA-only run never makes it.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "matmul.hpp"
#include "weights.hpp"

namespace pd {

struct CpuLayer {
    Linear qkv, attn_out, mlp_in, mlp_out;  // shapes as in LayerWeights
};

struct CpuWeights {
    std::vector<CpuLayer> layers;  // (n_layers)
    Linear head;                   // (vocab, dim)
};

// Packs every matrix of `w` in w.precision (seconds for a 1B model).
CpuWeights prepare_cpu_weights(const Weights& w);

// A model's CPU copy, made on first use: engines on several threads may ask
// at once, and exactly one of them packs.
class CpuWeightsOnce {
public:
    const CpuWeights& get(const Weights& w);

private:
    std::once_flag once_;
    std::unique_ptr<const CpuWeights> weights_;
};

}  // namespace pd
