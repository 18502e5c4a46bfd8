#include "engine/matmul.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/bf16_convert.hpp"
#include "engine/isa.hpp"
#include "engine/onednn_matmul.hpp"
#include "engine/panel_kernels.hpp"
#include "engine/quantize.hpp"
#include "engine/team.hpp"

namespace pd {

std::size_t matrix_bytes(int in, int out, Precision p) {
    const std::size_t values = (std::size_t(in) * weight_bits(p) + 7) / 8 * out;
    if (!is_quantized(p)) return values;
    const std::size_t groups = std::size_t((in + group_size(p) - 1) / group_size(p));
    return values + groups * out * sizeof(float);
}

double stored_bytes_per_weight(Precision p) {
    return bytes_per_weight(p) + (is_quantized(p) ? double(sizeof(float)) / group_size(p) : 0.0);
}

static void reserve_x_scratch(int in);

// Weights the decode kernel streams live on transparent huge pages: the
// reference machine's THP mode is "madvise", so only advised memory gets them,
// and the same read loop streams far faster from huge pages than from 4 KiB
// ones (figures in docs/performance.md, "Huge pages"). The buffer is mmap'd directly (not malloc'd: below glibc's sliding mmap
// threshold a vector comes from the heap, already touched in 4 KiB pages) and
// advised before first touch. PDLAB_HUGEPAGES=0 (Backends::huge_pages) turns
// the advice off for the arenas decode streams (arrange_for_decode).
template <typename T>
T* HugePageAllocator<T>::allocate(std::size_t n) {
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 1);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (advise) ::madvise(p, bytes, MADV_HUGEPAGE);
    return static_cast<T*>(p);
}
template <typename T>
void HugePageAllocator<T>::deallocate(T* p, std::size_t n) {
    ::munmap(p, std::max<std::size_t>(n * sizeof(T), 1));
}
template struct HugePageAllocator<std::byte>;

// Output n = row `row` of W as column c of its panel (see Linear). f32 and
// bf16 read the f32 rows; int8 and int4 their quantized rows (q, scales of row n).
static void write_column(const Linear& L, std::byte* panel, int c, const float* row) {
    const int K = L.in;
    if (L.precision.traits().packing == Packing::f32_columns) {
        float* dst = reinterpret_cast<float*>(panel) + c;
        for (int k = 0; k < K; k++) dst[std::size_t(k) * kPanel] = row[k];
    } else {
        bf16* dst = reinterpret_cast<bf16*>(panel) + 2 * c;
        for (int k = 0; k < K; k++) dst[std::size_t(k / 2) * kPanel * 2 + (k & 1)] = f32_to_bf16(row[k]);
    }
}
// Where value i (0-63) of a k-pair's (32, 2) block goes: int8 takes byte i;
// int4 the low 4 bits of byte i, or the high 4 of byte i - 32 (see Linear).
static void put_quantized(std::byte* pair_block, int i, int q, bool int4) {
    auto* bytes = reinterpret_cast<std::uint8_t*>(pair_block);
    if (!int4) bytes[i] = std::uint8_t(std::int8_t(q));
    else if (i < 32) bytes[i] = std::uint8_t((bytes[i] & 0xF0) | (q & 0x0F));
    else bytes[i - 32] = std::uint8_t((bytes[i - 32] & 0x0F) | ((q & 0x0F) << 4));
}

static void write_column(const Linear& L, std::byte* panel, int c, const std::int8_t* q, const float* scales) {
    const int G = group_size(L.precision);
    const bool int4 = is_int4(L.precision);
    for (int g = 0; g < L.n_groups(); g++) {
        std::byte* block = panel + std::size_t(g) * L.group_bytes();
        for (int k = g * G; k < std::min(L.in, (g + 1) * G); k++)
            put_quantized(block + std::size_t((k - g * G) / 2) * L.pair_bytes(), 2 * c + ((k - g * G) & 1), q[k], int4);
        reinterpret_cast<float*>(block + std::size_t(G / 2) * L.pair_bytes())[c] = scales[g];
    }
}

