// Lab 09: what you write. A prefill worker has computed a prompt's K and V
// into its paged cache; a decode worker, another process (another machine),
// must continue from them. You write how those blocks travel: which layers
// go in each message (the schedule), how big a message is, and how a
// sequence's blocks are packed into one contiguous message and unpacked into
// the receiver's own blocks, whose ids are different.
//
// The cache (src/engine/paged_kv_cache.hpp), per layer:
//   K and V each (total_blocks, n_kv_heads, block_size, head_dim), so ONE
//   block of one layer is block_stride() = n_kv_heads * block_size * head_dim
//   contiguous floats, reached with paged_key_tile(c, layer, block, 0)
//   (and paged_value_tile for V).
// A sequence: BlockTable t, positions 0..t.len-1 in t.blocks[0], t.blocks[1],
//   ... (block_size positions each). It may hold more blocks than t.len needs
//   (reserved ahead): send only the first blocks_for(c, t.len).
//
// The message layout (the wire format; both sides must agree), for layers
// r.first .. r.last-1:
//   for each layer l, in order:
//     for each block i of the sequence, in table order:
//       K of (l, t.blocks[i])   block_stride() floats
//       V of (l, t.blocks[i])   block_stride() floats
// Whole blocks travel, the unused rows of the last one included.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/paged_kv_cache.hpp"
#include "serve/disagg/kv_codec.hpp"

namespace pd::lab09 {

using pd::serve::disagg::LayerRange;

// Task 1: the messages of one transfer, in send order, each a run of
// `layers_per_message` consecutive layers (the last one shorter when it does
// not divide n_layers). n_layers: one message, the whole cache after the
// prefill; 1: one per layer, each sent as soon as its layer is computed.
// Layers 0..n_layers-1 each in exactly one message. n_layers >= 1,
// layers_per_message >= 1 (more than n_layers means one message).
std::vector<LayerRange> transfer_schedule(int n_layers, int layers_per_message);

// Task 2: floats in one message of `n_blocks` blocks and layers `r`.
std::size_t packed_floats(const PagedKVCache& c, int n_blocks, LayerRange r);

// Task 3: layers `r` of the blocks holding t.len positions, into `out`
// (exactly packed_floats(c, blocks_for(c, t.len), r) floats), in the layout above.
void pack_kv(const PagedKVCache& c, const BlockTable& t, LayerRange r, std::span<float> out);

// Task 4: the inverse: a message packed from any table into the receiver's
// table `t` (t.len positions, as many blocks, its own block ids). Writes
// those blocks' layers `r` and nothing else.
void unpack_kv(std::span<const float> in, LayerRange r, PagedKVCache& c, const BlockTable& t);

// Task 5: the decision. One long prompt, measured: its KV bytes, its prefill
// time, and the decode stall splitting removes (colocated ITL p99 with long
// prompts arriving minus without).
struct SplitCase {
    double kv_bytes = 0;    // the prompt's KV, all layers
    double prefill_ms = 0;  // its prefill on a prefill worker
    double link_gbps = 0;   // the link, gigabits per second
    double stall_ms = 0;    // the decode stall that splitting removes
};
struct SplitVerdict {
    double transfer_ms = 0;  // every byte over the link, nothing overlapped: kv_bytes * 8 / link_gbps ns
    double exposed_ms = 0;   // what the transfer adds after the prefill ended
    bool pays = false;       // exposed_ms < stall_ms
};
// The pipeline of `schedule` (task 1's messages) over `n_layers` layers: the
// prefill computes the layers one after another, each in prefill_ms /
// n_layers; a message leaves when its last layer is computed; the link
// carries one message at a time, a message of m layers taking m / n_layers
// of transfer_ms. For the messages in order,
//     ready_i = prefill_ms * (last layer of message i + 1) / n_layers
//     done_i  = max(done_(i-1), ready_i) + its share of transfer_ms   (done_(-1) = 0)
// and exposed_ms = done of the last message - prefill_ms. One message after
// the prefill exposes all of transfer_ms; one per layer, on a link faster than
// the prefill, only the last layer's share.
// Throws pd::UserError (pd::fail) naming the value when kv_bytes or
// prefill_ms is negative, link_gbps is not above 0 (or not a number),
// n_layers < 1 or the schedule is empty.
SplitVerdict split_verdict(const SplitCase& c, std::span<const LayerRange> schedule, int n_layers);

}  // namespace pd::lab09
