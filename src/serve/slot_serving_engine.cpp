#include "serve/slot_serving_engine.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common.hpp"

namespace pd::serve {

SlotServingEngine::SlotServingEngine(Engine& engine, int block_size)
    : engine_(engine), block_size_(block_size) {
    if (block_size < 1) fail("the block size must be at least 1 position, got {}", block_size);
    blocks_per_slot_ = (engine.max_seq() + block_size - 1) / block_size;
    const std::size_t batch = std::size_t(engine.batch());
    seq_in_slot_.assign(batch, -1);
    blocks_of_slot_.assign(batch, 0);
    logits_.resize(batch * std::size_t(engine.config().vocab_size));
    decode_slots_.reserve(batch);
    decode_tokens_.reserve(batch);
    decode_logit_row_.reserve(batch);
}

int SlotServingEngine::slot_of(int seq) const {
    auto it = std::find(seq_in_slot_.begin(), seq_in_slot_.end(), seq);
    if (seq < 0 || it == seq_in_slot_.end())
        throw std::logic_error("SlotServingEngine: sequence " + std::to_string(seq) + " is not open");
    return int(it - seq_in_slot_.begin());
}

int SlotServingEngine::open(int seq, std::span<const int> prompt) {
    if (seq < 0 || std::find(seq_in_slot_.begin(), seq_in_slot_.end(), seq) != seq_in_slot_.end())
        throw std::logic_error("SlotServingEngine::open: sequence " + std::to_string(seq) +
                               " is negative or already open");
    if (prompt.size() > std::size_t(engine_.max_seq()))
        fail("a prompt of {} tokens does not fit a sequence of {} positions (raise --max-seq or "
             "shorten the prompt)", prompt.size(), engine_.max_seq());
    auto free = std::find(seq_in_slot_.begin(), seq_in_slot_.end(), -1);
    if (free == seq_in_slot_.end())
        throw std::logic_error("SlotServingEngine::open: all " + std::to_string(engine_.batch()) +
                               " slots are live; the scheduler admits at most that many sequences");
    const int slot = int(free - seq_in_slot_.begin());
    engine_.reset(slot);
    *free = seq;
    return 0;  // no prefix cache
}

bool SlotServingEngine::reserve(int seq, int len) {
    const int slot = slot_of(seq);
    if (len > engine_.max_seq()) return false;  // a slot never grows past max_seq
    const int need = (len + block_size_ - 1) / block_size_;
    const int extra = need - blocks_of_slot_[std::size_t(slot)];
    if (extra <= 0) return true;
    if (extra > free_blocks()) return false;
    blocks_of_slot_[std::size_t(slot)] = need;
    used_blocks_ += extra;
    return true;
}

void SlotServingEngine::close(int seq) {
    const int slot = slot_of(seq);
    used_blocks_ -= blocks_of_slot_[std::size_t(slot)];
    blocks_of_slot_[std::size_t(slot)] = 0;
    seq_in_slot_[std::size_t(slot)] = -1;
    engine_.reset(slot);
}

int SlotServingEngine::cached_len(int seq) const { return engine_.cache_len(slot_of(seq)); }

const float* SlotServingEngine::step(std::span<const SeqWork> work) {
    const std::size_t vocab = std::size_t(engine_.config().vocab_size);
    std::size_t logit_rows = 0;
    for (const SeqWork& w : work) logit_rows += std::size_t(std::max(0, w.logit_rows));
    if (logits_.size() < logit_rows * vocab) logits_.resize(logit_rows * vocab);  // grows once per larger step
    decode_slots_.clear(), decode_tokens_.clear(), decode_logit_row_.clear();
    int logit_row = 0;
    for (const SeqWork& w : work) {
        const int slot = slot_of(w.seq);
        const int n = int(w.tokens.size());
        const int len = engine_.cache_len(slot) + n;
        if (n == 0 || len > blocks_of_slot_[std::size_t(slot)] * block_size_ || w.logit_rows < 0 || w.logit_rows > n)
            throw std::logic_error("SlotServingEngine::step: an item is empty, asks for logit rows it lacks, "
                                   "or its room was not reserved");
        const int row = logit_row;
        logit_row += w.logit_rows;
        if (n == 1 && engine_.cache_len(slot) > 0) {  // a decode row: batched below
            decode_slots_.push_back(slot);
            decode_tokens_.push_back(w.tokens[0]);
            decode_logit_row_.push_back(w.logit_rows > 0 ? row : -1);
            continue;
        }
        // A chunk (continuing the slot's cache), or a verify item, whose every row gets logits.
        const Keep keep = w.logit_rows > 1 ? Keep::all : Keep::last;
        const float* out = engine_.prefill(slot, w.tokens, keep);
        if (keep == Keep::all) out += std::size_t(n - w.logit_rows) * vocab;
        std::memcpy(logits_.data() + std::size_t(row) * vocab, out, std::size_t(w.logit_rows) * vocab * sizeof(float));
    }
    run_decode_rows();
    return logits_.data();
}

void SlotServingEngine::truncate(int seq, int len) {
    const int slot = slot_of(seq);
    engine_.truncate(slot, len);
    // Blocks past `len` go back, as the paged engine's do.
    const int keep = (len + block_size_ - 1) / block_size_;
    used_blocks_ -= std::max(0, blocks_of_slot_[std::size_t(slot)] - keep);
    blocks_of_slot_[std::size_t(slot)] = std::min(blocks_of_slot_[std::size_t(slot)], keep);
}

// One Engine::decode for every decode row of the step: one product per weight
// matrix for all of them, which is what makes batching pay.
void SlotServingEngine::run_decode_rows() {
    if (decode_slots_.empty()) return;
    const std::size_t vocab = std::size_t(engine_.config().vocab_size);
    const float* out = engine_.decode(decode_slots_, decode_tokens_);  // (rows, vocab)
    for (std::size_t i = 0; i < decode_slots_.size(); i++) {
        const int row = decode_logit_row_[i];
        if (row >= 0)
            std::memcpy(logits_.data() + std::size_t(row) * vocab, out + i * vocab,
                        vocab * sizeof(float));
    }
}

}  // namespace pd::serve
