// Matrix products: y = x @ W^T + b for every Linear layer of the model.
//
// Two kernels, picked by the number of rows M:
//  - M > kSmallM (prefill): oneDNN's matmul on weights packed once, at load,
//    into the blocked layout its JIT kernels prefer. Compute-bound.
//  - M <= kSmallM (decode, batched decode): our own panel kernel (Highway, for
//    the instruction set isa.hpp picks; panel_kernels.hpp) that streams each
//    weight from memory once and reuses it for all M rows of x, on a copy of
//    the weights in column panels. At M = 1 memory-bound: its speed is the
//    weight bytes over DRAM bandwidth.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "common.hpp"
#include "engine/precision.hpp"

namespace pd {

// Bytes of an (out, in) matrix as stored, scales included: ceil(in * bits / 8)
// per row, and for int8/int4 one f32 per group, ceil(in / G) groups per row
// (the last one shorter when G does not divide in).
std::size_t matrix_bytes(int in, int out, Precision p);
// Bytes per weight, scales included, for a matrix whose rows G divides:
// 1 + 4/G for int8, 0.5 + 4/G for int4.
double stored_bytes_per_weight(Precision p);

constexpr int kSmallM = 16;

// bf16 weights: from this many rows of x on, x is rounded to bf16 before the
// product (compute-bound there; oneDNN's bf16 prefill does the same); below
// it the decode kernel keeps x to about 16 bits more (see matmul.cpp).
constexpr int kBf16RoundXMinM = 4;

// Output columns per panel of the decode kernel's weight layout: the same on
// every CPU (2 vectors of f32 sums with AVX-512, 4 with AVX2, 8 with NEON).
constexpr int kPanel = 32;

struct PackedWeights;  // oneDNN memory + primitive cache (onednn_matmul.cpp)

// Memory for the weights the decode kernel streams: mmap'd whole and advised
// onto 2 MiB transparent huge pages before first touch (see matmul.cpp),
// unless made with advise = false (PDLAB_HUGEPAGES=0).
template <typename T>
struct HugePageAllocator {
    using value_type = T;
    bool advise = true;
    HugePageAllocator() = default;
    explicit HugePageAllocator(bool advise_) : advise(advise_) {}
    template <typename U>
    HugePageAllocator(const HugePageAllocator<U>& o) : advise(o.advise) {}
    T* allocate(std::size_t n);
    void deallocate(T* p, std::size_t n);
    // vector(n) does not zero-fill: fresh mmap'd pages read as zero already,
    // and leaving them untouched keeps them uncommitted until written (the
    // arenas of arrange_for_decode fill up while the old copies are freed).
    template <typename U>
    void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
    bool operator==(const HugePageAllocator& o) const { return advise == o.advise; }
};
template <typename T>
using huge_vector = std::vector<T, HugePageAllocator<T>>;

// The memory that panels live in: one or more huge-page arenas, shared by the
// Linears whose panels were placed in them (see arrange_for_decode).
struct PanelStore {
    std::vector<huge_vector<std::byte>> arenas;
};

// A run of consecutive panels stored contiguously: panels [first, next part's
// first) start at `data`, one panel_bytes() after the other.
struct PanelPart {
    int first = 0;
    const std::byte* data = nullptr;
};

struct Linear {
    int in = 0, out = 0;
    Precision precision = Precision::f32;
    // The decode copy, in column panels: panel p holds outputs [32p, 32p + 32)
    // for every k, k-major, so the kernel streams each panel front to back
    // and broadcasts x[k] against 32 weights at a time. Outputs past `out` in
    // the last panel are zero. One panel:
    //   f32:  (in, 32)
    //   bf16: (ceil(in / 2), 32, 2): k in pairs, as vdpbf16ps takes them
    //   int8: ceil(in / G) blocks, one per group of G inputs, each (G/2, 32, 2)
    //         int8 (k in pairs, as bf16) then (32) f32 scales: a group's weights
    //         and the scales that multiply them are one stretch of the stream.
    //         The last group's rows past `in` are zero.
    //   int4: as int8, but each (32, 2) block of a k-pair is 32 bytes: byte i
    //         holds value i in its low 4 bits and value i + 32 in its high 4
    //         (two's complement), i.e. columns 0-15 low and 16-31 high, so that
    //         one load of bytes gives the kernel a vector of each.
    std::vector<PanelPart> parts;                // where the panels are; one part after make_linear
    std::shared_ptr<const PanelStore> store;     // owns the memory the parts point into
    std::vector<float> bias;                     // (out), or empty
    std::shared_ptr<PackedWeights> packed;       // oneDNN's copy for M > kSmallM

