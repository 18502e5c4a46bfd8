// Lab 14's pair on the GPU (attention_pair.cuh); the CPU twins are in
// labs/track3/14-attention-kernels/kernels.cpp. The numbered steps these grew
// from are versions 1, 2 and 5 of gpu/dev/attention_prefill.cu.
#include "attention_pair.cuh"

#include <mma.h>

#include "common.cuh"
#include "cuda_check.cuh"
#include "decode_index.cuh"
#include "flash_index.cuh"

namespace pd::gpu {

namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return __bfloat162float(x); }

const bf16* as_bf16_in(const std::uint16_t* p) { return reinterpret_cast<const bf16*>(p); }

void check_shape(const AttentionShape& s) {
    PD_GPU_REQUIRE(s.T >= 1 && s.S >= s.T && s.D >= 1);
    PD_GPU_REQUIRE(s.n_heads >= 1 && s.n_kv_heads >= 1 && s.n_heads % s.n_kv_heads == 0);
}

// --- naive: three kernels, the scores in global memory ---------------------------------

constexpr int kNaiveThreads = 128;

// Row (h, i) of the score matrix P (n_heads, T, S): P[h][i][j] = q_i . k_j / sqrt(D)
// for the keys the query sees; the masked rest is never touched (as on the CPU).
// One block per (query, head); q_i is staged in shared memory (D floats).
template <typename In>
__global__ void naive_scores_kernel(float* P, const In* q, const In* K, AttentionShape s) {
    extern __shared__ float qs[];  // (D)
    const int i = blockIdx.x, h = blockIdx.y, g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const In* qi = q + (std::size_t(i) * s.n_heads + h) * s.D;
    const In* Kg = K + std::size_t(g) * s.S * s.D;
    for (int d = threadIdx.x; d < s.D; d += blockDim.x) qs[d] = widen(qi[d]);
    __syncthreads();
    const float scale = 1.0f / sqrtf(float(s.D));
    float* p = P + (std::size_t(h) * s.T + i) * s.S;
    for (int j = threadIdx.x; j < visible_keys(s, i); j += blockDim.x) {
        const In* k = Kg + std::size_t(j) * s.D;
        float dot = 0.0f;
        for (int d = 0; d < s.D; d++) dot += qs[d] * widen(k[d]);
        p[j] = dot * scale;
    }
}

// Softmax of row (h, i) in place: read, exponentiate against the row's max, rescale.
__global__ void naive_softmax_kernel(float* P, AttentionShape s) {
    const int i = blockIdx.x, h = blockIdx.y, n = visible_keys(s, i);
    float* p = P + (std::size_t(h) * s.T + i) * s.S;
    const float inv = 1.0f / block_exp_sum(p, n);
    // Each thread rescales the entries block_exp_sum had it write.
    for (int j = threadIdx.x; j < n; j += blockDim.x) p[j] *= inv;
}

// out_i (head h) = sum_j P[h][i][j] V_j; threads across D (coalesced V rows).
template <typename In>
__global__ void naive_pv_kernel(float* out, const float* P, const In* V, AttentionShape s) {
    const int i = blockIdx.x, h = blockIdx.y, n = visible_keys(s, i);
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const float* p = P + (std::size_t(h) * s.T + i) * s.S;
    const In* Vg = V + std::size_t(g) * s.S * s.D;
    for (int d = threadIdx.x; d < s.D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) acc += p[j] * widen(Vg[std::size_t(j) * s.D + d]);
        out[(std::size_t(i) * s.n_heads + h) * s.D + d] = acc;
    }
}

template <typename In>
std::size_t naive_launch(float* out, const In* q, const In* K, const In* V, const AttentionShape& s,
                         float* scratch, cudaStream_t stream) {
    check_shape(s);
    const dim3 rows(s.T, s.n_heads);
    const int pv_threads = s.D >= kNaiveThreads ? kNaiveThreads : (s.D + kWarp - 1) / kWarp * kWarp;
    naive_scores_kernel<<<rows, kNaiveThreads, s.D * sizeof(float), stream>>>(scratch, q, K, s);
    PD_CUDA_LAUNCHED();
    naive_softmax_kernel<<<rows, kNaiveThreads, 0, stream>>>(scratch, s);
    PD_CUDA_LAUNCHED();
    naive_pv_kernel<<<rows, pv_threads, 0, stream>>>(out, scratch, V, s);
    PD_CUDA_LAUNCHED();
    return std::size_t(s.T) * s.S * sizeof(float);
}

// --- tiled: flash-style on bf16 tensor cores ----------------------------------------

namespace wmma = nvcuda::wmma;

