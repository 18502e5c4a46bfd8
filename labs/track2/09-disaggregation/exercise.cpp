// Lab 09 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-4).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track2-09
#include "exercise.hpp"

#include <cstring>

#include "todo_exercise.hpp"

namespace pd::lab09 {

std::vector<LayerRange> transfer_schedule(int n_layers, int layers_per_message) {
    (void)n_layers, (void)layers_per_message;
    TODO_EXERCISE("README task 1: walk the layers in steps of layers_per_message; the last step may be shorter");
}

std::size_t packed_floats(const PagedKVCache& c, int n_blocks, LayerRange r) {
    (void)c, (void)n_blocks, (void)r;
    TODO_EXERCISE("README task 2: what does one block of one layer hold, K and V together?");
}

void pack_kv(const PagedKVCache& c, const BlockTable& t, LayerRange r, std::span<float> out) {
    (void)c, (void)t, (void)r, (void)out;
    TODO_EXERCISE(
        "README task 3: layers outside, blocks inside; one block of one layer is block_stride() "
        "contiguous floats (paged_key_tile(c, layer, block, 0)); how many blocks hold t.len positions?");
}

void unpack_kv(std::span<const float> in, LayerRange r, PagedKVCache& c, const BlockTable& t) {
    (void)in, (void)r, (void)c, (void)t;
    TODO_EXERCISE("README task 4: the same walk as pack_kv, copying the other way, into t's own blocks");
}

SplitVerdict split_verdict(const SplitCase& c, std::span<const LayerRange> schedule, int n_layers) {
    (void)c, (void)schedule, (void)n_layers;
    TODO_EXERCISE(
        "README task 5: refuse bad values first; then one pass over the messages keeping done, the time "
        "the link is free again: each starts at max(done, ready) and takes its share of transfer_ms");
}

}  // namespace pd::lab09
