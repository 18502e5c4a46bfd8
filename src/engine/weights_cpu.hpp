// The CPU's copy of the model's matrices: each Matrix of weights.hpp packed
// into the decode kernel's column panels and oneDNN's blocked layout (a
// Linear, matmul.hpp), the panels of a decode step laid out in the order
// decode reads them. Made once per model, when it is loaded to serve the CPU
// (make_model); a CUDA-only run never makes it.
#pragma once

#include <vector>

#include "engine/matmul.hpp"
#include "engine/weights.hpp"

namespace pd {

struct CpuLayer {
    Linear qkv, attn_out, mlp_in, mlp_out;  // shapes as in LayerWeights
};

struct CpuWeights {
    std::vector<CpuLayer> layers;  // (n_layers)
    Linear head;                   // (vocab, dim)
};

// What becomes of each Matrix's row-major copy once it is packed.
enum class RowsAfterPacking { keep, release };

// Packs every matrix of `w` in w.precision (seconds for a 1B model). With
// RowsAfterPacking::release each Matrix's rows are freed right after packing
// it, so the two copies of the matrices never coexist in full. The arenas
// decode streams go on huge pages when `huge_pages` (arrange_for_decode).
CpuWeights prepare_cpu_weights(Weights& w, RowsAfterPacking rows, bool huge_pages);

}  // namespace pd
