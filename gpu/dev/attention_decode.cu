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
//   version 4  the engine's kernel (gpu/kernels/attention.cu) on the contiguous
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

// The command line: which version and the shapes.
struct Shapes {
    int version = 0, B = 1, H = 32, Hkv = 8, D = 64, N = 2048, layers = 16, bs = 16, repeats = 20;
    std::size_t q_layer() const { return std::size_t(B) * H * D; }         // queries (and outputs) of one layer
    std::size_t kv_layer() const { return std::size_t(B) * Hkv * N * D; }  // K (or V) of one layer
};

const char* const kHelp = R"(attention_decode: decode attention kernels, validated then timed against the floor.
  --version V    0 = all (default), 1 naive, 2 block + shared softmax, 3 split-K per head,
                 4 GQA split-K, 16-byte loads (engine), 5 the same through a block table,
                 6 the engine's kernel on a bf16 cache
  --batch B --heads H --kv-heads HKV --head-dim D --len N   shapes (1, 32, 8, 64, 2048)
  --layers L     layers of cache, each run covers all (16)
  --block-size S positions per block of version 5 (16)
  --repeats R    timed runs, median reported (20)
  --bandwidth-gbs X   copy bandwidth for the floor (gpu/dev/bandwidth; default: the card's peak)
  --peak-gbs X --peak-tflops Y   the card's peaks, if its clocks mislead
)";

// False (after saying why) for shapes the kernels do not take.
bool read_shapes(const dev::Args& args, Shapes& s) {
    s.version = int(args.get("--version", 0)), s.B = int(args.get("--batch", 1));
    s.H = int(args.get("--heads", 32)), s.Hkv = int(args.get("--kv-heads", 8));
    s.D = int(args.get("--head-dim", 64)), s.N = int(args.get("--len", 2048));
    s.layers = int(args.get("--layers", 16)), s.bs = int(args.get("--block-size", 16));
    s.repeats = int(args.get("--repeats", 20));
    if (s.B < 1 || s.H < 1 || s.Hkv < 1 || s.H % s.Hkv || s.D < 4 || s.D % 4 || s.D > pd::gpu::kDecodeMaxHeadDim ||
        s.N < 1 || s.layers < 1 || s.bs < 1) {
        std::fprintf(stderr, "attention_decode: need positive shapes, heads a multiple of kv-heads, and head-dim "
                             "a multiple of 4 up to 128 (rows are read 16 bytes at a time)\n");
        return false;
    }
    return true;
}

// The inputs and what every version must give: the reference on the f32 K/V
// and on the K/V rounded to bf16 (version 6), and the paged copy (version 5).
// The cache holds exactly N positions per sequence; every query sees all of them.
struct HostData {
    std::vector<float> q, K, V, ref, ref16;
    Paged paged;
};
HostData make_host_data(const Shapes& s) {
    HostData h;
    h.q = dev::randn(s.layers * s.q_layer(), 1);
    h.K = dev::randn(s.layers * s.kv_layer(), 2);
    h.V = dev::randn(s.layers * s.kv_layer(), 3);
    h.ref = cpu_reference(h.q, h.K, h.V, s.layers, s.B, s.H, s.Hkv, s.N, s.D);
    h.ref16 = cpu_reference(h.q, dev::rounded(h.K), dev::rounded(h.V), s.layers, s.B, s.H, s.Hkv, s.N, s.D);
    h.paged = to_paged(h.K, h.V, s.layers, s.B, s.Hkv, s.N, s.D, s.bs);
    return h;
}

