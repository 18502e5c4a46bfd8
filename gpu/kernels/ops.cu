// Element-wise and row-wise kernels; the CPU twins are in src/engine/ops.cpp.
//
// Row-wise operations (the norms) run one block per row: the threads stride
// over the row's D features and combine their partial sums with block_sum().
// rmsnorm keeps each thread's share of the row in registers (see
// rmsnorm_kernel) and picks its block by the row count. Element-wise operations
// run a grid-stride loop over all elements.
#include "ops.cuh"

#include "common.cuh"
#include "cuda_check.cuh"
#include "kv_write_index.cuh"

namespace pd::gpu {

namespace {

constexpr int kRowThreads = 256;       // threads per row for layernorm
constexpr int kRmsPerThread = 8;       // features of x and w a thread holds in registers
constexpr int kEltThreads = 256;       // threads per block for element-wise kernels

// rmsnorm's two block shapes. A decode step normalises one row (or a few), so
// its time is latency: up to 1,024 threads, one per feature, spread the row
// over the whole SM. A prefill normalises thousands of rows: there a block of
// 1,024 threads (over 32 registers each) leaves one block per SM and the SM
// idles at every block's reduction and tail; blocks of 256 threads, limited to
// 32 registers (ptxas spills 8 bytes) so that 8 share an SM, keep the loads of
// other rows in flight.
// The third H200 run (docs/gpu.md) measured the wide block at 2.97 us a call
// on one row (6.51 us with the old loops over 256 threads) and at 15.79 us on
// 2,048 rows (9.51 us).
constexpr int kRmsWideThreads = 1024;   // threads per row at most, few rows (one per feature below)
constexpr int kRmsNarrowThreads = 256;  // threads per row at most, many rows
constexpr int kRmsNarrowBlocks = 8;     // narrow blocks the compiler must fit on one SM at once
constexpr int kRmsWideMaxRows = 16;     // up to this many rows (decode, small batches) use wide blocks

// One block per row. Each thread loads its kRmsPerThread features of x and of
// w at once (a compile-time count, unrolled, so every load is in flight before
// the first is used), the block sums the squares, and the outputs come from
// the registers, with no second pass over memory. Features past
// kRmsPerThread x blockDim.x (D > 8192 wide, D > 2048 narrow) take a strided
// loop that reads them twice. The block shape is a template parameter so that
// __launch_bounds__ can tell the compiler how many registers each may use.
template <int kMaxThreads, int kMinBlocks, typename Out>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    rmsnorm_kernel(Out* out, const float* x, const float* w, int D, float eps) {
    const float* xr = x + std::size_t(blockIdx.x) * D;
    Out* o = out + std::size_t(blockIdx.x) * D;
    const int held = kRmsPerThread * blockDim.x;  // features the registers hold
    float xv[kRmsPerThread], wv[kRmsPerThread];
#pragma unroll
    for (int k = 0; k < kRmsPerThread; k++) {
        const int i = threadIdx.x + k * blockDim.x;  // consecutive threads, consecutive features
        xv[k] = i < D ? xr[i] : 0.0f;
        wv[k] = i < D ? w[i] : 0.0f;
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kRmsPerThread; k++) ss += xv[k] * xv[k];
    for (int i = held + threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss);
    const float scale = 1.0f / sqrtf(ss / D + eps);
#pragma unroll
    for (int k = 0; k < kRmsPerThread; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < D) store(o + i, wv[k] * (xv[k] * scale));
    }
    for (int i = held + threadIdx.x; i < D; i += blockDim.x) store(o + i, w[i] * (xr[i] * scale));
}

// rmsnorm's threads for a row of D: one per feature (whole warps), at most max_threads.
int rmsnorm_threads(int D, int max_threads) {
    const int warps = (D + kWarp - 1) / kWarp;
    return warps * kWarp < max_threads ? warps * kWarp : max_threads;
}

template <typename Out>
__global__ void layernorm_kernel(Out* out, const float* x, const float* w, const float* b, int D,
                                 float eps) {
    const float* xr = x + std::size_t(blockIdx.x) * D;
    Out* o = out + std::size_t(blockIdx.x) * D;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) sum += xr[i];
    const float mean = block_sum(sum) / D;
    float var = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) var += (xr[i] - mean) * (xr[i] - mean);
    var = block_sum(var);
    const float scale = 1.0f / sqrtf(var / D + eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) store(o + i, (xr[i] - mean) * scale * w[i] + b[i]);
}

template <typename Out>
__global__ void gelu_tanh_kernel(Out* out, const float* x, long n) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        float v = x[i];
        store(out + i, 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v))));
    }
}

template <typename Out>
__global__ void swiglu_kernel(Out* out, const float* gate_up, int F, long n) {
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        const long m = i / F, f = i % F;
        const float g = gate_up[m * 2 * F + f];
        const float u = gate_up[m * 2 * F + F + f];
        store(out + i, g / (1.0f + expf(-g)) * u);
    }
}

__global__ void rope_kernel(float* x, int stride, int n_heads, int D, const int* pos,
                            const float* cos_table, const float* sin_table, long n) {
    const int half = D / 2;
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        const long m = i / (long(n_heads) * half);
        const int rem = int(i % (long(n_heads) * half));
        const int h = rem / half, j = rem % half;
        float* v = x + m * stride + long(h) * D;
        const long t = long(pos[m]) * half + j;
        const float2 r = rotate_pair(v[j], v[j + half], cos_table[t], sin_table[t]);
        v[j] = r.x;
        v[j + half] = r.y;
    }
}

