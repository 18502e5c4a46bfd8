#include "engine/model.hpp"

#include <cstring>
#include <mutex>

#include "base/timeline.hpp"
#include "engine/attention.hpp"
#include "engine/ops.hpp"
#include "engine/request.hpp"
#include "engine/team.hpp"

namespace pd {

Model make_model(Config config, Weights w, Precision precision, Backends serves) {
    if (w.precision != precision)
        fail("internal error: weights prepared for {} in a {} model", precision_name(w.precision),
             precision_name(precision));
    std::shared_ptr<const CpuWeights> cpu;
    if (serves.cpu) {
        const auto rows = serves.cuda ? RowsAfterPacking::keep : RowsAfterPacking::release;
        cpu = std::make_shared<const CpuWeights>(prepare_cpu_weights(w, rows, serves.huge_pages));
    }
    return Model{std::move(config), precision, serves, std::move(w), std::move(cpu)};
}

const CpuWeights& cpu_weights(const Model& m) {
    if (!m.cpu)
        fail("internal error: a CPU forward pass on a model loaded for the CUDA engine only "
             "(load it with Backends{{.cpu = true}})");
    return *m.cpu;
}

static void size_run_state(RunState& st, const Config& c, int rows) {
    std::size_t R = std::size_t(rows);
    st.capacity = rows;
    st.x.resize(R * c.dim);
    st.xn.resize(R * c.dim);
    st.qkv.resize(R * (c.q_dim() + 2 * c.kv_dim()));
    st.q.resize(R * c.q_dim());
    st.att.resize(R * c.q_dim());
    st.proj.resize(R * c.dim);
    st.mlp_h.resize(R * c.mlp_in_rows());
    st.mlp_act.resize(R * c.hidden_dim);
    st.kept.reserve(R * c.dim);
    reserve_plan(st.plan, rows);
}

RunState make_run_state(const Config& c, int capacity) {
    RunState st;
    size_run_state(st, c, capacity);
    // Logits for every row a decode step can take; not in size_run_state,
    // where a long prompt (which keeps one row's logits) would reserve
    // prompt length x vocabulary floats.
    st.logits.reserve(std::size_t(capacity) * c.vocab_size);
    return st;
}

// The rotary angles of positions 0 .. S-1 (rotary families; GPT-2 learns its positions).
template <class Cache>
static void fill_rope_tables(Cache& cache, const Config& c, int S) {
    if (c.traits().positions != Positions::rotary) return;
    const std::size_t n = std::size_t(S) * (c.head_dim / 2);
    cache.rope_cos.resize(n);
    cache.rope_sin.resize(n);
    rope_tables(cache.rope_cos.data(), cache.rope_sin.data(), S, c.head_dim, c.rope_theta, c.rope_scaling);
}

KVCache make_kv_cache(const Model& m, int batch, int max_seq) {
    const Config& c = m.config;
    const int S = max_seq > 0 ? std::min(max_seq, c.max_seq_len) : c.max_seq_len;
    KVCache cache = make_kv_cache(c.n_layers, batch, c.n_kv_heads, S, c.head_dim);
    fill_rope_tables(cache, c, S);
    return cache;
}

PagedKVCache make_paged_kv_cache(const Model& m, int block_size, int total_blocks,
                                 const BlockPoolFactory& make_pool, bool on_host) {
    const Config& c = m.config;
    PagedKVCache cache = make_paged_kv_cache(c.n_layers, c.n_kv_heads, c.head_dim, block_size, total_blocks,
                                             c.max_seq_len, make_pool, on_host);
    fill_rope_tables(cache, c, c.max_seq_len);
    return cache;
}

namespace {

CacheRoom room(const KVCache& cache) { return {cache.seq_len, cache.max_seq}; }

// What forward() asks of a cache for the rows of a plan: the rotary tables,
// where each row's K and V go, and attention over what is cached. One
// forward serves both caches through these two adapters.

// The contiguous cache: one prefill of plan.slot[0], or one decode row per sequence.
struct ContiguousPass {
    KVCache& cache;
    const StepPlan& plan;

