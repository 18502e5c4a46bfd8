// How a sequence's KV blocks travel from a prefill worker to a decode worker:
// which layers each message carries (the transfer schedule), and how those
// layers of the sequence's blocks are packed into one contiguous message and
// unpacked into the receiver's own blocks. Lab 09 writes these four; the
// workers (prefill_worker.hpp, decode_worker.hpp) call them through KvCodec,
// so this library never depends on a lab's exercise.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "engine/paged_kv_cache.hpp"

namespace pd::serve::disagg {

// Layers [first, last) of every block of one sequence: one message.
struct LayerRange {
    int first = 0, last = 0;
    int size() const { return last - first; }
    bool operator==(const LayerRange&) const = default;
};

struct KvCodec {
    // The messages of one transfer, in send order: a message leaves as soon as
    // its last layer has been computed.
    std::function<std::vector<LayerRange>(int n_layers)> schedule;
    // Floats of one message: `n_blocks` blocks, layers `r`, K and V.
    std::function<std::size_t(const PagedKVCache& c, int n_blocks, LayerRange r)> floats;
    // Layers `r` of the blocks holding t.len positions, into `out` (floats(...) long).
    std::function<void(const PagedKVCache& c, const BlockTable& t, LayerRange r, std::span<float> out)> pack;
    // The inverse, into the receiver's table `t` (as many blocks, any ids).
    std::function<void(std::span<const float> in, LayerRange r, PagedKVCache& c, const BlockTable& t)> unpack;
};

}  // namespace pd::serve::disagg
