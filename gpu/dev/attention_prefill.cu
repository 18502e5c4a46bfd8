// Causal prefill attention, step by step (llm.c dev/cuda style): T queries of
// one sequence against their own T keys, query t seeing keys 0..t.
// Compute-bound: about 2 T^2 H D FLOPs, every key read by many queries.
//
//   version 1  naive: one thread per (query, head), scores in global memory.
//   version 2  one block per (query, head), scores in shared memory,
//              block-wide max and sum.
//   version 3  tiled "flash" style on CUDA cores: a block takes 8 queries of
//              one head (a warp each); tiles of 64 keys and values are staged
//              once in shared memory for all 8; online softmax (running max
//              and sum, output rescaled as the max grows): no T x T scores.
//   version 4  the engine's path for f32 models (gpu/kernels/attention.cu): cuBLAS
//              batched GEMMs S = Q K^T, a causal softmax kernel, O = P V, in
//              query chunks.
//   version 5  flash on bf16 tensor cores (gpu/kernels/attention_pair.cu's
//              tiled_attention: lab 14's GPU twin, and the engine's path for
//              bf16 models): 64 queries x 64 keys per tile, m16n16k16 wmma for
//              Q K^T and P V, online softmax by a warp per row; f32 inputs
//              rounded to bf16 in shared memory, f32 sums.
//   version 6  the same kernel reading bf16 q, K and V (half the bytes).
//
// Each version is checked against a CPU reference (on a sample of query rows,
// all heads, to keep the CPU side short) before it is timed; versions 5 and 6
// against the reference on the inputs rounded to bf16, within 1e-2 + 1e-2 |ref|
// (their probabilities are bf16: 2^-9 relative).
//
//   attention_prefill [--version 0..6] [--heads 16] [--kv-heads 4] [--head-dim 64]
//                     [--len 2048] [--repeats 10] [--tf32] [--peak-gbs X] [--peak-tflops Y]
// Exits 77 without a GPU.
#include "dev_common.cuh"

#include "attention.cuh"
#include "attention_pair.cuh"
#include "common.cuh"
#include "matmul.cuh"

namespace {

// --- version 1 -------------------------------------------------------------------
__global__ void prefill_v1(float* out, const float* q, const float* K, const float* V, float* scores,
                           int T, int H, int Hkv, int D) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // (t, h)
    if (i >= T * H) return;
    const int t = i / H, h = i % H, g = h / (H / Hkv);
    const float* qv = q + std::size_t(i) * D;
    const float* Kg = K + std::size_t(g) * T * D;
    const float* Vg = V + std::size_t(g) * T * D;
    float* sc = scores + std::size_t(i) * T;
    const float scale = 1.0f / sqrtf(float(D));
    float mx = -INFINITY;
    for (int s = 0; s <= t; s++) {
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += qv[d] * Kg[std::size_t(s) * D + d];
        sc[s] = dot * scale;
        mx = fmaxf(mx, sc[s]);
    }
    float sum = 0.0f;
    for (int s = 0; s <= t; s++) sum += (sc[s] = expf(sc[s] - mx));
    for (int d = 0; d < D; d++) {
        float acc = 0.0f;
        for (int s = 0; s <= t; s++) acc += sc[s] * Vg[std::size_t(s) * D + d];
        out[std::size_t(i) * D + d] = acc / sum;
    }
}

// --- version 2 -------------------------------------------------------------------
__global__ void prefill_v2(float* out, const float* q, const float* K, const float* V, int T, int H,
                           int Hkv, int D) {
    extern __shared__ float sc[];  // (T)
    const int t = blockIdx.x, h = blockIdx.y, g = h / (H / Hkv);
    const float* qv = q + (std::size_t(t) * H + h) * D;
    const float* Kg = K + std::size_t(g) * T * D;
    const float* Vg = V + std::size_t(g) * T * D;
    const float scale = 1.0f / sqrtf(float(D));
    for (int s = threadIdx.x; s <= t; s += blockDim.x) {
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += qv[d] * Kg[std::size_t(s) * D + d];
        sc[s] = dot * scale;
    }
    const float sum = pd::gpu::block_exp_sum(sc, t + 1);  // sc[] becomes exp(score - max)
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s <= t; s++) acc += sc[s] * Vg[std::size_t(s) * D + d];
        out[(std::size_t(t) * H + h) * D + d] = acc / sum;
    }
}

// --- version 3 -------------------------------------------------------------------
constexpr int kQ3 = 8;    // queries (warps) per block
constexpr int kBc = 64;   // keys per tile
constexpr int kMaxD3 = 128;