    const float* rope_cos() const { return cache.rope_cos.data(); }
    const float* rope_sin() const { return cache.rope_sin.data(); }
    void write(int layer, int r, const float* k, const float* v) {
        kv_write(cache, layer, plan.slot[r], plan.pos[r], k, v);
    }
    // Prefill: T queries of one sequence, query i sees positions 0..start+i.
    // Decode : one query per sequence, each sees its whole cache.
    // (Both only the last `window` positions of those under a sliding window.)
    void attend(float* out, const float* q, int layer, int n_heads, int window) {
        if (plan.kind == StepKind::prefill)
            attention_prefill(out, q, cache, layer, plan.slot[0], plan.pos[0], plan.rows, n_heads, window);
        else
            attention_decode(out, q, cache, layer, plan.slot.data(), plan.pos.data(), plan.rows, n_heads, window);
    }
    void layer_written(int) {}
    bool hooked() const { return false; }
};

// The paged cache: a mixed batch, rows in runs (plan.spans); row r writes
// through the table of its item, plan.slot[r].
struct PagedPass {
    PagedKVCache& cache;
    const StepPlan& plan;
    const LayerHook& on_layer;

    const float* rope_cos() const { return cache.rope_cos.data(); }
    const float* rope_sin() const { return cache.rope_sin.data(); }
    void write(int layer, int r, const float* k, const float* v) {
        paged_write(cache, layer, *plan.tables[plan.slot[r]], plan.pos[r], k, v);
    }
    // Each run: its rows see the sequence's cached prefix and, causally, the
    // rows of its step (within the sliding window when there is one).
    void attend(float* out, const float* q, int layer, int n_heads, int window) {
        attention_paged(out, q, cache, layer, plan.spans, n_heads, window);
    }
    void layer_written(int layer) {
        if (on_layer) on_layer(layer);
    }
    bool hooked() const { return bool(on_layer); }
};

// One forward pass at a time in the process. Engines that share a model share
// its packed weights, whose oneDNN scratch is per row count, not per engine,
// and every pass uses oneDNN's one CPU stream (matmul.cpp). A pass spreads
// over every core already, so two threads lose nothing by taking turns.
std::mutex forward_mutex;

// out = the family's norm of x: RMSNorm (w) or LayerNorm (w, b), rows of D.
void norm(const Config& c, float* out, const float* x, const std::vector<float>& w, const std::vector<float>& b,
          int rows) {
    if (c.traits().norm == Norm::rmsnorm) rmsnorm(out, x, w.data(), rows, c.dim, c.norm_eps);
    else layernorm(out, x, w.data(), b.data(), rows, c.dim, c.norm_eps);
}

// The categories of a layer's parts on the timeline (base/timeline.hpp).
constexpr const char* kProduct = "product";
constexpr const char* kAttention = "attention";
constexpr const char* kOther = "other";

// Layer detail on the timeline when one is recorded with it, from the thread
// that runs the pass (in a team, the other members leave it alone).
TimelineLaps layer_laps() {
    Timeline* tl = active_timeline();
    return TimelineLaps(tl, tl && tl->detail() == TimelineDetail::layers && team_thread() == 0);
}

// The layers, for the rows of `plan` (token, slot, pos), with the cache
// reached through `cache` (ContiguousPass or PagedPass): logits into
// st.logits for the plan's kept rows. With a timeline recording layers, each step
// below is a span when it ends (`laps.mark`), and each layer a span around its
// steps: its products, its attention and the rest.
//
// Every thread of a team runs this (see forward), so each statement that
// writes what the threads share goes through parallel_items(), directly or
// inside an op: a step that is not split (one row's embedding, say) runs on
// one thread while the others wait.
template <class Pass>
void forward_steps(const Model& m, const CpuWeights& packed, Pass& cache, RunState& st, const StepPlan& plan) {
    const Config& c = m.config;
    const Weights& w = m.w;
    const int D = c.dim, Q = c.q_dim(), KV = c.kv_dim(), F = c.hidden_dim;
    const int qkv_stride = Q + 2 * KV;
    const bool rotary = c.traits().positions == Positions::rotary;
    const int rows = plan.rows, kept = plan.n_kept;
    float* x = st.x.data();
    TimelineLaps laps = layer_laps();

    // 1. Embed: x = token embedding (+ learned position embedding for GPT-2).
    parallel_items(rows, Schedule::fixed, [&](int r) {
        std::memcpy(x + std::size_t(r) * D, w.tok_emb.data() + std::size_t(plan.token[r]) * D, sizeof(float) * D);
        if (!rotary) add_inplace(x + std::size_t(r) * D, w.pos_emb.data() + std::size_t(plan.pos[r]) * D, D);
    });
    laps.mark("embed", kOther);

    for (int l = 0; l < c.n_layers; l++) {
        const LayerWeights& L = w.layers[l];
        const CpuLayer& P = packed.layers[l];
        const std::int64_t layer_start = laps.last_ns();

        // 2. Attention sublayer input: xn = norm(x).
        norm(c, st.xn.data(), x, L.norm1_w, L.norm1_b, rows);
        laps.mark("norm", kOther);

        // 3. Project to queries, keys and values: (rows, D) -> (rows, Q + 2 KV),
        //    with their biases where the family has them (GPT-2, Qwen2).
        linear_forward(P.qkv, st.xn.data(), rows, st.qkv.data());
        laps.mark("qkv", kProduct);

        // 4. Rotary positions on q and k (Llama); GPT-2 added positions in step 1.
        if (rotary) {
            rope(st.qkv.data(), rows, qkv_stride, c.n_heads, c.head_dim, plan.pos.data(),
                 cache.rope_cos(), cache.rope_sin());
            rope(st.qkv.data() + Q, rows, qkv_stride, c.n_kv_heads, c.head_dim, plan.pos.data(),
                 cache.rope_cos(), cache.rope_sin());
        }

        // 5. Append each row's K and V to its sequence's cache, at its position.
        parallel_items(rows, Schedule::fixed, [&](int r) {
            const float* row = st.qkv.data() + std::size_t(r) * qkv_stride;
            cache.write(l, r, row + Q, row + Q + KV);
            std::memcpy(st.q.data() + std::size_t(r) * Q, row, sizeof(float) * Q);
        });
        cache.layer_written(l);  // layer l's K/V of every row are final (a disaggregated prefill sends them now)
        laps.mark("rope + kv write", kOther);

        // 6. Attention over the cache, each row seeing its sequence up to its
        //    own position (its last sliding_window positions, when set).
        cache.attend(st.att.data(), st.q.data(), l, c.n_heads, c.sliding_window);
        laps.mark("attention", kAttention);

        // 7. Output projection and residual: x += att @ Wo^T.
        linear_forward(P.attn_out, st.att.data(), rows, st.proj.data());
        laps.mark("attn_out", kProduct);
        add_inplace(x, st.proj.data(), std::size_t(rows) * D);

        // 8. MLP sublayer: x += mlp(norm(x)).
        norm(c, st.xn.data(), x, L.norm2_w, L.norm2_b, rows);
        laps.mark("residual + norm", kOther);
        linear_forward(P.mlp_in, st.xn.data(), rows, st.mlp_h.data());
        laps.mark("mlp_in", kProduct);
        const float* act = st.mlp_h.data();
        if (c.traits().mlp == Mlp::swiglu) {
            swiglu(st.mlp_act.data(), st.mlp_h.data(), rows, F);  // silu(gate) * up
            act = st.mlp_act.data();
        } else {
            gelu_tanh(st.mlp_h.data(), std::size_t(rows) * F);    // in place
        }
        laps.mark("activation", kOther);
        linear_forward(P.mlp_out, act, rows, st.proj.data());
        laps.mark("mlp_out", kProduct);
        add_inplace(x, st.proj.data(), std::size_t(rows) * D);
        laps.mark("residual", kOther);
        laps.enclose(layer_start, {"layer", l}, "layer");
    }

    // 9. Final norm and output head, only for the rows whose logits are wanted
    //    (one run of rows: first_kept ..).
    parallel_items(kept, Schedule::fixed, [&](int i) {
        const float* row = x + std::size_t(plan.first_kept + i) * D;
        norm(c, st.kept.data() + std::size_t(i) * D, row, w.norm_f_w, w.norm_f_b, 1);
    });
    linear_forward(packed.head, st.kept.data(), kept, st.logits.data());
    laps.mark("logits", kProduct);
}

// One pass of forward_steps. One of at most kSmallM rows (decode) runs on one
// team of threads (engine/team.hpp) instead of opening a parallel region for
// each of its ~60 products and attentions; not one with a layer hook, whose
// code (an MPI send) may throw, which a team's threads cannot pass on.
template <class Pass>
const float* forward(const Model& m, Pass& cache, RunState& st, const StepPlan& plan) {
    std::lock_guard lock(forward_mutex);
    const CpuWeights& packed = cpu_weights(m);  // the same matrices, in the CPU kernels' layouts
    const std::size_t kept = std::size_t(plan.n_kept);
    st.kept.resize(kept * m.config.dim);
    st.logits.resize(kept * m.config.vocab_size);
    const bool team = plan.rows <= kSmallM && !cache.hooked() && team_possible();
    with_team(team, [&] { forward_steps(m, packed, cache, st, plan); });
    return st.logits.data();
}

}  // namespace

// Each phase: its plan (step_plan.hpp, with the request's checks), the run
// state grown to it where the phase may grow, one forward pass, then the
// lengths the pass wrote.

const float* prefill(const Model& m, KVCache& cache, RunState& st, int slot,
                     std::span<const int> tokens, Keep keep) {
    TimelineScope span("prefill", "phase");
    StepPlan& plan = st.plan;
    plan_prefill(plan, m.config, room(cache), slot, tokens, keep);
    span.arg("tokens", plan.rows);
    span.arg("from position", plan.pos[0]);
    if (plan.rows > st.capacity)
        size_run_state(st, m.config, plan.rows);  // grows once per longer prompt, never in decode
    ContiguousPass pass{cache, plan};
    const float* logits = forward(m, pass, st, plan);
    commit(plan, cache.seq_len);
    return logits;
}

const float* decode(const Model& m, KVCache& cache, RunState& st, std::span<const int> slots,
                    std::span<const int> tokens) {
    TimelineScope span("decode", "phase");
    StepPlan& plan = st.plan;
    plan_decode(plan, m.config, room(cache), slots, tokens);
    span.arg("rows", plan.rows);
    span.arg("row 0 position", plan.pos[0]);
    if (plan.rows > st.capacity)
        fail("decode batch of {} exceeds the run state's capacity of {}", plan.rows, st.capacity);
    ContiguousPass pass{cache, plan};
    const float* logits = forward(m, pass, st, plan);
    commit(plan, cache.seq_len);
    return logits;
}

const float* forward_batch(const Model& m, PagedKVCache& cache, RunState& st, std::span<const BatchItem> items,
                          const LayerHook& on_layer) {
    TimelineScope span("batch step", "phase");
    StepPlan& plan = st.plan;
    plan_batch(plan, m.config, cache, items);
    span.arg("sequences", double(items.size()));
    span.arg("rows", plan.rows);
    if (plan.rows > st.capacity) size_run_state(st, m.config, plan.rows);  // grows once per larger step
    PagedPass pass{cache, plan, on_layer};
    const float* logits = forward(m, pass, st, plan);
    commit(plan);
    return logits;
}

}  // namespace pd
