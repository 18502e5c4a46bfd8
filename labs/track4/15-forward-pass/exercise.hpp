// Lab 15: what you write. One Llama-family decoder layer, then the whole
// forward pass and greedy generation, on the kit's own model and KV cache.
//
// Shapes (from the model's Config c; rows = the tokens of one call):
//   D = c.dim, H = c.n_heads, Hkv = c.n_kv_heads, Dh = c.head_dim,
//   Q = H * Dh (c.q_dim()), KV = Hkv * Dh (c.kv_dim()), F = c.hidden_dim, V = c.vocab_size
//   x, the residual stream     : (rows, D)
//   tok_emb (m.w.tok_emb)      : (V, D); also the head's rows when c.tied_head (tiny and
//                                Llama 3.2 1B tie them; Llama 2 and 3 8B keep a head of their own)
//   norm weights               : (D) each: m.w.layers[l].norm1_w, norm2_w, m.w.norm_f_w
//   the products (cpu_weights(m).layers[l], a pd::Linear each, y = x @ W^T (+ bias)):
//     qkv      : (D) -> (Q + 2 KV), each output row [q | k | v]
//     attn_out : (Q) -> (D)
//     mlp_in   : (D) -> (2 F), each output row [gate | up]
//     mlp_out  : (F) -> (D)
//   and the head cpu_weights(m).head : (D) -> (V).
//   Multiply only through pd::linear_forward(L, x, rows, y) (engine/matmul.hpp):
//   the kit's matmul is yours to use; every other step below is yours to write.
//
// The cache (engine/kv_cache.hpp): K and V of every layer, (batch, Hkv, max_seq, Dh);
// one row through pd::kv_key(cache, layer, seq, kv_head, pos) / pd::kv_value(...).
// cache.seq_len[seq] positions are in use. The rotary tables are in the cache too:
// cache.rope_cos / rope_sin, (max_seq, Dh/2), row p for position p.
//
// Bad input (a token id outside the vocabulary, more tokens than the cache
// has room for, a sequence the cache does not have) throws pd::UserError
// (pd::fail), before anything is written.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "base/timing.hpp"
#include "engine/kv_cache.hpp"
#include "engine/model.hpp"

namespace pd::lab15 {

// ---- Given: where a forward pass spends its time. Your decoder_layer and
// forward call s.clock.mark(piece) at the end of each step: the time since the
// previous mark goes to that piece (the program restarts the clock before each
// call and prints the shares; the tests ignore it). The engine's forward does
// the same with its timeline (laps.mark in src/engine/model.cpp).
enum class Piece { norms, products, attention, mlp, other };
inline constexpr int kPieces = 5;
inline constexpr std::array<const char*, kPieces> kPieceNames = {"norms", "q/k/v, out, head products", "attention",
                                                                 "MLP", "embed, rope, cache, residuals"};

struct PieceClock {
    std::array<double, kPieces> ms{};  // time per piece since zero()
    double last = now_ms();
    void restart() { last = now_ms(); }
    void zero() { ms.fill(0.0), restart(); }
    void mark(Piece p) {
        const double t = now_ms();
        ms[std::size_t(p)] += t - last;
        last = t;
    }
};

// ---- Given: the scratch of one forward pass of up to `rows` rows, sized by
// fit() (forward calls it; it grows, never shrinks). Your functions write
// their intermediate results here instead of allocating on every call.
struct Scratch {
    int rows = 0;
    std::vector<float> xn;       // (rows, D) normalised input of a sublayer
    std::vector<float> qkv;      // (rows, Q + 2 KV) projections [q | k | v]
    std::vector<float> att;      // (rows, Q) attention output, heads side by side
    std::vector<float> proj;     // (rows, D) output of attn_out and of the MLP
    std::vector<float> gate_up;  // (rows, 2 F) the MLP's [gate | up]
    std::vector<float> act;      // (rows, F) silu(gate) * up
    std::vector<float> scores;   // (max_seq) one head's attention scores
    std::vector<float> x;        // (rows, D) forward's residual stream
    std::vector<float> logits;   // (V) forward's result: the last row's logits
    PieceClock clock;

