#include "engine/weights.hpp"

#include <cmath>

namespace pd {

namespace {

// Finds a tensor by name, checks its shape, converts it to f32.
struct TensorReader {
    const Checkpoint& ck;
    const Config& c;

    const TensorView& get(const std::string& name, std::vector<std::int64_t> shape) const {
        const TensorView* t = ck.find(name);
        if (!t)
            fail("the checkpoint has no tensor \"{}\", which a {} model with this config.json "
                 "needs (is the checkpoint complete, and of the family config.json says?)",
                 name, c.model_type);
        if (t->shape != shape)
            fail("tensor \"{}\" has shape {} but config.json implies [{}]: the config does not "
                 "match these weights", name, t->shape_str(), fmt::join(shape, ", "));
        return *t;
    }
    std::vector<float> f32(const std::string& name, std::vector<std::int64_t> shape) const {
        const TensorView& t = get(name, shape);
        std::vector<float> out(t.numel());
        convert_to_f32(t, out.data());
        return out;
    }
};

// (rows, cols) -> (cols, rows): GPT-2's Conv1D stores weights (in, out).
std::vector<float> transpose(const std::vector<float>& a, int rows, int cols) {
    std::vector<float> t(a.size());
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) t[std::size_t(j) * rows + i] = a[std::size_t(i) * cols + j];
    return t;
}

Matrix matrix(std::vector<float> w, std::vector<float> bias, int in, int out) {
    return Matrix{in, out, std::move(w), std::move(bias)};
}

std::vector<float> concat(std::initializer_list<const std::vector<float>*> parts) {
    std::vector<float> out;
    for (auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
}

Weights load_gpt2(const Checkpoint& ck, const Config& c, const Progress& progress) {
    // Checkpoints come with bare names (h.0.attn...) or prefixed (transformer.h.0.attn...).
    std::string p = ck.find("transformer.wte.weight") ? "transformer." : "";
    TensorReader r{ck, c};
    const int D = c.dim, F = c.hidden_dim;
    Weights w;
    w.tok_emb = r.f32(p + "wte.weight", {c.vocab_size, D});
    w.pos_emb = r.f32(p + "wpe.weight", {c.max_seq_len, D});
    for (int l = 0; l < c.n_layers; l++) {
        std::string h = fmt::format("{}h.{}.", p, l);
        LayerWeights L;
        L.norm1_w = r.f32(h + "ln_1.weight", {D});
        L.norm1_b = r.f32(h + "ln_1.bias", {D});
        L.qkv = matrix(transpose(r.f32(h + "attn.c_attn.weight", {D, 3 * D}), D, 3 * D),
                       r.f32(h + "attn.c_attn.bias", {3 * D}), D, 3 * D);
        L.attn_out = matrix(transpose(r.f32(h + "attn.c_proj.weight", {D, D}), D, D),
                            r.f32(h + "attn.c_proj.bias", {D}), D, D);
        L.norm2_w = r.f32(h + "ln_2.weight", {D});
        L.norm2_b = r.f32(h + "ln_2.bias", {D});
        L.mlp_in = matrix(transpose(r.f32(h + "mlp.c_fc.weight", {D, F}), D, F),
                          r.f32(h + "mlp.c_fc.bias", {F}), D, F);
        L.mlp_out = matrix(transpose(r.f32(h + "mlp.c_proj.weight", {F, D}), F, D),
                           r.f32(h + "mlp.c_proj.bias", {D}), F, D);
        w.layers.push_back(std::move(L));
        if (progress) progress(l + 1, c.n_layers);
    }
    w.norm_f_w = r.f32(p + "ln_f.weight", {D});
    w.norm_f_b = r.f32(p + "ln_f.bias", {D});
    w.head = matrix({}, {}, D, c.vocab_size);  // GPT-2's head is always tied: tok_emb
    return w;
}

// Llama naming, shared by Mistral and Qwen2; Qwen2 adds q/k/v biases.
Weights load_llama(const Checkpoint& ck, const Config& c, const Progress& progress) {
    TensorReader r{ck, c};
    const int D = c.dim, F = c.hidden_dim, Q = c.q_dim(), KV = c.kv_dim();
    Weights w;
    w.tok_emb = r.f32("model.embed_tokens.weight", {c.vocab_size, D});
    for (int l = 0; l < c.n_layers; l++) {
        std::string h = fmt::format("model.layers.{}.", l);
        LayerWeights L;
        L.norm1_w = r.f32(h + "input_layernorm.weight", {D});
        auto q = r.f32(h + "self_attn.q_proj.weight", {Q, D});
        auto k = r.f32(h + "self_attn.k_proj.weight", {KV, D});
        auto v = r.f32(h + "self_attn.v_proj.weight", {KV, D});
        std::vector<float> qkv_bias;
        if (c.qkv_bias) {
            auto qb = r.f32(h + "self_attn.q_proj.bias", {Q});
            auto kb = r.f32(h + "self_attn.k_proj.bias", {KV});
            auto vb = r.f32(h + "self_attn.v_proj.bias", {KV});
            qkv_bias = concat({&qb, &kb, &vb});
        }
        L.qkv = matrix(concat({&q, &k, &v}), std::move(qkv_bias), D, Q + 2 * KV);
        L.attn_out = matrix(r.f32(h + "self_attn.o_proj.weight", {D, Q}), {}, Q, D);
        L.norm2_w = r.f32(h + "post_attention_layernorm.weight", {D});
        auto gate = r.f32(h + "mlp.gate_proj.weight", {F, D});
        auto up = r.f32(h + "mlp.up_proj.weight", {F, D});
        L.mlp_in = matrix(concat({&gate, &up}), {}, D, 2 * F);
        L.mlp_out = matrix(r.f32(h + "mlp.down_proj.weight", {D, F}), {}, F, D);
        w.layers.push_back(std::move(L));
        if (progress) progress(l + 1, c.n_layers);
    }
    w.norm_f_w = r.f32("model.norm.weight", {D});
    if (c.tied_head) {
        w.head = matrix({}, {}, D, c.vocab_size);  // tied: tok_emb
    } else {
        if (!ck.find("lm_head.weight"))
            fail("the checkpoint has no \"lm_head.weight\" but config.json says "
                 "tie_word_embeddings is false; set it to true if the head shares the embedding");
        w.head = matrix(r.f32("lm_head.weight", {c.vocab_size, D}), {}, D, c.vocab_size);
    }
    return w;
}

// Counter-based random numbers: value i of tensor `stream` depends on nothing
// else, so tensors fill in parallel and the same seed gives the same model.
std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

std::vector<float> random_uniform(std::size_t n, float stdev, std::uint64_t seed, std::uint64_t stream) {
    std::vector<float> out(n);
    const float a = stdev * std::sqrt(3.0f);  // uniform(-a, a) has this standard deviation
    std::uint64_t base = splitmix64(seed ^ splitmix64(stream));
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; i++) {
        double u = double(splitmix64(base + i) >> 11) * 0x1.0p-53;  // [0, 1)
        out[i] = float((2.0 * u - 1.0) * a);
    }
    return out;
}

}  // namespace

