// Lab 09 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track2/09-disaggregation/exercise.hpp"

#include <algorithm>
#include <cstring>

#include "common.hpp"

namespace pd::lab09 {

namespace {

// The walk both directions share: for each layer of r, for each block of the
// sequence, K then V; `copy(block_k, block_v, at)` moves one block's floats
// between the cache and offset `at` of the message. Cache: const for pack.
template <class Cache, class Copy>
void walk(Cache& c, const BlockTable& t, LayerRange r, Copy copy) {
    const int n_blocks = blocks_for(c, t.len);
    const std::size_t stride = c.block_stride();
    std::size_t at = 0;
    for (int l = r.first; l < r.last; l++)
        for (int i = 0; i < n_blocks; i++) {
            const int b = t.blocks[std::size_t(i)];
            copy(paged_key_tile(c, l, b, 0), paged_value_tile(c, l, b, 0), at);
            at += 2 * stride;
        }
}

void check_size(std::size_t have, std::size_t want, const char* what) {
    if (have != want) fail("{} holds {} floats where the message has {}", what, have, want);
}

}  // namespace

std::vector<LayerRange> transfer_schedule(int n_layers, int layers_per_message) {
    std::vector<LayerRange> plan;
    for (int first = 0; first < n_layers; first += layers_per_message)
        plan.push_back({first, std::min(n_layers, first + layers_per_message)});
    return plan;
}

std::size_t packed_floats(const PagedKVCache& c, int n_blocks, LayerRange r) {
    return 2 * std::size_t(r.size()) * std::size_t(n_blocks) * c.block_stride();
}

void pack_kv(const PagedKVCache& c, const BlockTable& t, LayerRange r, std::span<float> out) {
    check_size(out.size(), packed_floats(c, blocks_for(c, t.len), r), "the output");
    const std::size_t bytes = sizeof(float) * c.block_stride();
    walk(c, t, r, [&](const float* k, const float* v, std::size_t at) {
        std::memcpy(out.data() + at, k, bytes);
        std::memcpy(out.data() + at + c.block_stride(), v, bytes);
    });
}

void unpack_kv(std::span<const float> in, LayerRange r, PagedKVCache& c, const BlockTable& t) {
    check_size(in.size(), packed_floats(c, blocks_for(c, t.len), r), "the message");
    const std::size_t bytes = sizeof(float) * c.block_stride();
    walk(c, t, r, [&](float* k, float* v, std::size_t at) {
        std::memcpy(k, in.data() + at, bytes);
        std::memcpy(v, in.data() + at + c.block_stride(), bytes);
    });
}

SplitVerdict split_verdict(const SplitCase& c, std::span<const LayerRange> schedule, int n_layers) {
    if (!(c.kv_bytes >= 0)) fail("the KV bytes must be 0 or more, got {}", c.kv_bytes);
    if (!(c.prefill_ms >= 0)) fail("the prefill time must be 0 ms or more, got {}", c.prefill_ms);
    if (!(c.link_gbps > 0)) fail("the link must carry more than 0 Gb/s, got {}", c.link_gbps);
    if (n_layers < 1) fail("a model has at least 1 layer, got {}", n_layers);
    if (schedule.empty()) fail("a transfer has at least one message, got an empty schedule");
    const double transfer_ms = c.kv_bytes * 8 / c.link_gbps / 1e6;  // bits / (Gb/s) = ns
    const double per_layer_compute = c.prefill_ms / n_layers, per_layer_wire = transfer_ms / n_layers;
    // The link is one queue: a message starts when it is ready and the one before has landed.
    double done = 0;
    for (const LayerRange& r : schedule) {
        const double ready = per_layer_compute * r.last;
        done = std::max(done, ready) + per_layer_wire * (r.last - r.first);
    }
    const double exposed = done - c.prefill_ms;
    return {transfer_ms, exposed, exposed < c.stall_ms};
}

}  // namespace pd::lab09
