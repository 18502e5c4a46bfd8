// Decode attention, step by step (llm.c dev/cuda style): one new query per
// sequence against a KV cache of N positions, in each of L layers. Memory-
// bound: every step reads the whole cache of each sequence once, K and V.
//
//   version 1  naive port of the CPU loop: one thread per (sequence, head),
//              scores in global memory. Very few threads, uncoalesced reads.
//   version 2  one block per (sequence, head): threads share the keys, scores
//              in shared memory, block-wide max and sum. Each thread still
//              reads a whole key row alone (strided across threads).
//   version 3  split-K "flash-decoding" per query head: blocks per (256-key
//              split, head, sequence), a warp per key with lanes across
//              head_dim (4-byte loads), local softmax per split, exact merge.
//              The engine's kernel until GQA blocks replaced it: a KV head's
//              keys are read once per query head of its group.
//   version 4  the engine's kernel (gpu/attention.cu) on the contiguous
//              cache: blocks per (128-key split, group of query heads sharing
//              a KV head, sequence), 8 lanes x 16-byte loads per key (4 keys
//              per warp), each key and value read once for the whole group.
//   version 5  the same kernel through a block table: the cache in blocks of
//              --block-size positions in scrambled order (the paged cache).
//   version 6  the engine's kernel on a bf16 cache (PDLAB_CUDA_KV=bf16): 8-byte
//              loads of 4 elements, half the bytes; checked against the
//              reference on the K and V rounded to bf16, timed against its own floor.
//
// Each version is checked on every output against a double CPU reference
// before it is timed. A timed run covers all L layers (--layers 16: 128 MiB
// of f32 K/V at the defaults, beyond any L2, so no run is served from the
// cache) and is reported against the floor, the bytes read at
// --bandwidth-gbs (what gpu/dev/bandwidth measured; default the card's peak).
//
//   attention_decode [--version 0..6] [--batch 1] [--heads 32] [--kv-heads 8]
//                    [--head-dim 64] [--len 2048] [--layers 16] [--block-size 16]
//                    [--repeats 20] [--bandwidth-gbs X] [--peak-gbs X] [--peak-tflops Y]
// Exits 77 without a GPU.
#include "dev_common.cuh"

#include <numeric>

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

// --- version 3 -------------------------------------------------------------------
constexpr int kV3Keys = 256;

// One block per (split, head, sequence): the split's unnormalised output and (max, sum).
__global__ void decode_v3_split(const float* q, const float* K, const float* V, int H, int Hkv, int N, int D,
                                int n_splits, float* part_o, float* part_ml) {
    extern __shared__ float smem[];
    const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int k0 = split * kV3Keys, nk = min(kV3Keys, N - k0);
    const int g = h / (H / Hkv);
    const float scale = 1.0f / sqrtf(float(D));
    float* qs = smem;      // (D)
    float* sc = smem + D;  // (kV3Keys)
    for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = q[(std::size_t(b) * H + h) * D + d];
    __syncthreads();
    const float* Kb = K + ((std::size_t(b) * Hkv + g) * N + k0) * D;
    const float* Vb = V + ((std::size_t(b) * Hkv + g) * N + k0) * D;
    const int lane = threadIdx.x % pd::gpu::kWarp, warp = threadIdx.x / pd::gpu::kWarp;
    const int n_warps = blockDim.x / pd::gpu::kWarp;
    for (int s = warp; s < nk; s += n_warps) {
        float dot = 0.0f;
        for (int d = lane; d < D; d += pd::gpu::kWarp) dot += qs[d] * Kb[std::size_t(s) * D + d];
        dot = pd::gpu::warp_sum(dot);
        if (lane == 0) sc[s] = dot * scale;
    }
    __syncthreads();
    float m;
    const float l = pd::gpu::block_exp_sum(sc, nk, &m);
    const std::size_t part = (std::size_t(b) * H + h) * n_splits + split;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < nk; s++) acc += sc[s] * Vb[std::size_t(s) * D + d];
        part_o[part * D + d] = acc;
    }
    if (threadIdx.x == 0) part_ml[part * 2] = m, part_ml[part * 2 + 1] = l;
}