constexpr int kTile = 16;                          // the tensor-core tile: m16n16k16
constexpr int kFlashWarps = kFlashBr / kTile;      // 4: a warp owns 16 query rows
constexpr int kFlashThreads = kFlashWarps * kWarp;
constexpr int kLdS = kFlashBc + 4;                 // f32 scores row stride (padded)
constexpr int kLdP = kFlashBc + 8;                 // bf16 probabilities row stride (padded)

__host__ __device__ std::size_t round128(std::size_t bytes) { return (bytes + 127) / 128 * 128; }

// The block's shared memory: byte offsets of its six arrays, each 128-byte
// aligned. Row strides are padded (+8 bf16, +4 f32) so that the rows of a
// 16 x 16 fragment fall in different banks; every fragment pointer stays
// 32-byte aligned (16 rows of a padded stride are a multiple of 32 bytes).
struct FlashSmem {
    int ld_h = 0;  // bf16 row stride of Qs, Ks, Vs: D + 8
    int ld_o = 0;  // f32 row stride of Os: D + 4
    std::size_t q = 0, k = 0, v = 0, s = 0, p = 0, o = 0, total = 0;
};

__host__ __device__ FlashSmem flash_smem(int D) {
    FlashSmem f;
    f.ld_h = D + 8;
    f.ld_o = D + 4;
    f.q = 0;                                                                  // Qs (kFlashBr, ld_h) bf16
    f.k = f.q + round128(std::size_t(kFlashBr) * f.ld_h * sizeof(bf16));      // Ks (kFlashBc, ld_h) bf16
    f.v = f.k + round128(std::size_t(kFlashBc) * f.ld_h * sizeof(bf16));      // Vs (kFlashBc, ld_h) bf16
    f.s = f.v + round128(std::size_t(kFlashBc) * f.ld_h * sizeof(bf16));      // Ss (kFlashBr, kLdS) f32
    f.p = f.s + round128(std::size_t(kFlashBr) * kLdS * sizeof(float));       // Ps (kFlashBr, kLdP) bf16
    f.o = f.p + round128(std::size_t(kFlashBr) * kLdP * sizeof(bf16));        // Os (kFlashBr, ld_o) f32
    f.total = f.o + round128(std::size_t(kFlashBr) * f.ld_o * sizeof(float));
    return f;
}

// One warp's view of the block's tiles: its 16 rows of Q, S, P and O, the shared K and V tile.
struct WarpTiles {
    const bf16* Q;  // (16, ld_h)
    const bf16* K;  // (kFlashBc, ld_h)
    const bf16* V;  // (kFlashBc, ld_h)
    float* S;       // (16, kLdS)
    bf16* P;        // (16, kLdP)
    float* O;       // (16, ld_o)
    int ld_h, ld_o, D;
};

// S (16, kFlashBc) = Q (16, D) . K^T, unscaled. K's rows are K^T's columns,
// so K^T is read as a column-major matrix with K's row stride.
__device__ __forceinline__ void warp_scores(const WarpTiles& w) {
    wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, bf16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> c;
    for (int n = 0; n < kFlashBc / kTile; n++) {
        wmma::fill_fragment(c, 0.0f);
        for (int k = 0; k < w.D / kTile; k++) {
            wmma::load_matrix_sync(a, w.Q + k * kTile, w.ld_h);
            wmma::load_matrix_sync(b, w.K + n * kTile * w.ld_h + k * kTile, w.ld_h);
            wmma::mma_sync(c, a, b, c);
        }
        wmma::store_matrix_sync(w.S + n * kTile, c, kLdS, wmma::mem_row_major);
    }
}

// O (16, D) += P (16, kFlashBc) . V (kFlashBc, D), O kept in shared memory
// between tiles (an accumulator fragment's layout is opaque, and the online
// softmax must rescale O row by row).
__device__ __forceinline__ void warp_pv(const WarpTiles& w) {
    wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, bf16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float> c;
    for (int n = 0; n < w.D / kTile; n++) {
        wmma::load_matrix_sync(c, w.O + n * kTile, w.ld_o, wmma::mem_row_major);
        for (int k = 0; k < kFlashBc / kTile; k++) {
            wmma::load_matrix_sync(a, w.P + k * kTile, kLdP);
            wmma::load_matrix_sync(b, w.V + k * kTile * w.ld_h + n * kTile, w.ld_h);
            wmma::mma_sync(c, a, b, c);
        }
        wmma::store_matrix_sync(w.O + n * kTile, c, w.ld_o, wmma::mem_row_major);
    }
}