    void fit(const Config& c, int n_rows, int max_seq) {
        if (n_rows > rows) {
            const std::size_t R = std::size_t(n_rows);
            rows = n_rows;
            xn.resize(R * c.dim), qkv.resize(R * (c.q_dim() + 2 * c.kv_dim())), att.resize(R * c.q_dim());
            proj.resize(R * c.dim), gate_up.resize(R * 2 * c.hidden_dim), act.resize(R * c.hidden_dim);
            x.resize(R * c.dim);
        }
        scores.resize(std::max(scores.size(), std::size_t(max_seq)));
        logits.resize(std::size_t(c.vocab_size));
    }
};

// ---- Task 1: RMSNorm, each of `rows` rows of `dim` values:
//   out = w * x / sqrt(mean(x^2) + eps)        (sum the squares in float or double)
// out and x may be the same array.
void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps);

// ---- Task 2: rotary embedding of ONE row's heads, in place, Hugging Face's
// "rotate half" layout: x is (n_heads, Dh); in each head, for i < Dh/2, the
// pair (x[i], x[i + Dh/2]) is rotated by the angle of position `pos`:
//   x[i]        <- x[i] cos - x[i + Dh/2] sin
//   x[i + Dh/2] <- x[i] sin + x[i + Dh/2] cos
// with cos = cache.rope_cos[pos * Dh/2 + i], sin likewise (the kit's tables
// include the model's theta and any rope scaling).
void apply_rope(float* x, int n_heads, int head_dim, int pos, const KVCache& cache);

// ---- Task 3: causal GQA attention of ONE row: the query of the token at
// position `pos` of sequence `seq`, whose K/V are already in the cache at pos.
//   q, out: (n_heads, Dh). Query head h reads KV head h / (n_heads / Hkv).
//   for each head: score_s = q_h . K[s] / sqrt(Dh) for s = 0 .. pos,
//                  p = softmax(score) (subtract the max), out_h = sum_s p_s V[s].
// scores: scratch of at least pos + 1 floats.
void attend(float* out, const float* q, const KVCache& cache, int layer, int seq, int pos, int n_heads,
            float* scores);

// ---- Task 4: the SwiGLU MLP of layer `layer` on `rows` normalised rows:
//   [gate | up] = mlp_in(xn)          (rows, 2F)
//   act         = silu(gate) * up     (rows, F), silu(g) = g / (1 + e^-g)
//   out         = mlp_out(act)        (rows, D)
// Intermediate results in s.gate_up and s.act.
void swiglu_mlp(float* out, const float* xn, const Model& m, int layer, int rows, Scratch& s);

// ---- Task 5: one decoder layer on `rows` consecutive tokens of sequence
// `seq`, at positions start .. start+rows-1 where start = cache.seq_len[seq]
// (they are not in the cache yet: forward advances seq_len after the last layer).
//   xn = rms_norm(x, norm1)                     then s.clock.mark(Piece::norms)
//   [q | k | v] = qkv(xn)                        products
//   rope on q (H heads) and k (Hkv heads) of each row, at its position
//   K, V of each row into the cache at its position, this layer   other
//   att = attend(q) for each row                 attention
//   x += attn_out(att)                           products (the add: other)
//   xn = rms_norm(x, norm2)                      norms
//   x += swiglu_mlp(xn)                          mlp (the add: other)
// x: (rows, D), updated in place.
void decoder_layer(float* x, const Model& m, int layer, int rows, KVCache& cache, int seq, Scratch& s);

// ---- Task 6: the whole forward pass of `tokens` (rows = tokens.size() >= 1)
// appended to sequence `seq`: prefill is one call with every prompt token,
// decode one call per new token. Embeds each token (its row of tok_emb), runs
// every layer, advances cache.seq_len[seq] by rows, then the final norm and the
// head on the LAST row only. Returns s.logits.data(): (V) logits.
// Refuses (pd::fail) a model that is not a Llama-family decoder this lab
// covers (GPT-2's LayerNorm/GELU/learned positions, a sliding window), bad ids,
// a sequence outside the cache, or tokens past the cache's max_seq.
const float* forward(const Model& m, KVCache& cache, int seq, std::span<const int> tokens, Scratch& s);

// ---- Task 7: greedy generation with your forward: `steps` new token ids.
//   use_cache = true : prefill (the whole prompt in one forward), then one
//                      forward per new token, which attends to the cache.
//   use_cache = false: every step forgets the cache (seq_len = 0) and runs
//                      the whole prefix, prompt + tokens so far, again.
// The token picked is the first index of the largest logit. A prompt of at
// least one token; prompt + steps within the model's context.
std::vector<int> generate_greedy(const Model& m, std::span<const int> prompt, int steps, bool use_cache);

}  // namespace pd::lab15
