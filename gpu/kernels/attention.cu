// Attention kernels; the CPU twins are in src/engine/attention.cpp. The step-by-step
// versions these grew from (naive, shared-memory softmax, split-K, tiled) are
// in gpu/dev/attention_decode.cu and gpu/dev/attention_prefill.cu.
#include "attention.cuh"

#include "attention_pair.cuh"
#include "common.cuh"
#include "decode_index.cuh"

namespace pd::gpu {

namespace {

// --- decode ----------------------------------------------------------------------

constexpr int kDecodeThreads = 128;  // 4 warps per (split, head group, row)
constexpr int kLanesPerKey = 8;      // 8 lanes x 16 bytes share a key row: 4 keys per warp

int decode_splits(int max_seq) { return decode_splits_used(max_seq); }

// Sum over the 8 lanes of a key group (lanes 8k .. 8k+7); every lane gets it.
__device__ __forceinline__ float key_group_sum(float v) {
    for (int o = kLanesPerKey / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

__device__ __forceinline__ void add_scaled(float4& acc, float w, float4 v) {
    acc.x += w * v.x, acc.y += w * v.y, acc.z += w * v.z, acc.w += w * v.w;
}

// Elements 4i .. 4i+3 of a cached row as floats: one 16-byte load of f32, or
// one 8-byte load of bf16 (a bf16 is the top half of its f32, so widening is
// a shift). Rows start at multiples of head_dim elements and head_dim % 4 == 0,
// so both loads are aligned; a bf16 key's 8 lanes then read 64 bytes of it per
// load instead of 128, the same count of loads for half the bytes.
__device__ __forceinline__ float4 load4(const float* row, int i) {
    return __ldg(reinterpret_cast<const float4*>(row) + i);
}
__device__ __forceinline__ float4 load4(const __nv_bfloat16* row, int i) {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(row) + i);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}

// Shared memory of one split block, in floats, in this order:
//   qs  (HPB, D)          the queries of its heads
//   red (n_kg, HPB, D)    the value pass's per-key-group sums, n_kg = threads / (D/4)
//   sc  (HPB, keys)       scores, then e^(score - m)
//   blk (keys) ints       the split's block ids, read from the table once
// Each part's size is a multiple of 4 floats, so every float4 stays aligned.
// With D <= 128, n_kg x D <= 4 x threads = 512, so it is at most
// 8 x (128 + 512) + 9 x 64 floats = 22.3 KiB: under the 48 KiB any card gives
// a block without opting in.
std::size_t decode_smem_floats(int hpb, int D) {
    const int n_kg = kDecodeThreads / (D / 4);
    return std::size_t(hpb) * D * (1 + n_kg) + std::size_t(hpb) * kDecodeKeysPerSplit + kDecodeKeysPerSplit;
}

// Pass 1: one block per (split, group of HPB query heads, row). Writes, per
// head of the group, the split's unnormalised output o (D floats) and its
// softmax statistics (max m, sum l). CPL = ceil(D / 32): the 4-element chunks
// (16 bytes of f32, 8 of bf16) each of a key's 8 lanes loads, a compile-time count so that a lane's loads
// of one key, and of the next keys the unrolled loop brings, are all issued
// before the arithmetic that waits for them. T: the cache's element type
// (float or __nv_bfloat16); K, V: the layer's keys and values in it.
template <int HPB, int CPL, typename T>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_split_kernel(const float* q, int q_stride, KVLayer c, const T* K, const T* V, const int* slots,
                        const int* pos, int n_heads, int n_splits, float* part_o, float* part_ml) {
    extern __shared__ float4 smem4[];
    const int split = blockIdx.x, h0 = blockIdx.y * HPB, r = blockIdx.z;
    const KeyRange keys = decode_split_keys(split, pos[r] + 1);
    if (keys.n <= 0) return;  // this split lies beyond the sequence: the merge skips it
    const int k0 = keys.k0, nk = keys.n;
    const int D = c.head_dim, D4 = D / 4, b = slots[r];
    const int kv_h = kv_head_of(h0, n_heads, c.n_kv_heads);  // HPB divides the group: every head here shares it
    const int n_kg = blockDim.x / D4;                // key groups of the value pass
    const float scale = 1.0f / sqrtf(float(D));
    float* qs = reinterpret_cast<float*>(smem4);
    float4* red = smem4 + HPB * D4;
    float* sc = qs + std::size_t(HPB) * D * (1 + n_kg);
    int* blk = reinterpret_cast<int*>(sc + HPB * kDecodeKeysPerSplit);

    // The queries, and the ids of the blocks that hold keys k0 .. k0+nk-1.
    for (int i = threadIdx.x; i < HPB * D; i += blockDim.x)
        qs[i] = q[std::size_t(r) * q_stride + std::size_t(h0) * D + i];
    const BlockRange blocks = blocks_of(keys, c.block_size);
    for (int i = threadIdx.x; i < blocks.count; i += blockDim.x)
        blk[i] = c.table[std::size_t(b) * c.max_blocks + blocks.first + i];
    __syncthreads();
    // Offset of key s of this split (position k0 + s) in K / V.
    auto key_row = [&](int s) { return split_key_offset(c, blk, blocks, kv_h, k0 + s); };

    // Scores: each warp takes 4 keys at a time, 8 lanes per key, each lane
    // 16 bytes of the row per load; one key row is read once for all HPB heads.
    // The loop bound is the same for a whole warp, so every lane reaches the shuffles.
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
    const int sub = lane % kLanesPerKey, grp = lane / kLanesPerKey;
    constexpr int kKeysPerWarp = kWarp / kLanesPerKey;
    const float4* qs4 = smem4;
#pragma unroll 2
    for (int base = warp * kKeysPerWarp; base < nk; base += n_warps * kKeysPerWarp) {
        const int s = base + grp;
        // Loads first (predicated, no branch), then the dot products.
        const T* kr = K + key_row(s < nk ? s : 0);
        float4 kv[CPL];
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            const int i = sub + j * kLanesPerKey;
            kv[j] = s < nk && i < D4 ? load4(kr, i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        float acc[HPB];
#pragma unroll
        for (int g = 0; g < HPB; g++) {
            acc[g] = 0.0f;
#pragma unroll
            for (int j = 0; j < CPL; j++) {
                const int i = sub + j * kLanesPerKey;
                if (i < D4) acc[g] += dot4(qs4[g * D4 + i], kv[j]);
            }
            acc[g] = key_group_sum(acc[g]);
        }
        if (s < nk && sub == 0) {
#pragma unroll
            for (int g = 0; g < HPB; g++) sc[g * kDecodeKeysPerSplit + s] = acc[g] * scale;
        }
    }
    __syncthreads();

    // Local softmax statistics, one warp per head: sc[] becomes e^(score - m).
    const std::size_t part0 = (std::size_t(r) * n_heads + h0) * n_splits + split;  // head h0's part
    for (int g = warp; g < HPB; g += n_warps) {
        float* p = sc + g * kDecodeKeysPerSplit;
        float m = -INFINITY;
        for (int s = lane; s < nk; s += kWarp) m = fmaxf(m, p[s]);
        m = warp_max(m);
        float l = 0.0f;
        for (int s = lane; s < nk; s += kWarp) {
            const float e = expf(p[s] - m);
            p[s] = e;
            l += e;
        }
        l = warp_sum(l);
        if (lane == 0) {
            const std::size_t part = part0 + std::size_t(g) * n_splits;
            part_ml[part * 2] = m;
            part_ml[part * 2 + 1] = l;
        }
    }
    __syncthreads();

    // Values: thread (kg, c4) sums 16 bytes (column c4) of every n_kg-th key
    // for all HPB heads; then the key groups' sums are added up.
    const int c4 = threadIdx.x % D4, kg = threadIdx.x / D4;
    if (kg < n_kg) {
        float4 acc[HPB];
#pragma unroll
        for (int g = 0; g < HPB; g++) acc[g] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
        for (int s = kg; s < nk; s += n_kg) {
            const float4 vv = load4(V + key_row(s), c4);
#pragma unroll
            for (int g = 0; g < HPB; g++) add_scaled(acc[g], sc[g * kDecodeKeysPerSplit + s], vv);
        }
#pragma unroll
        for (int g = 0; g < HPB; g++) red[(kg * HPB + g) * D4 + c4] = acc[g];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < HPB * D4; i += blockDim.x) {  // i = g * D4 + column
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int k = 0; k < n_kg; k++) add_scaled(sum, 1.0f, red[k * HPB * D4 + i]);
        const int g = i / D4, col = i % D4;
        reinterpret_cast<float4*>(part_o + (part0 + std::size_t(g) * n_splits) * D)[col] = sum;
    }
}

// Pass 2: one block per (head, row) merges the splits that hold keys, one
// output element per thread (D <= blockDim.x). Warp 0 finds the merged
// statistics: each lane a 32nd of the splits, then a butterfly of
// combine_stats over the lanes. Then, for each run of 32 splits, its lanes
// put the run's weights in shared memory and every thread adds the run to its
// element, 16 loads in flight. No thread walks the splits' statistics one
// after another, and the shared memory is 32 floats however long the cache.
template <typename Out>
__global__ void decode_merge_kernel(Out* out, const int* pos, int n_heads, int D, int n_splits,
                                    const float* part_o, const float* part_ml) {
    __shared__ float weights[kWarp];  // the current run's split weights
    const int h = blockIdx.x, r = blockIdx.y, d = threadIdx.x;
    const int used = decode_splits_used(pos[r] + 1);
    const std::size_t base = (std::size_t(r) * n_heads + h) * n_splits;
    const float* ml = part_ml + base * 2;
    const float* o = part_o + base * D;
    SoftmaxStats st;
    if (threadIdx.x < kWarp) {
        st = merge_split_stats(ml, used, threadIdx.x, kWarp);
        for (int lanes = kWarp / 2; lanes > 0; lanes /= 2) {
            const SoftmaxStats other{__shfl_xor_sync(0xffffffffu, st.m, lanes),
                                     __shfl_xor_sync(0xffffffffu, st.l, lanes)};
            st = combine_stats(st, other);
        }
    }
    float acc = 0.0f;
    for (int run = 0; run < used; run += kWarp) {
        const int n = used - run < kWarp ? used - run : kWarp;
        if (threadIdx.x < n) weights[threadIdx.x] = split_weight(ml, run + threadIdx.x, st);
        __syncthreads();
        if (d < D) acc += merge_split_value(weights, o + std::size_t(run) * D, n, D, d);
        __syncthreads();  // all have read this run's weights before the next run's replace them
    }
    if (d < D) store(out + (std::size_t(r) * n_heads + h) * D + d, acc);
}

// The split pass for the cache's element type T: the instance for (heads per
// block, chunks per lane), 8 x 4 of them.
template <typename T>
void decode_split_launch(const float* q, int q_stride, KVLayer c, const T* K, const T* V, const int* slots,
                         const int* pos, int rows, int n_heads, int n_splits, float* part_o, float* part_ml,
                         cudaStream_t s) {
    const int D = c.head_dim;
    const int hpb = decode_heads_per_block(n_heads, c.n_kv_heads);
    const int cpl = (D / 4 + kLanesPerKey - 1) / kLanesPerKey;
    const dim3 grid1(n_splits, n_heads / hpb, rows);
    const std::size_t smem = sizeof(float) * decode_smem_floats(hpb, D);
    switch (hpb * 8 + cpl) {
#define PD_DECODE_CASE(H, C)                                                                                  \
    case H * 8 + C:                                                                                           \
        decode_split_kernel<H, C><<<grid1, kDecodeThreads, smem, s>>>(q, q_stride, c, K, V, slots, pos,       \
                                                                       n_heads, n_splits, part_o, part_ml);   \
        break;
#define PD_DECODE_CASES(H) PD_DECODE_CASE(H, 1) PD_DECODE_CASE(H, 2) PD_DECODE_CASE(H, 3) PD_DECODE_CASE(H, 4)
        PD_DECODE_CASES(1) PD_DECODE_CASES(2) PD_DECODE_CASES(3) PD_DECODE_CASES(4)
        PD_DECODE_CASES(5) PD_DECODE_CASES(6) PD_DECODE_CASES(7) PD_DECODE_CASES(8)
#undef PD_DECODE_CASES
#undef PD_DECODE_CASE
        default: PD_GPU_REQUIRE(hpb >= 1 && hpb <= kDecodeHeadsPerBlock && cpl >= 1 && cpl <= 4);
    }
    PD_CUDA_LAUNCHED();
}

template <typename Out>
void decode_launch(Out* out, const float* q, int q_stride, KVLayer c, const int* slots, const int* pos,
                   int rows, int n_heads, float* scratch, cudaStream_t s) {
    if (rows <= 0) return;
    const int D = c.head_dim, n_splits = decode_splits(c.max_seq);
    PD_GPU_REQUIRE(c.n_kv_heads > 0 && n_heads % c.n_kv_heads == 0);
    PD_GPU_REQUIRE(D % 4 == 0 && D <= kDecodeMaxHeadDim);
    float* part_o = scratch;
    float* part_ml = scratch + std::size_t(rows) * n_heads * n_splits * D;
    with_kv_elements(c, [&](const auto* K, const auto* V) {
        decode_split_launch(q, q_stride, c, K, V, slots, pos, rows, n_heads, n_splits, part_o, part_ml, s);
    });
    const dim3 grid2(n_heads, rows);
    const int threads = (D + kWarp - 1) / kWarp * kWarp;  // a thread per element (D <= 128), whole warps
    decode_merge_kernel<<<grid2, threads, 0, s>>>(out, pos, n_heads, D, n_splits, part_o, part_ml);
    PD_CUDA_LAUNCHED();
}

// --- prefill ---------------------------------------------------------------------

constexpr int kSoftmaxThreads = 256;

// Floats at the start of the scratch that hold the 6 pointer arrays (n_heads
// pointers each), rounded up to 256 bytes so the scores stay aligned.
std::size_t pointer_floats(int n_heads) {
    const std::size_t bytes = 6 * std::size_t(n_heads) * sizeof(void*);
    return (bytes + 255) / 256 * 256 / sizeof(float);
}

// The per-head operands of the two batched GEMMs for one chunk of queries,
// as 6 arrays of n_heads pointers: qk_a, qk_b, qk_c, pv_a, pv_b, pv_c.
__global__ void prefill_pointers_kernel(void** ptrs, const float* q, int q_stride, float* out,
                                        int out_stride, float* scores, KVLayer c, int b, int n_heads,
                                        int c0, int tc, int nk) {
    const int D = c.head_dim, group = n_heads / c.n_kv_heads;
    for (int h = threadIdx.x; h < n_heads; h += blockDim.x) {
        const int kv_h = h / group;
        float* S = scores + std::size_t(h) * tc * nk;
        ptrs[h] = c.k + c.row(b, kv_h, 0);                                        // K (nk, D)
        ptrs[n_heads + h] = const_cast<float*>(q + std::size_t(c0) * q_stride + std::size_t(h) * D);  // Q (tc, D)
        ptrs[2 * n_heads + h] = S;                                                // S (tc, nk)
        ptrs[3 * n_heads + h] = c.v + c.row(b, kv_h, 0);                          // V (nk, D)
        ptrs[4 * n_heads + h] = S;                                                // P (tc, nk)
        ptrs[5 * n_heads + h] = out + std::size_t(c0) * out_stride + std::size_t(h) * D;  // O (tc, D)
    }
}

// Row (h, t) of S: query t of the chunk sees keys 0 .. start + c0 + t.
__global__ void causal_softmax_kernel(float* scores, int tc, int nk, int first_pos) {
    const int h = blockIdx.x / tc, t = blockIdx.x % tc;
    float* p = scores + (std::size_t(h) * tc + t) * nk;
    const int valid = first_pos + t + 1;
    const float inv = 1.0f / block_exp_sum(p, valid);
    // Each thread rescales the entries it wrote itself, and zeroes the masked ones.
    for (int s = threadIdx.x; s < nk; s += blockDim.x) p[s] = s < valid ? p[s] * inv : 0.0f;
}

}  // namespace

int decode_heads_per_block(int n_heads, int n_kv_heads) {
    const int group = n_heads / n_kv_heads;
    int hpb = group < kDecodeHeadsPerBlock ? group : kDecodeHeadsPerBlock;
    while (group % hpb != 0) hpb--;
    return hpb;
}

std::size_t attention_decode_scratch(int rows, int n_heads, int max_seq, int head_dim) {
    return std::size_t(rows) * n_heads * decode_splits(max_seq) * (head_dim + 2);
}

void attention_decode(float* out, const float* q, int q_stride, KVLayer c, const int* slots,
                      const int* pos, int rows, int n_heads, float* scratch, cudaStream_t s) {
    decode_launch(out, q, q_stride, c, slots, pos, rows, n_heads, scratch, s);
}

void attention_decode(std::uint16_t* out, const float* q, int q_stride, KVLayer c, const int* slots,
                      const int* pos, int rows, int n_heads, float* scratch, cudaStream_t s) {
    decode_launch(as_bf16(out), q, q_stride, c, slots, pos, rows, n_heads, scratch, s);
}

int attention_prefill_chunk(int T, int start, int n_heads, std::size_t budget_floats) {
    const std::size_t per_query = std::size_t(n_heads) * std::size_t(start + T);
    std::size_t rows = per_query ? budget_floats / per_query : std::size_t(T);
    if (rows < 1) rows = 1;
    if (rows > std::size_t(T)) rows = std::size_t(T);
    return int(rows);
}

std::size_t attention_prefill_scratch(int T, int start, int n_heads, std::size_t budget_floats) {
    const int chunk = attention_prefill_chunk(T, start, n_heads, budget_floats);
    return pointer_floats(n_heads) + std::size_t(n_heads) * chunk * std::size_t(start + T);
}

void attention_prefill(const Blas& blas, float* out, const float* q, int q_stride, KVLayer c, int b,
                       int start, int T, int n_heads, float* scratch, bool allow_tf32,
                       std::size_t budget_floats) {
    if (T <= 0) return;
    PD_GPU_REQUIRE(c.n_kv_heads > 0 && n_heads % c.n_kv_heads == 0);
    PD_GPU_REQUIRE(start >= 0 && start + T <= c.max_seq && b >= 0 && b < c.batch);
    PD_GPU_REQUIRE(c.max_blocks == 1);  // each head's keys one (max_seq, D) matrix: the contiguous cache
    PD_GPU_REQUIRE(!c.bf16());          // the f32 GEMMs read f32 K/V
    const cudaStream_t s = blas.stream();
    const int D = c.head_dim, out_stride = n_heads * D;
    const int chunk = attention_prefill_chunk(T, start, n_heads, budget_floats);
    const cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

    // Scratch: [6 pointer arrays | scores (n_heads, tc, nk)].
    void** ptrs = reinterpret_cast<void**>(scratch);
    void* const* qk_a = ptrs;
    void* const* qk_b = ptrs + n_heads;
    void* const* qk_c = ptrs + 2 * n_heads;
    void* const* pv_a = ptrs + 3 * n_heads;
    void* const* pv_b = ptrs + 4 * n_heads;
    void* const* pv_c = ptrs + 5 * n_heads;
    float* scores = scratch + pointer_floats(n_heads);

    const float scale = 1.0f / sqrtf(float(D)), one = 1.0f, zero = 0.0f;
    for (int c0 = 0; c0 < T; c0 += chunk) {
        const int tc = T - c0 < chunk ? T - c0 : chunk;
        const int nk = start + c0 + tc;  // keys the chunk's last query sees
        prefill_pointers_kernel<<<1, 128, 0, s>>>(ptrs, q, q_stride, out, out_stride, scores, c, b,
                                                  n_heads, c0, tc, nk);
        PD_CUDA_LAUNCHED();
        // S^T (nk x tc, column-major) = K (D x nk)^T . Q^T (D x tc), per head.
        PD_CUBLAS(cublasGemmBatchedEx(blas.handle(), CUBLAS_OP_T, CUBLAS_OP_N, nk, tc, D, &scale, qk_a,
                                      CUDA_R_32F, D, qk_b, CUDA_R_32F, q_stride, &zero, qk_c, CUDA_R_32F,
                                      nk, n_heads, compute, CUBLAS_GEMM_DEFAULT));
        causal_softmax_kernel<<<n_heads * tc, kSoftmaxThreads, 0, s>>>(scores, tc, nk, start + c0);
        PD_CUDA_LAUNCHED();
        // O^T (D x tc) = V^T (D x nk) . P^T (nk x tc), per head, into out's rows.
        PD_CUBLAS(cublasGemmBatchedEx(blas.handle(), CUBLAS_OP_N, CUBLAS_OP_N, D, tc, nk, &one, pv_a,
                                      CUDA_R_32F, D, pv_b, CUDA_R_32F, nk, &zero, pv_c, CUDA_R_32F,
                                      out_stride, n_heads, compute, CUBLAS_GEMM_DEFAULT));
    }
}

bool attention_prefill_flash_supports(int head_dim) { return tiled_attention_supports(head_dim); }

void attention_prefill_flash(std::uint16_t* out, const float* q, int q_stride, KVLayer c, int b, int start,
                             int T, int n_heads, cudaStream_t s) {
    if (T <= 0) return;
    PD_GPU_REQUIRE(start >= 0 && start + T <= c.max_seq && b >= 0 && b < c.batch);
    PD_GPU_REQUIRE(c.max_blocks == 1);  // the contiguous cache: sequence b is block b
    // The T queries are the last T of the sequence's start + T cached positions;
    // KV head g's rows follow one another, max_seq rows apart from head g + 1's.
    const AttentionShape shape{T, start + T, n_heads, c.n_kv_heads, c.head_dim};
    const AttentionStrides strides{q_stride, n_heads * c.head_dim, std::size_t(c.max_seq) * c.head_dim};
    if (c.bf16()) tiled_attention(out, q, c.k16 + c.tile(b, 0), c.v16 + c.tile(b, 0), shape, strides, s);
    else tiled_attention(out, q, c.k + c.tile(b, 0), c.v + c.tile(b, 0), shape, strides, s);
}

}  // namespace pd::gpu
