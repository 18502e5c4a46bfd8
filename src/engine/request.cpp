#include "engine/request.hpp"

#include <algorithm>

#include "common.hpp"

namespace pd {

void check_tokens(const Config& c, std::span<const int> tokens) {
    for (int t : tokens)
        if (t < 0 || t >= c.vocab_size)
            fail("token id {} is out of range: this model's vocabulary has ids 0 to {}", t,
                 c.vocab_size - 1);
}

void check_slot(int slot, int batch) {
    if (slot < 0 || slot >= batch)
        fail("sequence slot {} is outside the cache's batch of {}", slot, batch);
}

void check_prefill(const Config& c, CacheRoom room, int slot, std::span<const int> tokens) {
    const int T = int(tokens.size());
    if (T == 0) fail("prefill needs at least one token (the prompt is empty)");
    check_slot(slot, int(room.seq_len.size()));
    check_tokens(c, tokens);
    const int start = room.seq_len[slot];
    if (start + T > room.max_seq)
        fail("{} prompt tokens after {} cached ones exceed the context length of {} "
             "(shorten the prompt or generate fewer tokens)", T, start, room.max_seq);
}

void check_decode(const Config& c, CacheRoom room, std::span<const int> slots,
                  std::span<const int> tokens) {
    if (tokens.empty() || slots.size() != tokens.size())
        fail("decode needs one token per sequence ({} slots, {} tokens)", slots.size(), tokens.size());
    check_tokens(c, tokens);
    for (auto it = slots.begin(); it != slots.end(); ++it) {
        const int b = *it;
        check_slot(b, int(room.seq_len.size()));
        if (std::find(slots.begin(), it, b) != it)
            fail("sequence slot {} appears twice in one decode step: each sequence takes one new "
                 "token per step", b);
        if (room.seq_len[b] == 0) fail("decode on sequence {} before any prefill: its cache is empty", b);
        if (room.seq_len[b] + 1 > room.max_seq)
            fail("sequence {} is full: {} tokens fill the context length of {}", b, room.seq_len[b],
                 room.max_seq);
    }
}

}  // namespace pd
