// The baseline ServingEngine: pd::Engine's contiguous KV cache, one slot of
// max_seq positions per live sequence. Blocks are bookkeeping only (a slot
// already holds max_seq positions; reserve() counts them so the scheduler sees
// the same memory arithmetic as with a paged cache), and there is no prefix
// cache: open() always returns 0.
//
// A step runs each prefill chunk (or speculative verify item) as its own
// Engine::prefill (which continues the slot's cache) and every one-token item
// of a slot with a cache as ONE batched Engine::decode. It serves whatever backend the Engine is (CPU, CUDA).
#pragma once

#include <vector>

#include "engine/engine.hpp"
#include "serve/serving_engine.hpp"

namespace pd::serve {

class SlotServingEngine final : public ServingEngine {
public:
    // `engine` (borrowed; must outlive this) gives the slots: engine.batch()
    // sequences can be live at once, each up to engine.max_seq() positions.
    explicit SlotServingEngine(Engine& engine, int block_size = 16);

    const Config& config() const override { return engine_.config(); }
    int block_size() const override { return block_size_; }
    int total_blocks() const override { return engine_.batch() * blocks_per_slot_; }
    int free_blocks() const override { return total_blocks() - used_blocks_; }
    int open(int seq, std::span<const int> prompt) override;
    bool reserve(int seq, int len) override;
    void close(int seq) override;
    int cached_len(int seq) const override;
    void truncate(int seq, int len) override;
    const float* step(std::span<const SeqWork> work) override;

    int max_seq() const { return engine_.max_seq(); }

private:
    int slot_of(int seq) const;  // std::logic_error when `seq` is not live
    void run_decode_rows();

    Engine& engine_;
    int block_size_;
    int blocks_per_slot_;
    int used_blocks_ = 0;
    std::vector<int> seq_in_slot_;     // (batch) live sequence id, or -1
    std::vector<int> blocks_of_slot_;  // (batch) blocks reserved
    // A step's scratch, sized once for `batch` items (each sequence at most once):
    std::vector<float> logits_;        // (logit rows, vocab) what step() returns; grows with the largest step
    std::vector<int> decode_slots_, decode_tokens_, decode_logit_row_;  // (decode rows)
};

}  // namespace pd::serve
