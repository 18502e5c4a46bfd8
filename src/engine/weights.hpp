// The model's parameters, loaded from a checkpoint or made up from a seed,
// row-major and in f32, as loaded. Each backend prepares its own copy of the
// matrices from these (as calm's prepare()/prepare_cuda()): the CPU packs
// panels and oneDNN layouts (weights_cpu.hpp), the CUDA engine uploads the
// rows as they are (gpu/host/cuda_engine.cpp).
//
// Who keeps the rows: a model is loaded for the engines it will serve
// (Backends, model.hpp; pdlab asks for its --device). When the CPU packs and
// no CUDA engine will upload, each Matrix's rows are released as soon as they
// are packed, so a CPU run holds one copy of the matrices, not two (a 1B f32
// model: 4.4 GB less). The vectors the CPU forward reads as they are stay:
// tok_emb (the tied head's rows too), pos_emb and the norms. A CUDA engine on
// such a model refuses, saying it was loaded for the CPU only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "io/config.hpp"
#include "engine/matmul.hpp"  // Precision
#include "io/safetensors.hpp"

namespace pd {

// The weights of one linear layer y = x @ W^T + b.
struct Matrix {
    int in = 0, out = 0;
    std::vector<float> w;     // (out, in) row-major; empty once released (see the top)
    std::vector<float> bias;  // (out), or empty
};

struct LayerWeights {
    std::vector<float> norm1_w, norm1_b;  // (dim); the bias only for GPT-2's LayerNorm
    Matrix qkv;                           // (q_dim + 2*kv_dim, dim): rows [q | k | v]
    Matrix attn_out;                      // (dim, q_dim)
    std::vector<float> norm2_w, norm2_b;  // (dim)
    Matrix mlp_in;                        // llama: (2*hidden, dim) rows [gate | up]; gpt2: (hidden, dim)
    Matrix mlp_out;                       // (dim, hidden)
};

struct Weights {
    Precision precision = Precision::f32;  // what the backends prepare the matrices in
    std::vector<float> tok_emb;           // (vocab, dim) token embedding
    std::vector<float> pos_emb;           // (max_seq, dim) learned positions, GPT-2 only
    std::vector<LayerWeights> layers;     // (n_layers)
    std::vector<float> norm_f_w, norm_f_b;  // (dim) final norm
    Matrix head;                          // (vocab, dim) output head; head.w empty when tied to tok_emb
    bool rows_released = false;           // every Matrix's w freed once packed for the CPU (see the top)
};

// The output head's rows (vocab, dim): tok_emb when tied, else head.w. Fails
// once the rows are released (an untied head's would read as tied).
const std::vector<float>& head_rows(const Weights& w);

// Called with (done, total) while loading, for a progress display.
using Progress = std::function<void(int done, int total)>;

// Reads a Hugging Face checkpoint (GPT-2 or Llama naming) and checks every
// tensor's shape against the config.
Weights load_weights(const Checkpoint& ck, const Config& c, Precision precision,
                     const Progress& progress = {});

// Seeded random weights of the config's shape: real sizes for timing, no download.
Weights synthetic_weights(const Config& c, Precision precision, unsigned long long seed,
                          const Progress& progress = {});

// Bytes of the matrix weights a decode step reads (every Matrix, head
// included) once prepared in w.precision, int8's scales included; or, from
// the same shapes, in another precision `p`.
std::size_t matmul_weight_bytes(const Weights& w);
std::size_t matmul_weight_bytes(const Weights& w, Precision p);

}  // namespace pd