std::size_t smem_v3(int D) { return sizeof(float) * (kBc * (D + 1) + kBc * D + kQ3 * D + kQ3 * kBc); }

__global__ void prefill_v3(float* out, const float* q, const float* K, const float* V, int T, int H,
                           int Hkv, int D) {
    extern __shared__ float smem[];
    float* Ks = smem;                       // (kBc, D + 1): padded, lanes read different rows
    float* Vs = Ks + kBc * (D + 1);         // (kBc, D)
    float* qs = Vs + kBc * D;               // (kQ3, D)
    float* ps = qs + kQ3 * D;               // (kQ3, kBc) probabilities of the current tile
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int h = blockIdx.y, g = h / (H / Hkv);
    const int t0 = blockIdx.x * kQ3, t = t0 + warp;
    const int t_last = min(t0 + kQ3, T) - 1;
    const float* Kg = K + std::size_t(g) * T * D;
    const float* Vg = V + std::size_t(g) * T * D;
    const float scale = 1.0f / sqrtf(float(D));
    const int nd = D / 32;  // values of the output row per lane

    if (t < T)
        for (int d = lane; d < D; d += 32) qs[warp * D + d] = q[(std::size_t(t) * H + h) * D + d];
    float m = -INFINITY, l = 0.0f, acc[kMaxD3 / 32] = {0.0f, 0.0f, 0.0f, 0.0f};

    for (int k0 = 0; k0 <= t_last; k0 += kBc) {
        __syncthreads();  // the previous tile is no longer read
        for (int i = threadIdx.x; i < kBc * D; i += blockDim.x) {
            const int j = i / D, d = i % D, key = k0 + j;
            Ks[j * (D + 1) + d] = key < T ? Kg[std::size_t(key) * D + d] : 0.0f;
            Vs[j * D + d] = key < T ? Vg[std::size_t(key) * D + d] : 0.0f;
        }
        __syncthreads();
        if (t >= T || k0 > t) continue;  // warp-uniform; no barrier until the next tile
        float s[2];
        for (int u = 0; u < 2; u++) {
            const int j = lane + 32 * u, key = k0 + j;
            float dot = 0.0f;
            for (int d = 0; d < D; d++) dot += qs[warp * D + d] * Ks[j * (D + 1) + d];
            s[u] = key <= t ? dot * scale : -INFINITY;
        }
        const float m_new = fmaxf(m, pd::gpu::warp_max(fmaxf(s[0], s[1])));
        const float p0 = expf(s[0] - m_new), p1 = expf(s[1] - m_new);
        const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf)
        l = l * alpha + pd::gpu::warp_sum(p0 + p1);
        ps[warp * kBc + lane] = p0;
        ps[warp * kBc + lane + 32] = p1;
        __syncwarp();
        for (int i = 0; i < nd; i++) {
            float a = acc[i] * alpha;
            for (int j = 0; j < kBc; j++) a += ps[warp * kBc + j] * Vs[j * D + lane + 32 * i];
            acc[i] = a;
        }
        __syncwarp();
        m = m_new;
    }
    if (t < T)
        for (int i = 0; i < nd; i++) out[(std::size_t(t) * H + h) * D + lane + 32 * i] = acc[i] / l;
}

void cpu_reference_rows(std::vector<float>& out, const std::vector<int>& rows, const std::vector<float>& q,
                        const std::vector<float>& K, const std::vector<float>& V, int T, int H, int Hkv,
                        int D) {
    std::vector<double> p(T);
    for (int t : rows)
        for (int h = 0; h < H; h++) {
            const int g = h / (H / Hkv);
            const float* qv = &q[(std::size_t(t) * H + h) * D];
            const std::size_t kv = std::size_t(g) * T * D;
            dev::reference_attention_row(&out[(std::size_t(t) * H + h) * D], qv, &K[kv], &V[kv], t + 1, D, p);
        }
}

const std::uint16_t* bits(const __nv_bfloat16* p) { return reinterpret_cast<const std::uint16_t*>(p); }

// The command line: which version and the shapes.
struct Shapes {
    int version = 0, H = 16, Hkv = 4, D = 64, T = 2048, repeats = 10;
    bool tf32 = false;
};

const char* const kHelp = R"(attention_prefill: causal prefill attention kernels, validated then timed.
  --version V    0 = all (default), 1 naive, 2 block + shared softmax, 3 tiled flash,
                 4 cuBLAS + softmax (engine, f32 models), 5 flash on bf16 tensor cores
                 (engine, bf16 models), 6 the same reading bf16 inputs
  --heads H --kv-heads HKV --head-dim D --len T   shapes (16, 4, 64, 2048)
  --repeats R    timed runs, median reported (10)
  --tf32         let version 4 use TF32 tensor cores (as bf16 models do)
  --peak-gbs X --peak-tflops Y   the card's peaks, if its clocks mislead
)";

