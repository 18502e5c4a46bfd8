// Lab 15 reference solution.
#include "exercise.hpp"

#include <cmath>
#include <cstring>

#include "engine/matmul.hpp"

namespace pd::lab15 {

namespace {

// x += y, n values (a residual connection).
void add_rows(float* x, const float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; i++) x[i] += y[i];
}

// What this lab's forward covers: Llama's RMSNorm, rotary positions and
// SwiGLU MLP, every key visible (no sliding window).
void check_family(const Config& c) {
    const FamilyTraits& t = c.traits();
    if (t.norm != Norm::rmsnorm || t.positions != Positions::rotary || t.mlp != Mlp::swiglu)
        fail("lab 15's forward covers the Llama family (RMSNorm, rotary, SwiGLU); {} is a {} model: pick a "
             "Llama, Mistral or Qwen2 one, e.g. --model tiny",
             c.name, family_name(c.family));
    if (c.sliding_window > 0)
        fail("{} attends through a sliding window of {} positions, which lab 15's attention does not implement: "
             "pick a model without one",
             c.name, c.sliding_window);
}

void check_tokens(const Config& c, const KVCache& cache, int seq, std::span<const int> tokens) {
    if (tokens.empty()) fail("forward needs at least one token");
    if (seq < 0 || seq >= cache.batch) fail("sequence {} is outside the cache's {} sequences", seq, cache.batch);
    for (int t : tokens)
        if (t < 0 || t >= c.vocab_size) fail("token id {} is outside the vocabulary 0..{}", t, c.vocab_size - 1);
    const long end = long(cache.seq_len[std::size_t(seq)]) + long(tokens.size());
    if (end > cache.max_seq)
        fail("{} tokens after {} cached ones need {} positions, but the cache holds {}", tokens.size(),
             cache.seq_len[std::size_t(seq)], end, cache.max_seq);
}

// The first index of the largest of n values.
int argmax(const float* v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

}  // namespace

void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps) {
    for (int r = 0; r < rows; r++) {
        const float* xr = x + std::size_t(r) * dim;
        float* o = out + std::size_t(r) * dim;
        double squares = 0;
        for (int i = 0; i < dim; i++) squares += double(xr[i]) * xr[i];
        const float inv = float(1.0 / std::sqrt(squares / dim + eps));
        for (int i = 0; i < dim; i++) o[i] = w[i] * (xr[i] * inv);
    }
}

void apply_rope(float* x, int n_heads, int head_dim, int pos, const KVCache& cache) {
    const int half = head_dim / 2;
    const float* cos = cache.rope_cos.data() + std::size_t(pos) * half;
    const float* sin = cache.rope_sin.data() + std::size_t(pos) * half;
    for (int h = 0; h < n_heads; h++) {
        float* head = x + std::size_t(h) * head_dim;
        for (int i = 0; i < half; i++) {
            const float a = head[i], b = head[i + half];
            head[i] = a * cos[i] - b * sin[i];
            head[i + half] = a * sin[i] + b * cos[i];
        }
    }
}

void attend(float* out, const float* q, const KVCache& cache, int layer, int seq, int pos, int n_heads,
            float* scores) {
    const int Dh = cache.head_dim, group = n_heads / cache.n_kv_heads;
    const float scale = 1.0f / std::sqrt(float(Dh));
    for (int h = 0; h < n_heads; h++) {
        const float* qh = q + std::size_t(h) * Dh;
        float* oh = out + std::size_t(h) * Dh;
        const int kv = h / group;  // consecutive query heads share one KV head
        float mx = -INFINITY;
        for (int s = 0; s <= pos; s++) {
            const float* k = kv_key(cache, layer, seq, kv, s);
            float dot = 0;
            for (int i = 0; i < Dh; i++) dot += qh[i] * k[i];
            scores[s] = dot * scale;
            mx = std::max(mx, scores[s]);
        }
        float sum = 0;
        for (int s = 0; s <= pos; s++) sum += scores[s] = std::exp(scores[s] - mx);
        std::fill(oh, oh + Dh, 0.0f);
        for (int s = 0; s <= pos; s++) {
            const float* v = kv_value(cache, layer, seq, kv, s);
            const float p = scores[s] / sum;
            for (int i = 0; i < Dh; i++) oh[i] += p * v[i];
        }
    }
}

