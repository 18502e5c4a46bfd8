// Decode attention, step by step (llm.c dev/cuda style): one new query per
// sequence against a KV cache of N positions. Memory-bound: every step reads
// the whole cache of each sequence once, K and V.
//
//   version 1  naive port of the CPU loop: one thread per (sequence, head),
//              scores in global memory. Very few threads, uncoalesced reads.
//   version 2  one block per (sequence, head): threads share the keys, scores
//              in shared memory, block-wide max and sum. Each thread still
//              reads a whole key row alone (strided across threads).
//   version 3  split-K "flash-decoding" (gpu/attention.cu, what the engine
//              runs): blocks per (key split, head, sequence), a warp per key
//              with lanes across head_dim (coalesced), local softmax per
//              split, exact merge of the splits. Fills the GPU at batch 1.
//
// Each version is checked against a CPU reference before it is timed.
//
//   attention_decode [--version 0|1|2|3] [--batch 1] [--heads 32] [--kv-heads 8]
//                    [--head-dim 64] [--len 2048] [--repeats 20]
//                    [--peak-gbs X] [--peak-tflops Y]
// Exits 77 without a GPU.
#include "dev_common.cuh"

#include "attention.cuh"
#include "common.cuh"

namespace {

// --- version 1 -------------------------------------------------------------------
__global__ void decode_v1(float* out, const float* q, const float* K, const float* V, float* scores,
                          int B, int H, int Hkv, int N, int D) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * H) return;
    const int b = i / H, h = i % H, g = h / (H / Hkv);
    const float* qv = q + std::size_t(i) * D;
    const float* Kb = K + (std::size_t(b) * Hkv + g) * N * D;
    const float* Vb = V + (std::size_t(b) * Hkv + g) * N * D;
    float* sc = scores + std::size_t(i) * N;
    const float scale = 1.0f / sqrtf(float(D));
    float mx = -INFINITY;
    for (int s = 0; s < N; s++) {
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += qv[d] * Kb[std::size_t(s) * D + d];
        sc[s] = dot * scale;
        mx = fmaxf(mx, sc[s]);
    }
    float sum = 0.0f;
    for (int s = 0; s < N; s++) sum += (sc[s] = expf(sc[s] - mx));
    for (int d = 0; d < D; d++) {
        float acc = 0.0f;
        for (int s = 0; s < N; s++) acc += sc[s] * Vb[std::size_t(s) * D + d];
        out[std::size_t(i) * D + d] = acc / sum;
    }
}

// --- version 2 -------------------------------------------------------------------
__global__ void decode_v2(float* out, const float* q, const float* K, const float* V, int H, int Hkv,
                          int N, int D) {
    extern __shared__ float sc[];  // (N)
    const int b = blockIdx.y, h = blockIdx.x, g = h / (H / Hkv);
    const float* qv = q + (std::size_t(b) * H + h) * D;
    const float* Kb = K + (std::size_t(b) * Hkv + g) * N * D;
    const float* Vb = V + (std::size_t(b) * Hkv + g) * N * D;
    const float scale = 1.0f / sqrtf(float(D));
    for (int s = threadIdx.x; s < N; s += blockDim.x) {
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += qv[d] * Kb[std::size_t(s) * D + d];
        sc[s] = dot * scale;
    }
    const float sum = pd::gpu::block_exp_sum(sc, N);  // sc[] becomes exp(score - max)
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < N; s++) acc += sc[s] * Vb[std::size_t(s) * D + d];
        out[(std::size_t(b) * H + h) * D + d] = acc / sum;
    }
}

void cpu_reference(std::vector<float>& out, const std::vector<float>& q, const std::vector<float>& K,
                   const std::vector<float>& V, int B, int H, int Hkv, int N, int D) {
    std::vector<double> p(N);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int g = h / (H / Hkv);
            const float* qv = &q[(std::size_t(b) * H + h) * D];
            const float* Kb = &K[(std::size_t(b) * Hkv + g) * N * D];
            const float* Vb = &V[(std::size_t(b) * Hkv + g) * N * D];
            dev::reference_attention_row(&out[(std::size_t(b) * H + h) * D], qv, Kb, Vb, N, D, p);
        }
}

}  // namespace

