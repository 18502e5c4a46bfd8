// The checks every request goes through before a backend sees it. The CPU
// forward pass (model.cpp) and the CUDA engine (gpu/host/cuda_engine.cpp) both
// call these, so a bad request is refused in one place, with one message,
// whichever device would have run it.
#pragma once

#include <span>

#include "io/config.hpp"

namespace pd {

// What a request must fit in: the cached positions of each sequence slot and
// the positions one sequence can hold.
struct CacheRoom {
    std::span<const int> seq_len;  // (batch)
    int max_seq = 0;
};

// Every id must be in the model's vocabulary.
void check_tokens(const Config& c, std::span<const int> tokens);

// `slot` must name one of the cache's `batch` sequences.
void check_slot(int slot, int batch);

// Appending `tokens` to sequence `slot` must fit in its context.
void check_prefill(const Config& c, CacheRoom room, int slot, std::span<const int> tokens);

// One token per sequence; each slot prefilled, not full, and named once: two
// rows of one step for the same sequence would write the same cache position.
void check_decode(const Config& c, CacheRoom room, std::span<const int> slots,
                  std::span<const int> tokens);

}  // namespace pd