// False (after saying why) for shapes the kernels do not take.
bool read_shapes(const dev::Args& args, Shapes& s) {
    s.version = int(args.get("--version", 0));
    s.H = int(args.get("--heads", 16)), s.Hkv = int(args.get("--kv-heads", 4));
    s.D = int(args.get("--head-dim", 64)), s.T = int(args.get("--len", 2048));
    s.repeats = int(args.get("--repeats", 10));
    s.tf32 = args.has("--tf32");
    if (s.H < 1 || s.Hkv < 1 || s.H % s.Hkv || s.D < 2 || s.T < 1) {
        std::fprintf(stderr, "attention_prefill: need positive shapes with heads a multiple of kv-heads\n");
        return false;
    }
    return true;
}

// q (T, H, D); K and V in the cache layout of one sequence, (Hkv, T, D); the
// references on the checked rows (f32, and on the inputs rounded to bf16 for
// versions 5 and 6), and the output elements those rows hold.
struct HostData {
    std::vector<float> q, K, V, ref, ref16;
    std::vector<std::size_t> checked;
};
HostData make_host_data(const Shapes& s) {
    const int T = s.T, H = s.H, Hkv = s.Hkv, D = s.D;
    HostData h;
    h.q = dev::randn(std::size_t(T) * H * D, 1);
    h.K = dev::randn(std::size_t(Hkv) * T * D, 2);
    h.V = dev::randn(std::size_t(Hkv) * T * D, 3);
    // Checked rows: the first 48, every 97th, and the last 3.
    std::vector<int> rows;
    for (int t = 0; t < T; t++)
        if (t < 48 || t % 97 == 0 || t >= T - 3) rows.push_back(t);
    h.ref.assign(std::size_t(T) * H * D, 0.0f);
    h.ref16.assign(h.ref.size(), 0.0f);
    cpu_reference_rows(h.ref, rows, h.q, h.K, h.V, T, H, Hkv, D);
    if (s.version == 0 || s.version >= 5)
        cpu_reference_rows(h.ref16, rows, dev::rounded(h.q), dev::rounded(h.K), dev::rounded(h.V), T, H, Hkv, D);
    for (int t : rows)
        for (int i = 0; i < H * D; i++) h.checked.push_back(std::size_t(t) * H * D + i);
    return h;
}

// Runs the versions --version asks for: each validated on the checked rows,
// then timed; q, K, V and out are on the device.
struct Bench {
    const Shapes& s;
    const HostData& h;
    dev::Card card;
    float *q, *K, *V, *out;
    double flops = 0, bytes = 0;
    bool ok = true;

    void run(int v, const char* name, float tol, const std::function<void()>& launch) {
        if (s.version != 0 && s.version != v) return;
        DEV_CHECK(cudaMemset(out, 0xff, h.ref.size() * sizeof(float)));  // NaN: a value never written fails
        launch();
        DEV_CHECK(cudaGetLastError());
        DEV_CHECK(cudaDeviceSynchronize());
        if (!dev::validate(name, dev::to_host(out, h.ref.size()), v >= 5 ? h.ref16 : h.ref, h.checked, tol, tol)) {
            ok = false;
            return;
        }
        dev::report(name, dev::time_ms(launch, 2, s.repeats), bytes, flops, card);
    }
};

// Versions 1 to 3: the steps towards a flash kernel, on CUDA cores.
void run_steps(Bench& b) {
    const Shapes& s = b.s;
    const int T = s.T, H = s.H, Hkv = s.Hkv, D = s.D;
    float* scores = nullptr;
    const std::size_t scores_bytes = std::size_t(T) * H * T * sizeof(float);
    if (cudaMalloc(&scores, scores_bytes) == cudaSuccess) {
        b.run(1, "1 naive: thread per (query, head)", 1e-4f, [&] {
            const int threads = 64, blocks = (T * H + threads - 1) / threads;
            prefill_v1<<<blocks, threads>>>(b.out, b.q, b.K, b.V, scores, T, H, Hkv, D);
        });
        cudaFree(scores);
    } else {
        cudaGetLastError();
        std::printf("  1 skipped: no room for %zu MB of scores\n", scores_bytes >> 20);
    }

    const std::size_t smem2 = std::size_t(T) * sizeof(float);
    if (dev::fit_shared_memory(prefill_v2, smem2)) {
        b.run(2, "2 block per (query, head), shared softmax", 1e-4f, [&] {
            prefill_v2<<<dim3(T, H), 128, smem2>>>(b.out, b.q, b.K, b.V, T, H, Hkv, D);
        });
    } else if (s.version == 0 || s.version == 2) {
        std::printf("  2 skipped: %d scores and the block reduction's static bytes do not fit in shared memory\n", T);
    }

    const std::size_t smem3 = smem_v3(D);
    if (D % 32 == 0 && D <= kMaxD3 && dev::fit_shared_memory(prefill_v3, smem3)) {
        b.run(3, "3 tiled flash, 8 queries x 64 keys per tile", 1e-4f, [&] {
            prefill_v3<<<dim3((T + kQ3 - 1) / kQ3, H), kQ3 * 32, smem3>>>(b.out, b.q, b.K, b.V, T, H, Hkv, D);
        });
    } else if (s.version == 0 || s.version == 3) {
        std::printf("  3 skipped: needs head_dim a multiple of 32, at most %d, and %zu bytes of tiles in "
                    "shared memory\n", kMaxD3, smem3);
    }
}