// The online softmax of the lab's tiled_attention_head (its fold of one key
// tile) for the warp's 16 rows, one row at a time across the 32 lanes (two of
// the tile's 64 keys each). Row r is query i0 + r at key tile j0; rows[r]
// (every lane holds all 16) is its running max and sum. Rows at or past T get
// P = 0 and keep O = 0.
__device__ __forceinline__ void warp_online_softmax(const WarpTiles& w, const AttentionShape& s, int i0, int j0,
                                                    float scale, RunningSoftmax (&rows)[kTile]) {
    const int lane = threadIdx.x % kWarp;
#pragma unroll
    for (int r = 0; r < kTile; r++) {
        float* srow = w.S + r * kLdS;
        bf16* prow = w.P + r * kLdP;
        // Keys of this tile the row sees: all, some (the causal diagonal), none.
        const int n = flash_row_keys(s, i0 + r, j0);
        const float s0 = lane < n ? srow[lane] * scale : -INFINITY;
        const float s1 = lane + kWarp < n ? srow[lane + kWarp] * scale : -INFINITY;
        // n is warp-uniform: every lane reaches the shuffles, or none does. The
        // new max is finite: every row sees key 0 in the first tile (j0 = 0).
        const float alpha = n > 0 ? rows[r].rescale_to(warp_max(fmaxf(s0, s1))) : 1.0f;
        const float p0 = n > 0 ? expf(s0 - rows[r].m) : 0.0f;
        const float p1 = n > 0 ? expf(s1 - rows[r].m) : 0.0f;
        if (n > 0) rows[r].add(warp_sum(p0 + p1));
        prow[lane] = __float2bfloat16_rn(p0);
        prow[lane + kWarp] = __float2bfloat16_rn(p1);
        if (alpha != 1.0f)  // warp-uniform; most tiles leave the max where it was
            for (int d = lane; d < w.D; d += kWarp) w.O[r * w.ld_o + d] *= alpha;
    }
}

// Copies `rows` rows of D values (row stride `ld_in`) into a bf16 tile of
// `tile_rows` rows (stride ld_h), rounding to bf16; rows past `rows` are zeros.
// A warp per row, its lanes across the row: coalesced reads, no division.
template <typename In>
__device__ __forceinline__ void stage_rows(bf16* tile, int ld_h, const In* in, std::size_t ld_in, int rows,
                                           int tile_rows, int D) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, n_warps = blockDim.x / kWarp;
    for (int r = warp; r < tile_rows; r += n_warps)
        for (int d = lane; d < D; d += kWarp)
            tile[r * ld_h + d] = __float2bfloat16_rn(r < rows ? widen(in[std::size_t(r) * ld_in + d]) : 0.0f);
}

// Grid (ceil(T / kFlashBr), n_heads), kFlashThreads threads, flash_smem(D).total
// bytes of dynamic shared memory. Block (x, h): queries x*kFlashBr .. +kFlashBr-1 of head h.
// QIn, KVIn: float or bf16 (the engine's f32 q rows with a bf16 cache: both kinds).
template <typename QIn, typename KVIn, typename Out>
__global__ void __launch_bounds__(kFlashThreads)
    tiled_attention_kernel(Out* out, const QIn* q, const KVIn* K, const KVIn* V, AttentionShape s,
                           AttentionStrides st) {
    extern __shared__ __align__(128) unsigned char smem[];
    const FlashSmem L = flash_smem(s.D);
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int h = blockIdx.y, g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const int b0 = blockIdx.x * kFlashBr;  // the block's first query
    const int i0 = b0 + warp * kTile;      // the warp's first query
    const int block_rows = min(kFlashBr, s.T - b0);
    const KVIn* Kg = K + std::size_t(g) * st.kv_stride;
    const KVIn* Vg = V + std::size_t(g) * st.kv_stride;
    bf16* Qs = reinterpret_cast<bf16*>(smem + L.q);
    bf16* Ks = reinterpret_cast<bf16*>(smem + L.k);
    bf16* Vs = reinterpret_cast<bf16*>(smem + L.v);
    float* Os = reinterpret_cast<float*>(smem + L.o);
    const WarpTiles w{Qs + warp * kTile * L.ld_h, Ks, Vs,
                      reinterpret_cast<float*>(smem + L.s) + warp * kTile * kLdS,
                      reinterpret_cast<bf16*>(smem + L.p) + warp * kTile * kLdP,
                      Os + warp * kTile * L.ld_o, L.ld_h, L.ld_o, s.D};

    stage_rows(Qs, L.ld_h, q + std::size_t(b0) * st.q_stride + std::size_t(h) * s.D, st.q_stride, block_rows,
               kFlashBr, s.D);
    for (int e = threadIdx.x; e < kFlashBr * L.ld_o; e += blockDim.x) Os[e] = 0.0f;
    RunningSoftmax rows[kTile];

    const float scale = 1.0f / sqrtf(float(s.D));
    const int block_keys = flash_block_keys(s, b0);
    const int warp_keys = flash_warp_keys(s, i0, kTile);
    for (int j0 = 0; j0 < block_keys; j0 += kFlashBc) {
        __syncthreads();  // every warp is done with the previous tile (and Qs, Os are staged)
        const int keys = flash_tile_keys(s, j0);
        stage_rows(Ks, L.ld_h, Kg + std::size_t(j0) * s.D, std::size_t(s.D), keys, kFlashBc, s.D);
        stage_rows(Vs, L.ld_h, Vg + std::size_t(j0) * s.D, std::size_t(s.D), keys, kFlashBc, s.D);
        __syncthreads();
        if (j0 >= warp_keys) continue;  // warp-uniform: no row of this warp sees the tile (or no rows)
        warp_scores(w);
        __syncwarp();  // S stored by the fragments, read by the lanes
        warp_online_softmax(w, s, i0, j0, scale, rows);
        __syncwarp();  // P and the rescaled O written by the lanes, read by the fragments
        warp_pv(w);
    }
    __syncwarp();  // O stored by the fragments, read by the lanes
#pragma unroll
    for (int r = 0; r < kTile; r++) {
        const int i = i0 + r;
        if (i >= s.T) continue;
        const float inv = 1.0f / rows[r].l;  // l >= 1: the row's largest score contributes exp(0)
        for (int d = lane; d < s.D; d += kWarp)
            store(out + std::size_t(i) * st.out_stride + std::size_t(h) * s.D + d, w.O[r * L.ld_o + d] * inv);
    }
}