// Row-major (out, in) -> panels (see Linear), in a new store of one arena.
// `quantized` holds the rows of an int8 or int4 Linear (else null). Each
// panel is written by one thread: int4's columns c and c + 16 share bytes.
static void fill_panels(Linear& L, const float* w, const QuantizedMatrix* quantized) {
    const int K = L.in, N = L.out, P = L.n_panels();
    auto store = std::make_shared<PanelStore>();
    store->arenas.emplace_back(std::size_t(P) * L.panel_bytes());  // zero: the last panel's padding
    std::byte* base = store->arenas[0].data();
#pragma omp parallel for schedule(static)
    for (int p = 0; p < P; p++)
        for (int c = 0; c < kPanel && p * kPanel + c < N; c++) {
            const std::size_t n = std::size_t(p) * kPanel + c;
            std::byte* panel = base + std::size_t(p) * L.panel_bytes();
            if (quantized)
                write_column(L, panel, c, &quantized->q[n * K], &quantized->scales[n * quantized->groups_per_row()]);
            else write_column(L, panel, c, w + n * K);
        }
    L.parts = {PanelPart{0, base}};
    L.store = std::move(store);
}

Linear make_linear(std::vector<float> w, std::vector<float> bias, int in, int out,
                   Precision precision) {
    Linear L;
    L.in = in;
    L.out = out;
    L.precision = precision;
    L.bias = std::move(bias);
    kernel_isa();  // PDLAB_ISA caps oneDNN too: before its first primitive
    reserve_x_scratch(in);  // decode's scratch, sized now
    if (precision.traits().prefill != PrefillPath::onednn_bf16_dequantized) {
        L.packed = onednn_pack(L, w.data());
        fill_panels(L, w.data(), nullptr);
        return L;
    }
    // Quantized once; prefill (oneDNN) multiplies by the weights the integers stand for.
    const QuantizedMatrix q = quantize_rows(w.data(), out, in, group_size(precision), quantized_max(precision));
    std::vector<float>().swap(w);  // the f32 rows are no longer needed: free them before the copies grow
    L.packed = onednn_pack(L, dequantize_rows(q).data());
    fill_panels(L, nullptr, &q);
    return L;
}

// First panel of thread t's share of P panels.
static int part_start(int P, int t, int threads) { return int(std::int64_t(P) * t / threads); }

void arrange_for_decode(const std::vector<Linear*>& linears, int threads, bool huge_pages) {
    threads = std::max(1, threads);
    std::vector<std::size_t> size(threads, 0);
    for (const Linear* L : linears)
        for (int t = 0; t < threads; t++)
            size[t] += std::size_t(part_start(L->n_panels(), t + 1, threads) - part_start(L->n_panels(), t, threads)) *
                       L->panel_bytes();
    auto store = std::make_shared<PanelStore>();
    for (int t = 0; t < threads; t++) store->arenas.emplace_back(size[t], HugePageAllocator<std::byte>(huge_pages));
    std::vector<std::size_t> used(threads, 0);
    for (Linear* L : linears) {
        const int P = L->n_panels();
        std::vector<PanelPart> parts;
        for (int t = 0; t < threads; t++) {
            const int a = part_start(P, t, threads), b = part_start(P, t + 1, threads);
            std::byte* dst = store->arenas[t].data() + used[t];
            for (int p = a; p < b; p++)
                std::memcpy(dst + std::size_t(p - a) * L->panel_bytes(), L->panel(p), L->panel_bytes());
            parts.push_back(PanelPart{a, dst});
            used[t] += std::size_t(b - a) * L->panel_bytes();
        }
        L->parts = std::move(parts);
        L->store = store;  // the Linear's old store is freed here, unless shared
    }
}

