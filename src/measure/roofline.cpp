#include "measure/roofline.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "engine/isa.hpp"
#include "engine/onednn_api.hpp"
#include "engine/onednn_matmul.hpp"
#include "measure/stream_sum.hpp"
#include "base/timing.hpp"

namespace pd {

// --- bandwidth ------------------------------------------------------------------

namespace {

// The buffer the bandwidth probes read: allocated once, 2 MiB aligned and
// advised onto huge pages (the weights are too, see matmul.cpp), so the probe
// measures DRAM rather than page walks.
struct ProbeBuffer {
    float* data = nullptr;
    std::size_t bytes = 0;
    ~ProbeBuffer() {
        if (data) ::munmap(data, bytes);
    }
};

ProbeBuffer& probe_buffer(std::size_t bytes) {
    static ProbeBuffer buf;
    if (buf.bytes >= bytes) return buf;
    if (buf.data) ::munmap(buf.data, buf.bytes);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("cannot map {} MiB for the bandwidth probe", bytes >> 20);
    ::madvise(p, bytes, MADV_HUGEPAGE);
    buf.data = static_cast<float*>(p);
    buf.bytes = bytes;
    // First touch by the same threads, with the same split, as the reads below.
    const std::size_t n = bytes / sizeof(float);
#pragma omp parallel
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        std::size_t a = n * t / T, b = n * (t + 1) / T;
        for (std::size_t i = a; i < b; i++) buf.data[i] = 1.0f;
    }
    return buf;
}

volatile float g_sink;  // keeps the sums alive

}  // namespace

// One thread's share [a, b) of the probe buffer, read whole by `loop`.
static float read_share(const float* p, std::size_t n, ReadLoop loop) {
    if (loop == ReadLoop::probe) return stream_sum(p, n);
    // The buffer holds 1.0f everywhere (bytes 00 00 80 3f): 0x55 is never found.
    return std::memchr(p, 0x55, n * sizeof(float)) ? 1.0f : 0.0f;
}

BandwidthResult measure_read_bandwidth(std::size_t bytes, int min_passes, double min_seconds, ReadLoop loop) {
    bytes = std::max<std::size_t>(bytes, std::size_t(1) << 21) & ~((std::size_t(1) << 21) - 1);
    ProbeBuffer& buf = probe_buffer(bytes);
    const std::size_t n = bytes / sizeof(float);
    std::vector<double> gbps;
    gbps.reserve(1024);
    const double t_start = now_ms();
    // One untimed pass: threads up, caches and TLBs in their steady state.
    for (int pass = -1; pass < min_passes || now_ms() - t_start < 1000.0 * min_seconds; pass++) {
        float total = 0;
        double t0 = now_ms();
#pragma omp parallel reduction(+ : total)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            // 128-float (512-byte) aligned shares of the buffer.
            std::size_t blocks = n / 128, a = blocks * t / T * 128, b = blocks * (t + 1) / T * 128;
            total += read_share(buf.data + a, b - a, loop);
        }
        double ms = now_ms() - t0;
        g_sink = total;
        if (pass >= 0) gbps.push_back(double(bytes) / (ms * 1e6));
        if (gbps.size() >= 1000) break;
    }
    BandwidthResult r;
    r.passes = int(gbps.size());
    r.bytes = bytes;
    r.best_gbps = *std::max_element(gbps.begin(), gbps.end());
    r.median_gbps = percentile(gbps, 50);
    r.seconds = (now_ms() - t_start) / 1000.0;
    return r;
}

BandwidthResult quick_bandwidth(double seconds) {
    return measure_read_bandwidth(std::size_t(256) << 20, 5, seconds);
}

// --- peak matrix throughput ------------------------------------------------------------

PeakResult measure_peak_gflops(Precision precision, int n, int min_reps, double min_seconds) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    kernel_isa();  // PDLAB_ISA caps oneDNN too
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    // Where oneDNN has no bf16 matmul (below AVX512_CORE), bf16 prefill runs
    // as f32 products (onednn_matmul.hpp): its peak is the f32 peak.
    const dt in_dt = precision == Precision::bf16 && onednn_has_bf16() ? dt::bf16 : dt::f32;
    dnnl::memory::desc a_ab({n, n}, in_dt, tag::ab), b_any({n, n}, in_dt, tag::any), c_ab({n, n}, dt::f32, tag::ab);
    auto pd = onednn_matmul_pd(eng, a_ab, b_any, nullptr, c_ab);
    const dnnl::memory::desc a_md = pd.src_desc(), c_md = pd.dst_desc();
    dnnl::matmul prim(pd);
    dnnl::memory a(a_md, eng), b(pd.weights_desc(), eng), c(c_md, eng);
    // Small values: the throughput of FMAs does not depend on them, but keep
    // them finite and out of the denormal range.
    auto fill = [](dnnl::memory& m, std::size_t elems, dt t) {
        if (t == dt::f32) {
            float* p = static_cast<float*>(m.get_data_handle());
            for (std::size_t i = 0; i < elems; i++) p[i] = 0.5f + float(i % 7) * 0.01f;
        } else {
            bf16* p = static_cast<bf16*>(m.get_data_handle());
            for (std::size_t i = 0; i < elems; i++) p[i] = f32_to_bf16(0.5f + float(i % 7) * 0.01f);
        }
    };
    fill(a, std::size_t(n) * n, in_dt);
    fill(b, pd.weights_desc().get_size() / (in_dt == dt::f32 ? 4 : 2), in_dt);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    prim.execute(s, args);  // JIT warm-up
    s.wait();
    PeakResult r;
    r.n = n;
    r.impl = std::string(pd.impl_info_str()) + (precision == Precision::bf16 && in_dt == dt::f32 ? " (bf16 as f32)" : "");
    const double flops = 2.0 * n * double(n) * n;
    const double t_start = now_ms();
    while (r.reps < min_reps || now_ms() - t_start < 1000.0 * min_seconds) {
        double t0 = now_ms();
        prim.execute(s, args);
        s.wait();
        double ms = now_ms() - t0;
        r.best_gflops = std::max(r.best_gflops, flops / (ms * 1e6));
        if (++r.reps >= 1000) break;
    }
    return r;
}

