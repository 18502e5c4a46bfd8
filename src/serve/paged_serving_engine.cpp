#include "serve/paged_serving_engine.hpp"

#include <omp.h>

#include <algorithm>
#include <climits>

#include "common.hpp"
#include "engine/prefix_cache.hpp"
#include "engine/request.hpp"

namespace pd::serve {

// Blocks the pool gets: opts.total_blocks, else as many as opts.kv_bytes holds.
static int pool_blocks(const Config& c, const PagedOptions& o) {
    if (o.block_size < 1) fail("a block size of {} positions: give at least 1 (16 is the usual)", o.block_size);
    if (o.total_blocks < 0) fail("{} blocks: give a positive number of blocks (or KV bytes)", o.total_blocks);
    if (o.total_blocks > 0) return o.total_blocks;
    if (o.kv_bytes == 0) fail("a paged KV cache needs a size: give a number of blocks or of KV bytes");
    const std::size_t per_block =
        kv_bytes(c.n_layers, c.n_kv_heads, c.head_dim, o.block_size, kv_elem_bytes(o.device));
    const std::size_t n = o.kv_bytes / per_block;
    if (n == 0)
        fail("{} bytes of KV memory hold no block: one block of {} positions takes {} bytes on this model",
             o.kv_bytes, o.block_size, per_block);
    if (n > std::size_t(INT_MAX)) fail("{} bytes of KV memory make more blocks than can be counted: ask for less", o.kv_bytes);
    return int(n);
}

// opts.make_prefix_index's index over `blocks`, else the engine's PrefixCache.
static std::unique_ptr<PrefixIndex> make_prefix_index(const PagedOptions& o, BlockPool& blocks, int block_size) {
    auto index = o.make_prefix_index ? o.make_prefix_index(blocks, block_size)
                                     : std::make_unique<PrefixCache>(blocks, block_size);
    if (!index) fail("internal error: the prefix index factory made no index");
    return index;
}

PagedServingEngine::PagedServingEngine(std::shared_ptr<const Model> model, const PagedOptions& opts)
    : model_(std::move(model)), prefix_caching_(opts.prefix_caching),
      cache_(make_paged_kv_cache(*model_, opts.block_size, pool_blocks(model_->config, opts), opts.make_block_pool,
                                 /*on_host=*/opts.device == Device::cpu)),
      prefix_(make_prefix_index(opts, *cache_.blocks, cache_.block_size)),
      forward_(make_paged_forward(model_, cache_, opts.device)) {
    if (opts.threads > 0) omp_set_num_threads(opts.threads);
    items_.reserve(64);
}

PagedServingEngine::Sequence& PagedServingEngine::live(int seq) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) fail("sequence {} is not open (open() it first; close() ends it)", seq);
    return it->second;
}
const PagedServingEngine::Sequence& PagedServingEngine::live(int seq) const {
    return const_cast<PagedServingEngine*>(this)->live(seq);
}

int PagedServingEngine::open(int seq, std::span<const int> prompt) {
    const Config& c = config();
    if (seqs_.count(seq)) fail("sequence {} is already open: close it first, or give another id", seq);
    if (prompt.empty()) fail("a request needs at least one prompt token");
    if (int(prompt.size()) > c.max_seq_len)
        fail("a request of {} prompt tokens is longer than the context length of {} (shorten the prompt)",
             prompt.size(), c.max_seq_len);
    check_tokens(c, prompt);
    Sequence& s = seqs_[seq];
    s.tokens.reserve(c.max_seq_len);  // the sequence's growth allocates nothing per step
    s.table.blocks.reserve(blocks_for(cache_, c.max_seq_len));
    s.keys.reserve(blocks_for(cache_, c.max_seq_len));
    if (!prefix_caching_) return 0;
    // Whole blocks only, and never the last prompt token: its logits pick the first output token.
    const int max_blocks = (int(prompt.size()) - 1) / block_size();
    prefix_->match(prompt, max_blocks, s.table.blocks, s.keys);
    s.table.len = int(s.table.blocks.size()) * block_size();
    s.tokens.assign(prompt.begin(), prompt.begin() + s.table.len);
    return s.table.len;
}

