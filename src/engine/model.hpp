// The decoder: weights + run state + KV cache, and the two phases of inference.
//
//   prefill(tokens) : every prompt token in ONE forward pass. The matrix
//                     products see T rows at once (compute-bound), attention is
//                     causal within the prompt, and the K/V of all T tokens are
//                     appended to the cache. The last row's logits give token 1.
//   decode(token)   : ONE new token per sequence. Its K/V are appended and it
//                     attends to everything cached. Each step streams every
//                     weight from memory for one row of work (memory-bound).
//
// Both run the same layers (forward() in model.cpp); they differ in how many
// rows go through and in which attention kernel reads the cache. Each phase
// first builds its step plan (step_plan.hpp: the rows, the kept rows, the
// lengths, with the request's checks), runs it, then commits its lengths.
//
//   forward_batch(items) : serving (track 2). Several sequences in ONE pass over
//                     the paged cache: some bring a prefill chunk, others one
//                     decode token. Their rows are stacked, so each weight
//                     matrix is one product for all of them; attention runs
//                     per sequence through its block table.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "io/config.hpp"
#include "engine/attention.hpp"
#include "engine/kv_cache.hpp"
#include "engine/paged_kv_cache.hpp"
#include "engine/step_plan.hpp"
#include "engine/weights.hpp"
#include "engine/weights_cpu.hpp"

namespace pd {

// The engines a model is loaded to serve: decides which copies of the
// matrices it holds (weights.hpp), and how the CPU's is held. pdlab asks for
// its --device only; a program that runs both engines on one model asks for both.
// PDLAB_HUGEPAGES of this process's environment, read once (engine_settings.cpp):
// the default below, so that a model loaded without the command line's
// settings still follows it rather than silently taking "on".
bool environment_huge_pages();

struct Backends {
    bool cpu = true;
    bool cuda = false;
    bool huge_pages = environment_huge_pages();  // the CPU's decode panels advised as huge pages
};

struct Model {
    Config config;
    Precision precision = Precision::f32;
    Backends serves;
    Weights w;  // as loaded; the matrices' rows only when serves.cuda (the CUDA engine uploads them)
    std::shared_ptr<const CpuWeights> cpu;  // packed when serves.cpu, else null; see cpu_weights()
};

// Packs the matrices for the CPU when `serves` has it, releasing their rows
// unless a CUDA engine will need them.
Model make_model(Config config, Weights w, Precision precision, Backends serves);

// The matrices packed for the CPU kernels (made by make_model). Fails when
// the model was not loaded to serve the CPU.
const CpuWeights& cpu_weights(const Model& m);

// Scratch for one forward pass of up to `capacity` rows (tokens). Sized once
// for `capacity` rows, logits included: a decode step never allocates. A
// prompt longer than the capacity grows it once; Keep::all logits grow on demand.
struct RunState {
    int capacity = 0;            // rows a forward pass can take
    std::vector<float> x;        // (rows, dim) residual stream
    std::vector<float> xn;       // (rows, dim) normalised input of a sublayer
    std::vector<float> qkv;      // (rows, q_dim + 2*kv_dim) projections [q | k | v]
    std::vector<float> q;        // (rows, q_dim) queries after rotary
    std::vector<float> att;      // (rows, q_dim) attention output, heads concatenated
    std::vector<float> proj;     // (rows, dim) output of attn_out and mlp_out
    std::vector<float> mlp_h;    // (rows, mlp_in.out) MLP hidden before activation
    std::vector<float> mlp_act;  // (rows, hidden) after activation
    std::vector<float> kept;     // (kept rows, dim) final-normed rows whose logits we want
    std::vector<float> logits;   // (kept rows, vocab)
    StepPlan plan;               // the pass's rows (step_plan.hpp), its buffers reused step to step
};

RunState make_run_state(const Config& c, int capacity);

// A cache of `batch` sequences of `max_seq` positions each (0, or more than
// the model's context: the context), with the rotary tables for those
// positions. Size it to the request: a model's context can be 128k positions.
KVCache make_kv_cache(const Model& m, int batch, int max_seq = 0);

// Appends `tokens` to sequence `slot`, positions continuing from its cache
// length (so a prompt can come in chunks, after a cached prefix).
// Returns logits: (1, vocab) for Keep::last, (T, vocab) for Keep::all.
const float* prefill(const Model& m, KVCache& cache, RunState& st, int slot,
                     std::span<const int> tokens, Keep keep = Keep::last);

// One new token for each sequence in `slots` (each named once). Returns
// logits (rows, vocab).
//
// Several engines (or threads) may share one Model: forward passes take
// turns, since they share scratch inside the packed weights (see model.cpp).
const float* decode(const Model& m, KVCache& cache, RunState& st, std::span<const int> slots,
                    std::span<const int> tokens);

// A paged cache of `total_blocks` blocks of `block_size` positions for this
// model, with the rotary tables of its whole context. on_host = false: K and
// V are left to a GPU (paged_kv_cache.hpp).
PagedKVCache make_paged_kv_cache(const Model& m, int block_size, int total_blocks,
                                 const BlockPoolFactory& make_pool = {}, bool on_host = true);

// Called with l once layer l's K/V of every row are in the cache, before
// layer l+1 starts (lab 09 sends a prefill's KV layer by layer from here).
using LayerHook = std::function<void(int layer)>;

// One forward pass over every item (BatchItem, step_plan.hpp; each sequence
// at most once): writes their K/V through their block tables and advances
// table->len. Returns the logit rows the items ask for, item by item in
// order: (sum of logit_rows, vocab). UserError: see plan_batch.
const float* forward_batch(const Model& m, PagedKVCache& cache, RunState& st, std::span<const BatchItem> items,
                          const LayerHook& on_layer = {});

}  // namespace pd