std::vector<float> linear_rows_f32(const Linear& L) {
    if (L.precision != Precision::f32) fail("linear_rows_f32 on a {} Linear", precision_name(L.precision));
    std::vector<float> w(std::size_t(L.out) * L.in);
    for (int n = 0; n < L.out; n++) {
        const float* panel = reinterpret_cast<const float*>(L.panel(n / kPanel));
        for (int k = 0; k < L.in; k++) w[std::size_t(n) * L.in + k] = panel[std::size_t(k) * kPanel + n % kPanel];
    }
    return w;
}

std::vector<bf16> linear_rows_bf16(const Linear& L) {
    if (L.precision != Precision::bf16) fail("linear_rows_bf16 on a {} Linear", precision_name(L.precision));
    std::vector<bf16> w(std::size_t(L.out) * L.in);
    for (int n = 0; n < L.out; n++) {
        const bf16* panel = reinterpret_cast<const bf16*>(L.panel(n / kPanel));
        for (int k = 0; k < L.in; k++)
            w[std::size_t(n) * L.in + k] = panel[(std::size_t(k / 2) * kPanel + n % kPanel) * 2 + (k & 1)];
    }
    return w;
}

std::string linear_impl_name(const Linear& L, int M) {
    if (M > kSmallM) return onednn_impl_name(L, M);
    switch (L.precision.traits().decode) {
        case DecodeKernel::f32_panels: break;
        case DecodeKernel::bf16_panels:
            if (use_avx512_bf16()) return "pdlab panel kernel, AVX-512 BF16";
            break;
        case DecodeKernel::quantized_panels:
            return fmt::format("pdlab {} panel kernel, {}", L.precision.traits().name,
                               use_avx512_vnni() ? "AVX-512 VNNI" : kernel_isa());
    }
    return "pdlab panel kernel, " + kernel_isa();
}

std::string describe_kernels(const Linear& L) {
    return "decode: " + linear_impl_name(L, 1) + "; prefill: oneDNN " + linear_impl_name(L, 128);
}

// --- small M (decode): the panel kernels, split among the threads -------------

namespace {

// The calling thread's copy of x as a bf16 product takes it (rounded to bf16,
// or split into halves for vdpbf16ps): kSmallM rows of K rounded up to 32,
// 64-byte aligned. It grows to the largest K seen (in make_linear, or the
// first decode steps), then is reused: the decode loop allocates nothing.
float* x_scratch(int K) {
    thread_local std::vector<float> buf;
    const std::size_t floats = std::size_t(kSmallM) * ((K + 31) / 32 * 32) + 16;
    if (buf.size() < floats) buf.resize(floats);
    return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(buf.data()) + 63) & ~std::uintptr_t(63));
}

using PanelFn = void (*)(const PanelJob&, int, int);

// All panels of j.L, through `kernel`, on the threads (engine/team.hpp).
void run_panels(const PanelJob& j, PanelFn kernel) {
    const Linear& L = *j.L;
    const int P = L.n_panels(), threads = worker_count();
    // Below a few hundred KiB of weights, waking the second thread costs more
    // than it saves.
    if (L.weight_bytes() < (std::size_t(256) << 10) || threads == 1)
        return parallel_items(1, Schedule::fixed, [&](int) { kernel(j, 0, P); });
    const int parts = int(L.parts.size());
    if (parts == threads) {
        // Arranged for this thread count (arrange_for_decode): thread t takes
        // part t, the next stretch of its own arena.
        return parallel_items(parts, Schedule::fixed, [&](int p) {
            kernel(j, L.parts[p].first, p + 1 < parts ? L.parts[p + 1].first : P);
        });
    }
    // Otherwise runs of whole panels, 2 per thread, handed out in order as the
    // threads get free: each run is one long sequential stream, and every new
    // run costs a restart of the hardware prefetcher's stream (measurements in
    // docs/performance.md).
    const int chunk = std::max(1, P / (2 * threads));
    const int nchunks = (P + chunk - 1) / chunk;
    parallel_items(nchunks, Schedule::dynamic, [&](int c) { kernel(j, c * chunk, std::min(P, (c + 1) * chunk)); });
}