// --- phase costs ----------------------------------------------------------------------

double matmul_bytes(const Config& c, Precision p) {
    return double(c.n_matmul_params()) * stored_bytes_per_weight(p);
}

// (query, key) pairs attention computes over a prompt of P positions:
// P(P+1)/2 under the causal mask, fewer under a sliding window of W, where a
// query sees at most W keys.
static double causal_pairs(const Config& c, double P) {
    const double W = c.sliding_window > 0 ? std::min<double>(c.sliding_window, P) : P;
    return W * (W + 1) / 2 + (P - W) * W;
}

// Keys (and values) one decode query reads with `context` positions cached.
static double visible_keys(const Config& c, double context) {
    return c.sliding_window > 0 ? std::min<double>(c.sliding_window, context) : context;
}

static PhaseCost finish(PhaseCost pc, const Ceilings& roof) {
    pc.intensity = pc.bytes > 0 ? pc.flops / pc.bytes : 0;
    pc.compute_ms = roof.peak_gflops > 0 ? pc.flops / (roof.peak_gflops * 1e6) : 0;
    pc.memory_ms = roof.bandwidth_gbps > 0 ? pc.bytes / (roof.bandwidth_gbps * 1e6) : 0;
    pc.floor_ms = std::max(pc.compute_ms, pc.memory_ms);
    pc.bound = pc.compute_ms >= pc.memory_ms ? "compute" : "memory";
    return pc;
}

PhaseCost prefill_cost(const Config& c, Precision p, int prompt_len, int batch, const Ceilings& roof) {
    const double P = prompt_len, B = batch;
    const double head = double(c.vocab_size) * c.dim;
    const double body = double(c.n_matmul_params()) - head;
    const double attn_pairs = causal_pairs(c, P);
    PhaseCost pc;
    pc.flops = B * (2.0 * body * P + 2.0 * head +
                    2.0 * 2.0 * c.n_layers * c.n_heads * double(c.head_dim) * attn_pairs);
    pc.bytes = matmul_bytes(c, p) + B * P * double(c.kv_elems_per_token()) * sizeof(float);
    return finish(pc, roof);
}

// --- product by product -------------------------------------------------------------

namespace {

// The model's products for `rows` rows through every layer, and the head for
// `head_rows`; weight bytes once whatever the rows. `kv_positions`: the
// positions whose K (and V) attention moves, `pairs`: (query, key) pairs.
std::vector<ProductCost> products(const Config& c, Precision p, double rows, double head_rows,
                                  double pairs, double kv_positions) {
    const double L = c.n_layers, D = c.dim, F = c.hidden_dim, Q = c.q_dim(), KV = c.kv_dim();
    const double bpw = stored_bytes_per_weight(p);  // int8: its scales included, as matmul_bytes counts them
    const double mlp_in_out = c.mlp_in_rows();  // SwiGLU: gate and up, fused
    auto matmul = [&](const char* name, double in, double out, double r, double layers) {
        return ProductCost{name, 2 * r * in * out * layers, in * out * layers * bpw};
    };
    // Each pair: a dot product of head_dim (QK^T), or a weighted add of a V row (PV), per query head.
    const double attn_flops = 2 * L * c.n_heads * double(c.head_dim) * pairs;
    const double k_bytes = kv_positions * L * KV * sizeof(float);
    return {matmul("qkv", D, Q + 2 * KV, rows, L),
            {"attn_scores", attn_flops, k_bytes},
            {"attn_values", attn_flops, k_bytes},
            matmul("attn_out", Q, D, rows, L),
            matmul("mlp_in", D, mlp_in_out, rows, L),
            matmul("mlp_out", F, D, rows, L),
            matmul("head", D, c.vocab_size, head_rows, 1)};
}

}  // namespace

std::vector<ProductCost> prefill_products(const Config& c, Precision p, int prompt_len, int batch) {
    const double P = prompt_len, B = batch;
    return products(c, p, B * P, B, B * causal_pairs(c, P), B * P);
}

std::vector<ProductCost> decode_products(const Config& c, Precision p, int batch, double context) {
    const double B = batch, keys = visible_keys(c, context);
    return products(c, p, B, B, B * keys, B * keys);
}

long decode_compute_bound_batch(const Config& c, Precision p, double context, double ridge) {
    // intensity(B) = B f / (W + B k) with f, k one sequence's FLOPs and K/V
    // bytes, W the weight bytes: it reaches R where B (f - R k) >= R W.
    const PhaseCost one = decode_cost(c, p, 1, context, {});
    const double W = matmul_bytes(c, p), k = one.bytes - W, gain = one.flops - ridge * k;
    if (gain <= 0) return 0;
    return std::max(1L, long(std::ceil(ridge * W / gain)));
}

PhaseCost decode_cost(const Config& c, Precision p, int batch, double context, const Ceilings& roof) {
    const double B = batch, keys = visible_keys(c, context);
    PhaseCost pc;
    pc.flops = B * (2.0 * double(c.n_matmul_params()) +
                    2.0 * 2.0 * c.n_layers * c.n_heads * double(c.head_dim) * keys);
    pc.bytes = matmul_bytes(c, p) + B * keys * double(c.kv_elems_per_token()) * sizeof(float);
    return finish(pc, roof);
}

}  // namespace pd
