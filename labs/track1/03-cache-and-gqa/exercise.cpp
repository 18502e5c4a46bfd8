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
    TODO_EXERCISE("handout task 1 and the paragraph \"Grouped-query attention\" (the 8-heads, 2-KV-heads "
                  "example); exercise.hpp lists the arguments to reject");
}

std::size_t kv_cache_bytes(const Config& c, int batch, int tokens, std::size_t bytes_per_elem) {
    (void)c, (void)batch, (void)tokens, (void)bytes_per_elem;
    TODO_EXERCISE("handout task 2 and the paragraph \"What the cache costs\"; the tests' no_overflow case "
                  "says which integer type the product needs");
}

void append_kv(KVCache& cache, int layer, int seq, const float* k_new, const float* v_new) {
    (void)cache, (void)layer, (void)seq, (void)k_new, (void)v_new;
    TODO_EXERCISE("handout task 3 and the paragraph \"Append, then commit\"; exercise.hpp gives the layout "
                  "of k_new (n_kv_heads rows of head_dim) and the accessors to write through");
}

int commit_kv(KVCache& cache, int seq) {
    (void)cache, (void)seq;
    TODO_EXERCISE("handout task 3 and the paragraph \"Append, then commit\": what commit means, and what "
                  "exercise.hpp says it returns and rejects");
}

void attend_one_head(float* out, const float* q, const KVCache& cache, int layer, int seq, int kv_head,
                     int n_keys) {
    (void)out, (void)q, (void)cache, (void)layer, (void)seq, (void)kv_head, (void)n_keys;
    TODO_EXERCISE("handout task 4; exercise.hpp has the three formulas and the shapes (q, out: head_dim); "
                  "lab 01's softmax is the middle step");
}

}  // namespace pd::lab03