    int n_panels() const { return (out + kPanel - 1) / kPanel; }
    std::size_t panel_bytes() const {
        switch (precision.traits().packing) {
            case Packing::f32_columns: return std::size_t(in) * kPanel * sizeof(float);
            case Packing::bf16_pairs: return std::size_t((in + 1) / 2) * kPanel * 2 * sizeof(bf16);
            case Packing::quantized_groups: return std::size_t(n_groups()) * group_bytes();
        }
        return 0;
    }
    // int8 and int4 only: groups per row; the bytes of one k-pair's (32, 2)
    // weights (64 for int8, 32 for int4); of one group's block in a panel,
    // its G/2 k-pairs then its 32 scales.
    int n_groups() const { return (in + group_size(precision) - 1) / group_size(precision); }
    std::size_t pair_bytes() const { return std::size_t(kPanel) * 2 * weight_bits(precision) / 8; }
    std::size_t group_bytes() const { return std::size_t(group_size(precision) / 2) * pair_bytes() + kPanel * sizeof(float); }
    const std::byte* panel(int p) const {  // the part holding panel p: at most one per thread
        std::size_t j = parts.size() - 1;
        while (parts[j].first > p) j--;
        return parts[j].data + std::size_t(p - parts[j].first) * panel_bytes();
    }
    std::size_t weight_bytes() const { return matrix_bytes(in, out, precision); }
};

// Takes row-major f32 weights (out, in) and prepares both the panel copy in
// `precision` and the oneDNN-packed copy. int8 and int4 are quantized here
// (quantize.hpp); their oneDNN copy holds the dequantized weights in bf16, as a bf16 Linear's
// (oneDNN 2.6's matmul takes no per-group scales on the weights).
Linear make_linear(std::vector<float> w_out_in, std::vector<float> bias, int in, int out,
                   Precision precision);

// y (M, out) = x (M, in) @ W^T + b. For M <= kSmallM it allocates nothing
// (scratch is sized in make_linear); oneDNN's path builds a primitive, and its
// buffers, the first time it sees a row count M.
void linear_forward(const Linear& L, const float* x, int M, float* y);

// The small-M kernel alone, exposed for tests and benchmarks.
void linear_small_m(const Linear& L, const float* x, int M, float* y);

// Moves the panels of `linears` into one arena per thread, each holding that
// thread's share (1/threads of the panels) of every matrix, in the order the
// matrices are given -- the order decode multiplies them in. Each thread's
// weights for a whole decode step are then ONE sequential stream instead of a
// new one per matrix: the prefetchers' ramp at the start of each stream cost
// ~15-20 us per matrix (see matmul.cpp). Results do not change; with another
// thread count the kernel still works, on runs of panels across the parts.
// The arenas are advised as huge pages unless huge_pages is false.
void arrange_for_decode(const std::vector<Linear*>& linears, int threads, bool huge_pages = true);

// The weights back in row-major (out, in) order, from the panels: for tests
// and lab 11's reference. f32 only for f32 Linears, bf16 for bf16. (The GPU
// backend uploads the checkpoint's rows, never the CPU's panels.)
std::vector<float> linear_rows_f32(const Linear& L);
std::vector<bf16> linear_rows_bf16(const Linear& L);

// The kernel used for M rows: for M <= kSmallM ours and its instruction set
// (e.g. "pdlab panel kernel, AVX2"), above it oneDNN's implementation (e.g.
// "brg:avx512_core"), so benchmarks can show that no reference kernel slipped in.
std::string linear_impl_name(const Linear& L, int M);

// Both kernels a Linear runs on, for `pdlab info` and `bench`, e.g.
// "decode: pdlab panel kernel, AVX2; prefill: oneDNN brg:avx2 (bf16 as f32)".
std::string describe_kernels(const Linear& L);

}  // namespace pd