// Version 4: the engine's path for f32 models, cuBLAS and the causal softmax.
void run_cublas(Bench& b) {
    const Shapes& s = b.s;
    pd::gpu::Blas blas(nullptr);  // the default stream, which the timing events use
    int* identity = dev::to_device(std::vector<int>{0});  // one sequence, one block of T positions
    pd::gpu::KVLayer layer{b.K, b.V, identity, 1, 1, s.T, s.Hkv, s.T, s.D};
    const std::size_t n = pd::gpu::attention_prefill_scratch(s.T, 0, s.H);
    float* scratch = nullptr;
    DEV_CHECK(cudaMalloc(&scratch, n * sizeof(float)));
    b.run(4, s.tf32 ? "4 cuBLAS + causal softmax, TF32 (engine)" : "4 cuBLAS + causal softmax (engine)",
          s.tf32 ? 5e-3f : 1e-4f, [&] {
              pd::gpu::attention_prefill(blas, b.out, b.q, s.H * s.D, layer, 0, 0, s.T, s.H, scratch, s.tf32);
          });
    cudaFree(scratch);
    cudaFree(identity);
}

// Versions 5 and 6: flash on bf16 tensor cores, the engine's path for bf16 models.
void run_tensor_core_flash(Bench& b) {
    const Shapes& s = b.s;
    const pd::gpu::AttentionShape shape{s.T, s.T, s.H, s.Hkv, s.D};
    if (pd::gpu::tiled_attention_supports(s.D)) {
        b.run(5, "5 flash, bf16 tensor cores, f32 in (engine)", 1e-2f,
              [&] { pd::gpu::tiled_attention(b.out, b.q, b.K, b.V, shape, nullptr); });
        __nv_bfloat16* q16 = dev::to_device(dev::to_bf16(b.h.q));
        __nv_bfloat16* K16 = dev::to_device(dev::to_bf16(b.h.K));
        __nv_bfloat16* V16 = dev::to_device(dev::to_bf16(b.h.V));
        b.run(6, "6 flash, bf16 tensor cores, bf16 in", 1e-2f,
              [&] { pd::gpu::tiled_attention(b.out, bits(q16), bits(K16), bits(V16), shape, nullptr); });
        cudaFree(q16), cudaFree(K16), cudaFree(V16);
    } else if (s.version == 0 || s.version >= 5) {
        std::printf("  5, 6 skipped: the tensor-core tiles need head_dim a multiple of 16 in 16 .. 256\n");
    }
}

}  // namespace

int main(int argc, char** argv) {
    dev::Args args{argc, argv, kHelp};
    args.maybe_help();
    dev::require_gpu("attention_prefill");
    Shapes s;
    if (!read_shapes(args, s)) return 2;
    const dev::Card card = dev::card(args);
    std::printf("prefill attention: %d tokens, %d heads over %d KV heads, head_dim %d\n", s.T, s.H, s.Hkv, s.D);
    const HostData h = make_host_data(s);

    Bench b{s, h, card, dev::to_device(h.q), dev::to_device(h.K), dev::to_device(h.V), nullptr};
    DEV_CHECK(cudaMalloc(&b.out, h.ref.size() * sizeof(float)));
    b.flops = 4.0 * s.H * double(s.D) * (double(s.T) * (s.T + 1) / 2);
    b.bytes = 4.0 * (2.0 * s.T * s.H * s.D + 2.0 * s.Hkv * double(s.T) * s.D);
    run_steps(b);
    run_cublas(b);
    run_tensor_core_flash(b);
    std::printf("%s\n", b.ok ? "all versions match the CPU reference" : "MISMATCH: see above");
    return b.ok ? 0 : 1;
}
