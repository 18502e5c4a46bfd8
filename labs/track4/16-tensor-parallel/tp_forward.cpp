#include "tp_forward.hpp"

#include <chrono>
#include <cstring>

#include "common.hpp"
#include "engine/attention.hpp"
#include "engine/ops.hpp"

namespace pd::lab16 {

void check_splittable(const Model& m) {
    const FamilyTraits& t = m.config.traits();
    if (t.norm != Norm::rmsnorm || t.positions != Positions::rotary || t.mlp != Mlp::swiglu)
        fail("lab 16 splits Llama-family models (RMSNorm, rotary, SwiGLU); {} is a {} model: use tiny or "
             "synthetic:llama,...", m.config.name, family_name(m.config.family));
    if (m.precision != Precision::f32)
        fail("lab 16 splits f32 weights; --precision {} is not supported here: use --precision f32",
             precision_name(m.precision));
}

LayerWeights layer_rows(const Model& m, int l) {
    const CpuLayer& P = cpu_weights(m).layers[std::size_t(l)];
    auto rows = [](const Linear& L) { return Matrix{L.in, L.out, linear_rows_f32(L), L.bias}; };
    LayerWeights w;
    w.qkv = rows(P.qkv), w.attn_out = rows(P.attn_out), w.mlp_in = rows(P.mlp_in), w.mlp_out = rows(P.mlp_out);
    return w;
}

namespace {

Linear pack(Matrix m) { return make_linear(std::move(m.w), std::move(m.bias), m.in, m.out, Precision::f32); }

// A shard's matrix must have the shape exercise.hpp gives it, or the forward would read out of bounds.
void check_shape(const Matrix& m, int out, int in, const char* what) {
    if (m.out != out || m.in != in || m.w.size() != std::size_t(out) * in)
        fail("shard_layer: {} is ({}, {}) with {} floats; expected ({}, {}): see exercise.hpp", what, m.out, m.in,
             m.w.size(), out, in);
}

}  // namespace

TpRank make_tp_rank(std::shared_ptr<const Model> model, int ranks, int rank, int max_seq) {
    check_splittable(*model);
    const Config& c = model->config;
    TpRank r;
    r.plan = plan_shard(c, ranks, rank);
    const ShardPlan& p = r.plan;
    const int hd = c.head_dim, qw = p.q_heads * hd, kvw = p.kv_heads * hd;
    for (int l = 0; l < c.n_layers; l++) {
        LayerShard s = shard_layer(c, layer_rows(*model, l), p);
        check_shape(s.qkv, qw + 2 * kvw, c.dim, "qkv");
        check_shape(s.attn_out, c.dim, qw, "attn_out");
        check_shape(s.mlp_in, 2 * p.hidden, c.dim, "mlp_in");
        check_shape(s.mlp_out, c.dim, p.hidden, "mlp_out");
        r.weight_bytes += sizeof(float) * (s.qkv.w.size() + s.attn_out.w.size() + s.mlp_in.w.size() +
                                           s.mlp_out.w.size());
        r.layers.push_back({pack(std::move(s.qkv)), pack(std::move(s.attn_out)), pack(std::move(s.mlp_in)),
                            pack(std::move(s.mlp_out))});
    }
    const int S = std::min(max_seq, c.max_seq_len);
    r.cache = make_kv_cache(c.n_layers, 1, p.kv_heads, S, hd);
    r.cache.rope_cos.resize(std::size_t(S) * (hd / 2));
    r.cache.rope_sin.resize(r.cache.rope_cos.size());
    rope_tables(r.cache.rope_cos.data(), r.cache.rope_sin.data(), S, hd, c.rope_theta, c.rope_scaling);
    r.model = std::move(model);
    return r;
}

namespace {

// One layer's sublayers on this rank's slices, for `rows` rows at positions pos[].
class RankSublayers : public ShardSublayers {
public:
    RankSublayers(TpRank& r, int layer, int rows, const int* pos)
        : r_(r), c_(r.model->config), L_(r.layers[std::size_t(layer)]), w_(r.model->w.layers[std::size_t(layer)]),
          layer_(layer), rows_(rows), pos_(pos) {}

