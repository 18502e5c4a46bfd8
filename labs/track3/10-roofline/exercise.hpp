// Lab 10: what you write. The bookkeeping of the roofline: how many
// floating-point operations each product of a forward pass does, how many
// bytes it must move to or from DRAM, and what the machine's two ceilings
// allow at that ratio.
//
// The cost model (the same as the engine's, src/measure/roofline.hpp):
//   FLOPs   a multiply-add is 2 FLOPs. A product y (rows, out) = x (rows, in) W^T
//           does 2 * rows * in * out.
//   bytes   only what MUST cross the DRAM bus once per pass:
//           - every weight of a matrix once, at the precision's bytes per weight
//             (f32: 4, bf16: 2), however many rows use it: the rows of a pass
//             share the weight while it is in the core;
//           - the K and V attention moves, always f32 (4 bytes): decode READS
//             each sequence's cached positions; prefill WRITES the new ones
//             (its attention re-reads them while they are still in cache);
//           - activations are NOT counted: a few rows of dim floats, they live
//             in the caches (for a prompt of thousands of tokens they do not:
//             see the questions).
#pragma once

#include <string>
#include <vector>

#include "engine/matmul.hpp"  // Precision, bytes_per_weight()
#include "io/config.hpp"      // Config

namespace pd::lab10 {

// FLOPs and DRAM bytes of one product (or of a phase: the sum of its products).
struct Count {
    std::string name;  // see count_phase
    double flops = 0;
    double bytes = 0;
};

// Task 1 (README "One product"): y (rows, out) = x (rows, in) @ W^T with W
// (out, in) in precision p. Throws std::invalid_argument when rows, in or out
// is below 1.
Count count_matmul(const std::string& name, double rows, int in, int out, Precision p);

enum class Phase { prefill, decode };

// The pass being counted.
//   prefill: `batch` prompts of `prompt_len` tokens each, from an empty cache
//            (the engine prefills them one after another; count them as one pass)
//   decode : one step for `batch` sequences whose caches hold `context`
//            positions each, the new token included (a mean over a run of
//            steps need not be whole: hence a double)
struct PhaseShape {
    Phase phase = Phase::decode;
    Precision precision = Precision::f32;
    int batch = 1;
    int prompt_len = 0;   // prefill only
    double context = 0;   // decode only
};

// Task 2 (README "A whole pass"): the seven products of a pass, summed over the
// n_layers layers, in this order and with these names:
//   "qkv"          x -> [q | k | v]: dim -> q_dim + 2 kv_dim           (every row)
//   "attn_scores"  q . k for every (query row, cached position) pair, every query head
//   "attn_values"  the weighted sum of V rows over the same pairs
//   "attn_out"     q_dim -> dim                                        (every row)
//   "mlp_in"       dim -> hidden, twice for Llama (gate and up, one fused matrix)
//   "mlp_out"      hidden -> dim                                       (every row)
//   "head"         dim -> vocab, ONE row per sequence: prefill wants the last
//                  position's logits only (and the head is not in the layers)
// Attention: each (query, position) pair costs one head_dim dot product in
// attn_scores and one head_dim multiply-add of a V row in attn_values, for
// each of the n_heads query heads. A prompt is causal: its query i sees
// positions 0..i. attn_scores moves the K bytes, attn_values the V bytes
// (n_kv_heads * head_dim floats per position and layer each).
// Throws std::invalid_argument when batch < 1, a prefill's prompt_len < 1 or a
// decode's context < 1.
std::vector<Count> count_phase(const Config& c, const PhaseShape& s);

// Task 3 (README "The roofline"): the fastest rate, in GFLOP/s, a kernel of
// arithmetic intensity `intensity` (FLOP per byte) can reach under a compute
// ceiling `peak_gflops` (GFLOP/s) and a memory ceiling `bandwidth_gbps` (GB/s,
// 1e9 bytes per second). Throws std::invalid_argument for a negative intensity
// or a ceiling that is not positive.
double attainable_gflops(double intensity, double peak_gflops, double bandwidth_gbps);

// Task 4 (README "When batching stops being free"): the smallest batch B at
// which one decode step (your count_phase, at this context and precision)
// reaches the ridge: FLOPs / bytes >= ridge. 0 when no batch ever does.
// Throws std::invalid_argument when context < 1 or ridge <= 0.
long compute_bound_batch(const Config& c, Precision p, double context, double ridge);

}  // namespace pd::lab10