int main(int argc, char** argv) {
    dev::Args args{argc, argv,
                   "attention_decode: decode attention kernels, validated then timed.\n"
                   "  --version V    0 = all (default), 1 naive, 2 block + shared softmax, 3 split-K (engine)\n"
                   "  --batch B --heads H --kv-heads HKV --head-dim D --len N   shapes (1, 32, 8, 64, 2048)\n"
                   "  --repeats R    timed runs, median reported (20)\n"
                   "  --peak-gbs X --peak-tflops Y   the card's peaks, if its clocks mislead\n"};
    args.maybe_help();
    dev::require_gpu("attention_decode");
    const int version = int(args.get("--version", 0)), B = int(args.get("--batch", 1));
    const int H = int(args.get("--heads", 32)), Hkv = int(args.get("--kv-heads", 8));
    const int D = int(args.get("--head-dim", 64)), N = int(args.get("--len", 2048));
    const int repeats = int(args.get("--repeats", 20));
    if (B < 1 || H < 1 || Hkv < 1 || H % Hkv || D < 1 || N < 1) {
        std::fprintf(stderr, "attention_decode: need positive shapes with heads a multiple of kv-heads\n");
        return 2;
    }
    const dev::Card card = dev::card(args);
    std::printf("decode attention: batch %d, %d heads over %d KV heads, head_dim %d, %d cached positions\n",
                B, H, Hkv, D, N);

    // The cache holds exactly N positions per sequence; every query sees all of them.
    auto hq = dev::randn(std::size_t(B) * H * D, 1);
    auto hK = dev::randn(std::size_t(B) * Hkv * N * D, 2);
    auto hV = dev::randn(std::size_t(B) * Hkv * N * D, 3);
    std::vector<float> ref(std::size_t(B) * H * D);
    cpu_reference(ref, hq, hK, hV, B, H, Hkv, N, D);
    float* q = dev::to_device(hq);
    float* K = dev::to_device(hK);
    float* V = dev::to_device(hV);
    float* out = nullptr;
    float* scores = nullptr;
    DEV_CHECK(cudaMalloc(&out, ref.size() * sizeof(float)));
    std::vector<int> hslots(B), hpos(B, N - 1);
    for (int b = 0; b < B; b++) hslots[b] = b;
    int* slots = dev::to_device(hslots);
    int* pos = dev::to_device(hpos);
    pd::gpu::KVLayer layer{K, V, B, Hkv, N, D};
    float* scratch = nullptr;
    DEV_CHECK(cudaMalloc(&scratch, pd::gpu::attention_decode_scratch(B, H, N, D) * sizeof(float)));

    const double bytes = 4.0 * (2.0 * B * Hkv * double(N) * D + 2.0 * B * H * D);
    const double flops = 4.0 * B * H * double(N) * D;
    bool ok = true;
    auto run_version = [&](int v, const char* name, const std::function<void()>& launch) {
        if (version != 0 && version != v) return;
        DEV_CHECK(cudaMemset(out, 0, ref.size() * sizeof(float)));
        launch();
        DEV_CHECK(cudaGetLastError());
        DEV_CHECK(cudaDeviceSynchronize());
        if (!dev::validate(name, dev::to_host(out, ref.size()), ref, dev::all_indices(ref.size()))) {
            ok = false;
            return;
        }
        dev::report(name, dev::time_ms(launch, 3, repeats), bytes, flops, card);
    };

    run_version(1, "1 naive: thread per (seq, head)", [&] {
        if (!scores) DEV_CHECK(cudaMalloc(&scores, std::size_t(B) * H * N * sizeof(float)));
        const int threads = 64, blocks = (B * H + threads - 1) / threads;
        decode_v1<<<blocks, threads>>>(out, q, K, V, scores, B, H, Hkv, N, D);
    });

    const std::size_t smem2 = std::size_t(N) * sizeof(float);
    if (dev::fit_shared_memory(decode_v2, smem2)) {
        run_version(2, "2 block per (seq, head), shared softmax", [&] {
            decode_v2<<<dim3(H, B), 256, smem2>>>(out, q, K, V, H, Hkv, N, D);
        });
    } else if (version == 0 || version == 2) {
        std::printf("  2 skipped: %d scores and the block reduction's static bytes do not fit in shared memory\n", N);
    }

    run_version(3, "3 split-K flash-decoding (engine)", [&] {
        pd::gpu::attention_decode(out, q, H * D, layer, slots, pos, B, H, scratch, nullptr);
    });

    std::printf("%s\n", ok ? "all versions match the CPU reference" : "MISMATCH: see above");
    return ok ? 0 : 1;
}
