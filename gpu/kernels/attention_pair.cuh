// Lab 14's pair of attention kernels on the GPU, the twins of
// labs/track3/14-attention-kernels/kernels.hpp (same names, same shape, same
// layouts), and the flash kernel the engine's bf16 prefill runs.
//
//   naive_attention  materialises the scores: (n_heads, T, S) floats in global
//                    memory, written (q . k), read and rewritten (softmax),
//                    read again (P V): three kernels, three passes over T*S floats
//                    per head. f32 arithmetic throughout.
//   tiled_attention  flash-style on bf16 tensor cores: a block takes kFlashBr
//                    queries of one head; the keys pass in tiles of kFlashBc
//                    through shared memory, and each query row keeps a running
//                    max m, sum l and unnormalised output o (the online softmax
//                    of the lab's tiled_attention_head). q, K and V are rounded to bf16 on
//                    the way into shared memory (exact when they are bf16
//                    already), the probabilities too; every sum is f32. No score
//                    leaves the block: its scratch is its shared memory,
//                    whatever the length.
//
// Both take T queries at the LAST T of S positions, causal (query i sits at
// position S - T + i and sees keys 0 .. S - T + i): a whole prompt is T = S, a
// decode step T = 1. Query head h reads KV head h / (n_heads / n_kv_heads).
// bf16 tensors are passed as std::uint16_t (this header is plain C++17).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace pd::gpu {

struct AttentionShape {
    int T = 1;           // queries
    int S = 1;           // keys (cached positions), S >= T
    int n_heads = 1;     // query heads
    int n_kv_heads = 1;  // KV heads, n_heads a multiple of it
    int D = 1;           // head_dim
};

// Where the tensors lie, in elements. The pair's contiguous layouts (as the
// lab's) are q, out (T, n_heads, D) and K, V (n_kv_heads, S, D); the engine
// reads q in place from its [q | k | v] rows and K, V from its cache, where one
// KV head's rows are max_seq * D apart from the next head's.
struct AttentionStrides {
    int q_stride = 0;           // from query row t to row t + 1
    int out_stride = 0;         // from output row t to row t + 1
    std::size_t kv_stride = 0;  // from KV head g's (S, D) rows to head g + 1's
};
AttentionStrides contiguous_strides(const AttentionShape& s);

// --- naive ------------------------------------------------------------------------

// Floats of scratch naive_attention needs: every head's (T, S) scores at once.
std::size_t naive_attention_scratch(const AttentionShape& s);

// Returns the scratch bytes of one head's work, as the CPU twin does: T * S
// floats (all heads' matrices exist at once: n_heads times that in `scratch`).
std::size_t naive_attention(float* out, const float* q, const float* K, const float* V,
                            const AttentionShape& s, float* scratch, cudaStream_t stream);
std::size_t naive_attention(float* out, const std::uint16_t* q, const std::uint16_t* K,
                            const std::uint16_t* V, const AttentionShape& s, float* scratch,
                            cudaStream_t stream);

// --- tiled (flash) ------------------------------------------------------------------

constexpr int kFlashBr = 64;  // queries per block: 4 warps of 16 rows (one tensor-core tile high)
constexpr int kFlashBc = 64;  // keys per tile

// Whether tiled_attention takes this head_dim: a multiple of 16 (the
// tensor-core tile), 16 .. 256 (its shared memory then stays under 200 KiB).
bool tiled_attention_supports(int D);

// One block's shared memory in bytes for head_dim D: the bf16 tiles of Q
// (kFlashBr x D), K and V (kFlashBc x D), the f32 scores and bf16
// probabilities of one tile (kFlashBr x kFlashBc) and the f32 running output
// (kFlashBr x D), rows padded against bank conflicts. Independent of T and S.
std::size_t tiled_attention_smem_bytes(int D);

// Contiguous layouts, f32 out. Returns one block's shared memory in bytes
// (the scratch of kFlashBr queries of one head; no global scratch at all).
std::size_t tiled_attention(float* out, const float* q, const float* K, const float* V,
                            const AttentionShape& s, cudaStream_t stream);
std::size_t tiled_attention(float* out, const std::uint16_t* q, const std::uint16_t* K,
                            const std::uint16_t* V, const AttentionShape& s, cudaStream_t stream);
// Strided f32 inputs, bf16 out: the engine's prefill of a bf16 model, whose
// next product takes bf16 (gpu/kernels/attention.cu's attention_prefill_flash).
std::size_t tiled_attention(std::uint16_t* out, const float* q, const float* K, const float* V,
                            const AttentionShape& s, const AttentionStrides& strides, cudaStream_t stream);
// The same reading a bf16 cache (PDLAB_CUDA_KV=bf16): K and V staged as they are.
std::size_t tiled_attention(std::uint16_t* out, const float* q, const std::uint16_t* K, const std::uint16_t* V,
                            const AttentionShape& s, const AttentionStrides& strides, cudaStream_t stream);

}  // namespace pd::gpu
