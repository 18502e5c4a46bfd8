// Lab 03 starter: replace each TODO_EXERCISE with your implementation, in
// task order (the lab program stops at the first one still missing).
// The declarations, with the rules each function follows, are in exercise.hpp.
#include "exercise.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "todo_exercise.hpp"  // TODO_EXERCISE and pd::lab::NotImplemented

namespace pd::lab03 {

int kv_head_for_query(int h, int n_heads, int n_kv_heads) {
    (void)h, (void)n_heads, (void)n_kv_heads;
    TODO_EXERCISE("check the arguments (n_heads divisible by n_kv_heads, 0 <= h < n_heads), then return "
                  "h / group_size with group_size = n_heads / n_kv_heads");
}

std::size_t kv_cache_bytes(const Config& c, int batch, int tokens, std::size_t bytes_per_elem) {
    (void)c, (void)batch, (void)tokens, (void)bytes_per_elem;
    TODO_EXERCISE("return 2 * n_layers * batch * n_kv_heads * tokens * head_dim * bytes_per_elem, "
                  "multiplied in std::size_t (start from std::size_t(2)) after rejecting negative sizes");
}

void append_kv(KVCache& cache, int layer, int seq, const float* k_new, const float* v_new) {
    (void)cache, (void)layer, (void)seq, (void)k_new, (void)v_new;
    TODO_EXERCISE("pos = cache.seq_len[seq] (fail if it equals max_seq); for every KV head h copy head_dim "
                  "floats from k_new + h * head_dim to kv_key(cache, layer, seq, h, pos), and the same for V; "
                  "leave seq_len alone");
}

int commit_kv(KVCache& cache, int seq) {
    (void)cache, (void)seq;
    TODO_EXERCISE("check seq and that the sequence is not full, then return ++cache.seq_len[seq]");
}

void attend_one_head(float* out, const float* q, const KVCache& cache, int layer, int seq, int kv_head,
                     int n_keys) {
    (void)out, (void)q, (void)cache, (void)layer, (void)seq, (void)kv_head, (void)n_keys;
    TODO_EXERCISE("scores[s] = dot(q, kv_key(cache, layer, seq, kv_head, s)) / sqrt(head_dim) for s < n_keys; "
                  "softmax them (max subtracted); out = sum_s p[s] * kv_value(...s)");
}

}  // namespace pd::lab03