// The same on the device, with the engine kernel's slots, positions and the
// identity block table, the output and the split scratch.
struct DeviceData {
    float *q, *K, *V, *Kp, *Vp;
    __nv_bfloat16 *K16, *V16;
    int *table, *slots, *pos, *identity;
    float* out = nullptr;
    float* scores = nullptr;  // version 1's, allocated on its first launch
    float* scratch = nullptr;
};
DeviceData upload(const Shapes& s, const HostData& h) {
    DeviceData d;
    d.q = dev::to_device(h.q);
    d.K = dev::to_device(h.K);
    d.V = dev::to_device(h.V);
    d.Kp = dev::to_device(h.paged.k);
    d.Vp = dev::to_device(h.paged.v);
    d.K16 = dev::to_device(dev::to_bf16(h.K));
    d.V16 = dev::to_device(dev::to_bf16(h.V));
    d.table = dev::to_device(h.paged.table);
    std::vector<int> hslots(s.B), hpos(s.B, s.N - 1), hidentity(s.B);
    std::iota(hslots.begin(), hslots.end(), 0);
    std::iota(hidentity.begin(), hidentity.end(), 0);
    d.slots = dev::to_device(hslots);
    d.pos = dev::to_device(hpos);
    d.identity = dev::to_device(hidentity);
    DEV_CHECK(cudaMalloc(&d.out, h.ref.size() * sizeof(float)));
    const int v3_splits = (s.N + kV3Keys - 1) / kV3Keys;
    const std::size_t scratch_floats = std::max(pd::gpu::attention_decode_scratch(s.B, s.H, s.N, s.D),
                                                std::size_t(s.B) * s.H * v3_splits * (s.D + 2));
    DEV_CHECK(cudaMalloc(&d.scratch, scratch_floats * sizeof(float)));
    return d;
}

// Runs the versions --version asks for: each validated against its
// reference, then timed against the floor of the bytes it reads.
struct Bench {
    const Shapes& s;
    const HostData& h;
    DeviceData& d;
    dev::Card card;
    double gbs = 0;
    double flops = 0;
    bool ok = true;

    void run(int v, const char* name, const std::function<void(int)>& layer_launch, const std::vector<float>& want,
             double read) {
        if (s.version != 0 && s.version != v) return;
        auto launch = [&] {
            for (int l = 0; l < s.layers; l++) layer_launch(l);
        };
        DEV_CHECK(cudaMemset(d.out, 0xff, h.ref.size() * sizeof(float)));  // NaN: an output never written fails
        launch();
        DEV_CHECK(cudaGetLastError());
        DEV_CHECK(cudaDeviceSynchronize());
        if (!dev::validate(name, dev::to_host(d.out, want.size()), want, dev::all_indices(want.size()))) {
            ok = false;
            return;  // a wrong kernel's time is not a result
        }
        const double ms = dev::time_ms(launch, 3, s.repeats);
        dev::report(name, ms, read, flops, card);
        std::printf("RESULT attn_decode_v%d_ms=%.4f\nRESULT attn_decode_v%d_floor_ratio=%.3f\n", v, ms, v,
                    ms / (read / (gbs * 1e9) * 1e3));
    }
};

// Versions 1 to 3: the steps towards the engine's kernel, on the contiguous f32 cache.
void run_steps(Bench& b, double bytes) {
    const Shapes& s = b.s;
    DeviceData& d = b.d;
    const std::size_t q_layer = s.q_layer(), kv_layer = s.kv_layer();
    b.run(1, "1 naive: thread per (seq, head)", [&](int l) {
        if (!d.scores) DEV_CHECK(cudaMalloc(&d.scores, std::size_t(s.B) * s.H * s.N * sizeof(float)));
        const int threads = 64, blocks = (s.B * s.H + threads - 1) / threads;
        decode_v1<<<blocks, threads>>>(d.out + l * q_layer, d.q + l * q_layer, d.K + l * kv_layer,
                                       d.V + l * kv_layer, d.scores, s.B, s.H, s.Hkv, s.N, s.D);
    }, b.h.ref, bytes);

    const std::size_t smem2 = std::size_t(s.N) * sizeof(float);
    if (dev::fit_shared_memory(decode_v2, smem2)) {
        b.run(2, "2 block per (seq, head), shared softmax", [&](int l) {
            decode_v2<<<dim3(s.H, s.B), 256, smem2>>>(d.out + l * q_layer, d.q + l * q_layer, d.K + l * kv_layer,
                                                      d.V + l * kv_layer, s.H, s.Hkv, s.N, s.D);
        }, b.h.ref, bytes);
    } else if (s.version == 0 || s.version == 2) {
        std::printf("  2 skipped: %d scores and the block reduction's static bytes do not fit in shared memory\n",
                    s.N);
    }

    const int v3_splits = (s.N + kV3Keys - 1) / kV3Keys;
    b.run(3, "3 split-K per query head", [&](int l) {
        float* part_ml = d.scratch + std::size_t(s.B) * s.H * v3_splits * s.D;
        decode_v3_split<<<dim3(v3_splits, s.H, s.B), 128, (s.D + kV3Keys) * sizeof(float)>>>(
            d.q + l * q_layer, d.K + l * kv_layer, d.V + l * kv_layer, s.H, s.Hkv, s.N, s.D, v3_splits, d.scratch,
            part_ml);
        decode_v3_merge<<<dim3(s.H, s.B), 64>>>(d.out + l * q_layer, s.H, s.D, v3_splits, d.scratch, part_ml);
    }, b.h.ref, bytes);
}