__global__ void add_inplace_kernel(float* y, const float* x, long n) {
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
        y[i] += x[i];
}

__global__ void add_bias_kernel(float* y, const float* b, int N, long n) {
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
        y[i] += b[i % N];
}

__global__ void embed_kernel(float* x, const int* token, const int* pos, const float* tok_emb,
                             const float* pos_emb, int D, long n) {
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
        const long r = i / D, d = i % D;
        float v = tok_emb[long(token[r]) * D + d];
        if (pos_emb) v += pos_emb[long(pos[r]) * D + d];
        x[i] = v;
    }
}

__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* x, long n) {
    for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
        out[i] = __float2bfloat16_rn(x[i]);
}

template <typename Out>
void rmsnorm_launch(Out* out, const float* x, const float* w, int M, int D, float eps, cudaStream_t s) {
    if (M <= 0 || D <= 0) return;
    if (M <= kRmsWideMaxRows)
        rmsnorm_kernel<kRmsWideThreads, 1>
            <<<M, rmsnorm_threads(D, kRmsWideThreads), 0, s>>>(out, x, w, D, eps);
    else
        rmsnorm_kernel<kRmsNarrowThreads, kRmsNarrowBlocks>
            <<<M, rmsnorm_threads(D, kRmsNarrowThreads), 0, s>>>(out, x, w, D, eps);
    PD_CUDA_LAUNCHED();
}

template <typename Out>
void layernorm_launch(Out* out, const float* x, const float* w, const float* b, int M, int D,
                      float eps, cudaStream_t s) {
    if (M <= 0) return;
    layernorm_kernel<<<M, kRowThreads, 0, s>>>(out, x, w, b, D, eps);
    PD_CUDA_LAUNCHED();
}

template <typename Out>
void gelu_launch(Out* out, const float* x, long n, cudaStream_t s) {
    if (n <= 0) return;
    gelu_tanh_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(out, x, n);
    PD_CUDA_LAUNCHED();
}

template <typename Out>
void swiglu_launch(Out* out, const float* gate_up, int M, int F, cudaStream_t s) {
    const long n = long(M) * F;
    if (n <= 0) return;
    swiglu_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(out, gate_up, F, n);
    PD_CUDA_LAUNCHED();
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* w, int M, int D, float eps, cudaStream_t s) {
    rmsnorm_launch(out, x, w, M, D, eps, s);
}
void rmsnorm(std::uint16_t* out, const float* x, const float* w, int M, int D, float eps, cudaStream_t s) {
    rmsnorm_launch(as_bf16(out), x, w, M, D, eps, s);
}

void layernorm(float* out, const float* x, const float* w, const float* b, int M, int D, float eps,
               cudaStream_t s) {
    layernorm_launch(out, x, w, b, M, D, eps, s);
}
void layernorm(std::uint16_t* out, const float* x, const float* w, const float* b, int M, int D,
               float eps, cudaStream_t s) {
    layernorm_launch(as_bf16(out), x, w, b, M, D, eps, s);
}

void gelu_tanh(float* out, const float* x, long n, cudaStream_t s) { gelu_launch(out, x, n, s); }
void gelu_tanh(std::uint16_t* out, const float* x, long n, cudaStream_t s) {
    gelu_launch(as_bf16(out), x, n, s);
}

void swiglu(float* out, const float* gate_up, int M, int F, cudaStream_t s) {
    swiglu_launch(out, gate_up, M, F, s);
}
void swiglu(std::uint16_t* out, const float* gate_up, int M, int F, cudaStream_t s) {
    swiglu_launch(as_bf16(out), gate_up, M, F, s);
}

void rope(float* x, int M, int stride, int n_heads, int D, const int* pos, const float* cos_table,
          const float* sin_table, cudaStream_t s) {
    const long n = long(M) * n_heads * (D / 2);
    if (n <= 0) return;
    rope_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(x, stride, n_heads, D, pos, cos_table,
                                                                  sin_table, n);
    PD_CUDA_LAUNCHED();
}

void add_inplace(float* y, const float* x, long n, cudaStream_t s) {
    if (n <= 0) return;
    add_inplace_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(y, x, n);
    PD_CUDA_LAUNCHED();
}

void add_bias(float* y, const float* b, int M, int N, cudaStream_t s) {
    const long n = long(M) * N;
    if (n <= 0) return;
    add_bias_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(y, b, N, n);
    PD_CUDA_LAUNCHED();
}

void embed(float* x, const int* token, const int* pos, const float* tok_emb, const float* pos_emb,
           int rows, int D, cudaStream_t s) {
    const long n = long(rows) * D;
    if (n <= 0) return;
    embed_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(x, token, pos, tok_emb, pos_emb, D, n);
    PD_CUDA_LAUNCHED();
}

void to_bf16(std::uint16_t* out, const float* x, long n, cudaStream_t s) {
    if (n <= 0) return;
    to_bf16_kernel<<<grid_for(n, kEltThreads), kEltThreads, 0, s>>>(as_bf16(out), x, n);
    PD_CUDA_LAUNCHED();
}

bool kernels_runnable(const char** why_not) {
    cudaFuncAttributes attr{};
    cudaError_t e = cudaFuncGetAttributes(&attr, add_inplace_kernel);
    if (e == cudaSuccess) return true;
    cudaGetLastError();  // not sticky: clear it
    if (why_not) *why_not = cudaGetErrorString(e);
    return false;
}

}  // namespace pd::gpu