void swiglu_mlp(float* out, const float* xn, const Model& m, int layer, int rows, Scratch& s) {
    const CpuLayer& P = cpu_weights(m).layers[std::size_t(layer)];
    const int F = m.config.hidden_dim;
    linear_forward(P.mlp_in, xn, rows, s.gate_up.data());
    for (int r = 0; r < rows; r++) {
        const float* gate = s.gate_up.data() + std::size_t(r) * 2 * F;
        const float* up = gate + F;
        float* a = s.act.data() + std::size_t(r) * F;
        for (int i = 0; i < F; i++) a[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
    linear_forward(P.mlp_out, s.act.data(), rows, out);
}

void decoder_layer(float* x, const Model& m, int layer, int rows, KVCache& cache, int seq, Scratch& s) {
    const Config& c = m.config;
    const LayerWeights& L = m.w.layers[std::size_t(layer)];
    const CpuLayer& P = cpu_weights(m).layers[std::size_t(layer)];
    const int D = c.dim, Q = c.q_dim(), KV = c.kv_dim(), stride = Q + 2 * KV;
    const int start = cache.seq_len[std::size_t(seq)];

    // Attention sublayer input.
    rms_norm(s.xn.data(), x, L.norm1_w.data(), rows, D, c.norm_eps);
    s.clock.mark(Piece::norms);
    // Queries, keys and values of every row in one product: (rows, D) -> (rows, Q + 2 KV).
    linear_forward(P.qkv, s.xn.data(), rows, s.qkv.data());
    s.clock.mark(Piece::products);
    // Positions into q and k, then this layer's K and V of each row into the cache.
    for (int r = 0; r < rows; r++) {
        float* row = s.qkv.data() + std::size_t(r) * stride;
        apply_rope(row, c.n_heads, c.head_dim, start + r, cache);
        apply_rope(row + Q, c.n_kv_heads, c.head_dim, start + r, cache);
        for (int h = 0; h < c.n_kv_heads; h++) {
            const std::size_t at = std::size_t(h) * c.head_dim;
            std::memcpy(kv_key(cache, layer, seq, h, start + r), row + Q + at, sizeof(float) * c.head_dim);
            std::memcpy(kv_value(cache, layer, seq, h, start + r), row + Q + KV + at, sizeof(float) * c.head_dim);
        }
    }
    s.clock.mark(Piece::other);
    // Each row sees the cache up to its own position: causal within the rows too.
    for (int r = 0; r < rows; r++)
        attend(s.att.data() + std::size_t(r) * Q, s.qkv.data() + std::size_t(r) * stride, cache, layer, seq,
               start + r, c.n_heads, s.scores.data());
    s.clock.mark(Piece::attention);
    // Output product and residual.
    linear_forward(P.attn_out, s.att.data(), rows, s.proj.data());
    s.clock.mark(Piece::products);
    add_rows(x, s.proj.data(), std::size_t(rows) * D);
    s.clock.mark(Piece::other);
    // MLP sublayer and residual.
    rms_norm(s.xn.data(), x, L.norm2_w.data(), rows, D, c.norm_eps);
    s.clock.mark(Piece::norms);
    swiglu_mlp(s.proj.data(), s.xn.data(), m, layer, rows, s);
    s.clock.mark(Piece::mlp);
    add_rows(x, s.proj.data(), std::size_t(rows) * D);
    s.clock.mark(Piece::other);
}

const float* forward(const Model& m, KVCache& cache, int seq, std::span<const int> tokens, Scratch& s) {
    const Config& c = m.config;
    check_family(c);
    check_tokens(c, cache, seq, tokens);
    const int rows = int(tokens.size()), D = c.dim;
    s.fit(c, rows, cache.max_seq);
    // Embed: row r is token r's row of the embedding.
    for (int r = 0; r < rows; r++)
        std::memcpy(s.x.data() + std::size_t(r) * D, m.w.tok_emb.data() + std::size_t(tokens[r]) * D,
                    sizeof(float) * D);
    s.clock.mark(Piece::other);
    for (int l = 0; l < c.n_layers; l++) decoder_layer(s.x.data(), m, l, rows, cache, seq, s);
    cache.seq_len[std::size_t(seq)] += rows;
    // Only the last row's logits pick the next token.
    rms_norm(s.xn.data(), s.x.data() + std::size_t(rows - 1) * D, m.w.norm_f_w.data(), 1, D, c.norm_eps);
    s.clock.mark(Piece::norms);
    linear_forward(cpu_weights(m).head, s.xn.data(), 1, s.logits.data());
    s.clock.mark(Piece::products);
    return s.logits.data();
}

std::vector<int> generate_greedy(const Model& m, std::span<const int> prompt, int steps, bool use_cache) {
    const Config& c = m.config;
    if (prompt.empty()) fail("generate_greedy needs a prompt of at least one token");
    if (steps < 0) fail("steps must be >= 0, got {}", steps);
    if (long(prompt.size()) + steps > c.max_seq_len)
        fail("a prompt of {} tokens and {} steps exceed the context of {}", prompt.size(), steps, c.max_seq_len);
    KVCache cache = make_kv_cache(m, 1, int(prompt.size()) + steps);
    Scratch s;
    std::vector<int> seen(prompt.begin(), prompt.end()), out;
    const float* logits = forward(m, cache, 0, prompt, s);
    for (int i = 0; i < steps; i++) {
        out.push_back(argmax(logits, c.vocab_size));
        seen.push_back(out.back());
        if (i + 1 == steps) break;
        if (use_cache) {
            logits = forward(m, cache, 0, std::span<const int>(&out.back(), 1), s);
        } else {
            cache.seq_len[0] = 0;  // forget everything: the whole prefix again
            logits = forward(m, cache, 0, seen, s);
        }
    }
    return out;
}

}  // namespace pd::lab15
