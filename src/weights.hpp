// The model's parameters, loaded from a checkpoint or made up from a seed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config.hpp"
#include "matmul.hpp"
#include "safetensors.hpp"

namespace pd {

struct LayerWeights {
    std::vector<float> norm1_w, norm1_b;  // (dim); the bias only for GPT-2's LayerNorm
    Linear qkv;                           // (q_dim + 2*kv_dim, dim): rows [q | k | v]
    Linear attn_out;                      // (dim, q_dim)
    std::vector<float> norm2_w, norm2_b;  // (dim)
    Linear mlp_in;                        // llama: (2*hidden, dim) rows [gate | up]; gpt2: (hidden, dim)
    Linear mlp_out;                       // (dim, hidden)
};

struct Weights {
    std::vector<float> tok_emb;           // (vocab, dim) token embedding
    std::vector<float> pos_emb;           // (max_seq, dim) learned positions, GPT-2 only
    std::vector<LayerWeights> layers;     // (n_layers)
    std::vector<float> norm_f_w, norm_f_b;  // (dim) final norm
    Linear head;                          // (vocab, dim) output head (a copy of tok_emb when tied)
};

// Called with (done, total) while loading, for a progress display.
using Progress = std::function<void(int done, int total)>;

// Reads a Hugging Face checkpoint (GPT-2 or Llama naming) and checks every
// tensor's shape against the config.
Weights load_weights(const Checkpoint& ck, const Config& c, Precision precision,
                     const Progress& progress = {});

// Seeded random weights of the config's shape: real sizes for timing, no download.
Weights synthetic_weights(const Config& c, Precision precision, unsigned long long seed,
                          const Progress& progress = {});

// Bytes of the matrix weights a decode step reads (every Linear, head included).
std::size_t matmul_weight_bytes(const Weights& w);

}  // namespace pd