template <typename QIn, typename KVIn, typename Out>
std::size_t tiled_launch(Out* out, const QIn* q, const KVIn* K, const KVIn* V, const AttentionShape& s,
                         const AttentionStrides& st, cudaStream_t stream) {
    check_shape(s);
    PD_GPU_REQUIRE(tiled_attention_supports(s.D));
    const std::size_t smem = tiled_attention_smem_bytes(s.D);
    auto* kernel = tiled_attention_kernel<QIn, KVIn, Out>;
    PD_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    const dim3 grid((s.T + kFlashBr - 1) / kFlashBr, s.n_heads);
    kernel<<<grid, kFlashThreads, smem, stream>>>(out, q, K, V, s, st);
    PD_CUDA_LAUNCHED();
    return smem;
}

}  // namespace

AttentionStrides contiguous_strides(const AttentionShape& s) {
    return {s.n_heads * s.D, s.n_heads * s.D, std::size_t(s.S) * s.D};
}

std::size_t naive_attention_scratch(const AttentionShape& s) {
    return std::size_t(s.n_heads) * s.T * s.S;
}

std::size_t naive_attention(float* out, const float* q, const float* K, const float* V,
                            const AttentionShape& s, float* scratch, cudaStream_t stream) {
    return naive_launch(out, q, K, V, s, scratch, stream);
}

std::size_t naive_attention(float* out, const std::uint16_t* q, const std::uint16_t* K,
                            const std::uint16_t* V, const AttentionShape& s, float* scratch,
                            cudaStream_t stream) {
    return naive_launch(out, as_bf16_in(q), as_bf16_in(K), as_bf16_in(V), s, scratch, stream);
}

bool tiled_attention_supports(int D) { return D >= kTile && D <= 256 && D % kTile == 0; }

std::size_t tiled_attention_smem_bytes(int D) { return flash_smem(D).total; }

std::size_t tiled_attention(float* out, const float* q, const float* K, const float* V,
                            const AttentionShape& s, cudaStream_t stream) {
    return tiled_launch(out, q, K, V, s, contiguous_strides(s), stream);
}

std::size_t tiled_attention(float* out, const std::uint16_t* q, const std::uint16_t* K,
                            const std::uint16_t* V, const AttentionShape& s, cudaStream_t stream) {
    return tiled_launch(out, as_bf16_in(q), as_bf16_in(K), as_bf16_in(V), s, contiguous_strides(s), stream);
}

std::size_t tiled_attention(std::uint16_t* out, const float* q, const float* K, const float* V,
                            const AttentionShape& s, const AttentionStrides& strides, cudaStream_t stream) {
    return tiled_launch(as_bf16(out), q, K, V, s, strides, stream);
}

std::size_t tiled_attention(std::uint16_t* out, const float* q, const std::uint16_t* K, const std::uint16_t* V,
                            const AttentionShape& s, const AttentionStrides& strides, cudaStream_t stream) {
    return tiled_launch(as_bf16(out), q, as_bf16_in(K), as_bf16_in(V), s, strides, stream);
}

}  // namespace pd::gpu
