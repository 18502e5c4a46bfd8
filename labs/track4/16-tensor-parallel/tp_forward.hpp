// The kit's side of lab 16: one rank's share of a Llama-family model, built
// from YOUR plan_shard and shard_layer, and a plain f32 forward pass over it
// that calls YOUR tp_layer once a layer. The embedding, the final norm and
// the output head are not split: every rank holds them and computes the same
// logits from the same x.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "comm.hpp"
#include "engine/kv_cache.hpp"
#include "engine/matmul.hpp"
#include "engine/model.hpp"
#include "exercise.hpp"

namespace pd::lab16 {

// One layer's slices, packed for the engine's matmul (shapes as LayerShard's).
struct ShardLinears {
    Linear qkv, attn_out, mlp_in, mlp_out;
};

struct TpRank {
    std::shared_ptr<const Model> model;  // the whole model: embedding, norms, head
    ShardPlan plan;
    std::vector<ShardLinears> layers;    // (n_layers)
    KVCache cache;                       // one sequence, plan.kv_heads KV heads: this rank's part only
    std::size_t weight_bytes = 0;        // bytes of this rank's matrix slices (head not included)
    std::vector<float> logits;           // (vocab) of the last pass's last row
};

// Refuses (UserError) what the lab does not split: a family other than
// Llama's (RMSNorm, rotary, SwiGLU) and weights not in f32.
void check_splittable(const Model& m);

// The model's layer `l` as row-major matrices (from the CPU's packed copy).
LayerWeights layer_rows(const Model& m, int l);

// Rank `rank` of `ranks`: YOUR plan_shard and shard_layer, each slice packed
// as a Linear, a cache of `max_seq` positions for the rank's KV heads.
TpRank make_tp_rank(std::shared_ptr<const Model> model, int ranks, int rank, int max_seq);

// Per forward pass, as measured on this rank.
struct PassTimes {
    double total_ms = 0;
    double comm_ms = 0;     // inside comm's calls (waiting for the slowest rank included)
    double comm_bytes = 0;  // this rank's buffers handed to allreduce_sum
    double start_s = 0;     // when it began, steady_clock seconds (the timeline's ranks share that clock on one machine)
};

// Appends `tokens` to the rank's sequence (positions continuing from the
// cache's length) in one forward pass; every rank calls it with the same
// tokens. Returns the last row's logits (vocab), the same on every rank.
std::span<const float> tp_forward(TpRank& r, TimedComm& comm, std::span<const int> tokens, PassTimes* times = nullptr);

}  // namespace pd::lab16