// One block per (head, sequence): the exact merge of its splits.
__global__ void decode_v3_merge(float* out, int H, int D, int n_splits, const float* part_o, const float* part_ml) {
    const std::size_t base = (std::size_t(blockIdx.y) * H + blockIdx.x) * n_splits;
    float M = -INFINITY, L = 0.0f;
    for (int i = 0; i < n_splits; i++) M = fmaxf(M, part_ml[(base + i) * 2]);
    for (int i = 0; i < n_splits; i++) L += expf(part_ml[(base + i) * 2] - M) * part_ml[(base + i) * 2 + 1];
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < n_splits; i++) acc += expf(part_ml[(base + i) * 2] - M) * part_o[(base + i) * D + d];
        out[(std::size_t(blockIdx.y) * H + blockIdx.x) * D + d] = acc / L;
    }
}

// Every layer's outputs: (layer, sequence, head, D), each row over all N keys.
std::vector<float> cpu_reference(const std::vector<float>& q, const std::vector<float>& K,
                                 const std::vector<float>& V, int layers, int B, int H, int Hkv, int N, int D) {
    std::vector<float> out(std::size_t(layers) * B * H * D);
    std::vector<double> p(N);
    for (int l = 0; l < layers; l++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const int g = h / (H / Hkv);
                const std::size_t row = (std::size_t(l) * B + b) * H + h;
                const std::size_t kv = ((std::size_t(l) * B + b) * Hkv + g) * N * D;
                dev::reference_attention_row(&out[row * D], &q[row * D], &K[kv], &V[kv], N, D, p);
            }
    return out;
}

// The cache in blocks of bs positions: (layer, block, Hkv, bs, D), block ids
// of sequence b in table[b * max_blocks ..], a shuffled permutation.
struct Paged {
    std::vector<float> k, v;
    std::vector<int> table;
    int max_blocks = 0;
    std::size_t layer_elems = 0;
};
Paged to_paged(const std::vector<float>& K, const std::vector<float>& V, int layers, int B, int Hkv, int N, int D,
               int bs) {
    Paged p;
    p.max_blocks = (N + bs - 1) / bs;
    const int n_blocks = B * p.max_blocks;
    p.table.resize(n_blocks);
    std::iota(p.table.begin(), p.table.end(), 0);
    std::shuffle(p.table.begin(), p.table.end(), std::mt19937(7));
    p.layer_elems = std::size_t(n_blocks) * Hkv * bs * D;
    p.k.assign(layers * p.layer_elems, 0.0f);
    p.v.assign(layers * p.layer_elems, 0.0f);
    for (int l = 0; l < layers; l++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < Hkv; h++)
                for (int s = 0; s < N; s++) {
                    const std::size_t from = (((std::size_t(l) * B + b) * Hkv + h) * N + s) * D;
                    const int blk = p.table[std::size_t(b) * p.max_blocks + s / bs];
                    const std::size_t to = l * p.layer_elems + ((std::size_t(blk) * Hkv + h) * bs + s % bs) * D;
                    std::copy_n(&K[from], D, &p.k[to]);
                    std::copy_n(&V[from], D, &p.v[to]);
                }
    return p;
}

}  // namespace