    void attention(const float* x, float* partial) override {
        const ShardPlan& p = r_.plan;
        const int hd = c_.head_dim, qw = p.q_heads * hd, kvw = p.kv_heads * hd, stride = qw + 2 * kvw;
        std::vector<float> xn(std::size_t(rows_) * c_.dim), qkv(std::size_t(rows_) * stride),
            q(std::size_t(rows_) * qw), att(q.size());
        // 1. norm, then this rank's q/k/v rows: (rows, D) -> (rows, qw + 2 kvw).
        rmsnorm(xn.data(), x, w_.norm1_w.data(), rows_, c_.dim, c_.norm_eps);
        linear_forward(L_.qkv, xn.data(), rows_, qkv.data());
        // 2. Rotary on its q and k heads.
        rope(qkv.data(), rows_, stride, p.q_heads, hd, pos_, r_.cache.rope_cos.data(), r_.cache.rope_sin.data());
        rope(qkv.data() + qw, rows_, stride, p.kv_heads, hd, pos_, r_.cache.rope_cos.data(),
             r_.cache.rope_sin.data());
        // 3. Its K/V heads into its cache; its queries apart.
        for (int i = 0; i < rows_; i++) {
            const float* row = qkv.data() + std::size_t(i) * stride;
            for (int h = 0; h < p.kv_heads; h++) {
                std::memcpy(kv_key(r_.cache, layer_, 0, h, pos_[i]), row + qw + h * hd, sizeof(float) * hd);
                std::memcpy(kv_value(r_.cache, layer_, 0, h, pos_[i]), row + qw + kvw + h * hd, sizeof(float) * hd);
            }
            std::memcpy(q.data() + std::size_t(i) * qw, row, sizeof(float) * qw);
        }
        // 4. Attention of its query heads over its KV heads (the group map holds within a rank).
        attention_prefill(att.data(), q.data(), r_.cache, layer_, 0, pos_[0], rows_, p.q_heads, c_.sliding_window);
        // 5. Its columns of the output projection: a partial sum of every output.
        linear_forward(L_.attn_out, att.data(), rows_, partial);
    }

    void mlp(const float* x, float* partial) override {
        const int F = r_.plan.hidden;
        std::vector<float> xn(std::size_t(rows_) * c_.dim), h(std::size_t(rows_) * 2 * F), act(std::size_t(rows_) * F);
        // norm, its gate/up rows, silu(gate) * up, its columns of the down projection.
        rmsnorm(xn.data(), x, w_.norm2_w.data(), rows_, c_.dim, c_.norm_eps);
        linear_forward(L_.mlp_in, xn.data(), rows_, h.data());
        swiglu(act.data(), h.data(), rows_, F);
        linear_forward(L_.mlp_out, act.data(), rows_, partial);
    }

private:
    TpRank& r_;
    const Config& c_;
    const ShardLinears& L_;
    const LayerWeights& w_;
    int layer_, rows_;
    const int* pos_;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::span<const float> tp_forward(TpRank& r, TimedComm& comm, std::span<const int> tokens, PassTimes* times) {
    const auto t0 = std::chrono::steady_clock::now();
    const double comm0 = comm.comm_ms(), bytes0 = comm.payload_bytes();
    const Config& c = r.model->config;
    const Weights& w = r.model->w;
    const int rows = int(tokens.size()), D = c.dim, start = r.cache.seq_len[0];
    if (rows < 1 || start + rows > r.cache.max_seq)
        fail("tp_forward: {} tokens from position {} do not fit the cache's {} positions", rows, start,
             r.cache.max_seq);
    std::vector<int> pos(static_cast<std::size_t>(rows));
    for (int i = 0; i < rows; i++) pos[std::size_t(i)] = start + i;

    // 1. Embed (every rank the whole x).
    std::vector<float> x(std::size_t(rows) * D), partial(x.size());
    for (int i = 0; i < rows; i++)
        std::memcpy(x.data() + std::size_t(i) * D, w.tok_emb.data() + std::size_t(tokens[std::size_t(i)]) * D,
                    sizeof(float) * D);
    // 2. The layers, wired by YOUR tp_layer.
    for (int l = 0; l < c.n_layers; l++) {
        RankSublayers sub(r, l, rows, pos.data());
        tp_layer(sub, comm, x, partial);
    }
    r.cache.seq_len[0] = start + rows;
    // 3. Final norm and head on the last row (not split: the same on every rank).
    std::vector<float> last(static_cast<std::size_t>(D));
    rmsnorm(last.data(), x.data() + std::size_t(rows - 1) * D, w.norm_f_w.data(), 1, D, c.norm_eps);
    r.logits.resize(std::size_t(c.vocab_size));
    linear_forward(cpu_weights(*r.model).head, last.data(), 1, r.logits.data());
    if (times)
        *times = {ms_since(t0), comm.comm_ms() - comm0, comm.payload_bytes() - bytes0,
                  std::chrono::duration<double>(t0.time_since_epoch()).count()};
    return r.logits;
}

}  // namespace pd::lab16
