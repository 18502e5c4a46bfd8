// The decoder on the GPU: device weights, device run state, and the forward
// pass of both phases. Mirrors src/engine/model.hpp; the weights are uploaded once
// from the host pd::Model by cuda_engine.cpp (which is where the C++20 host
// types live), so this header only needs plain structs.
//
//   prefill : all T prompt rows in one pass; cuBLAS GEMMs with M = T
//             (compute-bound), causal attention on cuBLAS (attention.cuh).
//   decode  : one row per sequence; every product streams its whole weight
//             matrix for one row of work (memory-bound), split-K attention
//             over the cache. All its inputs are in device arrays, so a step
//             can be captured once as a CUDA graph and replayed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda_check.cuh"
#include "kv_cache.cuh"
#include "matmul.cuh"

namespace pd::gpu {

// The model's shape (a copy of what the kernels need from pd::Config).
struct DeviceShape {
    // The family's traits (pd::FamilyTraits): llama's by default, GPT-2's are
    // LayerNorm with a bias, learned positions and a GELU MLP.
    bool rmsnorm = true, rotary = true, swiglu = true;
    int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int vocab_size = 0, max_seq_len = 0;
    float norm_eps = 1e-5f;

    int q_dim() const { return n_heads * head_dim; }
    int kv_dim() const { return n_kv_heads * head_dim; }
    int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
    int mlp_in_dim() const { return swiglu ? 2 * hidden_dim : hidden_dim; }
};

struct DeviceLayer {
    const float *norm1_w = nullptr, *norm1_b = nullptr;  // (dim); biases for GPT-2 only
    DeviceLinear qkv, attn_out;
    const float *norm2_w = nullptr, *norm2_b = nullptr;
    DeviceLinear mlp_in, mlp_out;
};

// Device pointers into memory owned by an arena (see cuda_engine.cpp).
struct DeviceModel {
    DeviceShape shape;
    bool bf16 = false;                 // matrix weights in bf16 or int8 (activations rounded to bf16 before each product)
    bool flash_prefill = false;        // prefill attention on the flash kernel (bf16 activations; PDLAB_CUDA_FLASH=1, or a bf16 KV cache)
    const float* tok_emb = nullptr;    // (vocab, dim) f32
    const float* pos_emb = nullptr;    // (max_seq, dim), GPT-2 only
    std::vector<DeviceLayer> layers;
    const float *norm_f_w = nullptr, *norm_f_b = nullptr;
    DeviceLinear head;
    const float *rope_cos = nullptr, *rope_sin = nullptr;  // (max_seq, head_dim/2), Llama only
};

// Scratch for forward passes of up to `capacity` rows, in device memory.
// Sized outside the decode loop; decode never allocates.
struct DeviceRunState {
    int capacity = 0;                 // rows a forward pass can take
    int logits_rows = 0;              // rows of logits it can return
    DeviceBuffer<float> x;            // (rows, dim) residual stream
    DeviceBuffer<float> xn;           // (rows, dim) normalised input of a sublayer (f32 weights)
    DeviceBuffer<std::uint16_t> act16;  // (rows, max(dim, q_dim, hidden)) bf16 input of a product (bf16 weights)
    DeviceBuffer<float> qkv;          // (rows, q_dim + 2 kv_dim) projections [q | k | v]
    DeviceBuffer<float> att;          // (rows, q_dim) attention output, heads concatenated
    DeviceBuffer<float> mlp_h;        // (rows, mlp_in.out) MLP hidden before activation
    DeviceBuffer<float> mlp_act;      // (rows, hidden) after activation (f32 weights)
    DeviceBuffer<std::uint16_t> mlp16;  // (rows, hidden) bf16 SwiGLU output (Llama, bf16 / int8 weights): apart
                                        // from act16, the MLP-in product's input, which its fused GEMV still reads
    DeviceBuffer<float> kept;         // (logits rows, dim) final-normed rows whose logits we want
    DeviceBuffer<float> logits;       // (logits rows, vocab)
    DeviceBuffer<float> att_scratch;  // decode: split partials; cuBLAS prefill: scores and GEMM pointers
    DeviceBuffer<int> token, slot, pos;  // (rows) per-row inputs, copied from the host each pass
    int generation = 0;               // bumped whenever a buffer moves (captured graphs go stale)
};

// Floats of attention scratch one pass needs: a prefill of `prefill_T`
// tokens after `prefill_start` cached ones on the cuBLAS path (scores and
// GEMM pointers; the flash kernel, flash_prefill, needs none), or
// (prefill_T = 0) a decode of `rows` rows over max_seq positions (split
// partials). The one place that decides: ensure_run_state allocates this and
// the engine's memory check counts it.
std::size_t attention_scratch_floats(const DeviceShape& c, bool flash_prefill, int rows, int max_seq,
                                     int prefill_T = 0, int prefill_start = 0);

// Grows `st` to take `rows` rows and `logits_rows` rows of logits, with the
// attention scratch (attention_scratch_floats) of a prefill of `prefill_T`
// tokens after `prefill_start` cached ones, or (prefill_T = 0) of a decode of
// `rows` rows. Returns true if any buffer was reallocated (and bumps
// st.generation).
bool ensure_run_state(DeviceRunState& st, const DeviceModel& m, int rows, int logits_rows,
                      int max_seq, int prefill_T = 0, int prefill_start = 0);

// Device bytes of a run state grown to `rows` rows, `logits_rows` rows of
// logits and `scratch_floats` of attention scratch (attention_scratch_floats):
// what the engine checks against free memory before it allocates anything.
std::size_t run_state_bytes(const DeviceShape& c, bool bf16, int rows, int logits_rows,
                            std::size_t scratch_floats);

enum class Phase { prefill, decode };

// What one forward pass works on. The per-row token / slot / pos must already
// be in st.token / st.slot / st.pos (device).
// Phase::decode runs every row as one query of sequence st.slot[r] (a row of
// the cache's block table) at st.pos[r]: decode steps, and the paged
// engine's mixed steps (prefill chunks and decode tokens in one pass).
struct ForwardArgs {
    Phase phase = Phase::prefill;
    int rows = 0;         // tokens in this pass
    int slot = 0;         // prefill: the sequence
    int start = 0;        // prefill: its cached length before this pass
    int first_kept = 0;   // logits for rows first_kept .. first_kept + n_kept - 1
    int n_kept = 1;
};

// The layers: enqueues every kernel of one forward pass on blas.stream() and
// returns at once; the logits land in st.logits (n_kept, vocab) when the
// stream gets there. Decode passes enqueue no allocation, no copy from the
// host and no synchronisation (they can be captured in a CUDA graph).
void forward(const DeviceModel& m, DeviceKVCache& cache, DeviceRunState& st, const Blas& blas,
             const ForwardArgs& a);

}  // namespace pd::gpu