// Versions 4 to 6: the engine's kernel on layer l's cache as it sees it:
// contiguous (one block of N positions per sequence, the identity table),
// paged, and contiguous in bf16.
void run_engine_kernel(Bench& b, double bytes, double bytes16) {
    const Shapes& s = b.s;
    const DeviceData& d = b.d;
    const std::size_t q_layer = s.q_layer(), kv_layer = s.kv_layer();
    const Paged& hp = b.h.paged;
    auto contiguous_layer = [&](int l) {
        return pd::gpu::KVLayer{d.K + l * kv_layer, d.V + l * kv_layer, d.identity, s.B, 1, s.N, s.Hkv, s.N, s.D};
    };
    auto paged_layer = [&](int l) {
        return pd::gpu::KVLayer{d.Kp + l * hp.layer_elems, d.Vp + l * hp.layer_elems, d.table, s.B, hp.max_blocks,
                                s.bs, s.Hkv, s.N, s.D};
    };
    auto bf16_layer = [&](int l) {
        pd::gpu::KVLayer c{nullptr, nullptr, d.identity, s.B, 1, s.N, s.Hkv, s.N, s.D};
        c.k16 = reinterpret_cast<std::uint16_t*>(d.K16 + l * kv_layer);
        c.v16 = reinterpret_cast<std::uint16_t*>(d.V16 + l * kv_layer);
        return c;
    };
    auto engine_kernel = [&](int l, const pd::gpu::KVLayer& cache) {
        pd::gpu::attention_decode(d.out + l * q_layer, d.q + l * q_layer, s.H * s.D, cache, d.slots, d.pos, s.B, s.H,
                                  d.scratch, nullptr);
    };
    b.run(4, "4 GQA split-K, 16-byte loads (engine)", [&](int l) { engine_kernel(l, contiguous_layer(l)); }, b.h.ref,
          bytes);
    b.run(5, "5 engine kernel through a block table", [&](int l) { engine_kernel(l, paged_layer(l)); }, b.h.ref,
          bytes);
    b.run(6, "6 engine kernel on a bf16 cache", [&](int l) { engine_kernel(l, bf16_layer(l)); }, b.h.ref16, bytes16);
}

}  // namespace

int main(int argc, char** argv) {
    dev::Args args{argc, argv, kHelp};
    args.maybe_help();
    dev::require_gpu("attention_decode");
    Shapes s;
    if (!read_shapes(args, s)) return 2;
    const dev::Card card = dev::card(args);
    const double gbs = args.getf("--bandwidth-gbs", card.peak_gbs);
    const HostData h = make_host_data(s);
    DeviceData d = upload(s, h);

    const std::size_t q_layer = s.q_layer(), kv_layer = s.kv_layer();
    const double bytes = 4.0 * s.layers * (2.0 * kv_layer + 2.0 * q_layer);
    const double bytes16 = s.layers * (2.0 * 2.0 * kv_layer + 4.0 * 2.0 * q_layer);  // bf16 K/V, f32 q and out
    const double flops = 4.0 * s.layers * s.B * s.H * double(s.N) * s.D;
    const double floor_ms = bytes / (gbs * 1e9) * 1e3;
    std::printf("decode attention: batch %d, %d heads over %d KV heads, head_dim %d, %d cached positions, %d layers: "
                "%.1f MB read, floor %.4f ms at %.0f GB/s\n",
                s.B, s.H, s.Hkv, s.D, s.N, s.layers, bytes / 1e6, floor_ms, gbs);
    Bench b{s, h, d, card, gbs, flops};
    run_steps(b, bytes);
    run_engine_kernel(b, bytes, bytes16);
    std::printf("%s\n", b.ok ? "all versions match the CPU reference" : "MISMATCH: see above");
    return b.ok ? 0 : 1;
}
