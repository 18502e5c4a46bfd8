// The roofline model of this machine, and where prefill and decode land on it.
//
// A kernel that does F floating-point operations while moving B bytes to or
// from DRAM can finish no faster than
//
//      time >= max(F / peak_flops, B / bandwidth)
//
// Its arithmetic intensity I = F / B (FLOPs per byte) says which term wins:
// below the ridge point peak_flops / bandwidth it is memory-bound, above it
// compute-bound. Both ceilings are measured here, on this machine, not taken
// from a data sheet:
//   - peak: oneDNN's matrix product on large square matrices with weights in
//     its packed layout (the best our prefill can hope for), f32 and bf16;
//   - bandwidth: a vector streaming read (the best instruction set this CPU
//     runs, see isa.hpp) of a buffer far larger than the
//     last-level cache, several independent accumulators, one OpenMP thread
//     per core, best of a few passes.
//
// Decode streams every weight once per step for one token per sequence: about
// 1 FLOP per byte in f32 (2 FLOPs per 4-byte weight, times the batch), far
// below the ridge. Prefill reuses each weight for all P prompt tokens: P/2
// FLOPs per byte, far above it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/config.hpp"
#include "engine/matmul.hpp"

namespace pd {

// --- measuring the ceilings ---------------------------------------------------

struct BandwidthResult {
    double best_gbps = 0;    // fastest pass, in GB/s (1e9 bytes per second)
    double median_gbps = 0;  // median pass
    int passes = 0;
    std::size_t bytes = 0;   // buffer size
    double seconds = 0;      // wall time spent measuring
};

// Streams a `bytes` buffer (allocated once and kept for later calls of the
// same or smaller size, first touched by the threads that read it) with
// vector loads into 8 independent accumulators per thread, all OpenMP
// threads each reading their own contiguous share. Makes passes until both
// `min_passes` are done and `min_seconds` have passed.
// With ReadLoop::libc_memchr the same buffer is read by glibc's memchr (for
// a byte it does not hold) instead: the C library's own tuned streaming read,
// a yardstick that shares no code with the probe.
enum class ReadLoop { probe, libc_memchr };
BandwidthResult measure_read_bandwidth(std::size_t bytes, int min_passes, double min_seconds,
                                       ReadLoop loop = ReadLoop::probe);

// A quick probe (about `seconds`, on a 256 MiB buffer) for benchmarks to run
// right before and after their timed loops: DRAM bandwidth drifts on a shared
// machine, so a floor is only honest next to its own measurement.
BandwidthResult quick_bandwidth(double seconds = 0.3);

struct PeakResult {
    double best_gflops = 0;  // fastest repetition
    int n = 0;               // M = N = K
    int reps = 0;
    std::string impl;        // the oneDNN implementation that ran
};

// oneDNN matmul C (n x n, f32) = A (n x n) * B (n x n) with B in oneDNN's
// packed layout (format_tag::any) and A, B in `precision`. Repeats until
// `min_reps` and `min_seconds` are both reached; reports the best.
PeakResult measure_peak_gflops(Precision precision, int n, int min_reps, double min_seconds);

// --- what each phase costs ------------------------------------------------------

struct PhaseCost {
    double flops = 0;         // floating-point operations actually done
    double bytes = 0;         // DRAM bytes that must move at least once
    double intensity = 0;     // flops / bytes
    double compute_ms = 0;    // flops / peak
    double memory_ms = 0;     // bytes / bandwidth
    double floor_ms = 0;      // max of the two: no implementation can beat it
    const char* bound = "";   // "compute" or "memory": which term is larger
};

struct Ceilings {
    double peak_gflops = 0;
    double bandwidth_gbps = 0;
    double ridge() const { return bandwidth_gbps > 0 ? peak_gflops / bandwidth_gbps : 0; }  // FLOP/byte
};

// Matrix FLOPs of prefill for B prompts of P tokens each:
//   2 * (matmul params without the head) * P   every layer's products, all rows
// + 2 * vocab * dim                             the head, for the last position only
// + 2 * 2 * L * H * D * P(P+1)/2                causal attention: QK^T and PV
// all times B. Bytes: every matrix weight once, plus the K/V written.
PhaseCost prefill_cost(const Config& c, Precision p, int prompt_len, int batch, const Ceilings& roof);

// One decode step for B sequences whose cache holds `context` positions each
// (the new token included): every matrix weight read once, plus each
// sequence's K and V in every layer (f32). FLOPs 2 * matmul params * B plus
// attention 2 * 2 * L * H * D * context * B.
PhaseCost decode_cost(const Config& c, Precision p, int batch, double context, const Ceilings& roof);

// Bytes of matrix weights one decode step streams (every Linear and the head).
double matmul_bytes(const Config& c, Precision p);

// --- the same costs, product by product ---------------------------------------------
//
// The reference lab 10's counts are checked against: one row per matrix
// product (summed over the layers) and per half of attention, in the order a
// layer runs them. Their sums are prefill_cost's and decode_cost's FLOPs and
// bytes. Bytes per row:
//   qkv, attn_out, mlp_in, mlp_out, head   the weights, at the precision, once
//   attention QK^T                         K: read by decode (B x context
//                                          positions), written by prefill (B x P)
//   attention PV                           V: the same
// Activations are left out: a few rows of dim floats, they stay in the caches.
struct ProductCost {
    const char* name = "";  // "qkv", "attn_out", "mlp_in", "mlp_out", "head", "attn_scores", "attn_values"
    double flops = 0;
    double bytes = 0;
};
std::vector<ProductCost> prefill_products(const Config& c, Precision p, int prompt_len, int batch);
std::vector<ProductCost> decode_products(const Config& c, Precision p, int batch, double context);

// The smallest decode batch B whose intensity decode_cost(c, p, B, context)
// reaches `ridge` (FLOP/byte): from there on batching costs time. 0 when no
// batch does: each sequence's K/V bytes grow with B as fast as its FLOPs, so
// at long contexts the intensity levels off below the ridge.
long decode_compute_bound_batch(const Config& c, Precision p, double context, double ridge);

}  // namespace pd