const BlockTable* PagedServingEngine::adopt(int seq, std::span<const int> tokens) {
    if (tokens.empty() || int(tokens.size()) > config().max_seq_len)
        fail("sequence {} of {} tokens cannot be adopted: a context holds 1 to {}", seq, tokens.size(),
             config().max_seq_len);
    check_tokens(config(), tokens);
    open(seq, tokens.first(1));  // a new sequence's checks; one token matches no whole block
    Sequence& s = live(seq);
    if (!paged_reserve(cache_, s.table, int(tokens.size()))) {
        close(seq);
        return nullptr;
    }
    s.table.len = int(tokens.size());
    s.tokens.assign(tokens.begin(), tokens.end());
    return &s.table;
}

bool PagedServingEngine::reserve(int seq, int len) {
    Sequence& s = live(seq);
    if (len > config().max_seq_len)
        fail("sequence {} asks for {} positions, past the context length of {}", seq, len, config().max_seq_len);
    return paged_reserve(cache_, s.table, len);
}

void PagedServingEngine::close(int seq) {
    paged_release(cache_, live(seq).table);  // cached blocks park, the rest go free
    seqs_.erase(seq);
}

int PagedServingEngine::cached_len(int seq) const { return live(seq).table.len; }

PagedKVCache& PagedServingEngine::kv_cache() {
    if (cache_.k.empty()) fail("this paged engine keeps its K/V on the GPU: moving sequences between engines runs on the CPU");
    return cache_;
}

const float* PagedServingEngine::step(std::span<const SeqWork> work) {
    items_.clear();
    for (const SeqWork& w : work) items_.push_back({&live(w.seq).table, w.tokens, w.logit_rows});
    const float* logits = forward_->forward_batch(cache_, items_, layer_hook_);
    for (const SeqWork& w : work) {
        Sequence& s = live(w.seq);
        s.tokens.insert(s.tokens.end(), w.tokens.begin(), w.tokens.end());
        // A verify item's proposed rows may be rejected: truncate() offers them once settled.
        const int tentative = std::max(0, w.logit_rows - 1);
        if (prefix_caching_) offer_full_blocks(s, s.table.len - tentative);
    }
    return logits;
}

void PagedServingEngine::truncate(int seq, int len) {
    Sequence& s = live(seq);
    // The last block kept is this sequence's own (only whole blocks before
    // the settled positions are ever shared), so no block is copied and none
    // needs to be free.
    if (!paged_truncate(cache_, s.table, len))
        fail("internal error: sequence {} could not be cut back to {} positions", seq, len);
    s.tokens.resize(std::size_t(len));
    if (prefix_caching_) offer_full_blocks(s, len);
}

// Every block of `s` filled within its first `settled` positions since the
// last offer goes to the prefix cache, keyed after the block before it.
void PagedServingEngine::offer_full_blocks(Sequence& s, int settled) {
    const int bs = block_size();
    for (int i = int(s.keys.size()); (i + 1) * bs <= settled; i++) {
        const std::uint64_t parent = i > 0 ? s.keys[i - 1] : PrefixIndex::kRoot;
        const auto ids = std::span<const int>(s.tokens).subspan(std::size_t(i) * bs, bs);
        s.keys.push_back(prefix_->insert(parent, ids, s.table.blocks[i]));
    }
}

KvMemoryUse PagedServingEngine::memory_use() const {
    KvMemoryUse u;
    const std::size_t per_position = bytes_per_block() / block_size();
    for (const auto& [id, s] : seqs_) {
        u.reserved_bytes += s.table.blocks.size() * bytes_per_block();
        u.used_bytes += std::size_t(s.table.len) * per_position;
    }
    return u;
}

std::unique_ptr<PagedServingEngine> make_paged_serving_engine(std::shared_ptr<const Model> model,
                                                              const PagedOptions& opts) {
    return std::make_unique<PagedServingEngine>(std::move(model), opts);
}

}  // namespace pd::serve