int main(int argc, char** argv) {
    dev::Args args{argc, argv,
                   "attention_decode: decode attention kernels, validated then timed against the floor.\n"
                   "  --version V    0 = all (default), 1 naive, 2 block + shared softmax, 3 split-K per head,\n"
                   "                 4 GQA split-K, 16-byte loads (engine), 5 the same through a block table,\n"
                   "                 6 the engine's kernel on a bf16 cache\n"
                   "  --batch B --heads H --kv-heads HKV --head-dim D --len N   shapes (1, 32, 8, 64, 2048)\n"
                   "  --layers L     layers of cache, each run covers all (16)\n"
                   "  --block-size S positions per block of version 5 (16)\n"
                   "  --repeats R    timed runs, median reported (20)\n"
                   "  --bandwidth-gbs X   copy bandwidth for the floor (gpu/dev/bandwidth; default: the card's peak)\n"
                   "  --peak-gbs X --peak-tflops Y   the card's peaks, if its clocks mislead\n"};
    args.maybe_help();
    dev::require_gpu("attention_decode");
    const int version = int(args.get("--version", 0)), B = int(args.get("--batch", 1));
    const int H = int(args.get("--heads", 32)), Hkv = int(args.get("--kv-heads", 8));
    const int D = int(args.get("--head-dim", 64)), N = int(args.get("--len", 2048));
    const int layers = int(args.get("--layers", 16)), bs = int(args.get("--block-size", 16));
    const int repeats = int(args.get("--repeats", 20));
    if (B < 1 || H < 1 || Hkv < 1 || H % Hkv || D < 4 || D % 4 || D > pd::gpu::kDecodeMaxHeadDim || N < 1 || layers < 1 || bs < 1) {
        std::fprintf(stderr, "attention_decode: need positive shapes, heads a multiple of kv-heads, and head-dim "
                             "a multiple of 4 up to 128 (rows are read 16 bytes at a time)\n");
        return 2;
    }
    const dev::Card card = dev::card(args);
    const double gbs = args.getf("--bandwidth-gbs", card.peak_gbs);

    // The cache holds exactly N positions per sequence; every query sees all of them.
    const std::size_t q_layer = std::size_t(B) * H * D, kv_layer = std::size_t(B) * Hkv * N * D;
    auto hq = dev::randn(layers * q_layer, 1);
    auto hK = dev::randn(layers * kv_layer, 2);
    auto hV = dev::randn(layers * kv_layer, 3);
    const std::vector<float> ref = cpu_reference(hq, hK, hV, layers, B, H, Hkv, N, D);
    const std::vector<float> ref16 = cpu_reference(hq, dev::rounded(hK), dev::rounded(hV), layers, B, H, Hkv, N, D);
    const Paged hp = to_paged(hK, hV, layers, B, Hkv, N, D, bs);
    float* q = dev::to_device(hq);
    float* K = dev::to_device(hK);
    float* V = dev::to_device(hV);
    float* Kp = dev::to_device(hp.k);
    float* Vp = dev::to_device(hp.v);
    __nv_bfloat16* K16 = dev::to_device(dev::to_bf16(hK));
    __nv_bfloat16* V16 = dev::to_device(dev::to_bf16(hV));
    int* table = dev::to_device(hp.table);
    std::vector<int> hslots(B), hpos(B, N - 1), hidentity(B);
    std::iota(hslots.begin(), hslots.end(), 0);
    std::iota(hidentity.begin(), hidentity.end(), 0);
    int* slots = dev::to_device(hslots);
    int* pos = dev::to_device(hpos);
    int* identity = dev::to_device(hidentity);
    float* out = nullptr;
    float* scores = nullptr;
    float* scratch = nullptr;
    DEV_CHECK(cudaMalloc(&out, ref.size() * sizeof(float)));
    const int v3_splits = (N + kV3Keys - 1) / kV3Keys;
    const std::size_t scratch_floats = std::max(pd::gpu::attention_decode_scratch(B, H, N, D),
                                                std::size_t(B) * H * v3_splits * (D + 2));
    DEV_CHECK(cudaMalloc(&scratch, scratch_floats * sizeof(float)));
    // Layer l's cache as the engine's kernel sees it: contiguous (one block
    // of N positions per sequence, the identity table) or paged.
    auto contiguous_layer = [&](int l) {
        return pd::gpu::KVLayer{K + l * kv_layer, V + l * kv_layer, identity, B, 1, N, Hkv, N, D};
    };
    auto paged_layer = [&](int l) {
        return pd::gpu::KVLayer{Kp + l * hp.layer_elems, Vp + l * hp.layer_elems, table, B, hp.max_blocks, bs, Hkv,
                                N, D};
    };
    auto bf16_layer = [&](int l) {
        pd::gpu::KVLayer c{nullptr, nullptr, identity, B, 1, N, Hkv, N, D};
        c.k16 = reinterpret_cast<std::uint16_t*>(K16 + l * kv_layer);
        c.v16 = reinterpret_cast<std::uint16_t*>(V16 + l * kv_layer);
        return c;
    };

    const double bytes = 4.0 * layers * (2.0 * kv_layer + 2.0 * q_layer);
    const double bytes16 = layers * (2.0 * 2.0 * kv_layer + 4.0 * 2.0 * q_layer);  // bf16 K/V, f32 q and out
    const double flops = 4.0 * layers * B * H * double(N) * D;
    const double floor_ms = bytes / (gbs * 1e9) * 1e3;
    std::printf("decode attention: batch %d, %d heads over %d KV heads, head_dim %d, %d cached positions, %d layers: "
                "%.1f MB read, floor %.4f ms at %.0f GB/s\n",
                B, H, Hkv, D, N, layers, bytes / 1e6, floor_ms, gbs);
    bool ok = true;
    // Version v: validated against `want`, then timed against the floor of `read` bytes.
    auto run_version = [&](int v, const char* name, const std::function<void(int)>& layer_launch,
                           const std::vector<float>& want, double read) {
        if (version != 0 && version != v) return;
        auto launch = [&] {
            for (int l = 0; l < layers; l++) layer_launch(l);
        };
        DEV_CHECK(cudaMemset(out, 0xff, ref.size() * sizeof(float)));  // NaN: an output never written fails
        launch();
        DEV_CHECK(cudaGetLastError());
        DEV_CHECK(cudaDeviceSynchronize());
        if (!dev::validate(name, dev::to_host(out, want.size()), want, dev::all_indices(want.size()))) {
            ok = false;
            return;  // a wrong kernel's time is not a result
        }
        const double ms = dev::time_ms(launch, 3, repeats);
        dev::report(name, ms, read, flops, card);
        std::printf("RESULT attn_decode_v%d_ms=%.4f\nRESULT attn_decode_v%d_floor_ratio=%.3f\n", v, ms, v,
                    ms / (read / (gbs * 1e9) * 1e3));
    };

    run_version(1, "1 naive: thread per (seq, head)", [&](int l) {
        if (!scores) DEV_CHECK(cudaMalloc(&scores, std::size_t(B) * H * N * sizeof(float)));
        const int threads = 64, blocks = (B * H + threads - 1) / threads;
        decode_v1<<<blocks, threads>>>(out + l * q_layer, q + l * q_layer, K + l * kv_layer, V + l * kv_layer,
                                       scores, B, H, Hkv, N, D);
    }, ref, bytes);

    const std::size_t smem2 = std::size_t(N) * sizeof(float);
    if (dev::fit_shared_memory(decode_v2, smem2)) {
        run_version(2, "2 block per (seq, head), shared softmax", [&](int l) {
            decode_v2<<<dim3(H, B), 256, smem2>>>(out + l * q_layer, q + l * q_layer, K + l * kv_layer,
                                                  V + l * kv_layer, H, Hkv, N, D);
        }, ref, bytes);
    } else if (version == 0 || version == 2) {
        std::printf("  2 skipped: %d scores and the block reduction's static bytes do not fit in shared memory\n", N);
    }

    run_version(3, "3 split-K per query head", [&](int l) {
        float* part_ml = scratch + std::size_t(B) * H * v3_splits * D;
        decode_v3_split<<<dim3(v3_splits, H, B), 128, (D + kV3Keys) * sizeof(float)>>>(
            q + l * q_layer, K + l * kv_layer, V + l * kv_layer, H, Hkv, N, D, v3_splits, scratch, part_ml);
        decode_v3_merge<<<dim3(H, B), 64>>>(out + l * q_layer, H, D, v3_splits, scratch, part_ml);
    }, ref, bytes);

    run_version(4, "4 GQA split-K, 16-byte loads (engine)", [&](int l) {
        pd::gpu::attention_decode(out + l * q_layer, q + l * q_layer, H * D, contiguous_layer(l), slots, pos, B, H,
                                  scratch, nullptr);
    }, ref, bytes);

    run_version(5, "5 engine kernel through a block table", [&](int l) {
        pd::gpu::attention_decode(out + l * q_layer, q + l * q_layer, H * D, paged_layer(l), slots, pos, B, H,
                                  scratch, nullptr);
    }, ref, bytes);

    run_version(6, "6 engine kernel on a bf16 cache", [&](int l) {
        pd::gpu::attention_decode(out + l * q_layer, q + l * q_layer, H * D, bf16_layer(l), slots, pos, B, H,
                                  scratch, nullptr);
    }, ref16, bytes16);

    std::printf("%s\n", ok ? "all versions match the CPU reference" : "MISMATCH: see above");
    return ok ? 0 : 1;
}
