// The KV cache: for every layer, the keys and values of every token a
// sequence has seen, so that decode computes K and V for the new token only.
//
// Layout per layer: K and V are each (batch, n_kv_heads, max_seq, head_dim),
// and seq_len[b] says how many positions of sequence b are usable. All reads
// and writes go through kv_key()/kv_value(). The paged cache (blocks of
// positions shared through a pool) is its sibling, paged_kv_cache.hpp.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/config.hpp"

namespace pd {

struct KVCache {
    int n_layers = 0, batch = 0, n_kv_heads = 0, max_seq = 0, head_dim = 0;
    std::vector<float> k;     // (layer, batch, n_kv_heads, max_seq, head_dim)
    std::vector<float> v;     // (layer, batch, n_kv_heads, max_seq, head_dim)
    std::vector<int> seq_len; // (batch) usable positions per sequence
    // Rotary angles of the positions the cache holds (Llama only, filled by
    // model.hpp's make_kv_cache): sized to max_seq, not to the model's context.
    std::vector<float> rope_cos, rope_sin;  // (max_seq, head_dim/2)

    std::size_t bytes_per_elem() const { return sizeof(float); }
    // Bytes the cache holds for `tokens` positions of one sequence: 2 * L * H_kv * D * bytes.
    std::size_t bytes_for_tokens(std::size_t tokens) const {
        return kv_bytes(n_layers, n_kv_heads, head_dim, tokens, bytes_per_elem());
    }
    std::size_t capacity_bytes() const { return bytes_for_tokens(std::size_t(batch) * max_seq); }
};

// Refuses (UserError) a cache larger than the memory available, naming its
// size, before allocating it.
KVCache make_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim);

// One cached row: head_dim floats for (layer, sequence b, kv head h, position pos).
inline float* kv_key(KVCache& c, int layer, int b, int h, int pos) {
    return c.k.data() +
           ((((std::size_t(layer) * c.batch + b) * c.n_kv_heads + h) * c.max_seq + pos) * c.head_dim);
}
inline float* kv_value(KVCache& c, int layer, int b, int h, int pos) {
    return c.v.data() +
           ((((std::size_t(layer) * c.batch + b) * c.n_kv_heads + h) * c.max_seq + pos) * c.head_dim);
}
inline const float* kv_key(const KVCache& c, int layer, int b, int h, int pos) {
    return kv_key(const_cast<KVCache&>(c), layer, b, h, pos);
}
inline const float* kv_value(const KVCache& c, int layer, int b, int h, int pos) {
    return kv_value(const_cast<KVCache&>(c), layer, b, h, pos);
}

// Writes the new token's K and V, each (n_kv_heads * head_dim), at `pos` of sequence b.
void kv_write(KVCache& c, int layer, int b, int pos, const float* k_new, const float* v_new);

// Forgets sequence b (its slot can take a new request); UserError if there is
// no slot b. This and kv_truncate change seq_len through the host layer's
// reset_length and truncate_length (step_plan.hpp), as the CUDA engine does.
void kv_reset(KVCache& c, int b);

// Rolls sequence b back to its first `len` positions, as if the tokens after
// them had never been fed (speculative decoding drops rejected draft tokens
// this way). Nothing is cleared: rows past `len` are no longer read, and the
// next token is written at `len`. UserError if there is no slot b or `len` is
// outside [0, seq_len[b]] (a cache cannot grow by truncation).
void kv_truncate(KVCache& c, int b, int len);

// "[1, 8, 5, 64]": the usable K (or V) shape of sequence b in one layer.
std::string kv_shape_str(const KVCache& c, int b);

}  // namespace pd
