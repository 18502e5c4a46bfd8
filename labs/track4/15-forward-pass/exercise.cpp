// Lab 15 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-7).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track4-15
// Multiply through pd::linear_forward (engine/matmul.hpp); write everything else
// yourself: the engine's rmsnorm, rope, attention, swiglu, softmax, kv_write,
// prefill, decode and generate are off limits (README "What you may use").
#include "exercise.hpp"

#include <cmath>
#include <cstring>

#include "engine/matmul.hpp"
#include "todo_exercise.hpp"

namespace pd::lab15 {

void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps) {
    (void)out, (void)x, (void)w, (void)rows, (void)dim, (void)eps;
    TODO_EXERCISE("README \"RMSNorm\": per row, the mean of the squares, then w[i] * x[i] / sqrt(mean + eps)");
}

void apply_rope(float* x, int n_heads, int head_dim, int pos, const KVCache& cache) {
    (void)x, (void)n_heads, (void)head_dim, (void)pos, (void)cache;
    TODO_EXERCISE(
        "README \"Rotary embeddings\": per head, rotate the pairs (x[i], x[i + Dh/2]) by the angle whose cos and "
        "sin are row `pos` of cache.rope_cos / rope_sin");
}

void attend(float* out, const float* q, const KVCache& cache, int layer, int seq, int pos, int n_heads,
            float* scores) {
    (void)out, (void)q, (void)cache, (void)layer, (void)seq, (void)pos, (void)n_heads, (void)scores;
    TODO_EXERCISE(
        "README \"Attention over the cache\": per query head, its KV head h / (n_heads / n_kv_heads), scores "
        "over positions 0..pos, a stable softmax, the weighted sum of V");
}

void swiglu_mlp(float* out, const float* xn, const Model& m, int layer, int rows, Scratch& s) {
    (void)out, (void)xn, (void)m, (void)layer, (void)rows, (void)s;
    TODO_EXERCISE(
        "README \"The MLP\": linear_forward with cpu_weights(m).layers[layer].mlp_in into s.gate_up, "
        "silu(gate) * up into s.act, then mlp_out");
}

void decoder_layer(float* x, const Model& m, int layer, int rows, KVCache& cache, int seq, Scratch& s) {
    (void)x, (void)m, (void)layer, (void)rows, (void)cache, (void)seq, (void)s;
    TODO_EXERCISE(
        "README \"One decoder layer\": the steps listed in exercise.hpp, in order, positions from "
        "cache.seq_len[seq]; K/V rows through kv_key/kv_value; s.clock.mark after each step");
}

const float* forward(const Model& m, KVCache& cache, int seq, std::span<const int> tokens, Scratch& s) {
    (void)m, (void)cache, (void)seq, (void)tokens, (void)s;
    TODO_EXERCISE(
        "README \"The whole forward\": check the model and the input first, s.fit, embed, every layer, advance "
        "seq_len, final norm and head on the last row");
}

std::vector<int> generate_greedy(const Model& m, std::span<const int> prompt, int steps, bool use_cache) {
    (void)m, (void)prompt, (void)steps, (void)use_cache;
    TODO_EXERCISE(
        "README \"Generating\": make_kv_cache(m, 1, prompt + steps), a Scratch, one forward for the prompt, "
        "then the argmax and one forward per step (without the cache: seq_len = 0 and the whole prefix)");
}

}  // namespace pd::lab15
