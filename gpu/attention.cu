// Attention kernels; the CPU twins are in src/engine/attention.cpp. The step-by-step
// versions these grew from (naive, shared-memory softmax, split-K, tiled) are
// in gpu/dev/attention_decode.cu and gpu/dev/attention_prefill.cu.
#include "attention.cuh"

#include "attention_pair.cuh"
#include "common.cuh"

namespace pd::gpu {

namespace {

// --- decode ----------------------------------------------------------------------

constexpr int kDecodeThreads = 128;  // 4 warps per (split, head, row)

int decode_splits(int max_seq) { return (max_seq + kDecodeKeysPerSplit - 1) / kDecodeKeysPerSplit; }

// Pass 1: one block per (split, head, row). Writes the split's unnormalised
// output o (D floats) and its softmax statistics (max m, sum l).
__global__ void decode_split_kernel(const float* q, int q_stride, KVLayer c, const int* slots,
                                    const int* pos, int n_heads, int n_splits, float* part_o,
                                    float* part_ml) {
    extern __shared__ float smem[];
    const int split = blockIdx.x, h = blockIdx.y, r = blockIdx.z;
    const int n_keys = pos[r] + 1;
    const int k0 = split * kDecodeKeysPerSplit;
    if (k0 >= n_keys) return;  // this split lies beyond the sequence: the merge skips it
    const int nk = min(kDecodeKeysPerSplit, n_keys - k0);
    const int D = c.head_dim;
    const int kv_h = h / (n_heads / c.n_kv_heads);
    const float scale = 1.0f / sqrtf(float(D));
    float* qs = smem;       // (D) the query
    float* sc = smem + D;   // (kDecodeKeysPerSplit) scores, then probabilities

    for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = q[std::size_t(r) * q_stride + h * D + d];
    __syncthreads();

    // Scores: each warp takes every n_warps-th key; its lanes split the dot product.
    const float* K = c.k + c.row(slots[r], kv_h, k0);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
    for (int s = warp; s < nk; s += n_warps) {
        const float* kr = K + std::size_t(s) * D;
        float dot = 0.0f;
        for (int d = lane; d < D; d += kWarp) dot += qs[d] * kr[d];
        dot = warp_sum(dot);
        if (lane == 0) sc[s] = dot * scale;
    }
    __syncthreads();

    // Local softmax statistics over this split's keys (sc[] becomes the exps).
    float m;
    const float l = block_exp_sum(sc, nk, &m);

    // Unnormalised output: o[d] = sum_s e^(score_s - m) v_s[d].
    const float* V = c.v + c.row(slots[r], kv_h, k0);
    const std::size_t part = (std::size_t(r) * n_heads + h) * n_splits + split;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < nk; s++) acc += sc[s] * V[std::size_t(s) * D + d];
        part_o[part * D + d] = acc;
    }
    if (threadIdx.x == 0) {
        part_ml[part * 2] = m;
        part_ml[part * 2 + 1] = l;
    }
}

// Pass 2: one block per (head, row) merges the splits that hold keys.
template <typename Out>
__global__ void decode_merge_kernel(Out* out, const int* pos, int n_heads, int D, int n_splits,
                                    const float* part_o, const float* part_ml) {
    const int h = blockIdx.x, r = blockIdx.y;
    const int n_keys = pos[r] + 1;
    const int used = (n_keys + kDecodeKeysPerSplit - 1) / kDecodeKeysPerSplit;
    const std::size_t base = (std::size_t(r) * n_heads + h) * n_splits;
    float M = -INFINITY;
    for (int i = 0; i < used; i++) M = fmaxf(M, part_ml[(base + i) * 2]);
    float L = 0.0f;
    for (int i = 0; i < used; i++) L += expf(part_ml[(base + i) * 2] - M) * part_ml[(base + i) * 2 + 1];
    const float inv = 1.0f / L;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < used; i++) acc += expf(part_ml[(base + i) * 2] - M) * part_o[(base + i) * D + d];
        store(out + (std::size_t(r) * n_heads + h) * D + d, acc * inv);
    }
}

template <typename Out>
void decode_launch(Out* out, const float* q, int q_stride, KVLayer c, const int* slots, const int* pos,
                   int rows, int n_heads, float* scratch, cudaStream_t s) {
    if (rows <= 0) return;
    PD_GPU_REQUIRE(c.n_kv_heads > 0 && n_heads % c.n_kv_heads == 0);
    const int D = c.head_dim, n_splits = decode_splits(c.max_seq);
    float* part_o = scratch;
    float* part_ml = scratch + std::size_t(rows) * n_heads * n_splits * D;
    const dim3 grid1(n_splits, n_heads, rows);
    const std::size_t smem = sizeof(float) * (D + kDecodeKeysPerSplit);
    decode_split_kernel<<<grid1, kDecodeThreads, smem, s>>>(q, q_stride, c, slots, pos, n_heads, n_splits,
                                                            part_o, part_ml);
    PD_CUDA_LAUNCHED();
    const dim3 grid2(n_heads, rows);
    const int threads = D >= 128 ? 128 : (D + kWarp - 1) / kWarp * kWarp;
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
    // The T queries are the last T of the sequence's start + T cached positions;
    // KV head g's rows follow one another, max_seq rows apart from head g + 1's.
    const AttentionShape shape{T, start + T, n_heads, c.n_kv_heads, c.head_dim};
    const AttentionStrides strides{q_stride, n_heads * c.head_dim, std::size_t(c.max_seq) * c.head_dim};
    tiled_attention(out, q, c.k + c.row(b, 0, 0), c.v + c.row(b, 0, 0), shape, strides, s);
}

}  // namespace pd::gpu
