// The attention kernels of both phases, in Highway (one source for every
// instruction set; see isa.hpp). attention.cpp splits the work into these
// calls and runs them on the threads.
#pragma once

#include <cstddef>

namespace pd {

// Decode: G query heads (q: G rows of D, contiguous) that share one KV head,
// against its n cached keys (K, V: n rows of D, contiguous). out: G rows of D.
// G <= kMaxDecodeGroup.
constexpr int kMaxDecodeGroup = 8;
void attention_decode_group(float* out, const float* q, const float* K, const float* V, int n, int G, int D);

// Prefill: one block of nq <= prefill_block_queries() queries of one head
// (rows t0 .. t0+nq-1 of q and out, row stride `stride`; positions
// start+t0 ..) against keys 0 .. start+t0+nq-1 of its KV head, causal.
void attention_prefill_block(float* out, const float* q, std::size_t stride, const float* K, const float* V,
                             int start, int t0, int nq, int D);

// Queries per prefill block: two vectors' worth, so 32 with AVX-512.
int prefill_block_queries();

}  // namespace pd