Weights load_weights(const Checkpoint& ck, const Config& c, Precision precision,
                     const Progress& progress) {
    Weights w = c.family == Family::gpt2 ? load_gpt2(ck, c, progress) : load_llama(ck, c, progress);
    w.precision = precision;
    return w;
}

Weights synthetic_weights(const Config& c, Precision precision, unsigned long long seed,
                          const Progress& progress) {
    const int D = c.dim, F = c.hidden_dim, Q = c.q_dim(), KV = c.kv_dim();
    const bool biased = c.traits().linear_bias;  // GPT-2: every linear and norm has a bias
    const float s = 0.02f;  // GPT-2's initialiser scale
    std::uint64_t stream = 0;
    auto rnd = [&](std::size_t n) { return random_uniform(n, s, seed, stream++); };
    auto ones = [](int n) { return std::vector<float>(std::size_t(n), 1.0f); };
    auto zeros = [](int n) { return std::vector<float>(std::size_t(n), 0.0f); };
    Weights w;
    w.precision = precision;
    w.tok_emb = rnd(std::size_t(c.vocab_size) * D);
    if (c.traits().positions == Positions::learned) w.pos_emb = rnd(std::size_t(c.max_seq_len) * D);
    for (int l = 0; l < c.n_layers; l++) {
        LayerWeights L;
        L.norm1_w = ones(D), L.norm2_w = ones(D);
        if (biased) L.norm1_b = zeros(D), L.norm2_b = zeros(D);
        std::vector<float> qkv_bias;
        if (biased) qkv_bias = zeros(Q + 2 * KV);
        else if (c.qkv_bias) qkv_bias = rnd(std::size_t(Q + 2 * KV));
        L.qkv = matrix(rnd(std::size_t(Q + 2 * KV) * D), std::move(qkv_bias), D, Q + 2 * KV);
        L.attn_out = matrix(rnd(std::size_t(D) * Q), biased ? zeros(D) : std::vector<float>{}, Q, D);
        const int mlp_rows = c.mlp_in_rows();
        L.mlp_in = matrix(rnd(std::size_t(mlp_rows) * D), biased ? zeros(mlp_rows) : std::vector<float>{},
                          D, mlp_rows);
        L.mlp_out = matrix(rnd(std::size_t(D) * F), biased ? zeros(D) : std::vector<float>{}, F, D);
        w.layers.push_back(std::move(L));
        if (progress) progress(l + 1, c.n_layers);
    }
    w.norm_f_w = ones(D);
    if (biased) w.norm_f_b = zeros(D);
    w.head = matrix(c.tied_head ? std::vector<float>{} : rnd(std::size_t(c.vocab_size) * D), {}, D,
                    c.vocab_size);
    return w;
}

const std::vector<float>& head_rows(const Weights& w) {
    if (w.rows_released) fail("internal error: the output head's rows were released after packing for the CPU");
    return w.head.w.empty() ? w.tok_emb : w.head.w;
}

std::size_t matmul_weight_bytes(const Weights& w) { return matmul_weight_bytes(w, w.precision); }

std::size_t matmul_weight_bytes(const Weights& w, Precision p) {
    std::size_t bytes = matrix_bytes(w.head.in, w.head.out, p);
    for (auto& L : w.layers)
        for (const Matrix* m : {&L.qkv, &L.attn_out, &L.mlp_in, &L.mlp_out})
            bytes += matrix_bytes(m->in, m->out, p);
    return bytes;
}

}  // namespace pd
