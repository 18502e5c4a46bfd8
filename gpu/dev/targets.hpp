// The two targets of the GPU track, judged from measured numbers. Plain host
// code (no CUDA): gpu/dev/targets and the gpu.host test use it, in builds with
// or without the CUDA backend. The costs come from src/measure/roofline.hpp (one
// definition of weight bytes and useful FLOPs for the whole kit).
//
//   decode  is memory-bound: a step reads every matrix weight once, so it
//           cannot take less than  floor = weight bytes / memory bandwidth.
//           Target: measured ms per step <= 1.5 x floor (batch 1).
//   prefill is compute-bound: its useful work is the products of every layer
//           for all P rows, the head for the one row whose logits are kept,
//           and causal attention (pd::prefill_cost). Target: achieved FLOP/s
//           >= 0.5 x the cuBLAS bf16 GEMM rate measured on the same card.
#pragma once

#include "io/config.hpp"
#include "engine/matmul.hpp"
#include "measure/roofline.hpp"

namespace pd::targets {

inline constexpr double kDecodeTarget = 1.5;   // decode ms / floor ms, at most
inline constexpr double kPrefillTarget = 0.5;  // prefill FLOP/s / GEMM FLOP/s, at least

// The decode floor in ms for `weight_bytes` at `bandwidth_gbs` (GB/s, 1e9 bytes).
inline double decode_floor_ms(double weight_bytes, double bandwidth_gbs) {
    return bandwidth_gbs > 0 ? weight_bytes / (bandwidth_gbs * 1e9) * 1e3 : 0.0;
}

// Useful FLOPs of prefilling one prompt of P tokens (pd::prefill_cost).
inline double prefill_flops(const Config& c, Precision p, int P) {
    return prefill_cost(c, p, P, 1, Ceilings{}).flops;
}

// FLOP/s (in TFLOP/s) of `flops` done in `ms`.
inline double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

struct Verdict {
    double weight_bytes = 0;     // matrix weights a decode step reads
    double decode_floor_ms = 0;  // weight bytes / bandwidth
    double decode_ratio = 0;     // measured decode ms per step / floor (lower is better; target <= 1.5)
    double prefill_flops = 0;    // useful work of the prefill
    double prefill_tflops = 0;   // achieved
    double prefill_ratio = 0;    // achieved / GEMM rate (higher is better; target >= 0.5)
    bool decode_ok = false, prefill_ok = false;
};

// decode_ms: median ms per decode step at batch 1; prefill_ms: median ms for
// one prompt of P tokens; bandwidth_gbs and gemm_tflops: measured on the card.
inline Verdict judge(const Config& c, Precision p, int P, double prefill_ms, double decode_ms,
                     double bandwidth_gbs, double gemm_tflops) {
    Verdict v;
    v.weight_bytes = matmul_bytes(c, p);
    v.decode_floor_ms = decode_floor_ms(v.weight_bytes, bandwidth_gbs);
    v.decode_ratio = v.decode_floor_ms > 0 ? decode_ms / v.decode_floor_ms : 0.0;
    v.prefill_flops = prefill_flops(c, p, P);
    v.prefill_tflops = tflops(v.prefill_flops, prefill_ms);
    v.prefill_ratio = gemm_tflops > 0 ? v.prefill_tflops / gemm_tflops : 0.0;
    v.decode_ok = v.decode_floor_ms > 0 && decode_ms > 0 && v.decode_ratio <= kDecodeTarget;
    v.prefill_ok = gemm_tflops > 0 && v.prefill_ratio >= kPrefillTarget;
    return v;
}

}  // namespace pd::targets
