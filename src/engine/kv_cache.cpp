#include "engine/kv_cache.hpp"

#include <cstring>

#include <fmt/format.h>

#include "common.hpp"
#include "engine/host_memory.hpp"
#include "engine/step_plan.hpp"

namespace pd {

KVCache make_kv_cache(int n_layers, int batch, int n_kv_heads, int max_seq, int head_dim) {
    KVCache c;
    c.n_layers = n_layers, c.batch = batch, c.n_kv_heads = n_kv_heads;
    c.max_seq = max_seq, c.head_dim = head_dim;
    const std::size_t n = std::size_t(n_layers) * batch * n_kv_heads * max_seq * head_dim;
    check_fits_in_memory(c.capacity_bytes(),
                         fmt::format("a KV cache of {} sequence(s) x {} positions", batch, max_seq),
                         "ask for fewer positions (a shorter prompt, fewer new tokens, a smaller "
                         "--max-seq) or fewer sequences (--batch)");
    c.k.assign(n, 0.0f);
    c.v.assign(n, 0.0f);
    c.seq_len.assign(batch, 0);
    return c;
}

void kv_write(KVCache& c, int layer, int b, int pos, const float* k_new, const float* v_new) {
    for (int h = 0; h < c.n_kv_heads; h++) {
        std::memcpy(kv_key(c, layer, b, h, pos), k_new + std::size_t(h) * c.head_dim,
                    sizeof(float) * c.head_dim);
        std::memcpy(kv_value(c, layer, b, h, pos), v_new + std::size_t(h) * c.head_dim,
                    sizeof(float) * c.head_dim);
    }
}

void kv_reset(KVCache& c, int b) { reset_length(c.seq_len, b); }

void kv_truncate(KVCache& c, int b, int len) { truncate_length(c.seq_len, b, len); }

std::string kv_shape_str(const KVCache& c, int b) {
    return fmt::format("[1, {}, {}, {}]", c.n_kv_heads, c.seq_len[b], c.head_dim);
}

}  // namespace pd