// The calling thread's x for an int8 or int4 product: kSmallM rows of int16 (row
// stride K rounded up to 128, the largest G) and their per-group scales
// (row stride ceil(K / 32), the most groups). Grows like x_scratch.
struct Int16XScratch {
    std::int16_t* x;
    float* scales;
};
Int16XScratch x_int16_scratch(int K) {
    thread_local std::vector<std::int16_t> x;
    thread_local std::vector<float> scales;
    const std::size_t values = std::size_t(kSmallM) * ((K + 127) / 128 * 128);
    if (x.size() < values) x.resize(values);
    if (scales.size() < std::size_t(kSmallM) * ((K + 31) / 32)) scales.resize(std::size_t(kSmallM) * ((K + 31) / 32));
    return {x.data(), scales.data()};
}

}  // namespace

static void reserve_x_scratch(int in) {
    x_scratch(in);
    x_int16_scratch(in);
}

// int8 and int4: x rounded to integers per group (x_quantized_max), so the kernel multiplies integers.
static void quantized_small_m(PanelJob& j) {
    const Linear& L = *j.L;
    const Int16XScratch xq = x_int16_scratch(L.in);
    j.ldx = L.n_groups() * group_size(L.precision);
    quantize_x_int16(j.x, j.M, L.in, group_size(L.precision), x_quantized_max(L.precision), xq.x, j.ldx, xq.scales);
    j.x_int16 = xq.x;
    j.x_scales = xq.scales;
#if defined(__x86_64__)
    if (use_avx512_vnni()) return run_panels(j, panel_products_avx512_vnni);
#endif
    run_panels(j, panel_products_quantized);
}

// bf16: vdpbf16ps on x split into bf16 halves where the CPU has it, else the
// Highway kernel (on x rounded to bf16 from kBf16RoundXMinM rows on).
static void bf16_small_m(PanelJob& j) {
    const Linear& L = *j.L;
    const int M = j.M;
    const float* x = j.x;
    float* scratch = x_scratch(L.in);
#if defined(__x86_64__)
    if (use_avx512_bf16()) {
        const int Kp = (L.in + 31) / 32 * 32;
        bf16* hi = reinterpret_cast<bf16*>(scratch);
        split_x_avx512_bf16(x, M, L.in, Kp, hi, hi + std::size_t(M) * Kp);
        j.x_hi = reinterpret_cast<const std::uint32_t*>(hi);
        j.x_lo = reinterpret_cast<const std::uint32_t*>(hi + std::size_t(M) * Kp);
        j.ldx = Kp / 2;
        return run_panels(j, panel_products_avx512_bf16);
    }
#endif
    // From kBf16RoundXMinM rows on, x is rounded to bf16 (see matmul.hpp).
    if (M >= kBf16RoundXMinM) {
        round_to_bf16(x, scratch, std::size_t(M) * L.in);
        j.x = scratch;
    }
    run_panels(j, panel_products);
}

void linear_small_m(const Linear& L, const float* x, int M, float* y) {
    sync_with_team();  // each thread of a team reads x for its own copy of it (below)
    PanelJob j{&L, x, M, y};
    switch (L.precision.traits().decode) {  // the format's row (precision.cpp) names its kernel
        case DecodeKernel::f32_panels: return run_panels(j, panel_products);
        case DecodeKernel::bf16_panels: return bf16_small_m(j);
        case DecodeKernel::quantized_panels: return quantized_small_m(j);
    }
}

void linear_forward(const Linear& L, const float* x, int M, float* y) {
    if (M <= kSmallM) linear_small_m(L, x, M, y);
    else onednn_forward(L, x, M, y);
}

}  // namespace pd
